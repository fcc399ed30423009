use super::Reflect;
use xdpool::testing::{FrameBuilder, Harness, Steered};

const CONFIG: &str = include_str!("../../../../../configs/examples/reflect.toml");

fn frame(udp: bool, tag: u8) -> Vec<u8> {
    let f = FrameBuilder::new()
        .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
        .payload(&[tag; 22]);
    if udp {
        f.udp(1024, 9)
    } else {
        f.tcp(1024, 9, 0x02)
    }
    .build()
    .bytes
}

#[test]
fn udp_frames_are_counted_and_sent_back_with_macs_swapped_others_dropped() {
    let mut h = Harness::builder(CONFIG)
        .handler("reflect", Reflect)
        .build()
        .unwrap();
    for i in 0..300u32 {
        assert_eq!(h.send("lab", &frame(i % 3 != 0, i as u8)), Steered::Worker);
    }
    h.run();
    let out = h.sent("lab");
    assert_eq!(out.len(), 200, "two of every three are UDP");
    for (i, o) in out.iter().enumerate() {
        let tag = (i / 2 * 3 + i % 2 + 1) as u8;
        let mut want = frame(true, tag);
        want[..12].rotate_left(6);
        assert_eq!(*o, want, "frame {i}: MACs swapped, nothing else changed");
    }
    assert_eq!(h.user_counter("lab", "reflect", "udp"), 200);
    assert_eq!(h.counter("lab", "handler_calls"), 300);
    assert_eq!(h.counter("lab", "action_drop"), 100);
    assert_eq!(h.counter("lab", "tx_packets"), 200);
    h.check_accounting().unwrap();
}
