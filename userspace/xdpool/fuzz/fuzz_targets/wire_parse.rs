//! The packet parser: never panics, what it accepts obeys the invariants
//! `wire::fuzz::check_invariants` states (offsets inside the frame, lengths agree),
//! and its short path for plain IPv4 says what the general walk says
//! (`wire::fuzz::exercise` checks all three).
#![no_main]
use libfuzzer_sys::fuzz_target;
use xdpool::internal::wire::fuzz::exercise;

fuzz_target!(|frame: &[u8]| {
    if let Err(e) = exercise(frame) {
        panic!("parser: {e}");
    }
});
