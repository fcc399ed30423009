//! The `xdpool` binary: parses the command line and prints results. All output to the
//! user is here; the library logs through `tracing`.
#![warn(clippy::undocumented_unsafe_blocks)]
// The binary has no unsafe code: it lives in the library's fenced modules.
#![deny(unsafe_code)]

use clap::Parser;
use cli::{
    BenchWhich, CaptureArgs, Cli, Command, ControlArgs, DemoArgs, DoctorArgs, EngineArg, GenArgs,
    LabAction, LabTopology, LogFormat, RulesAction, RulesApplyArgs, RunArgs, StatsArgs,
};
use exit::{ExitCode, Fatal};
use std::io::{BufRead, BufReader};
use std::process::{Command as Process, Stdio};
use std::time::{Duration, Instant};
use xdpool::internal::config::Config;

mod cli;
mod demo_forward;
mod exit;
mod reference;

fn main() {
    let cli = Cli::parse();
    // netlink-packet-route warns about attributes newer than itself on every dump.
    let directives = format!("{},netlink_packet_route=error", cli.log);
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    match cli.log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
    let result = match cli.command {
        Command::Run(args) => cmd_run(args),
        Command::Lab { action } => cmd_lab(action),
        Command::Gen(args) => cmd_gen(args),
        Command::Stats(args) => cmd_stats(args),
        Command::Capture(args) => cmd_capture(args),
        Command::Rules {
            action: RulesAction::Apply(args),
        } => cmd_rules_apply(args),
        Command::Control(args) => cmd_control(args),
        Command::Bench { which } => cmd_bench(which),
        Command::Demo(args) => cmd_demo(args),
        Command::Doctor(args) => cmd_doctor(args),
        Command::Completions { shell } => cmd_completions(shell),
        Command::Reference { out, check } => cmd_reference(&out, check),
    };
    match result {
        Ok(()) => std::process::exit(ExitCode::Ok as i32),
        Err(f) => {
            eprintln!("xdpool: {}", f.message);
            std::process::exit(f.code as i32);
        }
    }
}

fn cmd_doctor(args: DoctorArgs) -> Result<(), Fatal> {
    use xdpool::internal::doctor;
    let usage = |e: String| Fatal::new(ExitCode::Usage, e);
    let cfg = match (&args.config, &args.interface) {
        (Some(path), _) => Config::load(path).map_err(|e| usage(e.to_string()))?,
        (None, Some(dev)) => doctor::interface_config(dev, args.netns.as_deref())
            .map_err(|e| usage(format!("--interface {dev}: {e}")))?,
        (None, None) => doctor::host_config(),
    };
    let report = doctor::diagnose(&cfg);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json()).expect("JSON")
        );
    } else {
        print!("{}", report.text());
    }
    match report.count(doctor::Level::Fail) {
        0 => Ok(()),
        n => Err(Fatal::new(
            ExitCode::Failure,
            format!("{n} check(s) failed; each fail line says what to do"),
        )),
    }
}

fn cmd_completions(shell: clap_complete::Shell) -> Result<(), Fatal> {
    use std::io::Write;
    std::io::stdout()
        .write_all(&crate::reference::completion(shell))
        .map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot write to stdout: {e}")))
}

fn cmd_reference(out: &std::path::Path, check: bool) -> Result<(), Fatal> {
    if check {
        let stale = crate::reference::stale(out);
        if stale.is_empty() {
            println!("{}: every generated file matches the code", out.display());
            return Ok(());
        }
        return Err(Fatal::new(
            ExitCode::Failure,
            format!(
                "{} differs from the code: {}; run `make reference`",
                out.display(),
                stale.join(", ")
            ),
        ));
    }
    let n = crate::reference::write(out).map_err(|e| {
        Fatal::new(
            ExitCode::Failure,
            format!("cannot write {}: {e}", out.display()),
        )
    })?;
    println!("wrote {n} files under {}", out.display());
    Ok(())
}

