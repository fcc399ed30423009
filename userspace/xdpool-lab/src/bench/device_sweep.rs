//! The throughput sweep on devices that already exist: a NIC under test and a NIC
//! that sends to it (the TCG guest of `make test-vm`: e1000e -> igb; or real
//! hardware cabled back to back). No lab is built. Per size and repetition,
//! `xdpool run` with the `drop` action (rxdrop) on the receiver, one bounded
//! generator run (the kernel's pktgen, by default) out of the sending device, and
//! the frames the generator sent against the frames xdpool counted. The lab's
//! other subjects (in-kernel ceiling, l2fwd) need the lab's veth pair and are not
//! measured here.
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::report::{Subject, SIZE_NOTE};
use super::sweep::{
    child_config_on, eta, kernel_release, settle, wait_mode_name, ChildDevice, Progress, RunChild,
    SweepConfig, WorkDir,
};
use super::BenchError;
use crate::gen::{self, Engine, GenConfig};

/// The devices of a sweep that builds no lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Devices {
    /// The receiver: the NIC xdpool runs on.
    pub rx_dev: String,
    /// Its namespace (`None`: ours).
    pub rx_netns: Option<String>,
    /// The sending NIC (on the same wire or hub as the receiver).
    pub gen_dev: String,
    /// Its namespace (`None`: ours).
    pub gen_netns: Option<String>,
}

/// A sweep on [`Devices`]: sizes, repetitions, frames, cores and worker mode as in
/// the lab's sweep ([`SweepConfig`]; its lab and NAPI settings are not used).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSweepConfig {
    /// What to sweep.
    pub sweep: SweepConfig,
    /// Where.
    pub devices: Devices,
    /// Generator engine (pktgen unless the sending driver has `ndo_xdp_xmit`).
    pub engine: Engine,
    /// Generator rate limit, frames per second (`None`: flat out).
    pub rate_pps: Option<u64>,
}

impl DeviceSweepConfig {
    /// Checks what can be checked before touching the system.
    pub fn validate(&self) -> Result<(), BenchError> {
        self.sweep.validate()?;
        let bad = |m: &str| Err(BenchError::Config(m.into()));
        if self.devices.rx_dev.is_empty() || self.devices.gen_dev.is_empty() {
            return bad("give both devices: --iface (the receiver) and --gen-dev (the sender)");
        }
        if self.devices.rx_dev == self.devices.gen_dev
            && self.devices.rx_netns == self.devices.gen_netns
        {
            return bad("--iface and --gen-dev name the same device: the generator must send from another NIC to it");
        }
        if self.rate_pps == Some(0) {
            return bad(
                "--rate 0 sends nothing: give a positive rate, or leave it out for flat out",
            );
        }
        Ok(())
    }

    /// Measurements the sweep makes in all (rxdrop only).
    pub fn total_measurements(&self) -> usize {
        self.sweep.sizes.len() * self.sweep.reps as usize
    }

    fn gen_config(&self, size: usize, dst_mac: [u8; 6]) -> GenConfig {
        GenConfig {
            netns: self.devices.gen_netns.clone(),
            dev: self.devices.gen_dev.clone(),
            count: Some(self.sweep.count),
            duration: Some(self.sweep.time_limit),
            size,
            dst_mac,
            src_ports: gen::packet::PortRange::single(super::sweep::PORT),
            dst_ports: gen::packet::PortRange::single(super::sweep::PORT),
            cores: vec![self.sweep.gen_core],
            batch: self.sweep.batch,
            rate_pps: self.rate_pps,
            engine: self.engine,
            ..GenConfig::default_lab()
        }
    }
}

