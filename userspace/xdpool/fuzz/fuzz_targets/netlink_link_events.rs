//! The rtnetlink link-event parser (device watch): any datagram, never a panic; every
//! event it returns came from a message inside the datagram.
#![no_main]
use libfuzzer_sys::fuzz_target;
use xdpool::internal::device::parse_link_events;

fuzz_target!(|datagram: &[u8]| {
    let events = parse_link_events(datagram);
    // An nlmsghdr is 16 bytes: more events than headers would be invented ones.
    assert!(
        events.len() <= datagram.len() / 16,
        "{} events from {} bytes",
        events.len(),
        datagram.len()
    );
    for e in &events {
        if let Some(name) = &e.name {
            assert!(
                name.len() < datagram.len(),
                "a name longer than the datagram"
            );
        }
    }
});