fn cmd_run(args: RunArgs) -> Result<(), Fatal> {
    let cfg = Config::load(&args.config).map_err(|e| Fatal::new(ExitCode::Usage, e.to_string()))?;
    let opts = xdpool::internal::run::RunOptions {
        duration: args.duration.map(Duration::from_secs_f64),
        summary_json: args.summary_json,
        xdp_mode: args.xdp_mode,
        no_reattach: args.no_reattach,
        quiet: args.quiet,
        ready_line: args.ready_line,
        hold_frames: args.hold_frames,
        config_path: Some(args.config.clone()),
        worker: None,
    };
    let summary = xdpool::internal::run::run(&cfg, &opts)?;
    println!("{}", xdpool::internal::run::summary_text(&summary));
    if !summary.accounting_ok {
        return Err(Fatal::new(
            ExitCode::Failure,
            "frame accounting mismatch (see the summary): please report this",
        ));
    }
    if summary.workers.iter().any(|w| w.inflight_at_destroy > 0) {
        return Err(Fatal::new(
            ExitCode::StalledShutdown,
            "frames were still in flight at shutdown (see the warnings above)",
        ));
    }
    Ok(())
}

fn cmd_lab(action: LabAction) -> Result<(), Fatal> {
    use xdpool_lab::lab::{Lab, LabConfig};
    xdpool::internal::privilege::require_privileges("xdpool lab")?;
    match action {
        LabAction::Up {
            topology: LabTopology::Forward,
            queues,
            prefix,
            mtu,
            split_netns,
        } => {
            let cfg = LabConfig {
                prefix,
                queues: Some(queues),
                mtu,
                split_netns,
                ..LabConfig::default()
            };
            let st = xdpool_lab::lab::forward::ForwardLab::up(&cfg)
                .map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
            println!(
                "{}",
                if st.already_up {
                    "forward lab already up (nothing changed):"
                } else {
                    "forward lab up:"
                }
            );
            let rows = [(&st.src, "sender")]
                .into_iter()
                .chain(st.ports.iter().zip(["port in", "port out", "port mon"]))
                .chain([(&st.dst, "receiver"), (&st.mon, "monitor")]);
            for (side, role) in rows {
                println!(
                    "  netns {:<16} dev {:<6} {:<9} ifindex {:<4} mac {} {} {}",
                    side.netns,
                    side.dev,
                    role,
                    side.ifindex,
                    xdpool_lab::lab::format_mac(&side.mac),
                    side.ipv4,
                    side.ipv6
                );
            }
            let config = if st.names.fwd2.is_some() {
                "configs/forward-split.toml"
            } else {
                "configs/forward.toml"
            };
            println!("  xdpool: `xdpool run --config {config}`; traffic: `xdpool gen --lab-topology forward --engine afxdp --payload sequenced`");
            Ok(())
        }
        LabAction::Up {
            topology: LabTopology::Pair,
            split_netns: true,
            ..
        } => Err(Fatal::new(
            ExitCode::Usage,
            "--split-netns belongs to --topology forward (the pair lab has one xdpool namespace)",
        )),
        LabAction::Up {
            topology: LabTopology::Pair,
            queues,
            prefix,
            mtu,
            ..
        } => {
            let cfg = LabConfig {
                prefix,
                queues: Some(queues),
                mtu,
                ..LabConfig::default()
            };
            let st = Lab::up(&cfg).map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
            if st.already_up {
                println!("lab already up (nothing changed):");
            } else {
                println!("lab up:");
            }
            for side in [&st.a, &st.b] {
                println!(
                    "  netns {:<12} dev {:<8} ifindex {:<4} mac {} {} {} queues rx {} tx {}",
                    side.netns,
                    side.dev,
                    side.ifindex,
                    xdpool_lab::lab::format_mac(&side.mac),
                    side.ipv4,
                    side.ipv6,
                    side.rx_queues,
                    side.tx_queues
                );
            }
            Ok(())
        }
        LabAction::Down { prefix } => {
            let existed =
                Lab::down(&prefix).map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
            println!(
                "{}",
                if existed {
                    "lab down"
                } else {
                    "no lab to remove"
                }
            );
            Ok(())
        }
    }
}

