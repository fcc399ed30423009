//! The `lb` example's user-space instructions per frame, counted under callgrind the
//! way `userspace/xdpool/benches/handler_cost.rs` counts the built-in actions: the
//! real worker over heap rings (`xdpool::testing`), the config of
//! `configs/examples/lb.toml` (a UDP and a TCP `call` rule, three backends with
//! IPv4 addresses), frames of 64 flows as `tools/bench/vs-lb.sh` sends them.
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='*Driven*pass*' BIN lb 100000
//! ```
//!
//! `tools/bench/handler-cost.sh` runs it with the other variants. Without arguments
//! it runs 10 000 frames natively and checks where they went (what `cargo bench`
//! does).
// The example's `main` comes along, unused here, and its test module when this
// bench is built as a test (`cargo test --benches`, `clippy --all-targets`).
#[path = "../src/bin/lb/main.rs"]
#[allow(dead_code, unused_imports)]
mod lb;

use std::net::Ipv4Addr;
use std::process::ExitCode;
use xdpool::testing::{two_ports, FrameBuilder, Harness};

/// Frames per batch: half the RX ring, so the harness never waits on the worker.
const BATCH: usize = 256;
/// Flows, as `vs-lb.sh`'s generator sends them (source ports 1024-1087).
const FLOWS: u16 = 64;

/// The rules and backends of `configs/examples/lb.toml`, on the harness's ports.
fn config() -> Result<String, String> {
    let toml = include_str!("../../../configs/examples/lb.toml");
    let rules = toml
        .find("[[rule]]")
        .ok_or("configs/examples/lb.toml has no [[rule]]")?;
    Ok(two_ports(&toml[rules..]))
}

fn frame(flow: u16) -> Vec<u8> {
    FrameBuilder::new()
        .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 2, 1))
        .udp(1024 + flow % FLOWS, 9)
        .payload(&[0x5a; 18])
        .build()
        .bytes
}

/// Sends `n` frames of `FLOWS` flows; checks that all left `out` with a backend's
/// MAC and IPv4 destination, and that the accounting holds.
fn run(n: usize) -> Result<(), String> {
    let mut h = Harness::builder(&config()?)
        .handler("lb", lb::Lb)
        .build()
        .map_err(|e| e.to_string())?;
    let frames: Vec<Vec<u8>> = (0..FLOWS).map(frame).collect();
    let (mut sent, mut left) = (0, 0);
    while sent < n {
        let b = BATCH.min(n - sent);
        for i in 0..b {
            h.send("in", &frames[(sent + i) % frames.len()]);
        }
        sent += b;
        h.run();
        for o in h.sent("out") {
            if o[..6] != [0x02, 0x78, 0x64, 0x70, 0x02, 0x01] || o[30..33] != [198, 18, 2] {
                return Err(format!("a frame left `out` unbalanced: {o:02x?}"));
            }
            left += 1;
        }
    }
    h.check_accounting()?;
    if left != n {
        return Err(format!("{left} of {n} frames left `out`"));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let n = match args.as_slice() {
        [] => 10_000,
        [v, n] if v == "lb" => match n.parse() {
            Ok(n) => n,
            Err(_) => {
                eprintln!("usage: lb_cost [lb FRAMES]: `{n}` is not a frame count");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: lb_cost [lb FRAMES]");
            return ExitCode::from(2);
        }
    };
    match run(n) {
        Ok(()) => {
            println!("lb: {n} frames");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lb: {e}");
            ExitCode::FAILURE
        }
    }
}
