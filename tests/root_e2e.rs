//! End to end, as root: the lab, `xdpool run`, the generator. Proves the walking
//! skeleton: every matching frame reaches a worker (or is named in a drop counter),
//! non-matching frames reach the kernel, no program stays attached, and every frame of
//! the UMEM is accounted for.

mod common;

use common::*;
use std::time::Duration;
use xdpool_lab::gen::packet::PortRange;
use xdpool_lab::gen::{self, GenConfig};
use xdpool_lab::lab::LabConfig;

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn e2e_lab_rxdrop_counts_every_frame_and_leaves_nothing() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xe"),
            ..LabConfig::default()
        },
        "e2e",
    );
    // Owned: the lab is dropped below, and its namespaces checked gone.
    let (st, sock) = (rig.st.clone(), rig.sock.clone());
    let rules = "[[rule]]\nproto = \"udp\"\ndst_port = \"9\"\naction = \"drop\"\n";
    let cfg = rig.config("e2e", &[0], rules);
    let run = XdpoolRun::start(&cfg, &[]);

    let udp_before = udp_snmp(&st.b.netns);
    const N: u64 = 100_000;
    let mut g = GenConfig::for_lab(&st);
    g.count = Some(N);
    g.size = 64;
    g.dst_ports = PortRange::single(9);
    // Paced so that even an unoptimized test build keeps up; overruns would still be
    // named (rx_ring_full) and accepted below, but then this test would prove less.
    g.rate_pps = Some(250_000);
    g.chunk = 2048; // frames per kernel call: bursts smaller than the RX ring (4096)
                    // Frames the sender's veth could not put in the receiver's ring (it is full when
                    // the receiving NAPI is held off, as on a loaded machine): they never reach the
                    // program, and the veth names them.
    let (into_ring, refused) = veth_delivery(&st.a.netns, &st.a.dev, N, || {
        let sent = gen::run(&g).expect("generator");
        assert_eq!(
            sent.sent, N,
            "generator handed {} frames to the kernel",
            sent.sent
        );
    });
    eprintln!("sender's veth: {into_ring} frames into the receiver's ring, {refused} refused");
    let mut other = GenConfig::for_lab(&st);
    other.count = Some(1_000);
    other.dst_ports = PortRange::single(10); // matches no rule: must reach the kernel
    gen::run(&other).expect("generator (non-matching)");

    // Wait until the instance has seen them (its control socket answers).
    let seen = wait_for(Duration::from_secs(10), || {
        xdpool::internal::stats::control::query(&sock)
            .map(|s| s["total"]["rx_packets"].as_u64().unwrap_or(0) >= into_ring)
            .unwrap_or(false)
    });
    let live = xdpool::internal::stats::control::query(&sock).expect("control socket answers");
    let (code, summary, out) = run.stop();
    assert_eq!(code, Some(0), "xdpool run exit code; stdout:\n{out}");

    // Every matching frame received, or named in a drop counter (ours, or the
    // sender veth's).
    let packets = summary["packets"].as_u64().unwrap();
    let named = named_rx_drops(&summary);
    assert!(
        seen || packets + named == into_ring,
        "control socket never showed {into_ring} frames: {live}"
    );
    // Enough traffic reached xdpool for the run to prove something: most of what the
    // sender's veth delivered, and most of what was sent.
    // Paced at 250 kpps, so nearly all must arrive: 95% is the bar (it was 50% into
    // the ring and 90% of that received, which a halved receive path passed).
    assert!(
        into_ring >= N * 95 / 100,
        "the sender's veth refused {refused} of {N} frames at 250 kpps (a starved machine?)"
    );
    assert!(
        packets >= into_ring * 95 / 100,
        "only {packets} of the {into_ring} delivered frames received at 250 kpps: {summary:#}"
    );
    assert_eq!(packets + named + refused, N, "received {packets} + named drops {named} + refused at the sender's veth {refused} != sent {N}: {summary:#}");
    assert_eq!(
        summary["drops"]["action_drop"].as_u64().unwrap(),
        packets,
        "rxdrop drops what it receives"
    );
    assert_eq!(
        summary["xdp"]["steered"].as_u64().unwrap(),
        into_ring,
        "XDP program steered exactly the matching frames that reached it"
    );
    assert_eq!(summary["xdp"]["malformed"].as_u64().unwrap(), 0);
    assert_eq!(summary["bytes"].as_u64().unwrap(), packets * 64);

    // Non-matching frames reached the kernel: counted passed by the program and seen
    // by the namespace's UDP stack (no listener on port 10: NoPorts).
    assert!(
        summary["xdp"]["passed"].as_u64().unwrap() >= 1_000,
        "{summary:#}"
    );
    let udp_after = udp_snmp(&st.b.netns);
    let kernel_saw =
        (udp_after.0 + udp_after.1 + udp_after.2) - (udp_before.0 + udp_before.1 + udp_before.2);
    assert!(
        kernel_saw >= 1_000,
        "the kernel's UDP stack saw only {kernel_saw} of the 1000 passed frames"
    );

    // Nothing left behind: no program on the device, every frame accounted for.
    assert_eq!(summary["program_left_attached"], false);
    assert_eq!(
        program_on(&st.b.netns, st.b.ifindex),
        None,
        "an XDP program is still attached to {}",
        st.b.dev
    );
    assert_eq!(
        summary["accounting_ok"], true,
        "{:#}",
        summary["accounting"]
    );
    let a = &summary["accounting"];
    assert_eq!(a["total"].as_u64().unwrap(), 16384);
    assert_eq!(
        a["free"].as_u64().unwrap(),
        16384,
        "all frames back on the free lists: {a:#}"
    );
    assert!(!sock.exists(), "control socket removed at exit");
    drop(rig);
    assert!(
        !xdpool::internal::netns::exists(&st.a.netns)
            && !xdpool::internal::netns::exists(&st.b.netns),
        "lab namespaces removed"
    );
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn e2e_errors_a_new_user_meets_say_what_to_do() {
    require_root!();
    let exe = env!("CARGO_BIN_EXE_xdpool");
    let tmp = scratch_dir("err");
    let sock = tmp.path().join("control.sock");
    // Interface missing (in our own scratch namespace, so nothing real is touched).
    let ns = format!("xdperr{}", std::process::id() % 100_000);
    assert!(std::process::Command::new("ip")
        .args(["netns", "add", &ns])
        .status()
        .unwrap()
        .success());
    struct NsGuard(String);
    impl Drop for NsGuard {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &self.0])
                .status();
        }
    }
    let _g = NsGuard(ns.clone());
    let cfg = write_config(
        tmp.path(),
        "err",
        &ns,
        "nosuchdev0",
        &[0],
        "[[rule]]\naction = \"drop\"\n",
        &sock,
    );
    let (code, err) = run_config(&cfg);
    assert_eq!(code, Some(4), "{err}");
    assert!(
        err.contains("nosuchdev0") && err.contains("xdpool lab up"),
        "{err}"
    );

    // Namespace missing.
    let cfg2 = write_config(
        tmp.path(),
        "err2",
        "no-such-ns-xyz",
        "xdpb0",
        &[0],
        "[[rule]]\naction = \"drop\"\n",
        &sock,
    );
    let (code, err) = run_config(&cfg2);
    assert_eq!(code, Some(4), "{err}");
    assert!(err.contains("no-such-ns-xyz"), "{err}");

    // Config invalid: key and line named, exit 2.
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[interface]\nname = \"x\"\n[umem]\nchunk_size = 1000\n[[rule]]\naction = \"drop\"\n",
    )
    .unwrap();
    let (code, err) = run_config(&bad);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(":4:") && err.contains("umem.chunk_size") && err.contains("2048 or 4096"),
        "{err}"
    );

    // Not root: run as nobody through setuid in the child. The config is read before
    // the privilege check, so nobody is given the (still 0700) scratch dir and file.
    for p in [tmp.path(), cfg.as_path()] {
        std::os::unix::fs::chown(p, Some(65534), Some(65534)).unwrap();
    }
    let out = unsafe_run_as_nobody(exe, &["run", "--config", cfg.to_str().unwrap()]);
    assert_eq!(out.0, Some(3), "{}", out.1);
    assert!(
        out.1.contains("needs root") && out.1.contains("sudo"),
        "{}",
        out.1
    );
}

