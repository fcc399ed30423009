//! A packet function's cost against the built-in action doing the same work, in
//! user-space instructions per frame, measured deterministically under callgrind.
//!
//! Each variant is one `Harness` (the real worker over heap rings, no root) built
//! from one config that differs only in the rule's action; N identical UDP frames go
//! through it in batches that fit the rings. One variant per process, so callgrind
//! counts only the worker's passes of that variant:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='*Driven*pass*' BIN l2fwd 100000
//! ```
//!
//! `tools/bench/handler-cost.sh` runs every variant that way and prints the table.
//! Without an argument the binary runs each variant once, natively, as a check that
//! the frames leave where they should (what `cargo bench` does).

use std::process::ExitCode;
use xdpool::testing::{two_ports, FrameBuilder, Harness};
use xdpool::{Declaration, Handler, LaneSetup, Mac, Packet, PortRef, Verdict};

/// Frames per batch: half the RX ring, so the harness never waits on the worker.
const BATCH: usize = 256;
/// The fixed destination MAC of both forward variants.
const NEXT_HOP: [u8; 6] = [2, 0, 0, 0, 0xbb, 1];

/// The variants, in the table's order: (name, the built-in it is compared with).
/// The `-2rules` ones have a UDP and a TCP rule, as `configs/examples/lb.toml` has:
/// their verdicts differ, so the worker reads each frame to pick one (these plain
/// UDP frames on the parser's short path, matched on their fields).
const VARIANTS: [(&str, &str); 9] = [
    ("drop", "drop"),
    ("l2fwd", "l2fwd"),
    ("call-swap-bytes", "l2fwd"),
    ("call-swap-macs", "l2fwd"),
    ("call-mac-swap", "l2fwd"),
    ("forward", "forward"),
    ("call-forward", "forward"),
    ("l2fwd-2rules", "l2fwd-2rules"),
    ("call-parse-2rules", "l2fwd-2rules"),
];

/// Forwards every frame to the declared port `out`, destination MAC fixed: what the
/// built-in `forward` with `to = "out"` and a fixed `mac` does.
struct ForwardOut;

impl Handler for ForwardOut {
    type Lane = PortRef;
    fn declare(&self) -> Declaration {
        Declaration::new().sends_to("out").tx_per_frame(0)
    }
    fn lane(&self, setup: &mut LaneSetup<'_>) -> PortRef {
        setup.port("out").expect("`out` is declared")
    }
    #[inline]
    fn handle(&self, out: &mut PortRef, _: &mut Packet<'_>) -> Verdict {
        Verdict::forward(*out).with_mac(Mac::To(NEXT_HOP))
    }
}

/// Swaps the MACs with `Packet::swap_macs` and sends the frame back.
fn swap_macs(pkt: &mut Packet<'_>) -> Verdict {
    if !pkt.swap_macs() {
        return Verdict::drop();
    }
    Verdict::back()
}

/// Swaps the MACs in the handler and sends the frame back: l2fwd by hand.
fn swap_bytes(pkt: &mut Packet<'_>) -> Verdict {
    let b = pkt.bytes_mut();
    if b.len() < 12 {
        return Verdict::drop();
    }
    let (dst, rest) = b.split_at_mut(6);
    dst.swap_with_slice(&mut rest[..6]);
    Verdict::back()
}

/// Sends UDP frames to port 9 back with their MACs swapped, as the rule's l2fwd
/// does, and drops the rest: a handler that reads the headers (`Packet::parse`).
fn parse_swap(pkt: &mut Packet<'_>) -> Verdict {
    match pkt.parse() {
        Ok(p) if p.ip_proto() == Some(17) && p.dst_port() == Some(9) && pkt.swap_macs() => {
            Verdict::back()
        }
        _ => Verdict::drop(),
    }
}

/// l2fwd as a verdict: the worker's own rewrite.
fn mac_swap(_: &mut Packet<'_>) -> Verdict {
    Verdict::back().with_mac(Mac::Swap)
}

fn config(rule: &str) -> String {
    two_ports(&format!(
        "[[rule]]\nport = \"in\"\nproto = \"udp\"\n{rule}\n"
    ))
}

/// `udp` (the rule the frames match) and then a TCP rule that drops: a list whose
/// verdicts differ. `udp` names the UDP rule's action.
fn config_udp_tcp(udp: &str, tcp: &str) -> String {
    two_ports(&format!(
        "[[rule]]\nport = \"in\"\nproto = \"udp\"\n{udp}\n\n\
         [[rule]]\nport = \"in\"\nproto = \"tcp\"\n{tcp}\n"
    ))
}