fn gen_config(args: &GenArgs) -> Result<xdpool_lab::gen::GenConfig, Fatal> {
    use xdpool_lab::gen::{Engine, GenConfig};
    let usage = |e: String| Fatal::new(ExitCode::Usage, e);
    let mut cfg = match args.lab_topology {
        LabTopology::Pair => {
            let names = xdpool_lab::lab::LabNames::from_prefix(&args.prefix)
                .map_err(|e| usage(e.to_string()))?;
            GenConfig {
                netns: Some(names.netns_a),
                dev: names.dev_a,
                ..GenConfig::default_lab()
            }
        }
        LabTopology::Forward => {
            GenConfig::for_forward_lab(&args.prefix).map_err(|e| usage(e.to_string()))?
        }
    };
    if let Some(ns) = &args.netns {
        cfg.netns = Some(ns.clone());
    }
    if let Some(dev) = &args.dev {
        cfg.dev = dev.clone();
    }
    match args.dst_ip {
        Some(std::net::IpAddr::V4(a)) if !args.ipv6 => cfg.ipv4.1 = a,
        Some(std::net::IpAddr::V6(a)) if args.ipv6 => cfg.ipv6_addrs.1 = a,
        Some(a) => {
            return Err(usage(format!(
                "--dst-ip {a} is not of the family sent: give an IPv{} address{}",
                if args.ipv6 { 6 } else { 4 },
                if args.ipv6 { "" } else { ", or add --ipv6" }
            )))
        }
        None => {}
    }
    if let Some(mac) = &args.dst_mac {
        cfg.dst_mac = xdpool_lab::lab::parse_mac(mac)
            .ok_or_else(|| usage(format!("--dst-mac {mac}: write it as aa:bb:cc:dd:ee:ff")))?;
    }
    if let Some(p) = args.payload {
        cfg.payload = p.into();
    }
    cfg.seq_first = args.seq_first;
    cfg.count = Some(args.count);
    cfg.duration = Some(Duration::from_secs_f64(args.duration));
    cfg.size = args.size as usize;
    cfg.ipv6 = args.ipv6;
    cfg.rate_pps = args.rate;
    cfg.cores = args.cores.clone();
    cfg.batch = args.batch;
    cfg.dst_ports = args
        .dst_ports
        .parse()
        .map_err(|e| usage(format!("--dst-ports: {e}")))?;
    cfg.src_ports = args
        .src_ports
        .parse()
        .map_err(|e| usage(format!("--src-ports: {e}")))?;
    cfg.engine = match args.engine {
        Some(EngineArg::Live) => Engine::Live,
        Some(EngineArg::Pktgen) => Engine::Pktgen,
        Some(EngineArg::Afxdp) => Engine::Afxdp,
        None => cfg.engine,
    };
    if args.payload.is_none() && cfg.engine != Engine::Afxdp {
        // Only the AF_XDP engine numbers frames; the forward lab's default follows it.
        cfg.payload = xdpool_lab::gen::Payload::Template;
    }
    cfg.queue = args.queue;
    Ok(cfg)
}

