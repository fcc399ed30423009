//! Shared helpers for the root integration tests that drive the `xdpool` binary.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use xdpool_lab::lab::{LabConfig, LabGuard, LabStatus};

/// The first line of every test that needs root. Such a test also carries
/// `#[cfg_attr(not(feature = "root-tests"), ignore = "needs root: ...")]`, so a plain
/// `cargo test` lists it as ignored instead of passing it having done nothing; `make
/// test` turns the feature on and runs as root. Run anyway without root (the feature
/// on, or `--ignored`), the test fails here and says why.
#[macro_export]
macro_rules! require_root {
    () => {{
        let euid = nix::unistd::Uid::effective();
        assert!(
            euid.is_root(),
            "needs root (running as uid {euid}): run the root tests as root, or leave \
             out --features root-tests (and --ignored) to have them listed as ignored"
        );
    }};
}

/// A short unique prefix for lab names (namespaces PREFIX-a/-b).
pub fn unique_prefix(tag: &str) -> String {
    format!("{tag}{}", std::process::id() % 100_000)
}

/// A private scratch directory for one test: an unpredictable name under the temp dir
/// (`xdpool-TAG-XXXXXX`, short enough for a control socket inside it), mode 0700,
/// removed with its contents when dropped. Keep it alive until every `xdpool`
/// child writing there (control socket, summary) has exited and been read.
pub fn scratch_dir(tag: &str) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix(&format!("xdpool-{tag}-"))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .expect("create a scratch dir under the temp dir")
}

