//! Each check over a fixture `/proc` and `/sys` tree: a tree where everything is
//! right, then one wrong setting per test, and the check that must name it.

use std::fs;
use std::path::Path;

use super::netdev::{act, XdpFeatures};
use super::port::{self, PortInput};
use super::{host, Check, HostFacts, Level, PortFacts, Report};
use crate::config::{Config, PortDef, ZeroCopy};
use crate::steer::XdpAttachMode;

const DEV: &str = "eth1";

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// A machine where every check passes: Linux 6.18, BTF, the JIT on, root's
/// capabilities, bpffs, 1024 free 2 MiB huge pages, two NUMA nodes (cores 0-1, 2-3),
/// and `eth1` on igb (node 1) with 2 RX queues, MTU 1500 and NAPI deferral set.
fn good_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, "proc/sys/kernel/osrelease", "6.18.0-1-amd64\n");
    write(r, "sys/kernel/btf/vmlinux", "");
    write(r, "proc/sys/net/core/bpf_jit_enable", "1\n");
    write(
        r,
        "proc/self/status",
        "Name:\txdpool\nCapEff:\t000001ffffffffff\n",
    );
    write(
        r,
        "proc/self/limits",
        "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         8388608              8388608              bytes\n",
    );
    write(r, "proc/self/mounts", "sysfs /sys sysfs rw 0 0\nbpf /sys/fs/bpf bpf rw,nosuid,nodev,noexec,relatime,mode=700 0 0\n");
    write(r, "proc/meminfo", "MemTotal: 24000000 kB\nHugePages_Total: 1024\nHugePages_Free: 1024\nHugepagesize: 2048 kB\n");
    write(r, "sys/devices/system/node/node0/cpulist", "0-1\n");
    write(r, "sys/devices/system/node/node1/cpulist", "2-3\n");
    let dev = format!("sys/class/net/{DEV}");
    write(r, &format!("{dev}/mtu"), "1500\n");
    write(r, &format!("{dev}/queues/rx-0/rps_cpus"), "0\n");
    write(r, &format!("{dev}/queues/rx-1/rps_cpus"), "0\n");
    write(r, &format!("{dev}/queues/tx-0/xps_cpus"), "0\n");
    write(r, &format!("{dev}/napi_defer_hard_irqs"), "2\n");
    write(r, &format!("{dev}/gro_flush_timeout"), "200000\n");
    write(r, &format!("{dev}/device/numa_node"), "1\n");
    fs::create_dir_all(r.join("sys/bus/pci/drivers/igb")).unwrap();
    std::os::unix::fs::symlink(
        "../../../../bus/pci/drivers/igb",
        r.join(format!("{dev}/device/driver")),
    )
    .unwrap();
    dir
}

fn good_features() -> XdpFeatures {
    XdpFeatures {
        bits: act::BASIC | act::REDIRECT | act::NDO_XMIT | act::XSK_ZEROCOPY | act::RX_SG,
        zc_max_segs: 1,
    }
}

fn good_facts() -> PortFacts {
    PortFacts {
        xdp: Ok(good_features()),
        rx_vlan_offload: Ok(false),
        rx_channels: Ok(2),
    }
}

/// Port `main` on eth1, queues 0 and 1, zero-copy on, 4096-byte chunks, busy-poll,
/// one VLAN rule, workers on cores 2 and 3 (the device's node).
fn good_port() -> PortInput {
    PortInput {
        def: PortDef {
            name: "main".into(),
            interface: DEV.into(),
            netns: None,
            queues: vec![0, 1],
            follow_queues: false,
            xdp_mode: XdpAttachMode::Native,
            zero_copy: ZeroCopy::On,
            multi_buffer: false,
        },
        chunk_size: 4096,
        vlan_rules: 1,
        busy_poll: true,
        cores: vec![2, 3],
    }
}