/// Runs `xdpool run --config cfg` to its end; returns (exit code, stderr).
fn run_config(cfg: &std::path::Path) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_xdpool"))
        .args(["run", "--config"])
        .arg(cfg)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The id of the XDP program on `ifindex` in namespace `netns`, if any.
fn program_on(netns: &str, ifindex: u32) -> Option<u32> {
    xdpool::internal::netns::in_netns(netns, || xdpool::internal::steer::xdp_program_on(ifindex))
        .unwrap()
        .unwrap()
}

/// Runs `exe args` as uid/gid 65534 (nobody); returns (exit code, stderr).
fn unsafe_run_as_nobody(exe: &str, args: &[&str]) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new(exe)
        .args(args)
        .gid(65534)
        .uid(65534)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Zero-copy asked on a driver without it (veth): exit code 7, the reason, and the
/// fix; nothing left attached.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn e2e_zero_copy_refused_names_the_fix() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xz"),
            ..LabConfig::default()
        },
        "zc",
    );
    let st = &rig.st;
    let cfg = rig.config("zc", &[0], "[[rule]]\naction = \"drop\"\n");
    patch_config(&cfg, "queues = [0]\n", "queues = [0]\nzero_copy = true\n");
    let (code, err) = run_config(&cfg);
    assert_eq!(code, Some(7), "{err}");
    assert!(
        err.contains("zero-copy") && err.contains("zero_copy = false"),
        "{err}"
    );
    assert_eq!(program_on(&st.b.netns, st.b.ifindex), None);
}

