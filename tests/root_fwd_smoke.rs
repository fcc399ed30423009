//! Forwarding smoke test of the data plane (the full forwarding suite is
//! root_forward.rs): three namespaces of its own (unique names), xdpool with three
//! ports on one UMEM, `forward` in -> out with `mac = "neigh"` and `mirror_to = mon`.
//! Every UDP datagram sent from the source reaches the destination's socket
//! byte-exact, each is mirrored once, frames cross workers and return to the
//! ingress pool through its return ring, and the accounting is exact. Then the
//! egress device is deleted mid-traffic and re-created: ingress keeps running, the
//! frames meant for the missing port are counted, nothing is lost or doubled. A
//! second test deletes the ingress device, whose socket registered the UMEM: every
//! port comes back on a new registration and forwarding is exact again.

mod common;

use common::*;
use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn mac_of(ns: &str, dev: &str) -> String {
    let out = Command::new("ip")
        .args(["-n", ns, "-br", "link", "show", dev])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(2)
        .expect("a MAC")
        .to_string()
}

/// The three namespaces; deleted on drop (also when the test fails).
struct Topo {
    src: String,
    fwd: String,
    dst: String,
}

impl Drop for Topo {
    fn drop(&mut self) {
        for ns in [&self.src, &self.fwd, &self.dst] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

impl Topo {
    fn up(prefix: &str) -> Topo {
        let t = Topo {
            src: format!("{prefix}-src"),
            fwd: format!("{prefix}-fwd"),
            dst: format!("{prefix}-dst"),
        };
        for ns in [&t.src, &t.fwd, &t.dst] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            // No IPv6 chatter (router solicitations, MLD) in the device counters.
            let _ = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ])
                .status();
        }
        t.ingress();
        t.egress("xdpf1", "xdpd0", "198.18.2");
        t.egress("xdpf2", "xdpm0", "198.18.3");
        t
    }

    /// The ingress veth (source side xdps0, xdpool's side xdpf0), the source's
    /// checksum setting, neighbour and routes.
    fn ingress(&self) {
        let t = self;
        ip(&[
            "-n", &t.src, "link", "add", "xdps0", "type", "veth", "peer", "name", "xdpf0", "netns",
            &t.fwd,
        ]);
        ip(&["-n", &t.src, "addr", "add", "198.18.1.1/24", "dev", "xdps0"]);
        ip(&["-n", &t.src, "link", "set", "xdps0", "up"]);
        ip(&["-n", &t.fwd, "addr", "add", "198.18.1.2/24", "dev", "xdpf0"]);
        ip(&["-n", &t.fwd, "link", "set", "xdpf0", "up"]);
        // A socket's UDP checksum is left to the device (CHECKSUM_PARTIAL) on veth;
        // a frame redirected to AF_XDP keeps the partial sum, so the receiver would
        // count it bad. Have the sender's stack compute it.
        let out = Command::new("ip")
            .args([
                "netns", "exec", &t.src, "ethtool", "-K", "xdps0", "tx", "off",
            ])
            .output()
            .expect("ethtool (make setup installs it)");
        assert!(
            out.status.success(),
            "ethtool -K xdps0 tx off: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let f0 = mac_of(&t.fwd, "xdpf0");
        ip(&[
            "-n",
            &t.src,
            "neigh",
            "replace",
            "198.18.1.2",
            "lladdr",
            &f0,
            "dev",
            "xdps0",
            "nud",
            "permanent",
        ]);
        ip(&[
            "-n",
            &t.src,
            "route",
            "add",
            "198.18.2.0/24",
            "via",
            "198.18.1.2",
        ]);
        ip(&[
            "-n",
            &t.src,
            "route",
            "add",
            "198.18.3.0/24",
            "via",
            "198.18.1.2",
        ]);
    }

    /// One egress veth (fwd side `f`, dst side `d`, subnet `net`.0/24) with the
    /// permanent neighbour entry `mac = "neigh"` reads.
    fn egress(&self, f: &str, d: &str, net: &str) {
        ip(&[
            "-n", &self.fwd, "link", "add", f, "type", "veth", "peer", "name", d, "netns",
            &self.dst,
        ]);
        ip(&[
            "-n",
            &self.fwd,
            "addr",
            "add",
            &format!("{net}.2/24"),
            "dev",
            f,
        ]);
        ip(&[
            "-n",
            &self.dst,
            "addr",
            "add",
            &format!("{net}.1/24"),
            "dev",
            d,
        ]);
        ip(&["-n", &self.fwd, "link", "set", f, "up"]);
        ip(&["-n", &self.dst, "link", "set", d, "up"]);
        let dmac = mac_of(&self.dst, d);
        ip(&[
            "-n",
            &self.fwd,
            "neigh",
            "replace",
            &format!("{net}.1"),
            "lladdr",
            &dmac,
            "dev",
            f,
            "nud",
            "permanent",
        ]);
    }

    fn rx_packets(&self, dev: &str) -> u64 {
        let out = Command::new("ip")
            .args(["-n", &self.dst, "-s", "-j", "link", "show", dev])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0]["stats64"]["rx"]["packets"].as_u64().unwrap()
    }
}

