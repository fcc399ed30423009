//! `xdpool capture` on a running instance, on the veth lab, as root: the frames one
//! rule matches reach a pcapng file that tcpdump reads, byte for byte as sent
//! (sequenced payloads, `gen::seq`), frames of the other rule are not in it, every
//! frame is still counted by the data path, and the workers stop copying once the
//! capture ends (at --count, and at Ctrl-C of the client).

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xdpool::gen::packet::PortRange;
use xdpool::gen::{self, seq, GenConfig, Payload};
use xdpool::lab::{LabConfig, LabStatus};

/// Rule 0: UDP to port 9, rule 1: UDP to port 10; both dropped by the workers.
const RULES: &str = "[[rule]]\nproto = \"udp\"\ndst_port = 9\naction = \"drop\"\n\n[[rule]]\nproto = \"udp\"\ndst_port = 10\naction = \"drop\"\n";

/// `n` sequenced UDP frames of 128 bytes to `port`, numbers from `first`, at `pps`.
fn send(st: &LabStatus, port: u16, n: u64, first: u64, pps: u64) {
    let mut g = GenConfig::for_lab(st);
    g.count = Some(n);
    g.size = 128;
    g.rate_pps = Some(pps);
    g.engine = gen::Engine::Afxdp;
    g.payload = Payload::Sequenced;
    g.seq_first = first;
    g.flows = 1;
    g.cores = vec![];
    g.dst_ports = PortRange::single(port);
    assert_eq!(gen::run(&g).expect("AF_XDP generator").sent, n);
}

/// Starts `xdpool capture` and waits until it says it is capturing (the tap is armed
/// before the instance answers, so every later frame is seen).
fn start_capture(sock: &Path, rule: usize, count: Option<u64>, file: &Path) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xdpool"));
    cmd.args(["capture", "--socket"]).arg(sock).args(["--rule", &rule.to_string(), "--snaplen", "2048", "-w"]).arg(file);
    if let Some(c) = count {
        cmd.args(["--count", &c.to_string()]);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn xdpool capture");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        line.clear();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            panic!("xdpool capture ended before capturing: {:?}", child.wait_with_output());
        }
        if line.contains("capturing") {
            // Keep draining stderr so the child never blocks on it.
            std::thread::spawn(move || for _ in err.lines() {});
            return child;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("xdpool capture did not start within 10 s");
}

