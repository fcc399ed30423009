//! Each example binary on the veth lab, as root (skipped otherwise): bounded traffic
//! in, exact counts out, and the summary's frame accounting. Traffic stays in the
//! test's own namespaces (198.18.0.0/15), which are removed even when a test fails.

mod common;

use common::*;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};
use xdpool_lab::gen::packet::PortRange;
use xdpool_lab::gen::{self, GenConfig};
use xdpool_lab::lab::forward::{outer_end, ForwardLabGuard, Link};
use xdpool_lab::lab::{LabConfig, LabGuard};

/// Waits up to 5 s for `f` to reach `want`, then 200 ms more for stragglers.
fn settle(want: u64, mut f: impl FnMut() -> u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    while f() < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    f()
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn reflect_sends_back_every_udp_frame_of_the_lab() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (running as uid {}): run as root",
        nix::unistd::geteuid()
    );
    let lab = LabGuard::up(&LabConfig::with_prefix(unique_prefix("xer"))).expect("lab up");
    let st = lab.status().clone();
    let dir = tempfile::tempdir().unwrap();
    let cfg = patched_config(
        dir.path(),
        "reflect",
        &[
            ("\"xdpool-b\"", &format!("\"{}\"", st.b.netns)),
            ("\"xdpb0\"", &format!("\"{}\"", st.b.dev)),
        ],
    );
    let run = ExampleRun::start(env!("CARGO_BIN_EXE_reflect"), &cfg);
    let received = || snmp(&st.a.netns, "Ip", ["InReceives"])[0];
    let before = received();
    const N: u64 = 2_000;
    let g = GenConfig {
        count: Some(N),
        rate_pps: Some(20_000),
        chunk: 256,
        ..GenConfig::for_lab(&st)
    };
    assert_eq!(gen::run(&g).expect("generator").sent, N);
    let back = settle(before + N, received) - before;
    let (code, s) = run.stop();
    assert_eq!(code, Some(0), "{s:#}");
    let udp = counter(&s, "handler_calls") - counter(&s, "action_drop");
    assert_eq!(
        udp, N,
        "UDP frames the handler took (others are dropped): {s:#}"
    );
    assert_eq!(counter(&s, "tx_packets"), N, "{s:#}");
    assert_eq!(back, N, "IPv4 frames the sender's namespace received back");
    assert_accounting_ok(&s);
}

/// A forward lab with backend addresses 198.18.2.11-13 on the receiver's xdpd0.
fn forward_lab(tag: &str) -> (ForwardLabGuard, String, String) {
    let prefix = unique_prefix(tag);
    let lab = ForwardLabGuard::up(&LabConfig::with_prefix(&prefix)).expect("forward lab up");
    let dst = lab.status().names.dst.clone();
    for i in 11..=13 {
        ip(&[
            "-n",
            &dst,
            "addr",
            "add",
            &format!("198.18.2.{i}/32"),
            "dev",
            outer_end(Link::Out).dev,
        ]);
    }
    (lab, prefix, dst)
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn lb_delivers_every_flow_to_a_backend_with_valid_checksums() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (running as uid {}): run as root",
        nix::unistd::geteuid()
    );
    let (lab, prefix, dst) = forward_lab("xel");
    let fwd = lab.status().names.fwd.clone();
    let dir = tempfile::tempdir().unwrap();
    let cfg = patched_config(
        dir.path(),
        "lb",
        &[("\"xdpool-fwd\"", &format!("\"{fwd}\""))],
    );
    let sock = dir.path().join("control.sock");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}\n[stats]\ncontrol_socket = \"{}\"\n", sock.display()),
    )
    .unwrap();
    let run = ExampleRun::start(env!("CARGO_BIN_EXE_lb"), &cfg);
    let udp = || snmp(&dst, "Udp", ["NoPorts", "InCsumErrors", "InErrors"]);
    let before = udp();
    const N: u64 = 3_000;
    let g = GenConfig {
        count: Some(N),
        rate_pps: Some(20_000),
        src_ports: PortRange::new(1024, 1087).unwrap(),
        flows: 64,
        ..GenConfig::for_forward_lab(&prefix).unwrap()
    };
    assert_eq!(gen::run(&g).expect("generator").sent, N);
    // Nothing listens on the backends' port 9: each datagram whose checksum
    // verifies is counted NoPorts, each that does not InCsumErrors.
    settle(before[0] + N, || udp()[0]);
    let after = udp();
    // `xdpool control lb LIST` on the running program: both lanes (in and out,
    // one queue each) take a good list and refuse a bad one.
    let control = |msg: &str| {
        xdpool::internal::stats::control::control_handler(&sock, "lb", msg).expect("it answers")
    };
    let reply = control("02:78:64:70:02:01=198.18.2.11");
    assert_eq!(
        (reply["ok"].clone(), reply["answered"].clone()),
        (true.into(), 2.into()),
        "{reply}"
    );
    let reply = control("02:78:64:70:02:01=not-an-ip");
    assert_eq!(reply["ok"], false, "{reply}");
    assert_eq!(
        reply["refused"].as_array().map(Vec::len),
        Some(2),
        "{reply}"
    );
    let (code, s) = run.stop();
    assert_eq!(code, Some(0), "{s:#}");
    assert_eq!(
        after[1] - before[1],
        0,
        "UDP checksum errors at the backends"
    );
    assert_eq!(after[2] - before[2], 0, "UDP errors at the backends");
    assert_eq!(after[0] - before[0], N, "datagrams the backends got");
    assert_eq!(counter(&s, "handler_calls"), N, "{s:#}");
    assert_eq!(counter(&s, "forwarded"), N, "{s:#}");
    assert_accounting_ok(&s);
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn ratelimit_passes_the_burst_and_the_rate_and_drops_the_rest() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (running as uid {}): run as root",
        nix::unistd::geteuid()
    );
    let (lab, prefix, dst) = forward_lab("xeq");
    let fwd = lab.status().names.fwd.clone();
    let dir = tempfile::tempdir().unwrap();
    let cfg = patched_config(
        dir.path(),
        "ratelimit",
        &[("\"xdpool-fwd\"", &format!("\"{fwd}\""))],
    );
    let run = ExampleRun::start(env!("CARGO_BIN_EXE_ratelimit"), &cfg);
    let delivered = || {
        snmp(&dst, "Udp", ["NoPorts", "InDatagrams"])
            .iter()
            .sum::<u64>()
    };
    let before = delivered();
    // 1 000 frames from one source at 10 000/s: about 0.1 s, against 100/s with
    // bursts of 50 (configs/examples/ratelimit.toml).
    const N: u64 = 1_000;
    let g = GenConfig {
        count: Some(N),
        rate_pps: Some(10_000),
        ..GenConfig::for_forward_lab(&prefix).unwrap()
    };
    let t0 = Instant::now();
    assert_eq!(gen::run(&g).expect("generator").sent, N);
    std::thread::sleep(Duration::from_millis(300));
    let (code, s) = run.stop();
    let elapsed = t0.elapsed().as_secs_f64();
    let passed = delivered() - before;
    assert_eq!(code, Some(0), "{s:#}");
    assert_eq!(counter(&s, "handler_calls"), N, "{s:#}");
    assert_eq!(
        counter(&s, "forwarded"),
        passed,
        "forwarded = delivered: {s:#}"
    );
    assert_eq!(
        counter(&s, "forwarded") + counter(&s, "action_drop"),
        N,
        "{s:#}"
    );
    let most = 50 + (100.0 * elapsed).ceil() as u64;
    assert!(
        (50..=most).contains(&passed),
        "{passed} passed in {elapsed:.2} s; at most {most}"
    );
    assert_accounting_ok(&s);
}

