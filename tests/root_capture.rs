//! `xdpool capture` on a running instance, on the veth lab, as root: the frames one
//! rule matches reach a pcapng file that tcpdump reads, byte for byte as sent
//! (sequenced payloads, `gen::seq`), frames of the other rule are not in it, every
//! frame is still counted by the data path, and the workers stop copying once the
//! capture ends (at --count, and at Ctrl-C of the client). Across a reload that
//! renumbers the rules a capture stays on its rule (by name), `--rule N` means the
//! list that runs now, and a capture whose rule a reload removed ends saying so.
//! A rule's `capture = { file }` is written by the daemon itself: exactly the rule's
//! frames, closed at its count, flushed at the stop, followed across a reload that
//! adds and removes captures.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xdpool_lab::gen::packet::PortRange;
use xdpool_lab::gen::{self, seq, GenConfig, Payload};
use xdpool_lab::lab::{LabConfig, LabStatus};

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
fn start_capture(sock: &Path, rule: &str, count: Option<u64>, file: &Path) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xdpool"));
    cmd.args(["capture", "--socket"])
        .arg(sock)
        .args(["--rule", rule, "--snaplen", "2048", "-w"])
        .arg(file);
    if let Some(c) = count {
        cmd.args(["--count", &c.to_string()]);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn xdpool capture");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        line.clear();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            panic!(
                "xdpool capture ended before capturing: {:?}",
                child.wait_with_output()
            );
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
    let out = Command::new("tcpdump")
        .args(["-n", "-r"])
        .arg(file)
        .args(filter)
        .output()
        .expect("run tcpdump (make setup installs it)");
    assert!(
        out.status.success(),
        "tcpdump -r {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
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
                i.options
                    .iter()
                    .find_map(|o| {
                        if let InterfaceDescriptionOption::IfName(n) = o {
                            Some(n.to_string())
                        } else {
                            None
                        }
                    })
                    .unwrap_or_default(),
            ),
            Block::EnhancedPacket(p) => frames.push((
                names[p.interface_id as usize].clone(),
                p.original_len,
                p.data.to_vec(),
            )),
            _ => {}
        }
    }
    frames
}

