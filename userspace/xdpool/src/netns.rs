//! Network namespaces by name (`/run/netns/NAME`, as `ip netns add` makes them).
//!
//! We switch the *current thread* with `setns(2)` instead of using `ip netns exec`:
//! the latter remounts /sys and hides the bpf filesystem, setns does neither. A
//! namespace is per thread, so [`NetnsGuard`] is `!Send`: it must be dropped on the
//! thread that entered.
use std::ffi::CString;
use std::fs::File;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use nix::sched::{setns, CloneFlags};

/// Directory where iproute2 keeps named network namespaces.
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// Errors from namespace and interface operations.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The named namespace does not exist (or cannot be opened).
    #[error("cannot open network namespace {name:?} at {path}: {source}; create it first (`xdpool lab up`) or check the name")]
    Open {
        /// Namespace name.
        name: String,
        /// Path that was opened.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The current thread's namespace could not be opened (to return to it later).
    #[error("cannot open this thread's network namespace: {0}; is /proc mounted?")]
    Current(std::io::Error),
    /// `setns` failed, usually for lack of CAP_SYS_ADMIN.
    #[error("setns into network namespace {name:?} failed: {source}; run as root")]
    Setns {
        /// Namespace name (or "original" when returning).
        name: String,
        /// Underlying error.
        source: nix::Error,
    },
    /// No interface of that name in the namespace.
    #[error("no interface {dev:?} in network namespace {netns}; check `ip -n {netns} link` (is the lab up?)")]
    NoSuchInterface {
        /// Interface name.
        dev: String,
        /// Namespace name, or "current".
        netns: String,
    },
    /// An ethtool ioctl failed.
    #[error(
        "ethtool {what} on {dev:?} failed: {source}; run as root, and check the device exists"
    )]
    Ethtool {
        /// What was being set.
        what: &'static str,
        /// Interface name.
        dev: String,
        /// Underlying error.
        source: std::io::Error,
    },
}

/// Path of a named namespace.
pub fn netns_path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_RUN_DIR).join(name)
}

/// Whether a named namespace exists.
pub fn exists(name: &str) -> bool {
    netns_path(name).exists()
}

/// While alive, the current thread is inside another network namespace; on drop it
/// returns to the namespace it came from. Not `Send`: namespaces are per thread.
#[derive(Debug)]
pub struct NetnsGuard {
    original: File,
    name: String,
    _not_send: PhantomData<*const ()>,
}

impl NetnsGuard {
    /// Name of the namespace this guard entered.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.original, CloneFlags::CLONE_NEWNET) {
            // Nothing sane to do but report: the thread stays in the lab namespace.
            tracing::error!(netns = %self.name, error = %e, "could not return to the original network namespace");
        }
    }
}

/// Moves the current thread into the named namespace until the guard drops.
pub fn enter(name: &str) -> Result<NetnsGuard, NetnsError> {
    let path = netns_path(name);
    let target = File::open(&path).map_err(|source| NetnsError::Open {
        name: name.to_string(),
        path,
        source,
    })?;
    let original = File::open("/proc/thread-self/ns/net").map_err(NetnsError::Current)?;
    setns(&target, CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Setns {
        name: name.to_string(),
        source,
    })?;
    Ok(NetnsGuard {
        original,
        name: name.to_string(),
        _not_send: PhantomData,
    })
}

/// Moves the current thread into the named namespace for good (for worker threads
/// that live there). `None` leaves the thread where it is.
pub fn enter_forever(name: Option<&str>) -> Result<(), NetnsError> {
    if let Some(name) = name {
        let guard = enter(name)?;
        let NetnsGuard { original, .. } = &guard;
        if let Ok(f) = original.try_clone() {
            let _ = ORIGINAL.set(f);
        }
        std::mem::forget(guard);
    }
    Ok(())
}

/// Which namespace a path names: the (device, inode) of the nsfs file, as
/// `ip netns identify` compares them.
pub type NetnsId = (u64, u64);