fn cmd_gen(args: GenArgs) -> Result<(), Fatal> {
    xdpool::internal::privilege::require_privileges("xdpool gen")?;
    let cfg = gen_config(&args)?;
    let report =
        xdpool_lab::gen::run(&cfg).map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
    println!("{}", report.summary());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).expect("report serializes");
        std::fs::write(path, text).map_err(|e| {
            Fatal::new(
                ExitCode::Failure,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
    }
    Ok(())
}

fn cmd_rules_apply(args: RulesApplyArgs) -> Result<(), Fatal> {
    let text = std::fs::read_to_string(&args.file).map_err(|e| {
        Fatal::new(
            ExitCode::Usage,
            format!(
                "cannot read {}: {e}; pass a rules file (or the config file)",
                args.file.display()
            ),
        )
    })?;
    let reply = xdpool::internal::stats::control::apply_rules(&args.socket, &text)
        .map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
    if args.json {
        println!("{reply}");
    }
    if reply["ok"] == true {
        let a = &reply["applied"];
        if !args.json {
            println!("rules applied: {} rules, generation {}, ports changed: {}, {} counters carried by name, swapped in {:.2} ms", a["rules"], a["generation"], a["ports_changed"], a["carried"], a["swap_ms"].as_f64().unwrap_or(0.0));
        }
        return Ok(());
    }
    let error = reply["error"].as_str().unwrap_or("no reason given");
    let code = match reply["kind"].as_str() {
        Some("invalid") => ExitCode::Usage,
        Some("refused") | Some("failed") => ExitCode::RulesRefused,
        _ => ExitCode::Failure,
    };
    Err(Fatal::new(
        code,
        format!("{}: {error}; the running rules stay", args.file.display()),
    ))
}

fn cmd_control(args: ControlArgs) -> Result<(), Fatal> {
    let reply = xdpool::internal::stats::control::control_handler(
        &args.socket,
        &args.handler,
        &args.message,
    )
    .map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
    if args.json {
        println!("{reply}");
    }
    let (lanes, answered) = (&reply["lanes"], &reply["answered"]);
    if reply["ok"] == true {
        if !args.json {
            println!("{}: taken by {lanes} lanes", args.handler);
        }
        return Ok(());
    }
    let mut why: Vec<String> = reply["refused"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{} queue {}: {}",
                r["port"].as_str().unwrap_or("?"),
                r["queue"],
                r["error"].as_str().unwrap_or("no reason given")
            )
        })
        .collect();
    if answered != lanes {
        why.push(format!(
            "{answered} of {lanes} lanes answered within 2 s (a worker busy or stopping)"
        ));
    }
    Err(Fatal::new(
        ExitCode::Failure,
        format!("{}: {}", args.handler, why.join("; ")),
    ))
}

fn cmd_stats(args: StatsArgs) -> Result<(), Fatal> {
    let ask = || {
        xdpool::internal::stats::control::query(&args.socket)
            .map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&ask()?).expect("serializes")
        );
        return Ok(());
    }
    if let Some(path) = &args.get {
        let snap = ask()?;
        let found = path
            .trim_start_matches('.')
            .split('.')
            .filter(|k| !k.is_empty())
            .try_fold(&snap, |v, k| match k.parse::<usize>() {
                Ok(i) if v.is_array() => v.get(i),
                _ => v.get(k),
            });
        return match found {
            Some(serde_json::Value::String(s)) => {
                println!("{s}");
                Ok(())
            }
            Some(v) => {
                println!("{v}");
                Ok(())
            }
            None => Err(Fatal::new(
                ExitCode::Failure,
                format!(
                    "the snapshot has nothing at {path}: see `xdpool stats --json` for the paths"
                ),
            )),
        };
    }
    if !(0.0..=3600.0).contains(&args.interval) || (args.watch && args.interval < 0.1) {
        return Err(Fatal::new(
            ExitCode::Usage,
            format!(
                "--interval {} is out of range: use 0 (totals only) or 0.1..3600 seconds",
                args.interval
            ),
        ));
    }
    let every = Duration::from_secs_f64(args.interval);
    let mut prev = if every.is_zero() {
        None
    } else {
        Some((ask()?, Instant::now()))
    };
    loop {
        if let Some((_, at)) = &prev {
            std::thread::sleep(every.saturating_sub(at.elapsed()));
        }
        let now = ask()?;
        let text = xdpool::internal::stats::view::render(
            &now,
            prev.as_ref().map(|(p, at)| (p, at.elapsed().as_secs_f64())),
        );
        if !args.watch {
            print!("{text}");
            return Ok(());
        }
        // Clear the screen and home the cursor, then draw.
        print!("\x1b[2J\x1b[H{text}");
        let _ = std::io::Write::flush(&mut std::io::stdout());
        prev = Some((now, Instant::now()));
    }
}