fn total(sock: &Path, key: &str) -> u64 {
    xdpool::internal::stats::control::query(sock).expect("stats")["total"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing"))
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

/// The tests run one after the other (each paces its generator; together they would
/// drop frames on the two cores).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn capture_writes_the_rules_frames_to_pcapng_under_traffic_and_stops() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xp"),
            ..LabConfig::default()
        },
        "capture",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let cfg = rig.config("capture", &[0], RULES);
    let run = XdpoolRun::start(&cfg, &[]);
    // `ready` comes before the control socket is up.
    assert!(
        wait_for(Duration::from_secs(10), || {
            xdpool::internal::stats::control::query(sock).is_ok()
        }),
        "no control socket at {}",
        sock.display()
    );

    // Errors say what to do.
    let file = rig.dir().join("c.pcapng");
    let out = Command::new(env!("CARGO_BIN_EXE_xdpool"))
        .args(["capture", "--socket"])
        .arg(sock)
        .args(["--rule", "5", "-w"])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no rule 5") && err.contains("--rule"), "{err}");
    assert!(!file.exists(), "a refused capture leaves no file");

    // A capture of rule 1 (port 10) for C frames while both rules see traffic,
    // interleaved in rounds.
    const C: u64 = 2000;
    const ROUND: u64 = 500;
    const ROUNDS: u64 = 8;
    let client = start_capture(sock, "1", Some(C), &file);
    for k in 0..ROUNDS {
        send(st, 9, ROUND, 1_000_000 + k * ROUND, 100_000);
        send(st, 10, ROUND, k * ROUND, 100_000);
    }
    let (code, line) = finish(client);
    eprintln!("capture: {line}");
    assert_eq!(code, Some(0), "{line}");
    assert!(line.contains(&format!("{C} frames written")), "{line}");

    // tcpdump reads it: C frames, all to port 10, none to port 9.
    assert_eq!(
        tcpdump_count(&file, &[]),
        C as usize,
        "tcpdump counts every captured frame"
    );
    assert_eq!(
        tcpdump_count(&file, &["udp", "dst", "port", "10"]),
        C as usize
    );
    assert_eq!(
        tcpdump_count(&file, &["udp", "dst", "port", "9"]),
        0,
        "no frame of the other rule"
    );
    // Byte for byte the sent frames: each one verifies (checksum, every payload byte),
    // whole (128 bytes), numbered in the order sent.
    let frames = read_pcapng(&file);
    assert_eq!(frames.len() as u64, C);
    let seqs: Vec<u64> = frames
        .iter()
        .map(|(name, orig, data)| {
            assert!(
                name.ends_with(&format!("/{}/q0", st.b.dev)),
                "interface name {name}"
            );
            assert_eq!(
                (*orig, data.len()),
                (128, 128),
                "whole frames (snaplen 2048)"
            );
            assert_eq!(seq::udp_dst_port(data), Some(10));
            seq::check_frame(data)
                .unwrap_or_else(|e| panic!("a captured frame differs from the one sent: {e}"))
        })
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "in the order sent");
    assert!(
        seqs.iter().all(|s| *s < ROUNDS * ROUND),
        "only rule 1's numbers"
    );

    // The workers stopped copying: more traffic, no more captures.
    let captured = total(sock, "captured");
    assert!(captured >= C, "the workers counted {captured} captured");
    let dropped_at_end = total(sock, "capture_dropped");
    let rx_before = settled_rx(sock);
    send(st, 10, ROUND, 100_000, 100_000);
    let rx_after = settled_rx(sock);
    assert!(
        rx_after - rx_before >= ROUND * 9 / 10,
        "the worker received {} of {ROUND}",
        rx_after - rx_before
    );
    assert_eq!(
        total(sock, "captured"),
        captured,
        "no copies once the capture ended at --count"
    );
    assert_eq!(
        total(sock, "capture_dropped"),
        dropped_at_end,
        "the workers do not even try to copy once it ended"
    );

    // Without --count: Ctrl-C of the client ends it, the file is complete, the
    // workers stop copying.
    let file2 = rig.dir().join("c2.pcapng");
    let dropped = total(sock, "capture_dropped");
    let client = start_capture(sock, "1", None, &file2);
    send(st, 10, ROUND, 200_000, 100_000);
    let rx_before = settled_rx(sock);
    assert!(
        rx_before - rx_after >= ROUND * 9 / 10,
        "the worker received {} of {ROUND}",
        rx_before - rx_after
    );
    // Every frame received since was captured (the queue holds more than ROUND).
    assert_eq!(total(sock, "captured") - captured, rx_before - rx_after);
    // SAFETY: kill on our own child's PID.
    unsafe { libc::kill(client.id() as i32, libc::SIGINT) };
    let (code, line) = finish(client);
    eprintln!("capture after Ctrl-C: {line}");
    assert_eq!(code, Some(0), "{line}");
    let n2 = tcpdump_count(&file2, &[]) as u64;
    let captured2 = total(sock, "captured");
    assert_eq!(
        total(sock, "capture_dropped"),
        dropped,
        "the queue had room for every copy"
    );
    assert_eq!(
        n2,
        captured2 - captured,
        "the file holds every copy the workers made"
    );
    send(st, 10, ROUND, 300_000, 100_000);
    assert!(settled_rx(sock) - rx_before >= ROUND * 9 / 10);
    assert_eq!(total(sock, "captured"), captured2, "no copies after Ctrl-C");

    // The data path counted every frame with the capture running.
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let sent = 2 * ROUNDS * ROUND + 3 * ROUND;
    let rx = s["packets"].as_u64().unwrap();
    eprintln!(
        "capture run: sent {sent} rx {rx} captured {} dropped {} drops {}",
        counter(&s, "captured"),
        counter(&s, "capture_dropped"),
        s["drops"]
    );
    assert_eq!(
        rx + named_rx_drops(&s),
        sent,
        "every frame received or named: {s:#}"
    );
    assert_eq!(
        counter(&s, "action_drop"),
        rx,
        "every frame went on to its action: {s:#}"
    );
    if named_rx_drops(&s) == 0 {
        // Nothing lost before the worker: the capture holds exactly the first C frames
        // of rule 1 (the tap was armed before the first was sent).
        assert_eq!(seqs, (0..C).collect::<Vec<u64>>());
    }
    assert_all_frames_back(&s);
}

