//! Kernel pktgen driver (`/proc/net/pktgen`), configured the way the kernel's
//! `samples/pktgen` scripts do it: per pktgen thread `rem_device_all` and
//! `add_device`, then one command per write to the device file, then `start` on
//! `pgctrl` (which blocks until the run ends), then the device file's `Result:`.
//!
//! The proc directory is a parameter so tests can point it at a plain directory.
//! `pkt_size` is the frame size without FCS, the same meaning as ours.
use std::fs::OpenOptions;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::packet::PortRange;
use super::{GenConfig, GenError, GenReport, ThreadReport};
use crate::lab::format_mac;
use crate::netns;

/// pktgen's directory as seen by a thread inside a namespace (pktgen is per netns).
pub const PKTGEN_THREAD_ROOT: &str = "/proc/thread-self/net/pktgen";

/// What the pktgen engine's `sent` means.
pub const PKTGEN_NOTE: &str =
    "transmitted by pktgen (pkts-sofar); count on the receiver for what arrived";

/// Errors talking to pktgen.
#[derive(Debug, thiserror::Error)]
pub enum PktgenError {
    /// A write was refused (pktgen answers an unknown or bad command with an error).
    #[error("writing {command:?} to {path} failed: {source}; check the command (see the device file's Result: line)")]
    Write {
        /// File written.
        path: PathBuf,
        /// Command.
        command: String,
        /// Cause.
        source: std::io::Error,
    },
    /// A device file could not be read.
    #[error("reading {path} failed: {source}; is the device still added to pktgen?")]
    Read {
        /// File read.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A device file did not have the expected shape.
    #[error("cannot parse pktgen output: {0}")]
    Parse(String),
}

/// A pktgen run to configure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PktgenSetup {
    /// Output device.
    pub dev: String,
    /// pktgen threads (`kpktgend_N`, one per CPU) to use; each gets its own device
    /// entry `DEV@N` when more than one is used.
    pub threads: Vec<usize>,
    /// Frames per thread (0: until stopped).
    pub count_per_thread: Vec<u64>,
    /// Frame size without FCS.
    pub pkt_size: usize,
    /// Frames per xmit burst (xmit_more).
    pub burst: u32,
    /// Rate limit per thread in frames per second (`ratep`).
    pub ratep_per_thread: Option<u64>,
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source IP.
    pub src: IpAddr,
    /// Destination IP.
    pub dst: IpAddr,
    /// UDP source ports (random within the range when it has more than one).
    pub udp_src: PortRange,
    /// UDP destination ports (random within the range when it has more than one).
    pub udp_dst: PortRange,
}

impl PktgenSetup {
    /// Name of the device entry for a pktgen thread.
    pub fn device_entry(&self, thread: usize) -> String {
        if self.threads.len() > 1 {
            format!("{}@{}", self.dev, thread)
        } else {
            self.dev.clone()
        }
    }

    /// The commands for one device entry, in order.
    pub fn device_commands(&self, count: u64) -> Vec<String> {
        let mut c = Vec::new();
        if self.threads.len() > 1 {
            // Each thread transmits on the TX queue of its CPU (like samples 02/03).
            c.push("flag QUEUE_MAP_CPU".to_string());
        }
        c.push(format!("count {count}"));
        // veth cannot share skbs (no IFF_TX_SKB_SHARING), so no clones.
        c.push("clone_skb 0".to_string());
        c.push(format!("pkt_size {}", self.pkt_size));
        c.push(format!("burst {}", self.burst.max(1)));
        match self.ratep_per_thread {
            Some(r) => c.push(format!("ratep {r}")),
            None => c.push("delay 0".to_string()),
        }
        c.push("flag NO_TIMESTAMP".to_string());
        c.push(format!("dst_mac {}", format_mac(&self.dst_mac)));
        match (self.src, self.dst) {
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                c.push(format!("dst6 {dst}"));
                c.push(format!("src6 {src}"));
            }
            (src, dst) => {
                c.push(format!("dst {dst}"));
                c.push(format!("src_min {src}"));
                c.push(format!("src_max {src}"));
            }
        }
        c.push(format!("udp_src_min {}", self.udp_src.first));
        c.push(format!("udp_src_max {}", self.udp_src.last));
        c.push(format!("udp_dst_min {}", self.udp_dst.first));
        c.push(format!("udp_dst_max {}", self.udp_dst.last));
        if self.udp_src.len() > 1 {
            c.push("flag UDPSRC_RAND".to_string());
        }
        if self.udp_dst.len() > 1 {
            c.push("flag UDPDST_RAND".to_string());
        }
        c
    }
}