fn cmd_capture(args: CaptureArgs) -> Result<(), Fatal> {
    use xdpool::internal::capture::client::{capture, report_line, CaptureError, CaptureOptions};
    let stop = xdpool::internal::signal::install_stop_flag().map_err(|e| {
        Fatal::new(
            ExitCode::Failure,
            format!("cannot install the SIGINT handler: {e}"),
        )
    })?;
    let opts = CaptureOptions {
        socket: args.socket,
        rule: xdpool::internal::capture::live::RuleRef::parse(&args.rule),
        count: args.count,
        snaplen: args.snaplen,
        file: args.file,
    };
    let report = capture(&opts, stop).map_err(|e| {
        let code = match e {
            CaptureError::Refused(_) => ExitCode::Usage,
            _ => ExitCode::Failure,
        };
        Fatal::new(code, e.to_string())
    })?;
    println!("{}", report_line(&report, &opts.file));
    Ok(())
}

fn bench_capture(args: cli::CaptureBenchArgs) -> Result<(), Fatal> {
    use xdpool_lab::bench::capture::{run, table, CaptureBenchConfig};
    xdpool::internal::privilege::require_privileges("xdpool bench capture")?;
    let exe = std::env::current_exe()
        .map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot find my own binary: {e}")))?;
    let cfg = CaptureBenchConfig {
        xdpool_exe: exe,
        prefix: args.prefix,
        count: args.count,
        reps: args.reps,
        rates: args.rates,
        size: args.size,
        worker_core: args.worker_core,
        gen_core: args.gen_core,
    };
    let stop = xdpool::internal::signal::install_stop_flag().map_err(|e| {
        Fatal::new(
            ExitCode::Failure,
            format!("cannot install the Ctrl-C handler: {e}"),
        )
    })?;
    let (pairs, paced) =
        run(&cfg, stop).map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
    print!("{}", table(&cfg, &pairs, &paced));
    Ok(())
}