/// Waits (at most 10 s) for the child and returns its exit code and stdout.
fn finish(mut child: Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            let mut out = String::new();
            std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
            return (s.code(), out);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("xdpool capture did not end within 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Lines tcpdump prints for `file` (with a filter), i.e. the frames it read.
fn tcpdump_count(file: &Path, filter: &[&str]) -> usize {
    let out = Command::new("tcpdump").args(["-n", "-r"]).arg(file).args(filter).output().expect("run tcpdump (make setup installs it)");
    assert!(out.status.success(), "tcpdump -r {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().count()
}

/// Every frame of the pcapng file: (interface name, original length, bytes).
fn read_pcapng(file: &Path) -> Vec<(String, u32, Vec<u8>)> {
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
    use pcap_file::pcapng::{Block, PcapNgReader};
    let mut r = PcapNgReader::new(std::fs::File::open(file).unwrap()).expect("a pcapng file");
    let (mut names, mut frames) = (Vec::new(), Vec::new());
    while let Some(b) = r.next_block() {
        match b.expect("a valid block") {
            Block::InterfaceDescription(i) => names.push(
                i.options.iter().find_map(|o| if let InterfaceDescriptionOption::IfName(n) = o { Some(n.to_string()) } else { None }).unwrap_or_default(),
            ),
            Block::EnhancedPacket(p) => frames.push((names[p.interface_id as usize].clone(), p.original_len, p.data.to_vec())),
            _ => {}
        }
    }
    frames
}

fn total(sock: &Path, key: &str) -> u64 {
    xdpool::stats::control::query(sock).expect("stats")["total"][key].as_u64().unwrap_or_else(|| panic!("{key} missing"))
}

/// `rx_packets` once it stops moving (200 ms quiet, 5 s at most).
fn settled_rx(sock: &Path) -> u64 {
    let mut last = total(sock, "rx_packets");
    for _ in 0..25 {
        std::thread::sleep(Duration::from_millis(200));
        let now = total(sock, "rx_packets");
        if now == last {
            break;
        }
        last = now;
    }
    last
}

#[test]
fn capture_writes_the_rules_frames_to_pcapng_under_traffic_and_stops() {
    if !root_or_skip("capture_writes_the_rules_frames_to_pcapng_under_traffic_and_stops") {
        return;
    }
    let rig = LabRig::up(LabConfig { prefix: unique_prefix("xp"), ..LabConfig::default() }, "capture");
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("capture", &[0], RULES);
    let run = XdpoolRun::start(&cfg, &[]);
    // `ready` comes before the control socket is up.
    assert!(wait_for(Duration::from_secs(10), || xdpool::stats::control::query(sock).is_ok()), "no control socket at {}", sock.display());

    // Errors say what to do.
    let file = rig.dir().join("c.pcapng");
    let out = Command::new(env!("CARGO_BIN_EXE_xdpool")).args(["capture", "--socket"]).arg(sock).args(["--rule", "5", "-w"]).arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no rule 5") && err.contains("--rule"), "{err}");
    assert!(!file.exists(), "a refused capture leaves no file");

    // A capture of rule 1 (port 10) for C frames while both rules see traffic,
    // interleaved in rounds.
    const C: u64 = 2000;
    const ROUND: u64 = 500;
    const ROUNDS: u64 = 8;
    let client = start_capture(sock, 1, Some(C), &file);
    for k in 0..ROUNDS {
        send(st, 9, ROUND, 1_000_000 + k * ROUND, 100_000);
        send(st, 10, ROUND, k * ROUND, 100_000);
    }
    let (code, line) = finish(client);
    eprintln!("capture: {line}");
    assert_eq!(code, Some(0), "{line}");
    assert!(line.contains(&format!("{C} frames written")), "{line}");

    // tcpdump reads it: C frames, all to port 10, none to port 9.
    assert_eq!(tcpdump_count(&file, &[]), C as usize, "tcpdump counts every captured frame");
    assert_eq!(tcpdump_count(&file, &["udp", "dst", "port", "10"]), C as usize);
    assert_eq!(tcpdump_count(&file, &["udp", "dst", "port", "9"]), 0, "no frame of the other rule");
    // Byte for byte the sent frames: each one verifies (checksum, every payload byte),
    // whole (128 bytes), numbered in the order sent.
    let frames = read_pcapng(&file);
    assert_eq!(frames.len() as u64, C);
    let seqs: Vec<u64> = frames
        .iter()
        .map(|(name, orig, data)| {
            assert!(name.ends_with(&format!("/{}/q0", st.b.dev)), "interface name {name}");
            assert_eq!((*orig, data.len()), (128, 128), "whole frames (snaplen 2048)");
            assert_eq!(seq::udp_dst_port(data), Some(10));
            seq::check_frame(data).unwrap_or_else(|e| panic!("a captured frame differs from the one sent: {e}"))
        })
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in the order sent");
    assert!(seqs.iter().all(|s| *s < ROUNDS * ROUND), "only rule 1's numbers");

    // The workers stopped copying: more traffic, no more captures.
    let captured = total(sock, "captured");
    assert!(captured >= C, "the workers counted {captured} captured");
    let dropped_at_end = total(sock, "capture_dropped");
    let rx_before = settled_rx(sock);
    send(st, 10, ROUND, 100_000, 100_000);
    let rx_after = settled_rx(sock);
    assert!(rx_after - rx_before >= ROUND * 9 / 10, "the worker received {} of {ROUND}", rx_after - rx_before);
    assert_eq!(total(sock, "captured"), captured, "no copies once the capture ended at --count");
    assert_eq!(total(sock, "capture_dropped"), dropped_at_end, "the workers do not even try to copy once it ended");

    // Without --count: Ctrl-C of the client ends it, the file is complete, the
    // workers stop copying.
    let file2 = rig.dir().join("c2.pcapng");
    let dropped = total(sock, "capture_dropped");
    let client = start_capture(sock, 1, None, &file2);
    send(st, 10, ROUND, 200_000, 100_000);
    let rx_before = settled_rx(sock);
    assert!(rx_before - rx_after >= ROUND * 9 / 10, "the worker received {} of {ROUND}", rx_before - rx_after);
    // Every frame received since was captured (the queue holds more than ROUND).
    assert_eq!(total(sock, "captured") - captured, rx_before - rx_after);
    // SAFETY: kill on our own child's PID.
    unsafe { libc::kill(client.id() as i32, libc::SIGINT) };
    let (code, line) = finish(client);
    eprintln!("capture after Ctrl-C: {line}");
    assert_eq!(code, Some(0), "{line}");
    let n2 = tcpdump_count(&file2, &[]) as u64;
    let captured2 = total(sock, "captured");
    assert_eq!(total(sock, "capture_dropped"), dropped, "the queue had room for every copy");
    assert_eq!(n2, captured2 - captured, "the file holds every copy the workers made");
    send(st, 10, ROUND, 300_000, 100_000);
    assert!(settled_rx(sock) - rx_before >= ROUND * 9 / 10);
    assert_eq!(total(sock, "captured"), captured2, "no copies after Ctrl-C");

    // The data path counted every frame with the capture running.
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let sent = 2 * ROUNDS * ROUND + 3 * ROUND;
    let rx = s["packets"].as_u64().unwrap();
    eprintln!("capture run: sent {sent} rx {rx} captured {} dropped {} drops {}", counter(&s, "captured"), counter(&s, "capture_dropped"), s["drops"]);
    assert_eq!(rx + named_rx_drops(&s), sent, "every frame received or named: {s:#}");
    assert_eq!(counter(&s, "action_drop"), rx, "every frame went on to its action: {s:#}");
    if named_rx_drops(&s) == 0 {
        // Nothing lost before the worker: the capture holds exactly the first C frames
        // of rule 1 (the tap was armed before the first was sent).
        assert_eq!(seqs, (0..C).collect::<Vec<u64>>());
    }
    assert_all_frames_back(&s);
}