/// `xdpool rules apply FILE`: (exit code, stderr).
fn rules_apply(sock: &Path, text: &str, file: &Path) -> (Option<i32>, String) {
    std::fs::write(file, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_xdpool"))
        .args(["rules", "apply"])
        .arg(file)
        .arg("--socket")
        .arg(sock)
        .output()
        .expect("run xdpool rules apply");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// A UDP rule to `port`, dropped by the workers, with extra lines.
fn udp_rule(name: Option<&str>, port: u16, extra: &str) -> String {
    let name = name
        .map(|n| format!("name = \"{n}\"\n"))
        .unwrap_or_default();
    format!("[[rule]]\n{name}proto = \"udp\"\ndst_port = {port}\naction = \"drop\"\n{extra}\n")
}

/// Frames tcpdump reads in `file`, if it reads it to the end (a file being written
/// may end in half a block).
fn tcpdump_reads(file: &Path) -> Option<usize> {
    let out = Command::new("tcpdump")
        .args(["-n", "-r"])
        .arg(file)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).lines().count())
}

/// (all, to port 9, to port 10, to port 11) frames tcpdump reads in `file`.
fn by_port(file: &Path) -> [usize; 4] {
    let f = |p: &str| tcpdump_count(file, &["udp", "dst", "port", p]);
    [tcpdump_count(file, &[]), f("9"), f("10"), f("11")]
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn capture_stays_on_its_rule_across_a_renumbering_reload_and_ends_when_it_is_gone() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xq"),
            ..LabConfig::default()
        },
        "capture-reload",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    // Rule 0 `nine` (port 9), rule 1 unnamed (port 10).
    let cfg = rig.config(
        "capture-reload",
        &[0],
        &format!(
            "{}{}",
            udp_rule(Some("nine"), 9, ""),
            udp_rule(None, 10, "")
        ),
    );
    let run = XdpoolRun::start(&cfg, &[]);
    assert!(
        wait_for(Duration::from_secs(10), || {
            xdpool::internal::stats::control::query(sock).is_ok()
        }),
        "no control socket at {}",
        sock.display()
    );
    const R: u64 = 500;

    // 1. A capture of `nine` (rule 0) across a reload that makes it rule 2 and puts
    //    a new rule `eleven` at 0: every frame to port 9 before and after, nothing else.
    let f1 = rig.dir().join("nine.pcapng");
    let captured0 = total(sock, "captured");
    let client = start_capture(sock, "nine", None, &f1);
    send(st, 9, R, 0, 100_000);
    send(st, 10, R, 1_000_000, 100_000);
    let renumbered = format!(
        "{}{}{}",
        udp_rule(Some("eleven"), 11, ""),
        udp_rule(None, 10, ""),
        udp_rule(Some("nine"), 9, "")
    );
    let (code, err) = rules_apply(sock, &renumbered, &rig.dir().join("renumbered.toml"));
    assert_eq!(code, Some(0), "{err}");
    send(st, 9, R, R, 100_000);
    send(st, 10, R, 1_000_000 + R, 100_000);
    send(st, 11, R, 2_000_000, 100_000);
    settled_rx(sock);
    // SAFETY: kill on our own child's PID.
    unsafe { libc::kill(client.id() as i32, libc::SIGINT) };
    let (code, line) = finish(client);
    eprintln!("capture across the reload: {line}");
    assert_eq!(code, Some(0), "{line}");
    let copies = total(sock, "captured") - captured0;
    let [all, p9, p10, p11] = by_port(&f1);
    eprintln!("nine.pcapng: {all} frames ({p9} to port 9, {p10} to 10, {p11} to 11); the workers copied {copies}");
    assert_eq!(
        (p10, p11),
        (0, 0),
        "no frame of another rule, before or after the reload"
    );
    assert_eq!(all, p9);
    assert_eq!(
        all as u64, copies,
        "the file holds every copy the workers made"
    );
    assert_eq!(total(sock, "capture_dropped"), 0);
    let seqs: Vec<u64> = read_pcapng(&f1)
        .iter()
        .map(|(_, _, d)| seq::check_frame(d).expect("a sent frame"))
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]) && seqs.iter().all(|s| *s < 2 * R),
        "port 9's frames in order"
    );
    assert!(
        seqs.iter().any(|s| *s < R) && seqs.iter().any(|s| *s >= R),
        "frames from before and after the reload"
    );

    // 2. `--rule 0` is the list that runs now: `eleven`.
    let f2 = rig.dir().join("zero.pcapng");
    let client = start_capture(sock, "0", Some(100), &f2);
    send(st, 9, 100, 10_000, 100_000);
    send(st, 11, 100, 2_100_000, 100_000);
    let (code, line) = finish(client);
    eprintln!("rule 0 after the reload: {line}");
    assert_eq!(code, Some(0), "{line}");
    assert!(
        line.contains("rule 0 `eleven`") && line.contains("100 frames written"),
        "{line}"
    );
    assert_eq!(
        by_port(&f2),
        [100, 0, 0, 100],
        "rule 0 is `eleven` now: only port 11"
    );

    // 3. The unnamed rule (now rule 1): a reload without it ends the capture, saying so.
    let f3 = rig.dir().join("ten.pcapng");
    let captured1 = total(sock, "captured");
    let client = start_capture(sock, "1", None, &f3);
    send(st, 10, 200, 1_100_000, 100_000);
    settled_rx(sock);
    let (code, err) = rules_apply(
        sock,
        &format!(
            "{}{}",
            udp_rule(Some("nine"), 9, ""),
            udp_rule(Some("eleven"), 11, "")
        ),
        &rig.dir().join("without-ten.toml"),
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, line) = finish(client);
    eprintln!("capture of a removed rule: {line}");
    assert_eq!(code, Some(0), "{line}");
    assert!(
        line.contains("rule 1 (unnamed) is gone") && line.contains("200 frames written"),
        "{line}"
    );
    assert_eq!(by_port(&f3), [200, 0, 200, 0]);
    assert_eq!(total(sock, "captured") - captured1, 200);

    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let sent = 5 * R + 200 + 200;
    eprintln!(
        "capture reload run: sent {sent} rx {} drops {}",
        s["packets"], s["drops"]
    );
    // Port 10's frames after the last reload passed to the kernel: none were sent.
    assert_eq!(
        s["packets"].as_u64().unwrap() + named_rx_drops(&s),
        sent,
        "{s:#}"
    );
    if named_rx_drops(&s) == 0 {
        assert_eq!(p9 as u64, 2 * R, "every frame to port 9 was captured");
    }
    assert_all_frames_back(&s);
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn rule_capture_files_get_exactly_their_rules_frames_across_a_reload() {
    require_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xk"),
            ..LabConfig::default()
        },
        "capture-file",
    );
    let (st, sock) = (&rig.st, &rig.sock);
    let (a, b, c) = (
        rig.dir().join("a.pcapng"),
        rig.dir().join("b.pcapng"),
        rig.dir().join("c.pcapng"),
    );
    let cap = |f: &Path, more: &str| format!("capture = {{ file = \"{}\"{more} }}\n", f.display());

    // A file that cannot be created is an error at start, naming it.
    let nowhere = rig.dir().join("no-such-dir/x.pcapng");
    let bad = rig.config(
        "capture-file-bad",
        &[0],
        &udp_rule(None, 9, &cap(&nowhere, "")),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_xdpool"))
        .args(["run", "--quiet", "--duration", "5", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("rule[0].capture")
            && err.contains(&nowhere.display().to_string())
            && err.contains("create its directory"),
        "{err}"
    );

    // `nine` writes a (64 bytes of each frame), port 10's rule writes b (300 frames).
    let rules = format!(
        "{}{}",
        udp_rule(Some("nine"), 9, &cap(&a, ", snaplen = 64")),
        udp_rule(None, 10, &cap(&b, ", count = 300"))
    );
    let cfg = rig.config("capture-file", &[0], &rules);
    let run = XdpoolRun::start(&cfg, &[]);
    assert!(wait_for(Duration::from_secs(10), || {
        xdpool::internal::stats::control::query(sock).is_ok()
    }));
    const R: u64 = 500;
    send(st, 9, R, 0, 100_000);
    send(st, 10, R, 1_000_000, 100_000);
    // b is complete at its count: closed and readable while xdpool runs.
    assert!(
        wait_for(Duration::from_secs(5), || tcpdump_reads(&b) == Some(300)),
        "b.pcapng: {:?}",
        tcpdump_reads(&b)
    );
    assert_eq!(by_port(&b), [300, 0, 300, 0]);

    // Refused reloads: a bad path (key and line), a file that cannot be created.
    let (code, err) = rules_apply(
        sock,
        &udp_rule(None, 9, "capture = { file = \"a.pcapng\" }"),
        &rig.dir().join("rel.toml"),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("rule[0].capture.file") && err.contains("line 5") && err.contains("absolute"),
        "{err}"
    );
    let (code, err) = rules_apply(
        sock,
        &udp_rule(None, 9, &cap(&nowhere, "")),
        &rig.dir().join("nowhere.toml"),
    );
    assert_eq!(code, Some(11), "{err}");
    assert!(
        err.contains(&nowhere.display().to_string()) && err.contains("create its directory"),
        "{err}"
    );

    // Reload: renumbered (`eleven` first, capturing to c), `nine` keeps a (it goes on
    // in the same file), port 10's rule loses its capture.
    let reloaded = format!(
        "{}{}{}",
        udp_rule(Some("eleven"), 11, &cap(&c, "")),
        udp_rule(None, 10, ""),
        udp_rule(Some("nine"), 9, &cap(&a, ", snaplen = 64"))
    );
    let (code, err) = rules_apply(sock, &reloaded, &rig.dir().join("reloaded.toml"));
    assert_eq!(code, Some(0), "{err}");
    let snap = xdpool::internal::stats::control::query(sock).unwrap();
    let files: Vec<Option<String>> = snap["rules"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["capture"].as_str().map(String::from))
        .collect();
    let path = |f: &Path| Some(f.display().to_string());
    assert_eq!(
        files,
        vec![path(&c), None, path(&a)],
        "the stats name each rule's capture file"
    );
    send(st, 9, R, R, 100_000);
    send(st, 10, R, 1_000_000 + R, 100_000);
    send(st, 11, R, 2_000_000, 100_000);
    settled_rx(sock);
    let (code, s, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    let sent = 5 * R;
    let drops = named_rx_drops(&s);
    eprintln!(
        "rule capture run: sent {sent} rx {} file_captured {} file_capture_dropped {} drops {drops}; a {:?} b {:?} c {:?}",
        s["packets"],
        counter(&s, "file_captured"),
        counter(&s, "file_capture_dropped"),
        by_port(&a),
        by_port(&b),
        by_port(&c)
    );
    assert_eq!(s["packets"].as_u64().unwrap() + drops, sent, "{s:#}");
    assert_eq!(
        counter(&s, "action_drop"),
        s["packets"].as_u64().unwrap(),
        "every frame went on to its action"
    );
    assert_eq!(counter(&s, "file_capture_dropped"), 0);
    // Flushed at the stop: a has port 9's frames from both lists (64 bytes each), c
    // port 11's; b kept its 300 (no copy after its count, none after the reload).
    let [a_all, a9, ..] = by_port(&a);
    let [c_all, .., c11] = by_port(&c);
    assert_eq!((a_all, a9), (a9, a9), "a: port 9 only");
    assert_eq!((c_all, c11), (c11, c11), "c: port 11 only");
    assert_eq!(by_port(&b), [300, 0, 300, 0], "b: its count, nothing after");
    assert_eq!(
        (a_all + c_all + 300) as u64,
        counter(&s, "file_captured"),
        "every copy written, and b's rule copied its count, no more"
    );
    for (_, orig, data) in read_pcapng(&a) {
        assert_eq!(
            (orig, data.len()),
            (128, 64),
            "snaplen 64, the frame's length kept"
        );
    }
    if drops == 0 {
        assert_eq!(
            (a_all as u64, c_all as u64),
            (2 * R, R),
            "every frame of the rules"
        );
    }
    assert_all_frames_back(&s);
}
