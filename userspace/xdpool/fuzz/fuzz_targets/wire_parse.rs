//! The packet parser: never panics, and what it accepts obeys the invariants
//! `wire::fuzz::check_invariants` states (offsets inside the frame, lengths agree).
#![no_main]
use libfuzzer_sys::fuzz_target;
use xdpool::internal::wire::{fuzz::check_invariants, parse};

fuzz_target!(|frame: &[u8]| {
    if let Ok(p) = parse(frame) {
        if let Err(e) = check_invariants(frame, &p) {
            panic!("parser invariant broken: {e}");
        }
    }
});