/// One measurement on the devices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevicePoint {
    /// Frame size without FCS.
    pub size: usize,
    /// Repetition, from 1.
    pub rep: u32,
    /// Frames the generator sent (pktgen: its `pkts-sofar`).
    pub sent: u64,
    /// Frames xdpool counted (its summary's `packets`).
    pub received: u64,
    /// `sent - received` (negative when frames came from elsewhere).
    pub lost: i64,
    /// How long the generator sent, seconds.
    pub gen_elapsed_s: f64,
    /// The generator's rate, Mpps.
    pub gen_mpps: f64,
    /// Delivered rate (`received / gen_elapsed_s`), Mpps.
    pub mpps: f64,
    /// Whether xdpool's frame accounting held at exit.
    pub accounting_ok: Option<bool>,
    /// Whether every queue of the run was in zero-copy mode (from the summary).
    pub zero_copy: Option<bool>,
    /// The worker cores xdpool chose (its summary's `cores`).
    pub cores: Vec<usize>,
    /// The XDP program's verdicts and xdpool's drops (the summary's `xdp` and
    /// `drops`): where frames sent but not received went, when the kernel saw them.
    pub xdp: serde_json::Value,
    /// See `xdp`.
    pub drops: serde_json::Value,
}

/// A sweep on devices.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceSweepReport {
    /// `uname -r`.
    pub kernel: String,
    /// The receiver, `DEV` or `DEV (netns NS)`.
    pub receiver: String,
    /// The sender, the same way.
    pub generator: String,
    /// Generator engine.
    pub engine: Engine,
    /// Generator rate limit, frames per second (`None`: flat out).
    pub rate_pps: Option<u64>,
    /// Frames per measurement.
    pub frames_per_run: u64,
    /// Repetitions per size.
    pub reps: u32,
    /// Time limit of one generator run, seconds.
    pub time_limit_s: f64,
    /// What "size" means.
    pub size_note: String,
    /// Generator core.
    pub generator_core: usize,
    /// Worker wait mode.
    pub worker_mode: String,
    /// Every measurement, in sweep order.
    pub points: Vec<DevicePoint>,
    /// True when Ctrl-C stopped the sweep early.
    pub interrupted: bool,
}

fn where_(dev: &str, netns: &Option<String>) -> String {
    match netns {
        Some(ns) => format!("{dev} (netns {ns})"),
        None => dev.to_string(),
    }
}

impl DeviceSweepReport {
    /// The Markdown table and what its numbers mean.
    pub fn table(&self) -> String {
        let mut out = String::from("| size (B) | rep | sent | received by xdpool | lost | generator Mpps | rxdrop Mpps | zero-copy | worker cores | accounting |\n");
        out.push_str("|---:|---:|---:|---:|---:|---:|---:|:---:|---:|:---:|\n");
        let yes_no = |b: Option<bool>, y: &str, n: &str| {
            b.map_or("?".to_string(), |b| if b { y.into() } else { n.into() })
        };
        for p in &self.points {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {:.4} | {:.4} | {} | {:?} | {} |\n",
                p.size,
                p.rep,
                p.sent,
                p.received,
                p.lost,
                p.gen_mpps,
                p.mpps,
                yes_no(p.zero_copy, "yes", "no"),
                p.cores,
                yes_no(p.accounting_ok, "ok", "FAILED")
            ));
        }
        out.push_str(&format!(
            "\n{} frames per run ({}), time limit {:.0} s, {} repetition(s). Sent: {:?} out of {} (generator core {}); received: `xdpool run` rxdrop on {} (every RX queue, workers on the cores xdpool chose, {}). Size: {}. Kernel {}.{}\n",
            self.frames_per_run,
            self.rate_pps.map_or("flat out".to_string(), |r| format!("{r} frames/s")),
            self.time_limit_s,
            self.reps,
            self.engine,
            self.generator,
            self.generator_core,
            self.receiver,
            self.worker_mode,
            self.size_note,
            self.kernel,
            if self.interrupted { " INTERRUPTED: only the points completed are shown." } else { "" }
        ));
        out
    }
}

