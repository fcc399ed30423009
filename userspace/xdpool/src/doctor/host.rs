//! Host checks: kernel, AF_XDP, BTF, the BPF JIT, capabilities, memlock, bpffs,
//! huge pages. Each reads under `root` (`/` live, a fixture tree in tests).

use std::path::Path;

use super::{Check, HostFacts};
use crate::config::Config;

/// Oldest kernel xdpool runs on: one UMEM shared across devices and queues
/// (XDP_SHARED_UMEM between devices, 5.10) and preferred busy polling (5.11).
pub const MIN_KERNEL: (u32, u32) = (5, 11);
/// Multi-buffer AF_XDP sockets (`XDP_USE_SG`, `multi_buffer = true`).
pub const MULTI_BUFFER_KERNEL: (u32, u32) = (6, 6);

/// `CAP_IPC_LOCK`: UMEM pages are not counted against RLIMIT_MEMLOCK with it.
const CAP_IPC_LOCK: u32 = 14;
/// `CAP_SYS_ADMIN`: setns into a port's namespace.
const CAP_SYS_ADMIN: u32 = 21;

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel)).ok()
}

/// Every host check for `cfg`.
pub fn checks(root: &Path, cfg: &Config, facts: &HostFacts) -> Vec<Check> {
    let umem_bytes =
        u64::from(*cfg.umem.frames.get_ref()) * u64::from(*cfg.umem.chunk_size.get_ref());
    let multi_buffer = cfg.ports().iter().any(|p| p.multi_buffer);
    let netns = cfg.ports().iter().any(|p| p.netns.is_some());
    vec![
        kernel(root, multi_buffer),
        af_xdp(facts.af_xdp),
        btf(root),
        bpf_jit(root),
        capabilities(root, netns),
        memlock(root, umem_bytes),
        bpffs(root),
        hugepages(root, cfg.umem.hugepages, umem_bytes),
    ]
}