fn frame() -> Vec<u8> {
    FrameBuilder::new()
        .macs([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4("198.18.0.1".parse().unwrap(), "198.18.1.1".parse().unwrap())
        .udp(1024, 9)
        .payload(&[0x5a; 18])
        .build()
        .bytes
}

/// Sends `n` identical frames into port `in` in batches the rings hold, running the
/// worker after each batch and handing `h` to `check` to look at what it left.
fn send_batches<H: xdpool::HandlerSet>(
    h: &mut Harness<H>,
    n: usize,
    mut check: impl FnMut(&mut Harness<H>) -> Result<(), String>,
) -> Result<(), String> {
    let f = frame();
    let mut sent = 0;
    while sent < n {
        let b = BATCH.min(n - sent);
        for _ in 0..b {
            h.send("in", &f);
        }
        sent += b;
        h.run();
        check(h)?;
    }
    Ok(())
}

/// Sends `n` frames through `h` in batches; checks that none left, that each was
/// counted dropped unread, and that the accounting holds. Returns the frames dropped.
fn drive_drop<H: xdpool::HandlerSet>(mut h: Harness<H>, n: usize) -> Result<usize, String> {
    send_batches(&mut h, n, |h| {
        let out = h.sent("in").len() + h.sent("out").len();
        if out > 0 {
            return Err(format!("{out} frames left a port; none should"));
        }
        Ok(())
    })?;
    h.check_accounting()?;
    let dropped = h.counter("in", "action_drop") as usize;
    if dropped != n {
        return Err(format!("{dropped} of {n} frames counted dropped"));
    }
    // Unread, straight back to the fill ring: the path this variant measures.
    let unread = h.counter("in", "rx_drop_to_fill") as usize;
    if unread != n {
        return Err(format!("{unread} of {n} frames dropped unread"));
    }
    Ok(dropped)
}

/// Sends `n` frames through `h` in batches; checks that each left `port` as
/// `want` and that the accounting holds. Returns the frames that left.
fn drive<H: xdpool::HandlerSet>(
    mut h: Harness<H>,
    n: usize,
    port: &str,
    want: &[u8],
) -> Result<usize, String> {
    let mut left = 0;
    send_batches(&mut h, n, |h| {
        let out = h.sent(port);
        if let Some(bad) = out.iter().find(|o| o.as_slice() != want) {
            return Err(format!(
                "a frame left `{port}` as {bad:02x?}, not {want:02x?}"
            ));
        }
        left += out.len();
        Ok(())
    })?;
    h.check_accounting()?;
    if left != n {
        return Err(format!("{left} of {n} frames left `{port}`"));
    }
    Ok(left)
}

fn run(variant: &str, n: usize) -> Result<usize, String> {
    let f = frame();
    let mut swapped = f.clone();
    swapped[..6].copy_from_slice(&f[6..12]);
    swapped[6..12].copy_from_slice(&f[..6]);
    let mut forwarded = f.clone();
    forwarded[..6].copy_from_slice(&NEXT_HOP);
    // The harness gives port i the device MAC 02:00:00:00:d0:i.
    forwarded[6..12].copy_from_slice(&[2, 0, 0, 0, 0xd0, 1]);
    let e = |e: xdpool::Error| e.to_string();
    let call = |name: &str| format!("action = \"call\"\nhandler = \"{name}\"");
    match variant {
        // Every frame dropped unread: straight back to the fill ring.
        "drop" => drive_drop(
            Harness::builder(&config("action = \"drop\""))
                .build()
                .map_err(e)?,
            n,
        ),
        "l2fwd" => drive(
            Harness::builder(&config("action = \"l2fwd\""))
                .build()
                .map_err(e)?,
            n,
            "in",
            &swapped,
        ),
        "call-swap-bytes" => drive(
            Harness::builder(&config(&call("swap")))
                .handler("swap", swap_bytes)
                .build()
                .map_err(e)?,
            n,
            "in",
            &swapped,
        ),
        "call-swap-macs" => drive(
            Harness::builder(&config(&call("swap")))
                .handler("swap", swap_macs)
                .build()
                .map_err(e)?,
            n,
            "in",
            &swapped,
        ),
        "call-mac-swap" => drive(
            Harness::builder(&config(&call("swap")))
                .handler("swap", mac_swap)
                .build()
                .map_err(e)?,
            n,
            "in",
            &swapped,
        ),
        "forward" => drive(
            Harness::builder(&config(
                "action = \"forward\"\nto = \"out\"\nmac = \"02:00:00:00:bb:01\"",
            ))
            .build()
            .map_err(e)?,
            n,
            "out",
            &forwarded,
        ),
        "call-forward" => drive(
            Harness::builder(&config(&call("fwd")))
                .handler("fwd", ForwardOut)
                .build()
                .map_err(e)?,
            n,
            "out",
            &forwarded,
        ),
        "l2fwd-2rules" => drive(
            Harness::builder(&config_udp_tcp("action = \"l2fwd\"", "action = \"drop\""))
                .build()
                .map_err(e)?,
            n,
            "in",
            &swapped,
        ),
        // Two `call` rules to one handler, as lb.toml has: one verdict per rule.
        "call-parse-2rules" => drive(
            Harness::builder(&config_udp_tcp(&call("parse"), &call("parse")))
                .handler("parse", parse_swap)
                .build()
                .map_err(e)?,
            n,
            "in",
            &swapped,
        ),
        other => Err(format!(
            "no variant `{other}`: use one of {:?}",
            VARIANTS.iter().map(|v| v.0).collect::<Vec<_>>()
        )),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let (variants, n): (Vec<&str>, usize) = match args.as_slice() {
        [] => (VARIANTS.iter().map(|v| v.0).collect(), 10_000),
        [v, n] => match n.parse() {
            Ok(n) => (vec![v.as_str()], n),
            Err(_) => {
                eprintln!("usage: handler_cost [VARIANT FRAMES]: `{n}` is not a frame count");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: handler_cost [VARIANT FRAMES]");
            return ExitCode::from(2);
        }
    };
    for v in variants {
        match run(v, n) {
            Ok(left) => println!("{v}: {left} frames"),
            Err(e) => {
                eprintln!("{v}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
