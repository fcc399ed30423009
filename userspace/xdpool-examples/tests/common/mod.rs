//! What the examples' lab tests share: starting an example binary on a config
//! patched for the test's own lab, stopping it and reading its summary, and the
//! kernel's protocol counters in a namespace.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A short prefix unique to this test process.
pub fn unique_prefix(tag: &str) -> String {
    format!("{tag}{}", std::process::id() % 100_000)
}

/// `configs/examples/NAME.toml` with each `(from, to)` replaced (every `from` must
/// be there), written into `dir`.
pub fn patched_config(dir: &Path, name: &str, replace: &[(&str, &str)]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../configs/examples")
        .join(format!("{name}.toml"));
    let mut text = std::fs::read_to_string(&src).unwrap();
    for (from, to) in replace {
        assert!(text.contains(from), "{from:?} not in {}", src.display());
        text = text.replace(from, to);
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// An example binary running on the lab, killed (by its PID) if the test ends early.
pub struct ExampleRun {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
    log: PathBuf,
}

impl ExampleRun {
    /// Starts `bin --config CONFIG --duration 60`, its log in CONFIG.log, and waits
    /// (at most 30 s) for its `ready` line.
    pub fn start(bin: &str, config: &Path) -> ExampleRun {
        let log = config.with_extension("log");
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(config)
            .args(["--duration", "60"])
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {bin}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let run = ExampleRun {
            child: Some(child),
            lines,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match run.lines.recv_timeout(left) {
                Ok(l) if l.trim() == "ready" => return run,
                Ok(_) => {}
                Err(_) => panic!("{bin} did not print ready within 30 s; log:\n{}", run.log()),
            }
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGINT, then (at most 20 s) its exit code and the summary it printed.
    pub fn stop(mut self) -> (Option<i32>, serde_json::Value) {
        let mut child = self.child.take().unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let code = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the example did not exit within 20 s of SIGINT; log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut summary = None;
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(500)) {
            if l.starts_with('{') {
                summary = Some(serde_json::from_str(&l).expect("the summary line is JSON"));
            }
        }
        let summary =
            summary.unwrap_or_else(|| panic!("no summary on stdout; log:\n{}", self.log()));
        (code, summary)
    }
}

impl Drop for ExampleRun {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The named counters of one protocol line of /proc/net/snmp (`"Udp"`, `"Icmp"`,
/// `"Ip"`) in namespace `ns`, in order.
pub fn snmp<const N: usize>(ns: &str, proto: &str, wanted: [&str; N]) -> [u64; N] {
    let text = xdpool::internal::netns::in_netns(ns, || {
        std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap()
    })
    .unwrap();
    let head = format!("{proto}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&head));
    let names: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let values: Vec<u64> = lines
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    wanted.map(|n| {
        let i = names
            .iter()
            .position(|x| *x == n)
            .unwrap_or_else(|| panic!("no {proto} {n}"));
        values[i - 1]
    })
}

/// A counter from a summary's `counters`.
pub fn counter(s: &serde_json::Value, key: &str) -> u64 {
    s["counters"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("counter {key} missing: {s:#}"))
}

/// Every frame of the UMEM back, nothing left attached.
pub fn assert_accounting_ok(s: &serde_json::Value) {
    assert_eq!(s["accounting_ok"], true, "{s:#}");
    assert_eq!(s["accounting"]["free"], s["accounting"]["total"], "{s:#}");
    assert_eq!(s["program_left_attached"], false, "{s:#}");
}

/// Runs `ip ARGS`, which must succeed.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}