const RULE: &str = "[[rule]]\nproto = \"udp\"\naction = \"drop\"\n";

fn host_cfg(extra: &str) -> Config {
    Config::parse(&format!(
        "{RULE}[interface]\nname = \"{DEV}\"\n[umem]\nframes = 8192\nchunk_size = 4096\n{extra}"
    ))
    .unwrap()
}

fn the<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.check == name)
        .unwrap_or_else(|| panic!("no check {name} in {checks:#?}"))
}

fn port_checks(root: &Path, input: &PortInput, facts: &PortFacts) -> Vec<Check> {
    port::checks(root, input, facts)
}

/// Everything else stays ok: only `name` changed level.
fn only(checks: &[Check], name: &str, level: Level) -> Check {
    for c in checks {
        if c.check == name {
            assert_eq!(c.level, level, "{}", c.line());
            if level != Level::Ok {
                assert!(c.fix.is_some(), "a {level:?} says what to do: {}", c.line());
            }
        } else {
            assert_eq!(
                c.level,
                Level::Ok,
                "only {name} should change, but: {}",
                c.line()
            );
        }
    }
    the(checks, name).clone()
}

#[test]
fn a_good_machine_passes_every_check() {
    let t = good_tree();
    let cfg = host_cfg("hugepages = true\n");
    let mut checks = host::checks(t.path(), &cfg, &HostFacts { af_xdp: Ok(()) });
    checks.extend(port_checks(t.path(), &good_port(), &good_facts()));
    let report = Report { checks };
    assert_eq!(report.worst(), Level::Ok, "{}", report.text());
    let names: Vec<&str> = report.checks.iter().map(|c| c.check).collect();
    assert_eq!(
        names,
        [
            "kernel",
            "af_xdp",
            "btf",
            "bpf_jit",
            "capabilities",
            "memlock",
            "bpffs",
            "hugepages",
            "driver",
            "xdp_native",
            "zero_copy",
            "multi_buffer",
            "queues",
            "frame_size",
            "rx_vlan_offload",
            "busy_poll_irq",
            "numa"
        ]
    );
    assert_eq!(the(&report.checks, "driver").found, "igb");
    let json = report.json();
    assert_eq!(json["fail"], 0);
    assert_eq!(json["checks"][14]["check"], "rx_vlan_offload");
    assert_eq!(json["checks"][14]["port"], "main");
}

fn host_with(t: &tempfile::TempDir, extra: &str, af_xdp: Result<(), i32>) -> Vec<Check> {
    host::checks(t.path(), &host_cfg(extra), &HostFacts { af_xdp })
}