/// `major.minor` of a kernel release string (`6.18.0-1-amd64`).
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut it = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// The running kernel's version (`proc/sys/kernel/osrelease`).
pub fn kernel(root: &Path, multi_buffer: bool) -> Check {
    let Some(release) = read(root, "proc/sys/kernel/osrelease") else {
        return Check::warn(
            "kernel",
            "cannot read /proc/sys/kernel/osrelease",
            "mount /proc (mount -t proc proc /proc)",
        );
    };
    let release = release.trim().to_string();
    let Some(v) = parse_release(&release) else {
        return Check::warn(
            "kernel",
            format!("cannot parse the release {release:?}"),
            format!(
                "check the kernel is {}.{} or newer",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
        );
    };
    if v < MIN_KERNEL {
        return Check::fail(
            "kernel",
            format!(
                "{release}: xdpool needs {}.{}+ (one UMEM shared across devices and queues, preferred busy polling)",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
            format!("boot a kernel {}.{} or newer", MIN_KERNEL.0, MIN_KERNEL.1),
        );
    }
    if v < MULTI_BUFFER_KERNEL {
        let (m, n) = MULTI_BUFFER_KERNEL;
        let found = format!("{release}: no multi-buffer AF_XDP before {m}.{n}");
        let fix = format!("boot {m}.{n}+ for jumbo frames, or keep multi_buffer = false");
        return if multi_buffer {
            Check::fail(
                "kernel",
                format!("{found}, and a port sets multi_buffer = true"),
                fix,
            )
        } else {
            Check::warn("kernel", found, fix)
        };
    }
    Check::ok(
        "kernel",
        format!("{release}: AF_XDP shared UMEM, busy polling and multi-buffer supported"),
    )
}

/// Whether an AF_XDP socket can be opened (the kernel's CONFIG_XDP_SOCKETS).
pub fn af_xdp(probe: Result<(), i32>) -> Check {
    match probe {
        Ok(()) => Check::ok("af_xdp", "an AF_XDP socket opens"),
        Err(e) if e == libc::EAFNOSUPPORT => Check::fail(
            "af_xdp",
            "the kernel has no AF_XDP sockets (EAFNOSUPPORT)",
            "boot a kernel built with CONFIG_XDP_SOCKETS=y (every distribution kernel since 5.x has it)",
        ),
        Err(e) if e == libc::EPERM || e == libc::EACCES => Check::fail(
            "af_xdp",
            format!("opening an AF_XDP socket was refused ({})", std::io::Error::from_raw_os_error(e)),
            "run as root or with CAP_NET_RAW (see the capabilities check)",
        ),
        Err(e) => Check::fail(
            "af_xdp",
            format!("opening an AF_XDP socket failed: {}", std::io::Error::from_raw_os_error(e)),
            "check the kernel's AF_XDP support (CONFIG_XDP_SOCKETS) and this process's limits",
        ),
    }
}

/// Kernel BTF (`sys/kernel/btf/vmlinux`).
pub fn btf(root: &Path) -> Check {
    if root.join("sys/kernel/btf/vmlinux").exists() {
        Check::ok("btf", "/sys/kernel/btf/vmlinux present")
    } else {
        Check::warn(
            "btf",
            "no /sys/kernel/btf/vmlinux: the kernel was built without CONFIG_DEBUG_INFO_BTF; xdpool's program loads without it, but bpftool and tracing tools show its maps without types",
            "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian's and most distributions' are)",
        )
    }
}

/// The BPF JIT (`proc/sys/net/core/bpf_jit_enable`).
pub fn bpf_jit(root: &Path) -> Check {
    match read(root, "proc/sys/net/core/bpf_jit_enable").as_deref().map(str::trim) {
        Some("1") => Check::ok("bpf_jit", "bpf_jit_enable = 1"),
        Some("0") => Check::warn(
            "bpf_jit",
            "bpf_jit_enable = 0: the steering program runs in the interpreter, several times slower per frame",
            "sysctl -w net.core.bpf_jit_enable=1",
        ),
        Some("2") => Check::warn(
            "bpf_jit",
            "bpf_jit_enable = 2: the JIT writes every program it compiles to the kernel log (a debugging mode)",
            "sysctl -w net.core.bpf_jit_enable=1",
        ),
        Some(other) => Check::warn(
            "bpf_jit",
            format!("bpf_jit_enable = {other:?}, not 0, 1 or 2"),
            "sysctl -w net.core.bpf_jit_enable=1",
        ),
        // net.core.bpf_jit_* exist in the initial network namespace only; the
        // per-namespace entries (somaxconn) say this is another one (ip netns exec).
        None if root.join("proc/sys/net/core/somaxconn").exists() => Check::warn(
            "bpf_jit",
            "net.core.bpf_jit_enable cannot be read from this network namespace: only the initial one shows it",
            "run xdpool doctor in the initial network namespace (--netns NS checks a device in another)",
        ),
        None => Check::warn(
            "bpf_jit",
            "no /proc/sys/net/core/bpf_jit_enable: the kernel has no BPF JIT, so the steering program is interpreted",
            "boot a kernel built with CONFIG_BPF_JIT=y",
        ),
    }
}

fn cap_eff(root: &Path) -> Option<u64> {
    crate::privilege::parse_cap_eff(&read(root, "proc/self/status")?)
}

/// The capabilities `xdpool run` needs ([`crate::privilege::REQUIRED_CAPABILITIES`]), and
/// CAP_SYS_ADMIN when a port lives in another namespace.
pub fn capabilities(root: &Path, netns: bool) -> Check {
    let Some(eff) = cap_eff(root) else {
        return Check::warn(
            "capabilities",
            "cannot read CapEff from /proc/self/status",
            "mount /proc (mount -t proc proc /proc)",
        );
    };
    let mut missing = crate::privilege::missing_capabilities(eff);
    if netns && eff & (1 << CAP_SYS_ADMIN) == 0 {
        missing.push("CAP_SYS_ADMIN (setns into a port's namespace)");
    }
    if missing.is_empty() {
        return Check::ok(
            "capabilities",
            format!("CapEff {eff:016x} has every capability xdpool needs"),
        );
    }
    Check::fail(
        "capabilities",
        format!("missing {}", missing.join(", ")),
        "run as root, or grant them: setcap cap_net_admin,cap_net_raw,cap_ipc_lock,cap_bpf,cap_perfmon,cap_sys_admin+ep $(command -v xdpool) (deploy/xdpool.service grants them to the service)",
    )
}

/// The soft `Max locked memory` of `proc/self/limits`, in bytes (`None`: unlimited).
pub fn parse_memlock(limits: &str) -> Option<Option<u64>> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))?;
    let soft = line
        .trim_start_matches("Max locked memory")
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        return Some(None);
    }
    soft.parse().ok().map(Some)
}