/// The namespace `/run/netns/NAME` names now; `None` when there is no such name
/// (deleted).
pub fn named_id(name: &str) -> Option<NetnsId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(netns_path(name))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// The namespace the calling thread is in.
pub fn current_id() -> std::io::Result<NetnsId> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net").map(|m| (m.dev(), m.ino()))
}

/// Moves the calling thread, for good, into the namespace now called `name` (after
/// the one it was in was deleted and a new one made under that name). Threads it
/// starts later start there; sockets already open stay where they were made.
pub fn reenter(name: &str) -> Result<(), NetnsError> {
    let path = netns_path(name);
    let target = File::open(&path).map_err(|source| NetnsError::Open {
        name: name.to_string(),
        path,
        source,
    })?;
    setns(&target, CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Setns {
        name: name.to_string(),
        source,
    })
}

/// The namespace one or more ports live in: the incarnation xdpool works in (an open
/// nsfs file, so it stays the same namespace when `/run/netns/NAME` is replaced), and
/// the name it was opened by (`None`: the namespace xdpool was started in).
///
/// Every socket is bound to a device looked up in the namespace current when the
/// socket was made (`socket(2)`), and rtnetlink, ethtool and bpf_link attach speak to
/// the caller's namespace: each per-port step runs inside [`PortNetns::enter`].
#[derive(Debug)]
pub struct PortNetns {
    name: Option<String>,
    file: File,
    id: NetnsId,
}

impl PortNetns {
    /// The namespace named `name` now (`None`: the calling thread's, which must be
    /// the one xdpool started in).
    pub fn open(name: Option<&str>) -> Result<PortNetns, NetnsError> {
        use std::os::unix::fs::MetadataExt;
        let (path, label) = match name {
            Some(n) => (netns_path(n), n.to_string()),
            None => (
                PathBuf::from("/proc/thread-self/ns/net"),
                "(started in)".to_string(),
            ),
        };
        let file = File::open(&path).map_err(|source| NetnsError::Open {
            name: label.clone(),
            path: path.clone(),
            source,
        })?;
        let meta = file.metadata().map_err(|source| NetnsError::Open {
            name: label,
            path,
            source,
        })?;
        Ok(PortNetns {
            name: name.map(str::to_string),
            file,
            id: (meta.dev(), meta.ino()),
        })
    }

    /// The name (`None`: where xdpool started).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Which namespace this is (compare with [`named_id`]).
    pub fn id(&self) -> NetnsId {
        self.id
    }

    /// For logs and errors: the name, or "the namespace xdpool started in".
    pub fn label(&self) -> &str {
        self.name
            .as_deref()
            .unwrap_or("the namespace xdpool started in")
    }

    /// Moves the calling thread into this namespace until the guard drops (nothing
    /// to do when it is there already). Sockets made meanwhile stay in it.
    pub fn enter(&self) -> Result<Option<NetnsGuard>, NetnsError> {
        if current_id().ok() == Some(self.id) {
            return Ok(None);
        }
        let original = File::open("/proc/thread-self/ns/net").map_err(NetnsError::Current)?;
        let name = self.label().to_string();
        setns(&self.file, CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Setns {
            name: name.clone(),
            source,
        })?;
        Ok(Some(NetnsGuard {
            original,
            name,
            _not_send: PhantomData,
        }))
    }

    /// Runs `f` inside this namespace.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> Result<T, NetnsError> {
        let _guard = self.enter()?;
        Ok(f())
    }

    /// Follows the name to the namespace it names now (after the old one was
    /// replaced); the old one is let go.
    pub fn reopen(&mut self) -> Result<(), NetnsError> {
        let Some(name) = self.name.clone() else {
            return Ok(());
        };
        *self = PortNetns::open(Some(&name))?;
        Ok(())
    }
}

/// The namespace the process started in, saved by the first [`enter_forever`].
static ORIGINAL: std::sync::OnceLock<File> = std::sync::OnceLock::new();