fn cmd_bench(which: BenchWhich) -> Result<(), Fatal> {
    match which {
        BenchWhich::Pool { json, check } => {
            let show = |report: &xdpool_lab::pool_bench::BenchReport| {
                if json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(report).expect("serializes")
                    );
                } else {
                    println!("{}", report.table());
                }
            };
            let cfg = xdpool_lab::pool_bench::BenchConfig::default();
            if !check {
                show(&xdpool_lab::pool_bench::run(&cfg));
                return Ok(());
            }
            let failures = xdpool_lab::pool_bench::check(
                &cfg,
                xdpool_lab::pool_bench::CHECK_ATTEMPTS,
                |n, report| {
                    if n > 1 {
                        eprintln!(
                            "a target was missed; run {n} of at most {}",
                            xdpool_lab::pool_bench::CHECK_ATTEMPTS
                        );
                    }
                    show(report);
                },
            );
            if !failures.is_empty() {
                return Err(Fatal::new(ExitCode::Failure, format!("pool benchmark missed: {}; rerun on an idle machine (or see docs/verification.md for the limits)", failures.join("; "))));
            }
            Ok(())
        }
        BenchWhich::Capture(args) => bench_capture(args),
        BenchWhich::Throughput(args) => {
            use xdpool_lab::bench::{self, SweepConfig};
            xdpool::internal::privilege::require_privileges("xdpool bench throughput")?;
            let fail = |e: bench::BenchError| Fatal::new(ExitCode::Failure, e.to_string());
            let exe = std::env::current_exe().map_err(|e| {
                Fatal::new(ExitCode::Failure, format!("cannot find my own binary: {e}"))
            })?;
            let cfg = SweepConfig {
                prefix: args.prefix,
                sizes: args.sizes.iter().map(|&s| s as usize).collect(),
                reps: args.reps,
                count: args.count,
                time_limit: Duration::try_from_secs_f64(args.time_limit)
                    .map_err(|e| Fatal::new(ExitCode::Usage, format!("--time-limit: {e}")))?,
                gen_core: args.gen_core,
                worker_core: args.worker_core,
                napi: args.napi.into(),
                napi_core: args.napi_core,
                worker_mode: match args.worker_mode.as_str() {
                    "spin" => xdpool::internal::config::WaitMode::Spin,
                    "busy-poll" => xdpool::internal::config::WaitMode::BusyPoll,
                    _ => xdpool::internal::config::WaitMode::Poll,
                },
                ..SweepConfig::new(exe)
            };
            let quiet = args.quiet;
            let mut progress = |p: &bench::Progress| {
                if !quiet {
                    eprintln!("bench throughput: {}", p.line());
                }
            };
            if let (Some(rx_dev), Some(gen_dev)) = (args.iface.clone(), args.gen_dev.clone()) {
                use bench::device_sweep::{run_device_sweep, DeviceSweepConfig, Devices};
                if args.plot.is_some() {
                    return Err(Fatal::new(ExitCode::Usage, "--plot draws the lab's sweep; with --iface the table and --json say it all"));
                }
                let dcfg = DeviceSweepConfig {
                    sweep: cfg,
                    devices: Devices {
                        rx_dev,
                        rx_netns: args.netns.clone(),
                        gen_dev,
                        gen_netns: args.gen_netns.clone(),
                    },
                    engine: match args.engine {
                        Some(EngineArg::Live) => xdpool_lab::gen::Engine::Live,
                        Some(EngineArg::Afxdp) => xdpool_lab::gen::Engine::Afxdp,
                        Some(EngineArg::Pktgen) | None => xdpool_lab::gen::Engine::Pktgen,
                    },
                    rate_pps: args.rate,
                };
                dcfg.validate()
                    .map_err(|e| Fatal::new(ExitCode::Usage, e.to_string()))?;
                let stop = bench::signal::install_stop_flag().map_err(|e| {
                    Fatal::new(
                        ExitCode::Failure,
                        format!("cannot install the Ctrl-C handler: {e}"),
                    )
                })?;
                let report = run_device_sweep(&dcfg, stop, &mut progress).map_err(fail)?;
                println!("{}", report.table());
                if let Some(path) = &args.json {
                    bench::write_device_json(&report, path).map_err(fail)?;
                    eprintln!("bench throughput: JSON written to {}", path.display());
                }
                if report.interrupted {
                    return Err(Fatal::new(
                        ExitCode::Failure,
                        "interrupted: the table shows the points completed",
                    ));
                }
                return Ok(());
            }
            cfg.validate()
                .map_err(|e| Fatal::new(ExitCode::Usage, e.to_string()))?;
            let stop = bench::signal::install_stop_flag().map_err(|e| {
                Fatal::new(
                    ExitCode::Failure,
                    format!("cannot install the Ctrl-C handler: {e}"),
                )
            })?;
            let report = bench::run_sweep(&cfg, stop, &mut progress).map_err(fail)?;
            println!("{}", report.table());
            if let Some(path) = &args.json {
                bench::write_json(&report, path).map_err(fail)?;
                eprintln!("bench throughput: JSON written to {}", path.display());
            }
            if let Some(path) = &args.plot {
                bench::plot::write_svg(&report, path).map_err(fail)?;
                eprintln!("bench throughput: plot written to {}", path.display());
            }
            if report.interrupted {
                return Err(Fatal::new(
                    ExitCode::Failure,
                    "interrupted: the table shows the sizes completed; the lab was removed",
                ));
            }
            Ok(())
        }
        BenchWhich::Steer(args) => {
            use xdpool_lab::bench::steer::{run_steer_bench, SteerBenchConfig};
            xdpool::internal::privilege::require_privileges("xdpool bench steer")?;
            if args.rounds == 0 || args.repeat == 0 {
                return Err(Fatal::new(
                    ExitCode::Usage,
                    "--rounds and --repeat must be at least 1",
                ));
            }
            let cfg = SteerBenchConfig {
                rounds: args.rounds,
                repeat: args.repeat,
            };
            let quiet = args.quiet;
            let report = run_steer_bench(&cfg, &mut |line| {
                if !quiet {
                    eprintln!("bench steer: {line}");
                }
            })
            .map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
            println!("{}", report.table());
            if let Some(path) = &args.json {
                let text = serde_json::to_vec_pretty(&report).expect("the report serializes");
                xdpool_lab::bench::write_creating_dirs(path, &text)
                    .map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
                eprintln!("bench steer: JSON written to {}", path.display());
            }
            Ok(())
        }
        BenchWhich::Generator(args) => {
            use xdpool_lab::bench::generator::{run_gen_bench, GenBenchConfig};
            xdpool::internal::privilege::require_privileges("xdpool bench generator")?;
            let fail =
                |e: xdpool_lab::bench::BenchError| Fatal::new(ExitCode::Failure, e.to_string());
            let secs = |what: &str, v: f64| {
                Duration::try_from_secs_f64(v)
                    .map_err(|e| Fatal::new(ExitCode::Usage, format!("{what}: {e}")))
            };
            let peer = match args.peer {
                Some(path) => Some(xdpool_lab::bench::gen_peer::PeerConfig {
                    path,
                    pairs: args.reps,
                    lead: secs("--peer-lead", args.peer_lead)?,
                    window: secs("--peer-window", args.peer_window)?,
                }),
                None => None,
            };
            let cfg = GenBenchConfig {
                peer,
                prefix: args.prefix,
                size: args.size as usize,
                count: args.count,
                reps: args.reps,
                batches: args.batches,
                gen_core: args.gen_core,
                napi_core: args.napi_core,
                time_limit: secs("--time-limit", args.time_limit)?,
            };
            cfg.validate()
                .map_err(|e| Fatal::new(ExitCode::Usage, e.to_string()))?;
            let stop = xdpool_lab::bench::signal::install_stop_flag().map_err(|e| {
                Fatal::new(
                    ExitCode::Failure,
                    format!("cannot install the Ctrl-C handler: {e}"),
                )
            })?;
            let quiet = args.quiet;
            let report = run_gen_bench(&cfg, stop, &mut |line| {
                if !quiet {
                    eprintln!("bench generator: {line}");
                }
            })
            .map_err(fail)?;
            println!("{}", report.table());
            if let Some(path) = &args.json {
                let text = serde_json::to_vec_pretty(&report).expect("the report serializes");
                xdpool_lab::bench::write_creating_dirs(path, &text).map_err(fail)?;
                eprintln!("bench generator: JSON written to {}", path.display());
            }
            if report.interrupted {
                return Err(Fatal::new(
                    ExitCode::Failure,
                    "interrupted: the table shows the points completed; the lab was removed",
                ));
            }
            Ok(())
        }
    }
}