/// A pktgen proc directory.
#[derive(Debug, Clone)]
pub struct Pktgen {
    root: PathBuf,
}

impl Pktgen {
    /// Opens pktgen at `root`; fails with [`GenError::PktgenUnavailable`] when the
    /// directory (or its `pgctrl`) is missing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, GenError> {
        let root = root.into();
        if !root.join("pgctrl").exists() {
            return Err(GenError::PktgenUnavailable { root });
        }
        Ok(Self { root })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes one command to one file, as `echo CMD > FILE` would.
    pub fn write(&self, file: &str, command: &str) -> Result<(), PktgenError> {
        let path = self.root.join(file);
        tracing::debug!(file = %path.display(), command, "pktgen");
        let err = |source| PktgenError::Write {
            path: path.clone(),
            command: command.to_string(),
            source,
        };
        let mut f = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .map_err(err)?;
        f.write_all(format!("{command}\n").as_bytes()).map_err(err)
    }

    /// Removes old devices and sets up every thread's device entry.
    pub fn configure(&self, setup: &PktgenSetup) -> Result<(), PktgenError> {
        for (i, &thread) in setup.threads.iter().enumerate() {
            let kthread = format!("kpktgend_{thread}");
            self.write(&kthread, "rem_device_all")?;
            let entry = setup.device_entry(thread);
            self.write(&kthread, &format!("add_device {entry}"))?;
            let count = setup.count_per_thread.get(i).copied().unwrap_or(0);
            for cmd in setup.device_commands(count) {
                self.write(&entry, &cmd)?;
            }
        }
        Ok(())
    }

    /// Starts every configured device; blocks until all are done (or stopped).
    pub fn start(&self) -> Result<(), PktgenError> {
        self.write("pgctrl", "start")
    }

    /// Stops a running `start` from another thread.
    pub fn stop(&self) -> Result<(), PktgenError> {
        self.write("pgctrl", "stop")
    }

    /// Reads and parses a device entry's file.
    pub fn device(&self, entry: &str) -> Result<PktgenDevice, PktgenError> {
        let path = self.root.join(entry);
        let text =
            std::fs::read_to_string(&path).map_err(|source| PktgenError::Read { path, source })?;
        parse_device(&text)
    }
}

/// A finished run, from the `Result: OK: ...` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PktgenRun {
    /// Total time, µs.
    pub usec: u64,
    /// Time not idle, µs (the `c` part).
    pub busy_usec: u64,
    /// Idle time, µs (the `d` part).
    pub idle_usec: u64,
    /// Frames sent.
    pub packets: u64,
    /// Frame size.
    pub pkt_size: u32,
    /// Fragments per frame.
    pub frags: i32,
    /// Frames per second.
    pub pps: u64,
    /// Mbit/s.
    pub mbps: u64,
    /// bit/s.
    pub bps: u64,
    /// Transmit errors.
    pub errors: u64,
}

/// The `Result:` line of a device file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum PktgenResult {
    /// Never run.
    Idle,
    /// A run finished.
    Run(PktgenRun),
    /// The last configuration write was accepted (`OK: count=1000`).
    Ack(String),
    /// The last write was refused (`No such parameter "x"`, `ERROR: ...`).
    Error(String),
}

/// A device file's `Current:` block and its `Result:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PktgenDevice {
    /// Frames sent so far.
    pub pkts_sofar: u64,
    /// Errors so far.
    pub errors: u64,
    /// The result line.
    pub result: PktgenResult,
}

fn field_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let start = text.find(key)? + key.len();
    text[start..].split_whitespace().next()
}

fn num(text: &str, what: &str) -> Result<u64, PktgenError> {
    text.parse()
        .map_err(|_| PktgenError::Parse(format!("{what}: {text:?} is not a number")))
}

