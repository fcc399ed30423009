//! `xdpool doctor` live on the veth lab, as root: each port check runs inside the
//! port's namespace (its sysfs mounted privately on a thread, never on the host), a
//! wrong setting fails with exit 1 and says what to do, and the JSON names each check.

mod common;

use common::*;
use serde_json::Value;
use std::process::Command;
use xdpool_lab::lab::LabConfig;

fn doctor(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xdpool"))
        .arg("doctor")
        .args(args)
        .output()
        .expect("xdpool doctor runs");
    (
        out.status.code().expect("an exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(args: &[&str]) -> (i32, Value) {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let (code, out, err) = doctor(&a);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"));
    (code, v)
}

fn check<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {v:#}"))
}

fn sys_mounts() -> usize {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("/sys"))
        .count()
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn doctor_checks_a_lab_port_inside_its_namespace_and_fails_on_a_missing_queue() {
    require_root!();
    let rig = LabRig::up(
        LabConfig {
            queues: Some(2),
            ..LabConfig::with_prefix(unique_prefix("xdoc"))
        },
        "doctor",
    );
    let (dev, ns) = (rig.st.b.dev.as_str(), rig.st.b.netns.as_str());
    let mounts = sys_mounts();

    // A bare interface: veth has native XDP with redirect and no zero-copy; the
    // [[port]] default zero_copy = "auto" warns, queue 0 of 2 served warns.
    let (code, v) = json(&["--interface", dev, "--netns", ns]);
    assert_eq!(code, 0, "no check fails on the lab: {v:#}");
    assert_eq!(v["fail"], 0);
    let q = check(&v, "queues");
    assert_eq!(
        (q["level"].as_str(), q["port"].as_str()),
        (Some("warn"), Some("main"))
    );
    assert!(
        q["found"]
            .as_str()
            .unwrap()
            .contains("1 of 2 RX queue(s) served"),
        "{q}"
    );
    let xdp = check(&v, "xdp_native");
    assert_eq!(xdp["level"], "ok");
    assert!(
        xdp["found"].as_str().unwrap().contains("basic,redirect"),
        "{xdp}"
    );
    assert_eq!(check(&v, "zero_copy")["level"], "warn");
    assert!(check(&v, "driver")["found"]
        .as_str()
        .unwrap()
        .starts_with("none in sysfs"));
    assert_eq!(check(&v, "kernel")["level"], "ok");

    // One wrong setting: a queue the device does not have. Exit 1, the line says it.
    let cfg = rig.config(
        "q5",
        &[0, 1, 5],
        "[[rule]]\nproto = \"udp\"\naction = \"drop\"\n",
    );
    let (code, out, err) = doctor(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}\n{err}");
    let line = out
        .lines()
        .find(|l| l.contains(" queues: "))
        .unwrap_or_else(|| panic!("no queues line:\n{out}"));
    assert!(
        line.starts_with(&format!("fail  port main ({dev}) queues: queue(s) 5 configured but {dev} has 2 RX queue(s); fix: ")),
        "{line}"
    );
    assert!(err.contains("1 check(s) failed"), "{err}");
    assert!(
        out.lines().any(|l| l.starts_with("ok    kernel: ")),
        "{out}"
    );

    // busy-poll without NAPI deferral on the device: a warning with the fix.
    patch_config(&cfg, "queues = [0, 1, 5]", "queues = [0, 1]");
    patch_config(&cfg, "mode = \"poll\"", "mode = \"busy-poll\"");
    let (code, v) = json(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{v:#}");
    let b = check(&v, "busy_poll_irq");
    assert_eq!(b["level"], "warn", "{b}");
    assert!(b["fix"]
        .as_str()
        .unwrap()
        .contains(&format!("/sys/class/net/{dev}/napi_defer_hard_irqs")));

    // A device that is not there.
    let (code, v) = json(&["--interface", "xdpnosuch0", "--netns", ns]);
    assert_eq!(code, 1);
    assert_eq!(check(&v, "interface")["level"], "fail");

    assert_eq!(
        sys_mounts(),
        mounts,
        "the private sysfs mounts stayed on their threads"
    );
}