/// `make run`: lab up, `xdpool run` in a child, traffic from the generator, summary,
/// lab down (also when something fails).
fn cmd_demo(mut args: DemoArgs) -> Result<(), Fatal> {
    use xdpool_lab::lab::{Lab, LabConfig};
    xdpool::internal::privilege::require_privileges("xdpool demo")?;
    if args.forward {
        return demo_forward::run(&args);
    }
    let config = args
        .config
        .get_or_insert_with(|| "configs/lab.toml".into())
        .clone();
    let cfg = Config::load(&config).map_err(|e| Fatal::new(ExitCode::Usage, e.to_string()))?;
    let lab = LabConfig::default();
    let names = xdpool_lab::lab::LabNames::from_prefix(&lab.prefix)
        .map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
    // The demo only ever attaches to the lab's receiving end, inside its namespace.
    let ports = cfg.ports();
    if ports.len() != 1
        || ports[0].netns.as_deref() != Some(names.netns_b.as_str())
        || ports[0].interface != names.dev_b
    {
        return Err(Fatal::new(
            ExitCode::Usage,
            format!(
                "{}: the demo runs on the lab only; its config must have interface.name = \"{}\" and interface.netns = \"{}\" (see configs/lab.toml); use `xdpool run` for other interfaces",
                config.display(),
                names.dev_b,
                names.netns_b
            ),
        ));
    }
    let stop = xdpool_lab::bench::signal::install_stop_flag().map_err(|e| {
        Fatal::new(
            ExitCode::Failure,
            format!("cannot install the SIGINT handler: {e}"),
        )
    })?;
    let st = Lab::up(&lab).map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))?;
    println!(
        "demo: lab {} ({} {} in {}) <-> ({} {} in {})",
        if st.already_up {
            "was already up"
        } else {
            "up"
        },
        st.a.dev,
        st.a.ipv4,
        st.a.netns,
        st.b.dev,
        st.b.ipv4,
        st.b.netns
    );
    let result = demo_inner(&args, stop);
    if st.already_up {
        println!(
            "demo: the lab was up before the demo; leaving it up (`xdpool lab down` removes it)"
        );
    } else {
        match Lab::down(&lab.prefix) {
            Ok(_) => println!("demo: lab down"),
            Err(e) => eprintln!("xdpool: lab down failed: {e}; run `xdpool lab down`"),
        }
    }
    result
}