fn config(dir: &std::path::Path, fwd_ns: &str) -> std::path::PathBuf {
    let text = format!(
        r#"[[port]]
name = "in"
interface = "xdpf0"
netns = "{fwd_ns}"
xdp_mode = "native"
zero_copy = "auto"

[[port]]
name = "out"
interface = "xdpf1"
netns = "{fwd_ns}"
zero_copy = "auto"

[[port]]
name = "mon"
interface = "xdpf2"
netns = "{fwd_ns}"
zero_copy = "auto"

[umem]
frames = 32768

[rings]
fill = 2048
rx = 2048
tx = 2048
completion = 2048

[workers]
mode = "poll"

[[rule]]
port = "in"
proto = "udp"
dst_port = "9"
action = "forward"
to = "out"
mac = "neigh"
mirror_to = "mon"

[stats]
control_socket = "{}"
live = false
"#,
        dir.join("ctl.sock").display()
    );
    let path = dir.join("fwd.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The mon port's `tx_packets`, asked of the running instance (`xdpool stats`).
fn run_counters(dir: &std::path::Path) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_xdpool"))
        .args(["stats", "--json", "--socket"])
        .arg(dir.join("ctl.sock"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "xdpool stats: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["port"] == "mon")
        .map(|q| q["tx_packets"].as_u64().unwrap())
        .sum()
}

fn payload(i: u32) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[..4].copy_from_slice(&i.to_be_bytes());
    for (k, b) in p[4..].iter_mut().enumerate() {
        *b = (i as usize * 7 + k) as u8;
    }
    p
}

/// Sends `n` datagrams from the source namespace, paced, numbered from `from`.
fn send(ns: &str, from: u32, n: u32) {
    xdpool::internal::netns::in_netns(ns, || {
        let s = UdpSocket::bind("198.18.1.1:0").unwrap();
        for i in from..from + n {
            s.send_to(&payload(i), "198.18.2.1:9").unwrap();
            if i % 64 == 0 {
                std::thread::sleep(Duration::from_micros(500));
            }
        }
    })
    .unwrap();
}

/// A receiver in the destination namespace: numbers of the byte-exact datagrams.
fn receiver(ns: &str) -> UdpSocket {
    let s =
        xdpool::internal::netns::in_netns(ns, || UdpSocket::bind("198.18.2.1:9").unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    // Room for every datagram of a run, so a receiver thread that is descheduled on
    // a busy machine drops none (UdpRcvbufErrors would count them).
    let bytes: libc::c_int = 32 << 20;
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt on our own socket with a c_int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &bytes as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as u32,
        )
    };
    assert_eq!(rc, 0, "SO_RCVBUFFORCE");
    s
}

/// Receives (on a thread, while the sender sends) until 500 ms pass without a
/// datagram; returns the numbers of the byte-exact ones and how many were not.
fn collect(s: UdpSocket) -> std::thread::JoinHandle<(Vec<u32>, u64)> {
    std::thread::spawn(move || {
        let (mut got, mut bad) = (Vec::new(), 0);
        let mut buf = [0u8; 2048];
        while let Ok(n) = s.recv(&mut buf) {
            let i = u32::from_be_bytes(buf[..4].try_into().unwrap());
            if buf[..n] == payload(i)[..] {
                got.push(i);
            } else {
                bad += 1;
            }
        }
        (got, bad)
    })
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn forward_with_neighbour_macs_and_a_mirror_then_the_egress_device_goes_and_returns() {
    require_root!();
    let topo = Topo::up(&unique_prefix("xfs"));
    let dir = scratch_dir("fwdsmoke");
    let cfg = config(dir.path(), &topo.fwd);
    let run = XdpoolRun::start(&cfg, &[]);
    let rx = collect(receiver(&topo.dst));
    let mon0 = topo.rx_packets("xdpm0");
    const N: u32 = 5000;
    send(&topo.src, 0, N);
    let (mut got, bad) = rx.join().unwrap();
    got.sort_unstable();
    got.dedup();
    if got.len() as u32 != N {
        let snmp = udp_snmp(&topo.dst);
        let d0 = topo.rx_packets("xdpd0");
        let m0 = topo.rx_packets("xdpm0");
        let o = Command::new("ip")
            .args(["netns", "exec", &topo.dst, "nstat", "-az"])
            .output()
            .unwrap();
        let (_, _s, _out) = run.stop();
        panic!(
            "forwarded {} of {N} ({bad} bad): snmp {snmp:?} xdpd0 rx {d0} xdpm0 rx {m0}\n{}",
            got.len(),
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.contains(" 0 "))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    assert_eq!(
        (got.len() as u32, bad),
        (N, 0),
        "every datagram forwarded once, byte-exact"
    );
    let mirrored = topo.rx_packets("xdpm0") - mon0;
    assert_eq!(mirrored, N as u64, "each frame mirrored once");
    let mon = run_counters(dir.path());
    assert_eq!(mon, N as u64, "the mon port sent each frame once");

    // The egress device goes away mid-traffic and comes back.
    let sender = {
        let ns = topo.src.clone();
        std::thread::spawn(move || send(&ns, N, N))
    };
    std::thread::sleep(Duration::from_millis(20));
    ip(&["-n", &topo.fwd, "link", "del", "xdpf1"]);
    sender.join().unwrap();
    topo.egress("xdpf1", "xdpd0", "198.18.2");
    let probe = receiver(&topo.dst);
    // Until xdpool is back on the new device and has read its new neighbour (a
    // frame sent before that is dropped and counted: egress port down, next hop
    // unknown), probe with single datagrams.
    let mut k = 0;
    assert!(
        wait_for(Duration::from_secs(10), || {
            k += 1;
            send(&topo.src, 10 * N + k, 1);
            let mut buf = [0u8; 2048];
            probe
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            probe.recv(&mut buf).is_ok()
        }),
        "forwarding resumed on the re-created device within 10 s"
    );
    drop(probe);
    let rx2 = collect(receiver(&topo.dst));
    send(&topo.src, 2 * N, N);
    let (mut after, bad) = rx2.join().unwrap();
    after.retain(|&i| i >= 2 * N);
    after.sort_unstable();
    after.dedup();
    if after.len() as u32 != N {
        let snmp = udp_snmp(&topo.dst);
        let d0 = topo.rx_packets("xdpd0");
        let (_, s, _out) = run.stop();
        panic!(
            "resumed {} of {N}: snmp {snmp:?} xdpd0 rx {d0}\n{:#}\n{:#}",
            after.len(),
            s["counters"],
            s["xdp"]
        );
    }
    assert_eq!(
        (after.len() as u32, bad),
        (N, 0),
        "forwarding resumed on the re-created device"
    );

    let (code, s, out) = run.stop();
    eprintln!("{out}");
    assert_eq!(code, Some(0), "{s:#}");
    assert_eq!(s["accounting_ok"], true, "{s:#}");
    let c = &s["counters"];
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} missing"));
    let workers = s["workers"].as_array().unwrap();
    let by_port = |p: &str| workers.iter().find(|w| w["port"] == p).unwrap();
    let (in_c, out_c, mon_c) = (
        &by_port("in")["counters"],
        &by_port("out")["counters"],
        &by_port("mon")["counters"],
    );
    // Every frame `in` took was forwarded (and mirrored), or dropped because the
    // next hop's MAC was unknown while the device was away.
    assert_eq!(
        n(in_c, "rx_packets"),
        n(in_c, "forwarded") + n(in_c, "neigh_miss_drop"),
        "{in_c:#}"
    );
    assert_eq!(n(in_c, "forwarded"), n(in_c, "mirrored"));
    // Each forwarded frame was put on out's TX ring or dropped for a named reason.
    let named = |x: &serde_json::Value| n(x, "egress_port_down_drop") + n(x, "tx_ring_full_drop");
    assert_eq!(
        n(in_c, "forwarded") + n(in_c, "mirrored"),
        n(out_c, "foreign_tx")
            + n(mon_c, "foreign_tx")
            + named(out_c)
            + named(mon_c)
            + n(in_c, "egress_full_drop"),
        "{c:#}"
    );
    // Each frame put on a TX ring completed or was reclaimed with the socket: once.
    for x in [out_c, mon_c] {
        assert_eq!(
            n(x, "foreign_tx"),
            n(x, "foreign_completed") + n(x, "foreign_reclaimed"),
            "{x:#}"
        );
    }
    assert_eq!(
        n(mon_c, "foreign_tx"),
        n(mon_c, "foreign_completed"),
        "the mon port never went away"
    );
    eprintln!(
        "forwarded {} | out: sent {} completed {} reclaimed {} port-down {} | neigh misses {}",
        n(in_c, "forwarded"),
        n(out_c, "foreign_tx"),
        n(out_c, "foreign_completed"),
        n(out_c, "foreign_reclaimed"),
        n(out_c, "egress_port_down_drop"),
        n(in_c, "neigh_miss_drop")
    );
    // The return path: frames came back to the ingress pool, through its ring from a
    // port of another worker, or into its cache from a port of its own worker (the
    // cores are the default ones here: which ports share a worker depends on the
    // machine's core count).
    let in_pool = &by_port("in")["pool"];
    let _ = c;
    let pool_n = |k: &str| in_pool[k].as_u64().unwrap();
    assert!(
        pool_n("recycle_ring") + pool_n("recycle_cached") > 0,
        "{in_pool:#}"
    );
    assert!(
        workers.iter().all(|w| w["zero_copy"] == false),
        "veth: copy mode everywhere (auto fell back)"
    );
    assert_eq!(s["accounting"]["application"], 0, "{s:#}");
    assert_eq!(s["device"]["reattaches"].as_u64().unwrap(), 1, "{s:#}");
}

/// Sends probes until one arrives (xdpool is back and knows the next hop).
fn until_forwarding(topo: &Topo, from: u32) {
    let probe = receiver(&topo.dst);
    probe
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut k = 0;
    assert!(
        wait_for(Duration::from_secs(10), || {
            k += 1;
            send(&topo.src, from + k, 1);
            let mut buf = [0u8; 2048];
            probe.recv(&mut buf).is_ok()
        }),
        "forwarding resumed within 10 s"
    );
}

/// The ingress port holds the UMEM's first socket: losing its device takes every
/// port down (the UMEM is closed and re-registered), the others come back at once,
/// the ingress when its device returns; then forwarding is exact again.
#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn losing_the_port_that_registered_the_umem_brings_every_port_back() {
    require_root!();
    let topo = Topo::up(&unique_prefix("xfu"));
    let dir = scratch_dir("fwdumem");
    let cfg = config(dir.path(), &topo.fwd);
    let run = XdpoolRun::start(&cfg, &[]);
    const N: u32 = 2000;
    let rx = collect(receiver(&topo.dst));
    send(&topo.src, 0, N);
    let (got, bad) = rx.join().unwrap();
    assert_eq!((got.len() as u32, bad), (N, 0));
    ip(&["-n", &topo.fwd, "link", "del", "xdpf0"]);
    std::thread::sleep(Duration::from_millis(200));
    topo.ingress();
    until_forwarding(&topo, 100 * N);
    let rx = collect(receiver(&topo.dst));
    send(&topo.src, N, N);
    let (mut got, bad) = rx.join().unwrap();
    got.retain(|&i| (N..2 * N).contains(&i));
    got.sort_unstable();
    got.dedup();
    assert_eq!(
        (got.len() as u32, bad),
        (N, 0),
        "forwarding exact after the UMEM came back"
    );
    let (code, s, out) = run.stop();
    eprintln!("{out}");
    assert_eq!(code, Some(0), "{s:#}");
    assert_eq!(s["accounting_ok"], true, "{s:#}");
    assert_eq!(s["accounting"]["application"], 0, "{s:#}");
    let workers = s["workers"].as_array().unwrap();
    // Every port re-attached once: in when its device came back, out and mon at once.
    assert!(
        workers
            .iter()
            .all(|w| w["counters"]["socket_attaches"] == 2),
        "{s:#}"
    );
    assert!(s["device"]["teardown_accounting_failures"] == 0, "{s:#}");
}