/// The receiver's MAC (what the generator addresses), asked over rtnetlink in its
/// namespace (sysfs shows the namespace it was mounted in, not the thread's).
fn device_mac(dev: &str, netns: Option<&str>) -> Result<[u8; 6], BenchError> {
    use netlink_packet_route::link::LinkAttribute;
    let ask = || -> Result<Option<[u8; 6]>, BenchError> {
        let ifx = crate::netns::ifindex(dev)?;
        let link = crate::steer::netlink::get_link(ifx)
            .map_err(|e| BenchError::Config(format!("cannot read the link of {dev}: {e}")))?;
        Ok(link.and_then(|l| {
            l.attributes.iter().find_map(|a| match a {
                LinkAttribute::Address(m) => <[u8; 6]>::try_from(m.as_slice()).ok(),
                _ => None,
            })
        }))
    };
    let mac = match netns {
        Some(ns) => crate::netns::in_netns(ns, ask)??,
        None => ask()?,
    };
    mac.ok_or_else(|| {
        BenchError::Config(format!(
            "{dev} has no Ethernet address; --iface must name an Ethernet NIC"
        ))
    })
}

/// RX queues `dev` has now (1 when the driver does not say).
fn rx_queues(dev: &str, netns: Option<&str>) -> Result<u32, BenchError> {
    let ask = || {
        crate::netns::rx_queues(dev)
            .map(|q| q.now.max(1))
            .unwrap_or(1)
    };
    Ok(match netns {
        Some(ns) => crate::netns::in_netns(ns, ask)?,
        None => ask(),
    })
}

/// The child on the receiver: zero-copy where the driver can, a socket on each of
/// its `queues` RX queues, frames enough to keep each supplied (fill 4 096 + TX
/// 2 048 + 256 cached per queue).
fn child_device(d: &Devices, queues: u32) -> ChildDevice<'_> {
    let list: Vec<u32> = (0..queues).collect();
    ChildDevice {
        dev: &d.rx_dev,
        netns: d.rx_netns.as_deref(),
        zero_copy: "\"auto\"",
        queues: format!("{list:?}"),
        frames: (queues as usize * 6400).max(8192).next_power_of_two(),
    }
}

/// Runs the sweep on the devices (see the module docs). `stop` is checked between
/// measurements.
pub fn run_device_sweep(
    cfg: &DeviceSweepConfig,
    stop: &AtomicBool,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<DeviceSweepReport, BenchError> {
    cfg.validate()?;
    let d = &cfg.devices;
    let dst_mac = device_mac(&d.rx_dev, d.rx_netns.as_deref())?;
    let mut workdir = WorkDir::new()?;
    let dir = workdir.path().to_path_buf();
    let control = dir.join("control.sock");
    let config = dir.join("rxdrop.toml");
    let on = child_device(d, rx_queues(&d.rx_dev, d.rx_netns.as_deref())?);
    // Every RX queue the device has now (RSS may put the one flow on any of them),
    // with xdpool's core choice (the NIC's NUMA node): --worker-core is not used here.
    let text = child_config_on(&on, None, cfg.sweep.worker_mode, Subject::Rxdrop, &control);
    std::fs::write(&config, text).map_err(|source| BenchError::Io {
        path: config.clone(),
        source,
    })?;
    let started = Instant::now();
    let total = cfg.total_measurements();
    let mut points = Vec::with_capacity(total);
    let mut interrupted = false;
    'sweep: for (i, &size) in cfg.sweep.sizes.iter().enumerate() {
        for rep in 1..=cfg.sweep.reps {
            if stop.load(Ordering::SeqCst) {
                interrupted = true;
                break 'sweep;
            }
            let done = points.len();
            on_progress(&Progress {
                size,
                size_index: i + 1,
                sizes: cfg.sweep.sizes.len(),
                rep,
                reps: cfg.sweep.reps,
                subject: Subject::Rxdrop,
                done,
                total,
                elapsed: started.elapsed(),
                eta: eta(started.elapsed(), done, total),
            });
            match measure(cfg, &dir, &config, &control, size, rep, dst_mac) {
                Ok(p) if !stop.load(Ordering::SeqCst) => points.push(p),
                Ok(_) => {
                    interrupted = true;
                    break 'sweep;
                }
                Err(e) => {
                    if matches!(e, BenchError::Child { .. }) {
                        workdir.keep();
                    }
                    return Err(e);
                }
            }
        }
    }
    Ok(DeviceSweepReport {
        kernel: kernel_release(),
        receiver: where_(&d.rx_dev, &d.rx_netns),
        generator: where_(&d.gen_dev, &d.gen_netns),
        engine: cfg.engine,
        rate_pps: cfg.rate_pps,
        frames_per_run: cfg.sweep.count,
        reps: cfg.sweep.reps,
        time_limit_s: cfg.sweep.time_limit.as_secs_f64(),
        size_note: SIZE_NOTE.into(),
        generator_core: cfg.sweep.gen_core,
        worker_mode: wait_mode_name(cfg.sweep.worker_mode).into(),
        points,
        interrupted,
    })
}