/// A device without native XDP (the namespace's loopback): exit code 6, the fix
/// named, the frame accounting still exact at teardown, nothing left attached.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn e2e_native_mode_refused_names_the_fix() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("x6"),
            ..LabConfig::default()
        },
        "mode",
    );
    let st = &rig.st;
    let cfg = write_config(
        rig.dir(),
        "mode",
        &st.b.netns,
        "lo",
        &[0],
        "[[rule]]\naction = \"drop\"\n",
        &rig.sock,
    );
    let (code, err) = run_config(&cfg);
    assert_eq!(code, Some(6), "{err}");
    assert!(
        err.contains("native") && err.contains("--xdp-mode skb"),
        "{err}"
    );
    assert!(
        err.contains("frame accounting exact"),
        "teardown after the refusal: {err}"
    );
    let lo = xdpool::internal::netns::in_netns(&st.b.netns, || nix::net::if_::if_nametoindex("lo"))
        .unwrap()
        .unwrap();
    assert_eq!(program_on(&st.b.netns, lo), None);
}

/// Each capability xdpool needs, removed alone (root with a reduced bounding set):
/// exit code 3, the missing capability named, and what to do.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn e2e_each_missing_capability_is_named() {
    require_root!();
    if std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: setpriv (util-linux) not found");
        return;
    }
    let tmp = scratch_dir("cap");
    let sock = tmp.path().join("control.sock");
    let cfg = write_config(
        tmp.path(),
        "cap",
        "no-such-ns-cap",
        "xdpb0",
        &[0],
        "[[rule]]\naction = \"drop\"\n",
        &sock,
    );
    for (cap, name) in [
        ("net_admin", "CAP_NET_ADMIN"),
        ("net_raw", "CAP_NET_RAW"),
        ("ipc_lock", "CAP_IPC_LOCK"),
        ("bpf", "CAP_BPF"),
        ("perfmon", "CAP_PERFMON"),
    ] {
        let mut drop = format!("-{cap}");
        if cap == "bpf" || cap == "perfmon" {
            drop.push_str(",-sys_admin"); // CAP_SYS_ADMIN implies CAP_BPF and CAP_PERFMON
        }
        let out = std::process::Command::new("setpriv")
            .args([
                &format!("--bounding-set={drop}"),
                "--",
                env!("CARGO_BIN_EXE_xdpool"),
                "run",
                "--config",
            ])
            .arg(&cfg)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "without {name}: {err}");
        assert!(
            err.contains(name) && err.contains("sudo"),
            "without {name}: {err}"
        );
    }
}