/// `xdpool run` as a child: stopped with SIGINT, then SIGKILL, whatever happens.
pub(crate) struct DemoChild {
    child: std::process::Child,
    pub(crate) lines: std::sync::mpsc::Receiver<String>,
}

impl DemoChild {
    /// Sends SIGINT, waits up to `grace`, then SIGKILL.
    pub(crate) fn interrupt_and_wait(
        &mut self,
        grace: Duration,
    ) -> Option<std::process::ExitStatus> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        let deadline = Instant::now() + grace;
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return self.child.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for DemoChild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.interrupt_and_wait(Duration::from_secs(10));
        }
    }
}

fn demo_inner(args: &DemoArgs, stop: &std::sync::atomic::AtomicBool) -> Result<(), Fatal> {
    use std::sync::atomic::Ordering;
    let mut child = start_run(args.config.as_deref().expect("set by cmd_demo"))?;
    // Let the worker settle on its core before the burst (a cold start drops a few
    // thousand frames at full speed: rx ring full).
    std::thread::sleep(Duration::from_millis(1000));
    if stop.load(Ordering::SeqCst) {
        child.interrupt_and_wait(Duration::from_secs(10));
        return Err(Fatal::new(ExitCode::Failure, "interrupted"));
    }
    let count = args.count.unwrap_or(1_000_000);
    println!(
        "demo: xdpool attached; sending {} frames of {} bytes",
        count, args.size
    );
    let gen_args = GenArgs {
        lab_topology: LabTopology::Pair,
        prefix: xdpool_lab::lab::DEFAULT_PREFIX.into(),
        netns: None,
        dev: None,
        dst_ip: None,
        dst_mac: None,
        payload: None,
        seq_first: 0,
        count,
        size: args.size,
        duration: 20.0,
        rate: None,
        ipv6: false,
        dst_ports: "9".into(),
        src_ports: "1024".into(),
        cores: vec![0],
        engine: Some(EngineArg::Live),
        queue: 0,
        batch: 64,
        json: None,
    };
    let gen = gen_config(&gen_args).and_then(|c| {
        xdpool_lab::gen::run(&c).map_err(|e| Fatal::new(ExitCode::Failure, e.to_string()))
    });
    std::thread::sleep(Duration::from_millis(1500));
    let status = child.interrupt_and_wait(Duration::from_secs(10));
    while let Ok(l) = child.lines.recv_timeout(Duration::from_millis(500)) {
        println!("{l}");
    }
    let report = gen?;
    println!("demo: generator: {}", report.summary());
    match status.and_then(|s| s.code()) {
        Some(0) => Ok(()),
        code => Err(Fatal::new(
            ExitCode::Failure,
            format!("`xdpool run` ended with {code:?}"),
        )),
    }
}

/// Starts `xdpool run --config CONFIG --duration 60 --ready-line` as a child and
/// waits (at most 30 s) for its ready line.
pub(crate) fn start_run(config: &std::path::Path) -> Result<DemoChild, Fatal> {
    let exe = std::env::current_exe()
        .map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot find my own binary: {e}")))?;
    let mut child = Process::new(&exe)
        .args(["run", "--config"])
        .arg(config)
        .args(["--duration", "60", "--ready-line"])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Fatal::new(ExitCode::Failure, format!("cannot start `xdpool run`: {e}")))?;
    let out = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut child = DemoChild { child, lines: rx };
    let ready =
        matches!(child.lines.recv_timeout(Duration::from_secs(30)), Ok(l) if l.trim() == "ready");
    if !ready {
        let status = child
            .interrupt_and_wait(Duration::from_secs(5))
            .and_then(|s| s.code());
        return Err(Fatal::new(
            ExitCode::Failure,
            format!("`xdpool run` did not start (exit {status:?}); see its message above"),
        ));
    }
    Ok(child)
}
