use super::{Clock, Limits, RateLimit};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use xdpool::testing::{FrameBuilder, Harness};

/// A clock the test moves.
#[derive(Clone, Default)]
struct Fake(Arc<AtomicU64>);

impl Fake {
    fn advance_ms(&self, ms: u64) {
        self.0.fetch_add(ms * 1_000_000, Ordering::Relaxed);
    }
}

impl Clock for Fake {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

const NEXT_HOP: [u8; 6] = [2, 0, 0, 0, 0xcc, 1];

fn harness(arg: &str, clock: &Fake) -> Harness<impl xdpool::HandlerSet> {
    let config = xdpool::testing::two_ports(&format!(
        "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"ratelimit\"\narg = \"{arg}\""
    ));
    Harness::builder(&config)
        .handler("ratelimit", RateLimit::with_clock(clock.clone()))
        .next_hop("out", IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1)), NEXT_HOP)
        .build()
        .unwrap()
}

fn from(src: u8, tag: u8) -> Vec<u8> {
    FrameBuilder::new()
        .ipv4(Ipv4Addr::new(198, 18, 0, src), Ipv4Addr::new(198, 19, 0, 1))
        .udp(1024, 9)
        .payload(&[tag; 18])
        .build()
        .bytes
}

/// Sends `n` frames from source `src`, runs, and returns how many left `out`.
fn burst(h: &mut Harness<impl xdpool::HandlerSet>, src: u8, n: u8) -> usize {
    for i in 0..n {
        h.send("in", &from(src, i));
    }
    h.run();
    h.sent("out").len()
}

#[test]
fn a_source_gets_its_burst_then_its_rate_and_no_more() {
    let clock = Fake::default();
    let mut h = harness("rate=100,burst=10", &clock);
    assert_eq!(
        burst(&mut h, 1, 25),
        10,
        "a new source starts with a full bucket"
    );
    clock.advance_ms(50); // 100/s for 50 ms: 5 tokens
    assert_eq!(burst(&mut h, 1, 25), 5);
    clock.advance_ms(9); // 0.9 of a token: none yet
    assert_eq!(burst(&mut h, 1, 3), 0);
    clock.advance_ms(1); // the 10th ms completes one
    assert_eq!(burst(&mut h, 1, 3), 1);
    clock.advance_ms(60_000); // idle a minute: the bucket holds the burst, no more
    assert_eq!(burst(&mut h, 1, 30), 10);
    assert_eq!(h.user_counter("in", "ratelimit", "passed"), 26);
    assert_eq!(h.user_counter("in", "ratelimit", "limited"), 86 - 26);
    assert_eq!(h.counter("in", "forwarded"), 26);
    assert_eq!(h.counter("in", "action_drop"), 60);
    h.check_accounting().unwrap();
}

#[test]
fn sources_have_their_own_buckets_and_passed_frames_go_to_the_next_hop() {
    let clock = Fake::default();
    let mut h = harness("rate=1000,burst=3", &clock);
    for i in 0..10 {
        for src in 1..=4 {
            h.send("in", &from(src, i));
        }
    }
    h.run();
    let out = h.sent("out");
    assert_eq!(out.len(), 12, "3 from each of 4 sources");
    for o in &out {
        assert_eq!(&o[..6], &NEXT_HOP);
        assert_eq!(&o[6..12], &[2, 0, 0, 0, 0xd0, 1], "the egress device's MAC");
    }
    for src in 1..=4 {
        assert_eq!(out.iter().filter(|o| o[29] == src).count(), 3);
    }
    assert_eq!(h.user_counter("in", "ratelimit", "limited"), 28);
    h.check_accounting().unwrap();
}

#[test]
fn the_table_keeps_at_most_max_sources_and_evicts_only_quiet_ones() {
    let clock = Fake::default();
    let mut h = harness("rate=10,burst=2,max_sources=3", &clock);
    for src in 1..=3 {
        assert_eq!(burst(&mut h, src, 1), 1); // each 1 of 2 tokens left: busy
    }
    assert_eq!(
        burst(&mut h, 4, 5),
        0,
        "table full of busy sources: limited"
    );
    assert_eq!(h.user_counter("in", "ratelimit", "table_full"), 5);
    clock.advance_ms(100); // one token back each: full again, evictable
    assert_eq!(burst(&mut h, 4, 5), 2, "a quiet source made room");
    assert_eq!(h.user_counter("in", "ratelimit", "table_full"), 5);
    assert_eq!(h.user_counter("in", "ratelimit", "passed"), 5);
    assert_eq!(h.user_counter("in", "ratelimit", "limited"), 8);
    h.check_accounting().unwrap();
}

#[test]
fn a_bad_arg_drops_and_says_what_to_write() {
    let clock = Fake::default();
    let mut h = harness("rate=fast", &clock);
    assert_eq!(burst(&mut h, 1, 4), 0);
    assert_eq!(h.user_counter("in", "ratelimit", "bad_arg"), 4);
    h.check_accounting().unwrap();
    assert!(Limits::parse("burst=3")
        .unwrap_err()
        .contains("rate=PPS is required"));
    assert!(Limits::parse("rate=0").unwrap_err().contains("above 0"));
    assert!(Limits::parse("rate=5,per=ip")
        .unwrap_err()
        .contains("unknown key `per`"));
    assert_eq!(
        Limits::parse("rate=5").unwrap(),
        Limits {
            rate: 5,
            burst: 5,
            max_sources: 65_536
        }
    );
}

#[test]
fn the_shipped_config_passes_a_burst_of_50() {
    let clock = Fake::default();
    let config = include_str!("../../../../../configs/examples/ratelimit.toml");
    let mut h = Harness::builder(config)
        .handler("ratelimit", RateLimit::with_clock(clock.clone()))
        .next_hop("out", IpAddr::V4(Ipv4Addr::new(198, 19, 0, 1)), NEXT_HOP)
        .build()
        .unwrap();
    assert_eq!(burst(&mut h, 1, 80), 50);
    clock.advance_ms(100); // 100/s: 10 more
    assert_eq!(burst(&mut h, 1, 80), 10);
    assert_eq!(h.user_counter("in", "ratelimit", "limited"), 100);
    h.check_accounting().unwrap();
}