/// Runs `f` in the namespace the process started in (before [`enter_forever`] moved
/// it), on a short-lived thread; sockets created there stay in that namespace. Used
/// so that the stats endpoint is reachable where the user started xdpool, not inside
/// the lab's namespace. Runs `f` in place when the process never moved.
pub fn in_original_netns<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    match ORIGINAL.get() {
        None => f(),
        Some(orig) => std::thread::scope(|s| {
            s.spawn(|| {
                if let Err(e) = setns(orig, CloneFlags::CLONE_NEWNET) {
                    tracing::warn!(error = %e, "could not return to the original namespace; binding where we are");
                }
                f()
            })
            .join()
            .expect("thread in the original namespace panicked")
        }),
    }
}

/// Runs `f` with the current thread inside the named namespace, then returns.
pub fn in_netns<T>(name: &str, f: impl FnOnce() -> T) -> Result<T, NetnsError> {
    let _guard = enter(name)?;
    Ok(f())
}

/// Interface index of `dev` in the current thread's namespace.
pub fn ifindex(dev: &str) -> Result<u32, NetnsError> {
    nix::net::if_::if_nametoindex(dev).map_err(|_| NetnsError::NoSuchInterface {
        dev: dev.to_string(),
        netns: "current".to_string(),
    })
}

/// Interface index of `dev` inside the named namespace (`None`: the current one).
pub fn ifindex_in(netns: Option<&str>, dev: &str) -> Result<u32, NetnsError> {
    match netns {
        None => ifindex(dev),
        Some(ns) => in_netns(ns, || ifindex(dev))?.map_err(|_| NetnsError::NoSuchInterface {
            dev: dev.to_string(),
            netns: ns.to_string(),
        }),
    }
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_SGRO: u32 = 0x0000_002c;
const ETHTOOL_GGRO: u32 = 0x0000_002b;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}
const _: () = assert!(std::mem::size_of::<EthtoolValue>() == 8);

/// `struct ifreq` with the `ifr_data` member of its union (40 bytes on 64-bit).
#[repr(C)]
struct IfreqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}
const _: () = assert!(std::mem::size_of::<IfreqData>() == std::mem::size_of::<libc::ifreq>());

fn ethtool_value(dev: &str, cmd: u32, data: u32, what: &'static str) -> Result<u32, NetnsError> {
    let mut value = EthtoolValue { cmd, data };
    ethtool_ioctl(dev, &mut value, what)?;
    Ok(value.data)
}

const ETHTOOL_GCHANNELS: u32 = 0x0000_003c;

/// `struct ethtool_channels` (linux/ethtool.h).
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
pub(crate) struct EthtoolChannels {
    cmd: u32,
    pub(crate) max_rx: u32,
    pub(crate) max_tx: u32,
    pub(crate) max_other: u32,
    pub(crate) max_combined: u32,
    pub(crate) rx_count: u32,
    pub(crate) tx_count: u32,
    pub(crate) other_count: u32,
    pub(crate) combined_count: u32,
}
const _: () = assert!(std::mem::size_of::<EthtoolChannels>() == 36);

/// A device's RX queues (ethtool's channels: combined plus RX-only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxQueues {
    /// RX queues the device has now (`ethtool -l`'s current combined + rx).
    pub now: u32,
    /// The most it can have (the pre-set maximums).
    pub max: u32,
}

/// `dev`'s RX queue counts in the current namespace (`ethtool -l DEV`). Fails with
/// EOPNOTSUPP on devices without channels (one queue, then).
pub fn rx_queues(dev: &str) -> Result<RxQueues, NetnsError> {
    let ch = channels(dev)?;
    Ok(RxQueues {
        now: (ch.combined_count + ch.rx_count).max(1),
        max: (ch.max_combined + ch.max_rx).max(1),
    })
}

/// `dev`'s channels in the current namespace (ETHTOOL_GCHANNELS, `ethtool -l DEV`).
pub(crate) fn channels(dev: &str) -> Result<EthtoolChannels, NetnsError> {
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    ethtool_ioctl(dev, &mut ch, "get channels")?;
    Ok(ch)
}