/// An ICMP echo request (id 0x7064, sequence `seq`), checksummed.
fn echo(seq: u16) -> Vec<u8> {
    let mut m = vec![8, 0, 0, 0, 0x70, 0x64];
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(b"xdpool responder lab test");
    let mut s: u32 = m
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    m[2..4].copy_from_slice(&(!(s as u16)).to_be_bytes());
    m
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn responder_answers_arp_and_every_ping_for_its_address() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (running as uid {}): run as root",
        nix::unistd::geteuid()
    );
    use nix::sys::socket::{
        sendto, socket, AddressFamily, MsgFlags, SockFlag, SockProtocol, SockType, SockaddrIn,
    };
    use std::os::fd::AsRawFd;
    let lab = LabGuard::up(&LabConfig::with_prefix(unique_prefix("xep"))).expect("lab up");
    let st = lab.status().clone();
    let dir = tempfile::tempdir().unwrap();
    let cfg = patched_config(
        dir.path(),
        "responder",
        &[
            ("\"xdpool-b\"", &format!("\"{}\"", st.b.netns)),
            ("\"xdpb0\"", &format!("\"{}\"", st.b.dev)),
        ],
    );
    let run = ExampleRun::start(env!("CARGO_BIN_EXE_responder"), &cfg);
    let replies = || snmp(&st.a.netns, "Icmp", ["InEchoReps"])[0];
    let before = replies();
    // A raw ICMP socket in the sender's namespace; 198.18.0.9 has no neighbour entry
    // there, so the kernel asks for it by ARP first (the responder answers).
    let sock = xdpool::internal::netns::in_netns(&st.a.netns, || {
        socket(
            AddressFamily::Inet,
            SockType::Raw,
            SockFlag::empty(),
            SockProtocol::Icmp,
        )
    })
    .unwrap()
    .expect("raw ICMP socket");
    let to = SockaddrIn::from(SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 9), 0));
    const N: u64 = 200;
    for seq in 0..N as u16 {
        sendto(sock.as_raw_fd(), &echo(seq), &to, MsgFlags::empty()).expect("send an echo request");
        std::thread::sleep(Duration::from_millis(1));
    }
    let got = settle(before + N, replies) - before;
    let (code, s) = run.stop();
    assert_eq!(code, Some(0), "{s:#}");
    assert_eq!(got, N, "echo replies the sender's namespace received");
    let out = std::process::Command::new("ip")
        .args(["-n", &st.a.netns, "neigh", "show", "198.18.0.9"])
        .output()
        .unwrap();
    let neigh = String::from_utf8_lossy(&out.stdout);
    assert!(
        neigh.contains("lladdr 02:78:64:70:00:0b"),
        "ARP answered: {neigh}"
    );
    // Every request is dropped; each answer is a new frame (Packet::emit).
    assert_eq!(
        counter(&s, "action_drop"),
        counter(&s, "handler_calls"),
        "{s:#}"
    );
    let answered = counter(&s, "handler_emitted");
    assert_eq!(counter(&s, "tx_packets"), answered, "{s:#}");
    let arp = answered - N;
    assert!(
        (1..=3).contains(&arp),
        "{arp} ARP replies besides {N} echo replies: {s:#}"
    );
    assert_accounting_ok(&s);
}
