//! `xdpool demo --forward` (part of the binary, not the library): the forward lab,
//! xdpool forwarding from port "in" to port "out", sequenced frames sent from the
//! sender's namespace and checked one by one by a UDP socket in the receiver's.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::cli::DemoArgs;
use crate::exit::{ExitCode, Fatal};
use xdpool_lab::gen::sink::SeqSink;
use xdpool_lab::gen::GenConfig;
use xdpool_lab::lab::forward::{outer_end, ForwardLab, ForwardNames, Link};
use xdpool_lab::lab::{Lab, LabConfig, DEFAULT_PREFIX};

/// Frames sent unless --count says otherwise.
pub const DEFAULT_COUNT: u64 = 200_000;
/// Frames per second unless --rate says otherwise: the receiver's UDP socket keeps
/// up with this on the 2-core lab VM with room to spare.
pub const DEFAULT_RATE: u64 = 100_000;

fn fail(e: impl std::fmt::Display) -> Fatal {
    Fatal::new(ExitCode::Failure, e.to_string())
}

/// The demo only ever attaches to the forward lab's own devices: every `[[port]]`
/// of the config must live in `netns` (checked on the TOML text, so the check does
/// not depend on how the data plane reads the rest).
fn check_config(path: &Path, netns: &str) -> Result<(), Fatal> {
    let usage = |m: String| Fatal::new(ExitCode::Usage, format!("{}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| usage(format!("cannot read it: {e}")))?;
    let doc: toml::Table = text
        .parse()
        .map_err(|e| usage(format!("not valid TOML: {e}")))?;
    let ports = doc
        .get("port")
        .and_then(|p| p.as_array())
        .filter(|a| !a.is_empty());
    let Some(ports) = ports else {
        return Err(usage(
            "the forwarding demo needs [[port]] tables (see configs/forward.toml)".into(),
        ));
    };
    for p in ports {
        if p.get("netns").and_then(|n| n.as_str()) != Some(netns) {
            return Err(usage(format!(
                "the forwarding demo runs on the forward lab only: every [[port]] needs netns = \"{netns}\" (see configs/forward.toml); use `xdpool run` elsewhere"
            )));
        }
    }
    Ok(())
}

/// Runs the forwarding demo and removes the lab afterwards (unless it was up before).
pub fn run(args: &DemoArgs) -> Result<(), Fatal> {
    let config: PathBuf = args
        .config
        .clone()
        .unwrap_or_else(|| "configs/forward.toml".into());
    let names = ForwardNames::from_prefix(DEFAULT_PREFIX).map_err(fail)?;
    check_config(&config, &names.fwd)?;
    let stop = xdpool::internal::signal::install_stop_flag()
        .map_err(|e| fail(format!("cannot install the SIGINT handler: {e}")))?;
    let lab = LabConfig::default();
    let st = ForwardLab::up(&lab).map_err(fail)?;
    let dst = outer_end(Link::Out);
    println!(
        "demo --forward: lab {}: {} {} in {} -> xdpool ({} \"in\" -> {} \"out\" in {}) -> {} {} in {}",
        if st.already_up { "was already up" } else { "up" },
        st.src.dev,
        st.src.ipv4,
        st.names.src,
        st.ports[0].dev,
        st.ports[1].dev,
        st.names.fwd,
        st.dst.dev,
        st.dst.ipv4,
        st.names.dst
    );
    let result = inner(args, &config, &names, SocketAddr::from((dst.ipv4, 9)), stop);
    if st.already_up {
        println!("demo --forward: the lab was up before the demo; leaving it up (`xdpool lab down` removes it)");
    } else {
        match Lab::down(&lab.prefix) {
            Ok(_) => println!("demo --forward: lab down"),
            Err(e) => eprintln!("xdpool: lab down failed: {e}; run `xdpool lab down`"),
        }
    }
    result
}

fn inner(
    args: &DemoArgs,
    config: &Path,
    names: &ForwardNames,
    to: SocketAddr,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<(), Fatal> {
    let count = args.count.unwrap_or(DEFAULT_COUNT);
    let rate = args.rate.unwrap_or(DEFAULT_RATE);
    let sink = SeqSink::udp(&names.dst, to, 0, count).map_err(fail)?;
    let mut child = crate::start_run(config)?;
    // Let the workers settle before the traffic starts.
    std::thread::sleep(Duration::from_millis(500));
    if stop.load(Ordering::SeqCst) {
        child.interrupt_and_wait(Duration::from_secs(10));
        return Err(fail("interrupted"));
    }
    println!("demo --forward: xdpool attached; sending {count} numbered frames of {} bytes at {rate} frames/s to {to}", args.size);
    let mut g = GenConfig::for_forward_lab(&names.prefix).map_err(fail)?;
    g.count = Some(count);
    g.size = args.size as usize;
    g.rate_pps = Some(rate);
    g.duration = Some(Duration::from_secs(30));
    let gen = xdpool_lab::gen::run(&g).map_err(fail);
    let got = sink.settle(Duration::from_millis(1000), Duration::from_secs(10));
    let status = child.interrupt_and_wait(Duration::from_secs(10));
    while let Ok(l) = child.lines.recv_timeout(Duration::from_millis(500)) {
        println!("{l}");
    }
    let report = gen?;
    println!("demo --forward: generator: {}", report.summary());
    println!(
        "demo --forward: receiver ({}): {}",
        sink.describe(),
        got.line()
    );
    if !got.exact() {
        let missing = sink.missing_sample(5);
        return Err(fail(format!(
            "the receiver did not get every frame exactly once and intact ({}; first missing {missing:?}{})",
            got.line(),
            got.first_corrupt.as_deref().map(|e| format!("; first corrupt: {e}")).unwrap_or_default()
        )));
    }
    println!("demo --forward: all {count} frames forwarded, each once, every byte checked");
    match status.and_then(|s| s.code()) {
        Some(0) => Ok(()),
        code => Err(fail(format!("`xdpool run` ended with {code:?}"))),
    }
}