/// One point: `xdpool run` up (ready: program attached, carrier up), the generator
/// run, the count settled, the child stopped and its summary read.
fn measure(
    cfg: &DeviceSweepConfig,
    dir: &Path,
    config: &Path,
    control: &Path,
    size: usize,
    rep: u32,
    dst_mac: [u8; 6],
) -> Result<DevicePoint, BenchError> {
    let summary = dir.join("rxdrop-summary.json");
    let log = dir.join(format!("rxdrop-{size}-{rep}.log"));
    let _ = std::fs::remove_file(&summary);
    let what = format!("rxdrop at {size} B on {}", cfg.devices.rx_dev);
    let run_for = cfg.sweep.time_limit + Duration::from_secs(30);
    let child = RunChild::start(
        &cfg.sweep.xdpool_exe,
        config,
        &summary,
        &log,
        run_for,
        &what,
    )?;
    let sent = gen::run(&cfg.gen_config(size, dst_mac))?;
    // Frames still in the NIC's ring or the socket: counted before the child stops.
    let counted = || {
        crate::stats::control::query(control)
            .map(|v| v["total"]["rx_packets"].as_u64().unwrap_or(0))
            .map_err(|e| {
                BenchError::Config(format!(
                    "cannot read the child's stats at {}: {e}",
                    control.display()
                ))
            })
    };
    settle(counted)?;
    child.finish()?;
    let child_err = |detail: String| BenchError::Child {
        what: what.clone(),
        detail,
        config: config.to_path_buf(),
        log: log.clone(),
    };
    let text = std::fs::read_to_string(&summary)
        .map_err(|e| child_err(format!("no summary at {}: {e}", summary.display())))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| child_err(format!("bad summary JSON: {e}")))?;
    let received = json["packets"]
        .as_u64()
        .ok_or_else(|| child_err("summary has no `packets`".into()))?;
    let accounting_ok = json["accounting_ok"].as_bool();
    let cores = json["cores"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c.as_u64().map(|c| c as usize))
                .collect()
        })
        .unwrap_or_default();
    let zero_copy = json["workers"]
        .as_array()
        .map(|w| !w.is_empty() && w.iter().all(|w| w["zero_copy"] == true));
    let _ = std::fs::remove_file(&log);
    let secs = sent.elapsed.as_secs_f64();
    let rate = |n: u64| {
        if secs > 0.0 {
            n as f64 / secs / 1e6
        } else {
            0.0
        }
    };
    Ok(DevicePoint {
        size,
        rep,
        sent: sent.sent,
        received,
        lost: sent.sent as i64 - received as i64,
        gen_elapsed_s: secs,
        gen_mpps: rate(sent.sent),
        mpps: rate(received),
        accounting_ok,
        zero_copy,
        cores,
        xdp: json["xdp"].clone(),
        drops: json["drops"].clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, WaitMode};

    fn cfg() -> DeviceSweepConfig {
        let sweep = SweepConfig {
            sizes: vec![64, 1500],
            reps: 1,
            count: 10_000,
            gen_core: 0,
            worker_core: 0,
            ..SweepConfig::new(std::env::current_exe().unwrap())
        };
        DeviceSweepConfig {
            sweep,
            devices: Devices {
                rx_dev: "eth0".into(),
                rx_netns: None,
                gen_dev: "src0".into(),
                gen_netns: Some("src".into()),
            },
            engine: Engine::Pktgen,
            rate_pps: Some(5000),
        }
    }

    #[test]
    fn settings_are_checked() {
        let ok = cfg();
        ok.validate().unwrap();
        assert_eq!(ok.total_measurements(), 2);
        let same = Devices {
            gen_dev: "eth0".into(),
            gen_netns: None,
            ..ok.devices.clone()
        };
        for bad in [
            DeviceSweepConfig {
                devices: Devices {
                    rx_dev: String::new(),
                    ..ok.devices.clone()
                },
                ..ok.clone()
            },
            DeviceSweepConfig {
                devices: same,
                ..ok.clone()
            },
            DeviceSweepConfig {
                rate_pps: Some(0),
                ..ok.clone()
            },
            DeviceSweepConfig {
                sweep: SweepConfig {
                    reps: 0,
                    ..ok.sweep.clone()
                },
                ..ok.clone()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(BenchError::Config(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_generator_sends_from_its_device_to_the_receivers_mac() {
        let c = cfg();
        let g = c.gen_config(1500, [2, 0x78, 0x64, 0x70, 0, 0x0b]);
        assert_eq!(
            (
                g.netns.as_deref(),
                g.dev.as_str(),
                g.size,
                g.count,
                g.rate_pps
            ),
            (Some("src"), "src0", 1500, Some(10_000), Some(5000))
        );
        assert_eq!(
            (g.engine, g.dst_mac, g.cores.as_slice()),
            (Engine::Pktgen, [2, 0x78, 0x64, 0x70, 0, 0x0b], &[0][..])
        );
        g.validate().unwrap();
    }

    #[test]
    fn the_child_serves_every_queue_of_the_receiver_and_tries_zero_copy() {
        let c = cfg();
        for (queues, frames) in [(1, 8192), (2, 16384), (8, 65536)] {
            let on = child_device(&c.devices, queues);
            let text = child_config_on(
                &on,
                None,
                WaitMode::Poll,
                Subject::Rxdrop,
                Path::new("/tmp/x/c.sock"),
            );
            let cfg = Config::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let port = &cfg.ports()[0];
            assert_eq!(
                (port.interface.as_str(), port.netns.as_deref()),
                ("eth0", None)
            );
            assert_eq!(port.queues, (0..queues).collect::<Vec<_>>());
            assert_eq!(*cfg.umem.frames.get_ref() as usize, frames);
            assert_eq!(port.zero_copy, crate::config::ZeroCopy::Auto);
            assert!(
                cfg.workers.cores.get_ref().is_empty(),
                "xdpool's core choice"
            );
        }
    }

    #[test]
    fn the_table_shows_every_point() {
        let p = |size, sent, received| DevicePoint {
            size,
            rep: 1,
            sent,
            received,
            lost: sent as i64 - received as i64,
            gen_elapsed_s: 2.0,
            gen_mpps: 0.005,
            mpps: 0.005,
            accounting_ok: Some(true),
            zero_copy: Some(true),
            cores: vec![1],
            xdp: serde_json::Value::Null,
            drops: serde_json::Value::Null,
        };
        let rep = DeviceSweepReport {
            kernel: "7.3".into(),
            receiver: "eth0".into(),
            generator: "src0 (netns src)".into(),
            engine: Engine::Pktgen,
            rate_pps: Some(5000),
            frames_per_run: 10_000,
            reps: 1,
            time_limit_s: 10.0,
            size_note: SIZE_NOTE.into(),
            generator_core: 0,
            worker_mode: "poll".into(),
            points: vec![p(64, 10_000, 10_000), p(1500, 10_000, 9_990)],
            interrupted: false,
        };
        let t = rep.table();
        assert!(t.contains("| 64 | 1 | 10000 | 10000 | 0 |"), "{t}");
        assert!(t.contains("| yes | [1] | ok |"), "{t}");
        assert!(t.contains("| 1500 | 1 | 10000 | 9990 | 10 |"), "{t}");
        assert!(
            t.contains("Pktgen out of src0 (netns src)") && t.contains("5000 frames/s"),
            "{t}"
        );
        let json = serde_json::to_value(&rep).unwrap();
        assert_eq!(json["points"][1]["lost"], 10);
        assert_eq!(json["engine"], "pktgen");
    }
}