/// Parses a pktgen device file (the text of `/proc/net/pktgen/DEV`).
pub fn parse_device(text: &str) -> Result<PktgenDevice, PktgenError> {
    let current = text
        .find("Current:")
        .map(|i| &text[i..])
        .ok_or_else(|| PktgenError::Parse("no Current: block".into()))?;
    let pkts_sofar = num(
        field_after(current, "pkts-sofar:")
            .ok_or_else(|| PktgenError::Parse("no pkts-sofar".into()))?,
        "pkts-sofar",
    )?;
    let errors = num(
        field_after(current, "errors:")
            .ok_or_else(|| PktgenError::Parse("no errors in Current:".into()))?,
        "errors",
    )?;
    let result = text
        .find("Result: ")
        .map(|i| &text[i + "Result: ".len()..])
        .ok_or_else(|| PktgenError::Parse("no Result: line".into()))?;
    Ok(PktgenDevice {
        pkts_sofar,
        errors,
        result: parse_result(result)?,
    })
}

/// Parses what follows `Result: ` (one or two lines).
pub fn parse_result(text: &str) -> Result<PktgenResult, PktgenError> {
    let text = text.trim_end();
    if text.starts_with("Idle") {
        return Ok(PktgenResult::Idle);
    }
    let Some(ok) = text.strip_prefix("OK: ") else {
        return Ok(PktgenResult::Error(
            text.lines().next().unwrap_or("").to_string(),
        ));
    };
    if !ok.starts_with(|c: char| c.is_ascii_digit()) || !ok.contains("usec") {
        return Ok(PktgenResult::Ack(
            ok.lines().next().unwrap_or("").to_string(),
        ));
    }
    // OK: 1234(c1000+d234) usec, 1000000 (60byte,0frags)
    //   810372pps 388Mb/sec (388978560bps) errors: 0
    let bad = |what: &str| PktgenError::Parse(format!("result {text:?}: {what}"));
    let (usec, rest) = ok.split_once("(c").ok_or_else(|| bad("no (c"))?;
    let (busy, rest) = rest.split_once("+d").ok_or_else(|| bad("no +d"))?;
    let (idle, rest) = rest.split_once(')').ok_or_else(|| bad("no )"))?;
    let rest = rest
        .trim_start()
        .strip_prefix("usec,")
        .ok_or_else(|| bad("no usec,"))?;
    let (packets, rest) = rest
        .trim_start()
        .split_once(" (")
        .ok_or_else(|| bad("no packet count"))?;
    let (size, rest) = rest.split_once("byte,").ok_or_else(|| bad("no byte,"))?;
    let (frags, rest) = rest.split_once("frags)").ok_or_else(|| bad("no frags)"))?;
    let mut words = rest.split_whitespace();
    let pps = words
        .next()
        .and_then(|w| w.strip_suffix("pps"))
        .ok_or_else(|| bad("no pps"))?;
    let mbps = words
        .next()
        .and_then(|w| w.strip_suffix("Mb/sec"))
        .ok_or_else(|| bad("no Mb/sec"))?;
    let bps = words
        .next()
        .and_then(|w| w.strip_prefix('(')?.strip_suffix("bps)"))
        .ok_or_else(|| bad("no (bps)"))?;
    let errors = field_after(rest, "errors:").ok_or_else(|| bad("no errors"))?;
    Ok(PktgenResult::Run(PktgenRun {
        usec: num(usec.trim(), "usec")?,
        busy_usec: num(busy, "busy usec")?,
        idle_usec: num(idle, "idle usec")?,
        packets: num(packets.trim(), "packets")?,
        pkt_size: num(size, "pkt size")? as u32,
        frags: frags.parse().map_err(|_| bad("frags"))?,
        pps: num(pps, "pps")?,
        mbps: num(mbps, "Mb/sec")?,
        bps: num(bps, "bps")?,
        errors: num(errors, "errors")?,
    }))
}

/// Builds the pktgen setup for a generator configuration.
pub fn setup_for(cfg: &GenConfig) -> PktgenSetup {
    let threads = if cfg.cores.is_empty() {
        vec![0]
    } else {
        cfg.cores.clone()
    };
    let count_per_thread = match cfg.count {
        Some(total) => super::live::split_evenly(total, threads.len()),
        None => vec![0; threads.len()],
    };
    let (src, dst) = cfg.ips();
    PktgenSetup {
        dev: cfg.dev.clone(),
        ratep_per_thread: cfg.rate_pps.map(|r| (r / threads.len() as u64).max(1)),
        threads,
        count_per_thread,
        pkt_size: cfg.size,
        burst: 1,
        dst_mac: cfg.dst_mac,
        src,
        dst,
        udp_src: cfg.src_ports,
        udp_dst: cfg.dst_ports,
    }
}

