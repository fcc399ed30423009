//! The deployment files say what the code does: the systemd unit passes
//! `systemd-analyze verify`, the unit and the DaemonSet grant exactly the capabilities
//! `xdpool run` checks (plus CAP_SYS_ADMIN for setns), the DaemonSet's config parses
//! as an xdpool config and exposes the port Prometheus scrapes, and every metric the
//! Grafana dashboard queries is one the exporter emits. Needs no root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The capability names the product needs, without `CAP_`, plus SYS_ADMIN.
fn wanted_caps() -> BTreeSet<String> {
    let mut caps: BTreeSet<String> = xdpool::internal::privilege::REQUIRED_CAPABILITIES
        .iter()
        .map(|(_, n)| n.trim_start_matches("CAP_").to_string())
        .collect();
    caps.insert("SYS_ADMIN".into());
    caps
}

#[test]
fn systemd_unit_verifies_and_grants_exactly_the_checked_capabilities() {
    let unit = read("deploy/xdpool.service");
    for key in [
        "Type=notify",
        "WatchdogSec=",
        "NotifyAccess=main",
        "--log-format json",
    ] {
        assert!(unit.contains(key), "the unit lacks {key}");
    }
    for key in ["CapabilityBoundingSet=", "AmbientCapabilities="] {
        let line = unit
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no {key}"));
        let got: BTreeSet<String> = line[key.len()..]
            .split_whitespace()
            .map(|c| c.trim_start_matches("CAP_").to_string())
            .collect();
        assert_eq!(got, wanted_caps(), "{key}");
    }
    // Verify with ExecStart pointing at the binary this test was built with.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("xdpool.service");
    std::fs::write(
        &path,
        unit.replace("/usr/local/bin/xdpool", env!("CARGO_BIN_EXE_xdpool")),
    )
    .unwrap();
    let out = match std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "systemd-analyze missing in CI: {e}"
            );
            println!("skipped: systemd-analyze not found ({e})");
            return;
        }
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify:\n{said}"
    );
}

fn docs(rel: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn kind<'a>(docs: &'a [Yaml], k: &str) -> &'a Yaml {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(k))
        .unwrap_or_else(|| panic!("no {k}"))
}

#[test]
fn daemonset_grants_the_checked_capabilities_and_its_config_parses() {
    let d = docs("deploy/kubernetes/xdpool.yaml");
    let ds = kind(&d, "DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"].as_bool(), Some(true));
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"].as_bool(), Some(false));
    let add: BTreeSet<String> = sc["capabilities"]["add"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|y| y.as_str().unwrap().to_string())
        .collect();
    assert_eq!(add, wanted_caps());
    assert_eq!(sc["capabilities"]["drop"][0].as_str(), Some("ALL"));
    // The config the pod reads is a valid xdpool config whose Prometheus endpoint is
    // the port the pod and its scrape annotation name.
    let cm = kind(&d, "ConfigMap");
    let text = cm["data"]["xdpool.toml"].as_str().unwrap();
    let cfg = xdpool::internal::config::Config::parse(text)
        .unwrap_or_else(|e| panic!("the DaemonSet's config: {e}"));
    let addr: std::net::SocketAddr = cfg
        .stats
        .prometheus
        .as_ref()
        .expect("prometheus set")
        .get_ref()
        .parse()
        .unwrap();
    assert_eq!(
        c["ports"][0]["containerPort"].as_i64(),
        Some(addr.port() as i64)
    );
    let ann = &ds["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        ann["prometheus.io/port"].as_str(),
        Some(addr.port().to_string().as_str())
    );
    assert_eq!(ann["prometheus.io/scrape"].as_str(), Some("true"));
    // The probes are the endpoint's own, on its port.
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"].as_str(), Some(path), "{probe}");
        assert_eq!(get["port"].as_i64(), Some(addr.port() as i64), "{probe}");
    }
    let args: Vec<&str> = c["args"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(&args[..3], ["run", "--config", "/etc/xdpool/xdpool.toml"]);
    // The scrape job keeps exactly these pods.
    let scrape = docs("deploy/kubernetes/prometheus-scrape.yaml");
    let job = &scrape[0]["scrape_configs"][0];
    let keeps: Vec<&Yaml> = job["relabel_configs"]
        .as_vec()
        .unwrap()
        .iter()
        .filter(|r| r["action"].as_str() == Some("keep"))
        .collect();
    let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
    assert!(
        keeps
            .iter()
            .any(|r| r["regex"].as_str() == pod_labels["app.kubernetes.io/name"].as_str()),
        "the scrape job does not keep the DaemonSet's pods"
    );
}

#[test]
fn every_dashboard_query_names_an_exported_metric() {
    let dash: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/xdpool.json")).unwrap();
    let exported: BTreeSet<String> = xdpool::internal::stats::metrics::exported_names()
        .into_iter()
        .collect();
    let mut exprs: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| {
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["expr"].as_str().unwrap().to_string())
        })
        .collect();
    for v in dash["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"].as_str() {
            exprs.push(q.to_string());
        }
    }
    assert!(exprs.len() >= 10, "{} queries", exprs.len());
    let mut used = 0;
    for e in &exprs {
        let bytes = e.as_bytes();
        let mut i = 0;
        while let Some(at) = e[i..].find("xdpool_").map(|k| k + i) {
            let end = e[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map(|k| k + at)
                .unwrap_or(e.len());
            let name = &e[at..end];
            // Only whole metric names (not part of a longer identifier).
            if at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                assert!(
                    exported.contains(name),
                    "the dashboard queries {name}, which the exporter does not emit: {e}"
                );
                used += 1;
            }
            i = end;
        }
    }
    assert!(used >= exprs.len(), "a query names no xdpool metric");
}