/// SIOCETHTOOL on `dev` with `value` as the command block (its first u32 is the command).
fn ethtool_ioctl<T>(dev: &str, value: &mut T, what: &'static str) -> Result<(), NetnsError> {
    let err = |source| NetnsError::Ethtool {
        what,
        dev: dev.to_string(),
        source,
    };
    let cname = CString::new(dev).map_err(|_| err(std::io::ErrorKind::InvalidInput.into()))?;
    if cname.as_bytes().len() >= libc::IFNAMSIZ {
        return Err(err(std::io::ErrorKind::InvalidInput.into()));
    }
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(err(std::io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh, valid descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfreqData {
        name: [0; libc::IFNAMSIZ],
        data: (value as *mut T).cast(),
        _pad: [0; 16],
    };
    for (dst, src) in req.name.iter_mut().zip(cname.as_bytes()) {
        *dst = *src as libc::c_char;
    }
    // SAFETY: req is a valid ifreq whose ifr_data points at `value`, which outlives
    // the call; the callers pass the kernel's struct for the command in `value`
    // (EthtoolValue or EthtoolChannels, sizes asserted), and SIOCETHTOOL reads and
    // writes only req and that struct.
    let rc = unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            SIOCETHTOOL as _,
            &mut req as *mut IfreqData,
        )
    };
    if rc < 0 {
        return Err(err(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Turns GRO on or off for `dev` in the current namespace (ethtool's `-K DEV gro`).
pub fn set_gro(dev: &str, on: bool) -> Result<(), NetnsError> {
    ethtool_value(dev, ETHTOOL_SGRO, u32::from(on), "set gro").map(|_| ())
}

const ETHTOOL_GFLAGS: u32 = 0x0000_0025;
/// `ETH_FLAG_RXVLAN` of ETHTOOL_GFLAGS: the NIC strips the VLAN tag on receive.
const ETH_FLAG_RXVLAN: u32 = 1 << 8;

/// Whether rx-vlan-offload (`ethtool -k DEV`'s rxvlan) is on for `dev` in the current
/// namespace: the device takes the outer tag off before XDP sees the frame.
pub fn rx_vlan_offload(dev: &str) -> Result<bool, NetnsError> {
    ethtool_value(dev, ETHTOOL_GFLAGS, 0, "get flags").map(|v| v & ETH_FLAG_RXVLAN != 0)
}

/// Whether GRO is on for `dev` in the current namespace.
pub fn gro(dev: &str) -> Result<bool, NetnsError> {
    ethtool_value(dev, ETHTOOL_GGRO, 0, "get gro").map(|v| v != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_namespace_is_a_named_error() {
        let err = enter("xdpool-no-such-namespace-for-test").unwrap_err();
        assert!(matches!(err, NetnsError::Open { .. }), "{err}");
        assert!(err.to_string().contains("xdpool lab up"));
    }

    #[test]
    fn the_started_namespace_is_the_current_one_and_entering_it_changes_nothing() {
        let here = PortNetns::open(None).unwrap();
        assert_eq!(Some(here.id()), current_id().ok());
        assert_eq!(
            (here.name(), here.label()),
            (None, "the namespace xdpool started in")
        );
        assert!(
            here.enter().unwrap().is_none(),
            "no setns into the namespace the thread is in"
        );
        assert_eq!(here.run(|| 7).unwrap(), 7);
        let err = PortNetns::open(Some("xdpool-no-such-namespace-for-test")).unwrap_err();
        assert!(matches!(err, NetnsError::Open { .. }), "{err}");
    }

    #[test]
    fn loopback_has_an_index_and_unknown_names_do_not() {
        assert!(ifindex("lo").unwrap() >= 1);
        let err = ifindex("xdpnonexist0").unwrap_err();
        assert!(matches!(err, NetnsError::NoSuchInterface { .. }));
    }
}