/// Runs kernel pktgen for a generator configuration.
pub fn run_pktgen(cfg: &GenConfig) -> Result<GenReport, GenError> {
    let _guard = cfg.netns.as_deref().map(netns::enter).transpose()?;
    let root = cfg
        .pktgen_root
        .clone()
        .unwrap_or_else(|| PathBuf::from(PKTGEN_THREAD_ROOT));
    let pg = Pktgen::open(root)?;
    let setup = setup_for(cfg);
    pg.configure(&setup)?;
    let started = Instant::now();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let stopper = cfg.duration.map(|d| {
        let (pg, netns) = (pg.clone(), cfg.netns.clone());
        std::thread::spawn(move || {
            if done_rx.recv_timeout(d) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                let _g = netns.as_deref().map(netns::enter).transpose();
                if let Err(e) = pg.stop() {
                    tracing::error!(error = %e, "stopping pktgen failed; stop it with `echo stop > pgctrl`");
                }
            }
        })
    });
    let started_ok = pg.start();
    drop(done_tx);
    if let Some(h) = stopper {
        let _ = h.join();
    }
    started_ok?;
    let wall = started.elapsed();
    let mut per_thread = Vec::new();
    for &thread in &setup.threads {
        let dev = pg.device(&setup.device_entry(thread))?;
        if dev.errors > 0 {
            tracing::warn!(
                thread,
                errors = dev.errors,
                "pktgen reported transmit errors"
            );
        }
        let elapsed = match dev.result {
            PktgenResult::Run(r) => Duration::from_micros(r.usec),
            _ => wall,
        };
        per_thread.push(ThreadReport {
            core: Some(thread),
            sent: dev.pkts_sofar,
            elapsed,
            pps: super::rate(dev.pkts_sofar, elapsed),
            calls: 0,
        });
    }
    let elapsed = per_thread.iter().map(|t| t.elapsed).max().unwrap_or(wall);
    Ok(GenReport::new(
        super::Engine::Pktgen,
        cfg.size,
        elapsed,
        per_thread,
        PKTGEN_NOTE,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn sample(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/pktgen")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// A private scratch directory standing in for /proc/net/pktgen, removed on drop.
    struct FakeProc(tempfile::TempDir);

    impl FakeProc {
        fn new(tag: &str) -> Self {
            use std::os::unix::fs::PermissionsExt;
            let dir = tempfile::Builder::new()
                .prefix(&format!("xdpool-pktgen-{tag}-"))
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir()
                .unwrap();
            std::fs::write(dir.path().join("pgctrl"), "").unwrap();
            Self(dir)
        }

        fn path(&self) -> &Path {
            self.0.path()
        }

        fn lines(&self, file: &str) -> Vec<String> {
            std::fs::read_to_string(self.path().join(file))
                .unwrap()
                .lines()
                .map(String::from)
                .collect()
        }
    }

    #[test]
    fn parses_a_finished_ipv4_run() {
        let d = parse_device(&sample("ok_ipv4_single.txt")).unwrap();
        assert_eq!((d.pkts_sofar, d.errors), (1_000_000, 0));
        assert_eq!(
            d.result,
            PktgenResult::Run(PktgenRun {
                usec: 1_234_000,
                busy_usec: 1_233_988,
                idle_usec: 12,
                packets: 1_000_000,
                pkt_size: 60,
                frags: 0,
                pps: 810_372,
                mbps: 388,
                bps: 388_978_560,
                errors: 0,
            })
        );
    }

    #[test]
    fn parses_a_run_with_errors() {
        let d = parse_device(&sample("ok_ipv6_multi_errors.txt")).unwrap();
        assert_eq!((d.pkts_sofar, d.errors), (249_873, 127));
        let PktgenResult::Run(r) = d.result else {
            panic!("{:?}", d.result)
        };
        assert_eq!(
            (r.packets, r.pkt_size, r.pps, r.errors, r.usec),
            (249_873, 1500, 800_875, 127, 312_000)
        );
        // The kernel's own arithmetic: bps = pps * 8 * size.
        assert_eq!(r.bps, r.pps * 8 * u64::from(r.pkt_size));
    }

    #[test]
    fn parses_idle_ack_and_error_results() {
        assert_eq!(
            parse_device(&sample("idle.txt")).unwrap().result,
            PktgenResult::Idle
        );
        assert_eq!(
            parse_device(&sample("ack_count.txt")).unwrap().result,
            PktgenResult::Ack("count=5000".into())
        );
        assert_eq!(
            parse_device(&sample("error_no_such_parameter.txt"))
                .unwrap()
                .result,
            PktgenResult::Error("No such parameter \"pkt_sise\"".into())
        );
    }

    #[test]
    fn truncated_output_is_a_parse_error() {
        let err = parse_device(&sample("truncated.txt")).unwrap_err();
        assert!(matches!(err, PktgenError::Parse(_)), "{err}");
        assert!(matches!(
            parse_device("Result: Idle\n"),
            Err(PktgenError::Parse(_))
        ));
    }

    fn setup(threads: Vec<usize>, ipv6: bool) -> PktgenSetup {
        let (src, dst): (IpAddr, IpAddr) = if ipv6 {
            (
                Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1).into(),
                Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2).into(),
            )
        } else {
            (
                Ipv4Addr::new(198, 18, 0, 1).into(),
                Ipv4Addr::new(198, 18, 0, 2).into(),
            )
        };
        PktgenSetup {
            dev: "xdpa0".into(),
            count_per_thread: vec![500; threads.len()],
            threads,
            pkt_size: 60,
            burst: 1,
            ratep_per_thread: None,
            dst_mac: crate::lab::MAC_B,
            src,
            dst,
            udp_src: "1000-1999".parse().unwrap(),
            udp_dst: PortRange::single(9),
        }
    }

    #[test]
    fn configuration_writes_the_sample_script_commands() {
        let fake = FakeProc::new("single");
        let pg = Pktgen::open(fake.path()).unwrap();
        pg.configure(&setup(vec![0], false)).unwrap();
        pg.start().unwrap();
        assert_eq!(
            fake.lines("kpktgend_0"),
            vec!["rem_device_all", "add_device xdpa0"]
        );
        assert_eq!(
            fake.lines("xdpa0"),
            vec![
                "count 500",
                "clone_skb 0",
                "pkt_size 60",
                "burst 1",
                "delay 0",
                "flag NO_TIMESTAMP",
                "dst_mac 02:78:64:70:00:0b",
                "dst 198.18.0.2",
                "src_min 198.18.0.1",
                "src_max 198.18.0.1",
                "udp_src_min 1000",
                "udp_src_max 1999",
                "udp_dst_min 9",
                "udp_dst_max 9",
                "flag UDPSRC_RAND",
            ]
        );
        assert_eq!(fake.lines("pgctrl"), vec!["start"]);
    }

    #[test]
    fn multi_thread_ipv6_configuration() {
        let fake = FakeProc::new("multi");
        let pg = Pktgen::open(fake.path()).unwrap();
        let mut s = setup(vec![0, 1], true);
        s.ratep_per_thread = Some(100_000);
        s.udp_src = PortRange::single(9);
        pg.configure(&s).unwrap();
        assert_eq!(
            fake.lines("kpktgend_1"),
            vec!["rem_device_all", "add_device xdpa0@1"]
        );
        let dev = fake.lines("xdpa0@1");
        assert_eq!(dev[0], "flag QUEUE_MAP_CPU");
        assert!(dev.contains(&"ratep 100000".to_string()), "{dev:?}");
        assert!(dev.contains(&"dst6 2001:2::2".to_string()), "{dev:?}");
        assert!(dev.contains(&"src6 2001:2::1".to_string()), "{dev:?}");
        assert!(
            !dev.iter()
                .any(|l| l.contains("RAND") || l.starts_with("delay")),
            "{dev:?}"
        );
        assert!(fake.path().join("xdpa0@0").exists());
    }

    #[test]
    fn missing_pktgen_says_what_to_do() {
        let err = Pktgen::open("/nonexistent/xdpool/pktgen").unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, GenError::PktgenUnavailable { .. }));
        assert!(text.contains("--engine live"), "{text}");
    }

    #[test]
    fn generator_config_maps_to_pktgen() {
        let cfg = GenConfig {
            count: Some(1001),
            cores: vec![2, 3],
            rate_pps: Some(1000),
            ..GenConfig::default_lab()
        };
        let s = setup_for(&cfg);
        assert_eq!(s.threads, vec![2, 3]);
        assert_eq!(s.count_per_thread, vec![501, 500]);
        assert_eq!(s.ratep_per_thread, Some(500));
        assert_eq!(s.device_entry(3), "xdpa0@3");
    }
}