/// Writes a config for the lab's receiving side to `dir/NAME.toml` and returns its
/// path (`XdpoolRun` puts the summary beside it).
pub fn write_config(
    dir: &Path,
    name: &str,
    netns: &str,
    dev: &str,
    queues: &[u32],
    extra_rules: &str,
    control_socket: &Path,
) -> PathBuf {
    let q: Vec<String> = queues.iter().map(|q| q.to_string()).collect();
    let text = format!(
        r#"[interface]
name = "{dev}"
netns = "{netns}"
queues = [{}]

[umem]
frames = {}
chunk_size = 2048

[rings]
fill = 8192
completion = 2048
rx = 4096
tx = 2048

[workers]
mode = "poll"

{extra_rules}

[stats]
control_socket = "{}"
live = false
"#,
        q.join(", "),
        16384 * queues.len().max(1),
        control_socket.display()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// How most root tests start: a lab, a private scratch dir (`scratch_dir`) and the
/// control socket path the configs written in it use. Dropped, it removes the
/// scratch dir, then the lab (its namespaces), even when the test failed.
pub struct LabRig {
    /// The lab's namespaces, devices and addresses.
    pub st: LabStatus,
    /// The control socket every config from `config` names.
    pub sock: PathBuf,
    tmp: tempfile::TempDir,
    _lab: LabGuard,
}

impl LabRig {
    /// Brings up the lab `lab` and makes a scratch dir called after `name`.
    pub fn up(lab: LabConfig, name: &str) -> LabRig {
        let guard = LabGuard::up(&lab).expect("lab up");
        let st = guard.status().clone();
        let tmp = scratch_dir(name);
        let sock = tmp.path().join("control.sock");
        LabRig {
            st,
            sock,
            tmp,
            _lab: guard,
        }
    }

    /// The scratch dir.
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// Writes `NAME.toml` for the lab's receiving side (`write_config`) and returns
    /// its path.
    pub fn config(&self, name: &str, queues: &[u32], rules: &str) -> PathBuf {
        write_config(
            self.dir(),
            name,
            &self.st.b.netns,
            &self.st.b.dev,
            queues,
            rules,
            &self.sock,
        )
    }
}

/// Replaces the first `from` with `to` in the config at `cfg` (one written by
/// `write_config`); the text must contain `from`.
pub fn patch_config(cfg: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(cfg).unwrap();
    assert!(
        text.contains(from),
        "{from:?} not in {}:\n{text}",
        cfg.display()
    );
    std::fs::write(cfg, text.replacen(from, to, 1)).unwrap();
}

/// A running `xdpool run` child, killed (by PID) if the test ends early.
pub struct XdpoolRun {
    child: Option<Child>,
    /// Summary JSON path.
    pub summary: PathBuf,
    /// Where its log (stderr) goes, if not to the test's own stderr.
    log: Option<PathBuf>,
    stdout_rest: Option<mpsc::Receiver<String>>,
}

impl XdpoolRun {
    /// Starts `xdpool run --config CFG --ready-line --summary-json ...` with its log on
    /// the test's stderr and waits (at most 30 s) for the ready line.
    pub fn start(config: &Path, extra: &[&str]) -> XdpoolRun {
        let run = XdpoolRun::launch(config, extra, false);
        if !run.ready_within(Duration::from_secs(30)) {
            let mut run = run;
            let status = run.child.as_mut().unwrap().try_wait();
            panic!("xdpool run did not become ready within 30 s (status {status:?})");
        }
        run
    }

    /// Starts it with its log in CONFIG.log (see [`XdpoolRun::log`]), without waiting.
    pub fn spawn(config: &Path, extra: &[&str]) -> XdpoolRun {
        XdpoolRun::launch(config, extra, true)
    }

    fn launch(config: &Path, extra: &[&str], log_to_file: bool) -> XdpoolRun {
        let summary = config.with_extension("summary.json");
        let _ = std::fs::remove_file(&summary);
        let log = log_to_file.then(|| config.with_extension("log"));
        let stderr = match &log {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::inherit(),
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_xdpool"))
            .args([
                "run",
                "--quiet",
                "--ready-line",
                "--duration",
                "120",
                "--config",
            ])
            .arg(config)
            .arg("--summary-json")
            .arg(&summary)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn xdpool");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        XdpoolRun {
            child: Some(child),
            summary,
            log,
            stdout_rest: Some(rx),
        }
    }

    /// Whether `ready` was printed within `limit` (lines before it are passed over).
    pub fn ready_within(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let lines = self.stdout_rest.as_ref().unwrap();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match lines.recv_timeout(left) {
                Ok(l) if l.trim() == "ready" => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    /// Its log so far (empty when it goes to the test's stderr).
    pub fn log(&self) -> String {
        self.log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// The child's PID.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// Sends SIGINT, waits (at most 20 s) and returns the exit code, the summary, and
    /// the rest of its stdout followed by its log (when it has one of its own).
    pub fn stop(self) -> (Option<i32>, serde_json::Value, String) {
        self.finish(true)
    }

    /// Waits (at most 20 s) for it to exit by itself; what `stop` returns.
    pub fn wait_exit(self) -> (Option<i32>, serde_json::Value, String) {
        self.finish(false)
    }

    fn finish(mut self, signal: bool) -> (Option<i32>, serde_json::Value, String) {
        let mut child = self.child.take().unwrap();
        if signal {
            // SAFETY: kill on our own child's PID.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "xdpool run did not exit within 20 s{}",
                    if signal { " of SIGINT" } else { "" }
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut out = String::new();
        if let Some(rx) = self.stdout_rest.take() {
            while let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
                out.push_str(&l);
                out.push('\n');
            }
        }
        out.push_str(&self.log());
        let text = std::fs::read_to_string(&self.summary).unwrap_or_else(|e| {
            panic!(
                "no summary at {}: {e}; output:\n{out}",
                self.summary.display()
            )
        });
        (
            status,
            serde_json::from_str(&text).expect("summary is JSON"),
            out,
        )
    }
}

impl Drop for XdpoolRun {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits until `f` returns true or the timeout passes; returns the last value of `f`.
pub fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads the named `Udp:` counters from /proc/net/snmp in namespace `ns`, in order.
pub fn udp_counters<const N: usize>(ns: &str, wanted: [&str; N]) -> [u64; N] {
    xdpool::internal::netns::in_netns(ns, || {
        let text = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
        let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
        let names: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let values: Vec<u64> = lines
            .next()
            .unwrap()
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap())
            .collect();
        wanted.map(|n| values[names.iter().position(|x| *x == n).unwrap() - 1])
    })
    .unwrap()
}

/// (InDatagrams, NoPorts, InErrors) of namespace `ns`.
pub fn udp_snmp(ns: &str) -> (u64, u64, u64) {
    let [a, b, c] = udp_counters(ns, ["InDatagrams", "NoPorts", "InErrors"]);
    (a, b, c)
}

/// The veth `dev`'s XDP transmit counters in namespace `ns`, summed over its queues:
/// (frames its peer's ring took, frames refused because that ring was full). The
/// live generator transmits with XDP_TX, so every frame it hands over lands in one
/// of the two; refused ones never reach the peer's XDP program. Read with
/// `ethtool -S` (veth's own statistics; the ethtool package, installed by setup).
pub fn veth_xdp_xmit(ns: &str, dev: &str) -> (u64, u64) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-S", dev])
        .output()
        .expect("run ethtool (make setup installs it)");
    assert!(
        out.status.success(),
        "ethtool -S {dev} in {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut xmit, mut errors) = (0, 0);
    for line in text.lines() {
        let Some((name, value)) = line.trim().split_once(':') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<u64>() else {
            continue;
        };
        if name.starts_with("tx_queue_") && name.ends_with("_xdp_xmit") {
            xmit += value;
        } else if name.starts_with("tx_queue_") && name.ends_with("_xdp_xmit_errors") {
            errors += value;
        }
    }
    assert!(
        text.contains("_xdp_xmit_errors"),
        "no XDP transmit counters in ethtool -S {dev}:\n{text}"
    );
    (xmit, errors)
}

/// Runs `send` (which sends `n` frames with the live generator out of the veth `dev`
/// in namespace `ns`) and returns what the veth did with them: (put in the
/// receiver's ring, refused because it was full). Asserts they add up to `n`.
pub fn veth_delivery(ns: &str, dev: &str, n: u64, send: impl FnOnce()) -> (u64, u64) {
    let before = veth_xdp_xmit(ns, dev);
    send();
    let after = veth_xdp_xmit(ns, dev);
    let (into_ring, refused) = (after.0 - before.0, after.1 - before.1);
    assert_eq!(
        into_ring + refused,
        n,
        "the sender's veth transmitted {into_ring} and refused {refused} of {n}"
    );
    (into_ring, refused)
}

/// A counter from a run summary's `counters`.
pub fn counter(s: &serde_json::Value, key: &str) -> u64 {
    s["counters"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("counter {key} missing"))
}

/// Frames in a run summary that the kernel or the worker dropped, each for a named
/// reason.
pub fn named_rx_drops(s: &serde_json::Value) -> u64 {
    [
        "rx_ring_full",
        "rx_fill_ring_empty",
        "rx_dropped",
        "invalid_descs",
        "rejected_descs",
    ]
    .iter()
    .map(|k| s["drops"][k].as_u64().unwrap())
    .sum()
}

/// Nothing leaked in a run summary: the invariant holds, every frame is back on the
/// free lists, no reference is left at the pool's destroy, the recycler saw no
/// misuse, and no program is left attached.
pub fn assert_all_frames_back(s: &serde_json::Value) {
    assert_eq!(s["accounting_ok"], true, "{s:#}");
    assert_eq!(
        s["accounting"]["free"], s["accounting"]["total"],
        "no frame leaked: {s:#}"
    );
    for w in s["workers"].as_array().unwrap() {
        assert_eq!(w["inflight_at_destroy"], 0, "{w:#}");
        for k in ["double_release", "foreign_addr", "not_in_tx", "not_in_fill"] {
            assert_eq!(w["pool"][k], 0, "pool misuse {k}: {w:#}");
        }
    }
    assert_eq!(counter(s, "completion_rejected"), 0);
    assert_eq!(s["program_left_attached"], false);
}

/// How the forward tests start: the forward lab (`xdpool lab up --topology forward`
/// with a unique prefix), a scratch dir and the control socket path. Dropped, it
/// removes the scratch dir, then the three namespaces, even when the test failed.
pub struct ForwardRig {
    /// The lab's namespaces, devices and addresses.
    pub st: xdpool_lab::lab::forward::ForwardStatus,
    /// The control socket every config from `config` names.
    pub sock: PathBuf,
    tmp: tempfile::TempDir,
    lab: xdpool_lab::lab::forward::ForwardLabGuard,
}

impl ForwardRig {
    /// Brings up a forward lab with prefix `prefix` and a scratch dir called after `name`.
    pub fn up(prefix: &str, name: &str) -> ForwardRig {
        Self::up_with(LabConfig::with_prefix(prefix), name)
    }

    /// The split forward lab (`--split-netns`): ports "out" and "mon" in P-fwd2.
    pub fn up_split(prefix: &str, name: &str) -> ForwardRig {
        Self::up_with(
            LabConfig {
                split_netns: true,
                ..LabConfig::with_prefix(prefix)
            },
            name,
        )
    }

    /// A forward lab built from `cfg` (its prefix unique to the test).
    pub fn up_with(cfg: LabConfig, name: &str) -> ForwardRig {
        let lab = xdpool_lab::lab::forward::ForwardLabGuard::up(&cfg).expect("forward lab up");
        let st = lab.status().clone();
        let tmp = scratch_dir(name);
        let sock = tmp.path().join("control.sock");
        ForwardRig { st, sock, tmp, lab }
    }

    /// The scratch dir.
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// The lab's config (for `ForwardLab::recreate_link`).
    pub fn lab_config(&self) -> &LabConfig {
        self.lab.config()
    }

    /// Writes `NAME.toml`: the named ports among "in", "out" and "mon" (on the lab's
    /// xdpf0/1/2, each in the namespace the lab put it in: P-fwd, or P-fwd2 for
    /// "out" and "mon" in a split lab), the given `[workers]` body and rules, and
    /// returns its path.
    pub fn config(&self, name: &str, ports: &[&str], workers: &str, rules: &str) -> PathBuf {
        let mut text = String::new();
        for (i, (port, dev)) in [("in", "xdpf0"), ("out", "xdpf1"), ("mon", "xdpf2")]
            .into_iter()
            .enumerate()
            .filter(|(_, (p, _))| ports.contains(p))
        {
            let ns = &self.st.ports[i].netns;
            text.push_str(&format!("[[port]]\nname = \"{port}\"\ninterface = \"{dev}\"\nnetns = \"{ns}\"\nqueues = [0]\nzero_copy = \"auto\"\n\n"));
        }
        text.push_str(&format!(
            "[umem]\nframes = 32768\nchunk_size = 2048\n\n[rings]\nfill = 4096\ncompletion = 2048\nrx = 2048\ntx = 2048\n\n[workers]\n{workers}\n\n{rules}\n\n[stats]\ncontrol_socket = \"{}\"\nlive = false\n",
            self.sock.display()
        ));
        let path = self.dir().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// A `forward` rule on port "in" for UDP to `dst_port`, out of `to`, MACs from the
/// neighbour table, plus `extra` lines (e.g. `mirror_to = "mon"`).
pub fn forward_rule(dst_port: u16, from: &str, to: &str, extra: &str) -> String {
    format!("[[rule]]\nport = \"{from}\"\nproto = \"udp\"\ndst_port = \"{dst_port}\"\naction = \"forward\"\nto = \"{to}\"\nmac = \"neigh\"\n{extra}\n")
}

/// Sum over a run summary's workers of one pool counter (`workers[].pool.KEY`).
pub fn pool_counter(s: &serde_json::Value, key: &str) -> u64 {
    s["workers"]
        .as_array()
        .expect("workers in the summary")
        .iter()
        .map(|w| {
            w["pool"][key]
                .as_u64()
                .unwrap_or_else(|| panic!("pool counter {key} missing: {w:#}"))
        })
        .sum()
}

/// Sets IP forwarding (IPv4) in namespace `ns` (the forward lab leaves it off).
pub fn set_ip_forward(ns: &str, on: bool) {
    xdpool::internal::netns::in_netns(ns, || {
        std::fs::write("/proc/sys/net/ipv4/ip_forward", if on { "1" } else { "0" })
    })
    .unwrap()
    .unwrap();
}

/// Sends `frame` `count` times out of `ifindex` (in the calling thread's namespace)
/// through an AF_PACKET socket; with `pace`, a 1 ms pause after every `pace` frames.
pub fn send_raw(ifindex: u32, frame: &[u8], count: usize, pace: Option<usize>) {
    use std::os::fd::AsRawFd;
    // SAFETY: plain socket(2); the fd is owned by `fd` below.
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    assert!(
        raw >= 0,
        "AF_PACKET socket: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `raw` is a new fd nobody else owns.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    // SAFETY: all-zero is a valid sockaddr_ll; the fields below are set.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_ifindex = ifindex as i32;
    addr.sll_halen = 6;
    addr.sll_addr[..6].copy_from_slice(&frame[..6]);
    for i in 0..count {
        // SAFETY: `frame` and `addr` are valid for the lengths given during the call.
        let n = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(
            n,
            frame.len() as isize,
            "sendto: {}",
            std::io::Error::last_os_error()
        );
        if pace.is_some_and(|p| i % p == p - 1) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Where frames may have gone in the forward lab: every device's RX/TX packet and
/// drop counters in each of its namespaces, and the UDP/IP drop counters of each
/// (`nstat`), one line per device. For the message of a failed delivery check.
pub fn forward_lab_drops(rig: &ForwardRig) -> String {
    let n = &rig.st.names;
    let mut out = String::new();
    for ns in [Some(&n.src), Some(&n.fwd), n.fwd2.as_ref(), Some(&n.dst)]
        .into_iter()
        .flatten()
    {
        if let Ok(o) = std::process::Command::new("ip")
            .args(["-n", ns, "-s", "-j", "link", "show"])
            .output()
        {
            let v: serde_json::Value =
                serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
            for d in v.as_array().into_iter().flatten() {
                let s = &d["stats64"];
                out.push_str(&format!(
                    "\n  {ns} {}: rx {} (dropped {}), tx {} (dropped {})",
                    d["ifname"].as_str().unwrap_or("?"),
                    s["rx"]["packets"],
                    s["rx"]["dropped"],
                    s["tx"]["packets"],
                    s["tx"]["dropped"]
                ));
            }
        }
        if let Ok(o) = std::process::Command::new("ip")
            .args(["netns", "exec", ns, "nstat", "-a", "-z"])
            .output()
        {
            let text = String::from_utf8_lossy(&o.stdout);
            let drops: Vec<&str> = text
                .lines()
                .filter(|l| {
                    ["Drop", "Errors", "Discards", "Overflow", "Dropped"]
                        .iter()
                        .any(|k| l.split_whitespace().next().unwrap_or("").contains(k))
                })
                .filter(|l| l.split_whitespace().nth(1).is_some_and(|v| v != "0"))
                .collect();
            if !drops.is_empty() {
                out.push_str(&format!("\n  {ns} nstat: {}", drops.join("; ")));
            }
        }
    }
    let softnet = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
    let dropped: Vec<String> = softnet
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
        .collect();
    out.push_str(&format!(
        "\n  softnet dropped per CPU: {}",
        dropped.join(" ")
    ));
    out
}