#[test]
fn an_old_kernel_fails_and_one_without_multi_buffer_warns() {
    let t = good_tree();
    write(t.path(), "proc/sys/kernel/osrelease", "5.10.0-28-amd64\n");
    let c = only(&host_with(&t, "", Ok(())), "kernel", Level::Fail);
    assert!(
        c.found.contains("5.10.0-28-amd64") && c.found.contains("5.11"),
        "{}",
        c.line()
    );
    write(t.path(), "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
    only(&host_with(&t, "", Ok(())), "kernel", Level::Warn);
    let mb = Config::parse(&format!(
        "{RULE}[interface]\nname = \"{DEV}\"\nmulti_buffer = true\n"
    ))
    .unwrap();
    let checks = host::checks(t.path(), &mb, &HostFacts { af_xdp: Ok(()) });
    assert_eq!(
        the(&checks, "kernel").level,
        Level::Fail,
        "multi_buffer on 6.1"
    );
}

#[test]
fn a_kernel_without_af_xdp_fails() {
    let t = good_tree();
    let c = only(
        &host_with(&t, "", Err(libc::EAFNOSUPPORT)),
        "af_xdp",
        Level::Fail,
    );
    assert!(c.found.contains("EAFNOSUPPORT"), "{}", c.line());
    assert!(c.fix.unwrap().contains("CONFIG_XDP_SOCKETS=y"));
}

#[test]
fn no_btf_warns() {
    let t = good_tree();
    fs::remove_file(t.path().join("sys/kernel/btf/vmlinux")).unwrap();
    only(&host_with(&t, "", Ok(())), "btf", Level::Warn);
}

#[test]
fn the_jit_off_warns() {
    let t = good_tree();
    write(t.path(), "proc/sys/net/core/bpf_jit_enable", "0\n");
    let c = only(&host_with(&t, "", Ok(())), "bpf_jit", Level::Warn);
    assert!(c.found.contains("interpreter"), "{}", c.line());
}

/// In another network namespace (ip netns exec) /proc/sys/net/core has the
/// per-namespace entries but not bpf_jit_enable: that is no kernel without a JIT.
#[test]
fn the_jit_unreadable_from_another_netns_is_not_a_missing_jit() {
    let t = good_tree();
    fs::remove_file(t.path().join("proc/sys/net/core/bpf_jit_enable")).unwrap();
    let c = only(&host_with(&t, "", Ok(())), "bpf_jit", Level::Warn);
    assert!(
        c.found.contains("no /proc/sys/net/core/bpf_jit_enable"),
        "{}",
        c.line()
    );
    write(t.path(), "proc/sys/net/core/somaxconn", "4096\n");
    let c = only(&host_with(&t, "", Ok(())), "bpf_jit", Level::Warn);
    assert!(
        c.found.contains("only the initial one shows it"),
        "{}",
        c.line()
    );
}

#[test]
fn missing_capabilities_fail_by_name() {
    let t = good_tree();
    // CAP_NET_ADMIN (12) and CAP_BPF (39) dropped; CAP_SYS_ADMIN (21) off too, or it
    // would stand in for CAP_BPF.
    let eff: u64 = 0x1ff_ffff_ffff & !(1 << 12) & !(1 << 39) & !(1 << 21);
    write(
        t.path(),
        "proc/self/status",
        &format!("CapEff:\t{eff:016x}\n"),
    );
    let checks = host_with(&t, "", Ok(()));
    let c = the(&checks, "capabilities");
    assert_eq!(c.level, Level::Fail);
    assert_eq!(c.found, "missing CAP_NET_ADMIN, CAP_BPF");
}

#[test]
fn a_small_memlock_without_cap_ipc_lock_fails() {
    let t = good_tree();
    // The UMEM: 8192 frames of 4096 B = 32 MiB; the limit 32 MiB - 4 KiB.
    write(
        t.path(),
        "proc/self/limits",
        "Max locked memory         33550336             33550336             bytes\n",
    );
    only(&host_with(&t, "", Ok(())), "memlock", Level::Ok); // root: CAP_IPC_LOCK
    let eff: u64 = 0x1ff_ffff_ffff & !(1 << 14);
    write(
        t.path(),
        "proc/self/status",
        &format!("CapEff:\t{eff:016x}\n"),
    );
    let checks = host_with(&t, "", Ok(()));
    let c = the(&checks, "memlock");
    assert_eq!(c.level, Level::Fail, "{}", c.line());
    assert!(
        c.found.contains("32764 KiB") && c.found.contains("32 MiB"),
        "{}",
        c.line()
    );
    write(
        t.path(),
        "proc/self/limits",
        "Max locked memory         unlimited            unlimited            bytes\n",
    );
    assert_eq!(the(&host_with(&t, "", Ok(())), "memlock").level, Level::Ok);
}

#[test]
fn no_bpffs_warns() {
    let t = good_tree();
    write(t.path(), "proc/self/mounts", "sysfs /sys sysfs rw 0 0\n");
    only(&host_with(&t, "", Ok(())), "bpffs", Level::Warn);
}

#[test]
fn too_few_huge_pages_warn_when_asked() {
    let t = good_tree();
    write(
        t.path(),
        "proc/meminfo",
        "HugePages_Free: 3\nHugepagesize: 2048 kB\n",
    );
    only(&host_with(&t, "", Ok(())), "hugepages", Level::Ok);
    let c = only(
        &host_with(&t, "hugepages = true\n", Ok(())),
        "hugepages",
        Level::Warn,
    );
    assert!(
        c.found.contains("needs 16"),
        "32 MiB in 2 MiB pages: {}",
        c.line()
    );
}

#[test]
fn a_missing_interface_fails_alone() {
    let t = good_tree();
    let mut p = good_port();
    p.def.interface = "eth9".into();
    let checks = port_checks(t.path(), &p, &good_facts());
    assert_eq!(checks.len(), 1);
    assert_eq!(
        (checks[0].check, checks[0].level),
        ("interface", Level::Fail)
    );
    assert!(
        checks[0]
            .line()
            .starts_with("fail  port main (eth9) interface: no device eth9"),
        "{}",
        checks[0].line()
    );
}

#[test]
fn a_driver_without_native_redirect_fails_native_mode() {
    let t = good_tree();
    let facts = PortFacts {
        xdp: Ok(XdpFeatures {
            bits: act::BASIC,
            zc_max_segs: 0,
        }),
        ..good_facts()
    };
    let mut p = good_port();
    p.def.zero_copy = ZeroCopy::Off;
    let c = only(
        &port_checks(t.path(), &p, &facts),
        "xdp_native",
        Level::Fail,
    );
    assert!(c.found.contains("xdp-features basic:"), "{}", c.line());
    p.def.xdp_mode = XdpAttachMode::Skb;
    only(&port_checks(t.path(), &p, &facts), "xdp_native", Level::Ok);
}

#[test]
fn zero_copy_asked_of_a_driver_without_it_fails_and_auto_warns() {
    let t = good_tree();
    let facts = PortFacts {
        xdp: Ok(XdpFeatures {
            bits: act::BASIC | act::REDIRECT | act::RX_SG,
            zc_max_segs: 0,
        }),
        ..good_facts()
    };
    let mut p = good_port();
    let c = only(&port_checks(t.path(), &p, &facts), "zero_copy", Level::Fail);
    assert!(
        c.found.contains("igb has no AF_XDP zero-copy"),
        "{}",
        c.line()
    );
    p.def.zero_copy = ZeroCopy::Auto;
    only(&port_checks(t.path(), &p, &facts), "zero_copy", Level::Warn);
    p.def.zero_copy = ZeroCopy::Off;
    only(&port_checks(t.path(), &p, &facts), "zero_copy", Level::Ok);
}

#[test]
fn multi_buffer_on_a_driver_without_rx_sg_warns() {
    let t = good_tree();
    let facts = PortFacts {
        xdp: Ok(XdpFeatures {
            bits: act::BASIC | act::REDIRECT | act::XSK_ZEROCOPY,
            zc_max_segs: 1,
        }),
        ..good_facts()
    };
    let mut p = good_port();
    p.def.multi_buffer = true;
    p.def.zero_copy = ZeroCopy::Off;
    let c = only(
        &port_checks(t.path(), &p, &facts),
        "multi_buffer",
        Level::Warn,
    );
    assert!(c.found.contains("lack rx-sg"), "{}", c.line());
}

#[test]
fn a_queue_beyond_the_channel_count_fails_and_unserved_queues_warn() {
    let t = good_tree();
    let mut p = good_port();
    p.def.queues = vec![0, 1, 2];
    p.cores = vec![2, 3, 2];
    let c = only(
        &port_checks(t.path(), &p, &good_facts()),
        "queues",
        Level::Fail,
    );
    assert!(
        c.found.contains("queue(s) 2 configured but eth1 has 2"),
        "{}",
        c.line()
    );
    assert!(c.fix.unwrap().contains("ethtool -L eth1 combined 3"));
    p.def.queues = vec![0];
    p.cores = vec![2];
    only(
        &port_checks(t.path(), &p, &good_facts()),
        "queues",
        Level::Warn,
    );
}

/// igb while down: sysfs lists the 8 queues it allocated, `ethtool -l` the 2 channels
/// it opens with (seen in the nested guest). The channels count; sysfs only where the
/// device has none.
#[test]
fn the_queue_count_is_the_channel_count_and_sysfs_only_without_channels() {
    let t = good_tree();
    let dev = t.path().join(format!("sys/class/net/{DEV}/queues"));
    for q in 2..8 {
        write(
            t.path(),
            &format!("sys/class/net/{DEV}/queues/rx-{q}/rps_cpus"),
            "0\n",
        );
    }
    assert_eq!(
        port::rx_queue_count(t.path(), DEV),
        Some(8),
        "{}",
        dev.display()
    );
    let p = good_port();
    let c = only(
        &port_checks(t.path(), &p, &good_facts()),
        "queues",
        Level::Ok,
    );
    assert_eq!(c.found, "2 RX queue(s), all served");
    let one = PortFacts {
        rx_channels: Ok(1),
        ..good_facts()
    };
    let c = only(&port_checks(t.path(), &p, &one), "queues", Level::Fail);
    assert!(
        c.found.contains("queue(s) 1 configured but eth1 has 1"),
        "{}",
        c.line()
    );
    let none = PortFacts {
        rx_channels: Err("get channels: Operation not supported".into()),
        ..good_facts()
    };
    let c = only(&port_checks(t.path(), &p, &none), "queues", Level::Warn);
    assert!(
        c.found.contains("2 of 8 RX queue(s) served"),
        "{}",
        c.line()
    );
}

#[test]
fn igb_zero_copy_with_2048_byte_chunks_cuts_1500_byte_frames() {
    let t = good_tree();
    let mut p = good_port();
    p.chunk_size = 2048;
    let c = only(
        &port_checks(t.path(), &p, &good_facts()),
        "frame_size",
        Level::Warn,
    );
    assert!(c.found.contains("up to 1024 B whole"), "{}", c.line());
    assert!(c
        .fix
        .unwrap()
        .contains("umem.chunk_size = 4096 (frames up to 3072 B)"));
    // Copy mode: the whole chunk's room.
    p.def.zero_copy = ZeroCopy::Off;
    only(
        &port_checks(t.path(), &p, &good_facts()),
        "frame_size",
        Level::Ok,
    );
    // A jumbo MTU without multi-buffer: the kernel drops what a chunk cannot hold.
    write(t.path(), "sys/class/net/eth1/mtu", "9000\n");
    let c = only(
        &port_checks(t.path(), &p, &good_facts()),
        "frame_size",
        Level::Warn,
    );
    assert!(c.found.contains("rx_dropped"), "{}", c.line());
}

#[test]
fn rx_vlan_offload_on_under_a_vlan_rule_fails() {
    let t = good_tree();
    let mut p = good_port();
    let facts = PortFacts {
        rx_vlan_offload: Ok(true),
        ..good_facts()
    };
    let c = only(
        &port_checks(t.path(), &p, &facts),
        "rx_vlan_offload",
        Level::Fail,
    );
    assert_eq!(c.fix.as_deref(), Some("ethtool -K eth1 rxvlan off"));
    p.vlan_rules = 0;
    only(
        &port_checks(t.path(), &p, &facts),
        "rx_vlan_offload",
        Level::Ok,
    );
    // veth strips nothing itself: a warning about the sender's side, not a failure.
    fs::remove_file(t.path().join("sys/class/net/eth1/device/driver")).unwrap();
    p.vlan_rules = 1;
    let c = only(
        &port_checks(t.path(), &p, &facts),
        "rx_vlan_offload",
        Level::Warn,
    );
    assert!(c.fix.unwrap().contains("txvlan off"));
}

#[test]
fn busy_poll_without_napi_deferral_warns() {
    let t = good_tree();
    write(t.path(), "sys/class/net/eth1/napi_defer_hard_irqs", "0\n");
    let p = good_port();
    let c = only(
        &port_checks(t.path(), &p, &good_facts()),
        "busy_poll_irq",
        Level::Warn,
    );
    assert!(c
        .fix
        .unwrap()
        .contains("echo 2 > /sys/class/net/eth1/napi_defer_hard_irqs"));
    let mut poll = p.clone();
    poll.busy_poll = false;
    only(
        &port_checks(t.path(), &poll, &good_facts()),
        "busy_poll_irq",
        Level::Ok,
    );
}

#[test]
fn workers_on_another_node_than_the_nic_warn() {
    let t = good_tree();
    let mut p = good_port();
    p.cores = vec![0, 3];
    let c = only(
        &port_checks(t.path(), &p, &good_facts()),
        "numa",
        Level::Warn,
    );
    assert!(
        c.found
            .contains("device on node 1, but workers.cores has 0 (node 0)"),
        "{}",
        c.line()
    );
    assert!(c.fix.unwrap().contains("node 1 (2-3)"));
}

#[test]
fn the_report_fails_when_one_check_fails() {
    let mut r = Report {
        checks: vec![Check::ok("kernel", "6.18")],
    };
    assert_eq!(r.worst(), Level::Ok);
    r.checks.push(Check::warn("btf", "none", "x"));
    assert_eq!(r.worst(), Level::Warn);
    r.checks.push(Check::fail("queues", "q 2", "y"));
    assert_eq!(r.worst(), Level::Fail);
    assert!(r.text().ends_with("1 ok, 1 warn, 1 fail\n"), "{}", r.text());
}

#[test]
fn a_bare_interface_is_checked_with_zero_copy_auto() {
    let cfg = super::interface_config("xdpb0", Some("xdpl-b")).unwrap();
    let p = &cfg.ports()[0];
    assert_eq!(
        (p.interface.as_str(), p.netns.as_deref()),
        ("xdpb0", Some("xdpl-b"))
    );
    assert_eq!(p.zero_copy, ZeroCopy::Auto);
    let odd = super::interface_config("we\"ird", None).unwrap();
    assert_eq!(
        odd.ports()[0].interface,
        "we\"ird",
        "the name is quoted, not spliced"
    );
}

#[test]
fn a_kernel_release_parses_to_major_minor() {
    assert_eq!(host::parse_release("6.18.0-1-amd64"), Some((6, 18)));
    assert_eq!(host::parse_release("5.4.0"), Some((5, 4)));
    assert_eq!(host::parse_release("x"), None);
}

#[test]
fn a_port_in_another_namespace_needs_cap_sys_admin() {
    let t = good_tree();
    let eff: u64 = 0x1ff_ffff_ffff & !(1 << 21);
    write(
        t.path(),
        "proc/self/status",
        &format!("CapEff:\t{eff:016x}\n"),
    );
    assert_eq!(host::capabilities(t.path(), false).level, Level::Ok);
    let c = host::capabilities(t.path(), true);
    assert_eq!(c.level, Level::Fail);
    assert!(c.found.contains("CAP_SYS_ADMIN"), "{}", c.line());
}

#[test]
fn no_config_means_the_host_checks_only() {
    let cfg = super::host_config();
    assert!(cfg.ports().is_empty());
    let t = good_tree();
    let checks = host::checks(t.path(), &cfg, &HostFacts { af_xdp: Ok(()) });
    assert_eq!(checks.len(), 8);
    assert!(checks.iter().all(|c| c.port.is_none()));
    assert_eq!(
        the(&checks, "memlock").found,
        "CAP_IPC_LOCK: the 16 MiB UMEM is not counted against RLIMIT_MEMLOCK"
    );
}