/// Whether the UMEM can be pinned: with CAP_IPC_LOCK the kernel does not count it
/// against RLIMIT_MEMLOCK; without, the limit must hold it.
pub fn memlock(root: &Path, umem_bytes: u64) -> Check {
    let mib = |b: u64| b.div_ceil(1 << 20);
    if cap_eff(root).is_some_and(|eff| eff & (1 << CAP_IPC_LOCK) != 0) {
        return Check::ok(
            "memlock",
            format!(
                "CAP_IPC_LOCK: the {} MiB UMEM is not counted against RLIMIT_MEMLOCK",
                mib(umem_bytes)
            ),
        );
    }
    match read(root, "proc/self/limits").as_deref().and_then(parse_memlock) {
        Some(None) => Check::ok("memlock", "RLIMIT_MEMLOCK unlimited"),
        Some(Some(limit)) if limit >= umem_bytes => Check::ok(
            "memlock",
            format!("RLIMIT_MEMLOCK {} MiB holds the {} MiB UMEM", mib(limit), mib(umem_bytes)),
        ),
        Some(Some(limit)) => Check::fail(
            "memlock",
            format!(
                "RLIMIT_MEMLOCK {} KiB, the UMEM needs {} MiB, and there is no CAP_IPC_LOCK",
                limit / 1024,
                mib(umem_bytes)
            ),
            "run as root or with CAP_IPC_LOCK, or raise the limit (ulimit -l unlimited; LimitMEMLOCK=infinity under systemd)",
        ),
        None => Check::warn(
            "memlock",
            "cannot read Max locked memory from /proc/self/limits",
            "mount /proc (mount -t proc proc /proc)",
        ),
    }
}

/// The BPF filesystem on /sys/fs/bpf (`proc/self/mounts`).
pub fn bpffs(root: &Path) -> Check {
    let Some(mounts) = read(root, "proc/self/mounts") else {
        return Check::warn(
            "bpffs",
            "cannot read /proc/self/mounts",
            "mount /proc (mount -t proc proc /proc)",
        );
    };
    let bpf = mounts.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 3 && f[1] == "/sys/fs/bpf" && f[2] == "bpf"
    });
    if bpf {
        Check::ok("bpffs", "bpf filesystem mounted on /sys/fs/bpf")
    } else {
        Check::warn(
            "bpffs",
            "no bpf filesystem on /sys/fs/bpf: xdpool runs without it (it pins nothing); bpftool and xdp-loader want it",
            "mount -t bpf bpf /sys/fs/bpf (or `make setup`)",
        )
    }
}

/// Free huge pages for the UMEM when `umem.hugepages = true` (`proc/meminfo`).
pub fn hugepages(root: &Path, asked: bool, umem_bytes: u64) -> Check {
    if !asked {
        return Check::ok("hugepages", "not asked (umem.hugepages = false)");
    }
    let meminfo = read(root, "proc/meminfo").unwrap_or_default();
    let field = |name: &str| -> Option<u64> {
        let l = meminfo.lines().find(|l| l.starts_with(name))?;
        l[name.len()..].split_whitespace().next()?.parse().ok()
    };
    let (Some(free), Some(size_kib)) = (field("HugePages_Free:"), field("Hugepagesize:")) else {
        return Check::warn(
            "hugepages",
            "umem.hugepages = true but /proc/meminfo shows no huge pages: the UMEM falls back to normal pages",
            "boot a kernel with CONFIG_HUGETLBFS, or set umem.hugepages = false",
        );
    };
    let page = size_kib * 1024;
    let need = umem_bytes.div_ceil(page);
    if free >= need {
        Check::ok(
            "hugepages",
            format!("{free} free huge pages of {size_kib} KiB; the UMEM needs {need}"),
        )
    } else {
        Check::warn(
            "hugepages",
            format!("{free} free huge pages of {size_kib} KiB, the UMEM needs {need}: it falls back to normal pages"),
            format!(
                "raise vm.nr_hugepages by {} (sysctl -w vm.nr_hugepages=N), or set umem.hugepages = false",
                need - free
            ),
        )
    }
}
