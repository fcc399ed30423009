//! AF_XDP sockets: bind, rings, wake-ups, statistics, busy-poll.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

use serde::Serialize;

use super::desc::{RingErrors, XdpDesc};
use super::error::XskError;
use super::ring::{CompletionRing, FillRing, RxRing, TxRing};
use super::sys;
use super::umem::{self, validate_ring_size, Primary, Umem, UmemShared};

/// Settings of one socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketConfig {
    /// RX ring size (power of two).
    pub rx_size: u32,
    /// TX ring size (power of two), or 0 for a socket that only receives.
    pub tx_size: u32,
    /// Ask for zero-copy (`XDP_ZEROCOPY`); otherwise copy mode (`XDP_COPY`).
    pub zero_copy: bool,
    /// Use `XDP_USE_NEED_WAKEUP`: the kernel says (ring flags) when a syscall is needed.
    pub need_wakeup: bool,
    /// Use `XDP_USE_SG`: a frame larger than a chunk arrives (and is sent) as several
    /// descriptors, all but the last flagged `XDP_PKT_CONTD`. Without it the kernel
    /// drops such frames (`rx_dropped`).
    pub multi_buffer: bool,
    /// Copy mode: the most frames one TX wake-up (`sendto`) sends
    /// (`XDP_MAX_TX_SKB_BUDGET`, Linux 6.17), 32..=`tx_size`; 0 leaves the kernel's
    /// 32. See [`XskSocket::tx_budget`] for what the kernel made of it.
    pub tx_budget: u32,
}

/// What became of [`SocketConfig::tx_budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxBudget {
    /// Not asked for (0, or no TX ring): the kernel sends at most 32 frames per
    /// wake-up in copy mode.
    KernelDefault,
    /// The kernel took it.
    Set(u32),
    /// The kernel refused it, with this errno: `ENOPROTOOPT` before Linux 6.17,
    /// `EACCES` outside 32..=the TX ring's size. The socket works with the default.
    Refused(i32),
}

impl Default for SocketConfig {
    fn default() -> Self {
        Self {
            rx_size: 2048,
            tx_size: 2048,
            zero_copy: false,
            need_wakeup: true,
            multi_buffer: false,
            tx_budget: 0,
        }
    }
}

/// Outcome of a wake-up syscall that did not fail for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wakeup {
    /// The kernel was woken.
    Done,
    /// Transient (EAGAIN, EBUSY, ENOBUFS, EINTR): call again later.
    Retry {
        /// The errno.
        errno: i32,
    },
    /// The device is gone (ENETDOWN, then ENXIO after `ip link del`): stop using this
    /// socket and rebind when the device is back.
    DeviceGone {
        /// The errno.
        errno: i32,
    },
}

/// The kernel's per-socket counters (`XDP_STATISTICS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct XdpStatistics {
    /// Frames dropped for reasons other than invalid descriptors.
    pub rx_dropped: u64,
    /// Invalid descriptors on the fill ring.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors on the TX ring.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was empty when the kernel looked.
    pub tx_ring_empty_descs: u64,
}

/// Mutable borrows of a socket's four rings at once.
pub struct RingsMut<'a> {
    /// Fill ring.
    pub fill: &'a mut FillRing,
    /// Completion ring.
    pub completion: &'a mut CompletionRing,
    /// RX ring.
    pub rx: &'a mut RxRing,
    /// TX ring.
    pub tx: &'a mut TxRing,
}

/// An AF_XDP socket bound to one queue of one interface, with its four rings.
///
/// The first socket bound on a [`Umem`] is the socket the UMEM was registered on;
/// every later one shares the UMEM (`XDP_SHARED_UMEM`) with its own fill and
/// completion ring. Context rule: one owner thread (the queue's worker). Dropping it
/// unmaps the rings, then closes the socket. The first socket's descriptor stays open
/// (and bound) until the `Umem` and all its sockets are dropped.
pub struct XskSocket {
    // Field order is drop order: rings are unmapped before any descriptor is closed.
    fill: FillRing,
    completion: CompletionRing,
    rx: RxRing,
    tx: TxRing,
    own_fd: Option<OwnedFd>,
    umem: Arc<UmemShared>,
    ifindex: u32,
    queue: u32,
    zero_copy: bool,
    need_wakeup: bool,
    tx_budget: TxBudget,
}

impl XskSocket {
    /// Binds a socket on `umem` to queue `queue` of interface `ifindex` (in the
    /// calling thread's network namespace).
    ///
    /// Errors: [`XskError::ZeroCopyUnsupported`] (retry with `zero_copy = false`; the
    /// same `Umem` can be used), [`XskError::Busy`] (retry with backoff),
    /// [`XskError::NoSuchQueue`], [`XskError::NoDevice`], [`XskError::DeviceGone`].
    pub fn bind(
        umem: &Umem,
        ifindex: u32,
        queue: u32,
        config: &SocketConfig,
    ) -> Result<XskSocket, XskError> {
        validate_ring_size("rx", config.rx_size)?;
        if config.tx_size > 0 {
            validate_ring_size("tx", config.tx_size)?;
        }
        let shared = &umem.shared;
        let mut primary = shared.primary();
        match std::mem::replace(&mut *primary, Primary::Binding) {
            Primary::Unbound { fill, comp, rx_tx } => {
                let rx_tx = match rx_tx {
                    Some((rx, tx))
                        if rx.size() != config.rx_size || tx.size() != config.tx_size =>
                    {
                        let e = XskError::RingSizeChanged {
                            rx: rx.size(),
                            tx: tx.size(),
                        };
                        *primary = Primary::Unbound {
                            fill,
                            comp,
                            rx_tx: Some((rx, tx)),
                        };
                        return Err(e);
                    }
                    Some(rings) => rings,
                    None => match rx_and_tx(shared.fd.as_fd(), config, shared) {
                        Ok(rings) => rings,
                        Err(e) => {
                            // The socket may now hold rings we could not map; a retry
                            // will say so (EINVAL), and a new Umem is the way out.
                            *primary = Primary::Unbound {
                                fill,
                                comp,
                                rx_tx: None,
                            };
                            return Err(e);
                        }
                    },
                };
                let mut flags = if config.zero_copy {
                    libc::XDP_ZEROCOPY
                } else {
                    libc::XDP_COPY
                };
                if config.need_wakeup {
                    flags |= libc::XDP_USE_NEED_WAKEUP;
                }
                if config.multi_buffer {
                    flags |= XDP_USE_SG;
                }
                let addr = sockaddr(ifindex, queue, flags, 0);
                if let Err(e) = sys::bind_xdp(shared.fd.as_fd(), &addr) {
                    *primary = Primary::Unbound {
                        fill,
                        comp,
                        rx_tx: Some(rx_tx),
                    };
                    return Err(bind_error(e, ifindex, queue, config.zero_copy));
                }
                *primary = Primary::Bound {
                    ifindex,
                    queue,
                    netns: crate::netns::current_id().ok(),
                    zero_copy: config.zero_copy,
                    need_wakeup: config.need_wakeup,
                };
                tracing::info!(
                    ifindex,
                    queue,
                    zero_copy = config.zero_copy,
                    "bound AF_XDP socket (UMEM owner)"
                );
                let (rx, tx) = rx_tx;
                let mut sock = XskSocket {
                    fill,
                    completion: comp,
                    rx,
                    tx,
                    own_fd: None,
                    umem: shared.clone(),
                    ifindex,
                    queue,
                    zero_copy: config.zero_copy,
                    need_wakeup: config.need_wakeup,
                    tx_budget: TxBudget::KernelDefault,
                };
                sock.ask_tx_budget(config.tx_budget);
                Ok(sock)
            }
            Primary::Bound {
                ifindex: p_if,
                queue: p_q,
                netns: p_ns,
                zero_copy,
                need_wakeup,
            } => {
                *primary = Primary::Bound {
                    ifindex: p_if,
                    queue: p_q,
                    netns: p_ns,
                    zero_copy,
                    need_wakeup,
                };
                drop(primary);
                if config.zero_copy != zero_copy || config.need_wakeup != need_wakeup {
                    return Err(XskError::SharedModeMismatch {
                        primary_zero_copy: zero_copy,
                        primary_need_wakeup: need_wakeup,
                    });
                }
                // The same ifindex in another namespace is another device.
                if (p_if, p_q) == (ifindex, queue) && p_ns == crate::netns::current_id().ok() {
                    return Err(XskError::Busy { ifindex, queue });
                }
                Self::bind_shared(shared, ifindex, queue, config)
            }
            // Only left behind by a bind that panicked halfway (the lock is held
            // for the whole bind otherwise).
            Primary::Binding => Err(XskError::InvalidUmem {
                reason: "an earlier bind on this UMEM stopped halfway (panic); register a new UMEM"
                    .into(),
            }),
        }
    }

    #[cold]
    fn bind_shared(
        shared: &Arc<UmemShared>,
        ifindex: u32,
        queue: u32,
        config: &SocketConfig,
    ) -> Result<XskSocket, XskError> {
        let fd = sys::xdp_socket().map_err(|source| XskError::NoAfXdp { source })?;
        let (fill, completion) =
            umem::fill_and_completion(fd.as_fd(), &shared.config, shared.layout)?;
        let (rx, tx) = rx_and_tx(fd.as_fd(), config, shared)?;
        let addr = sockaddr(
            ifindex,
            queue,
            libc::XDP_SHARED_UMEM,
            shared.fd.as_raw_fd() as u32,
        );
        sys::bind_xdp(fd.as_fd(), &addr)
            .map_err(|e| bind_error(e, ifindex, queue, config.zero_copy))?;
        tracing::info!(ifindex, queue, "bound AF_XDP socket (shared UMEM)");
        let mut sock = XskSocket {
            fill,
            completion,
            rx,
            tx,
            own_fd: Some(fd),
            umem: shared.clone(),
            ifindex,
            queue,
            zero_copy: config.zero_copy,
            need_wakeup: config.need_wakeup,
            tx_budget: TxBudget::KernelDefault,
        };
        sock.ask_tx_budget(config.tx_budget);
        Ok(sock)
    }

    /// Asks the kernel to send up to `budget` frames per TX wake-up (0: leave it).
    /// A refusal is kept for [`tx_budget`](Self::tx_budget), not an error: the
    /// socket works as before, at 32 per wake-up.
    fn ask_tx_budget(&mut self, budget: u32) {
        if budget == 0 || self.tx.size() == 0 {
            return;
        }
        self.tx_budget =
            match sys::setsockopt(self.fd(), libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &budget) {
                Ok(()) => TxBudget::Set(budget),
                Err(e) => TxBudget::Refused(e.raw_os_error().unwrap_or(0)),
            };
    }

    /// What the kernel made of [`SocketConfig::tx_budget`].
    pub fn tx_budget(&self) -> TxBudget {
        self.tx_budget
    }

    /// The socket descriptor, for XSKMAP registration.
    pub fn fd(&self) -> BorrowedFd<'_> {
        match &self.own_fd {
            Some(fd) => fd.as_fd(),
            None => self.umem.fd.as_fd(),
        }
    }

    /// Interface index this socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Queue id this socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Whether it was bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether it was bound with `XDP_USE_NEED_WAKEUP`.
    pub fn need_wakeup(&self) -> bool {
        self.need_wakeup
    }

    /// Whether this socket shares the UMEM of another (it is not the UMEM's first).
    pub fn is_shared(&self) -> bool {
        self.own_fd.is_some()
    }

    /// The fill ring.
    pub fn fill(&mut self) -> &mut FillRing {
        &mut self.fill
    }

    /// The completion ring.
    pub fn completion(&mut self) -> &mut CompletionRing {
        &mut self.completion
    }

    /// The RX ring.
    pub fn rx(&mut self) -> &mut RxRing {
        &mut self.rx
    }

    /// The TX ring.
    pub fn tx(&mut self) -> &mut TxRing {
        &mut self.tx
    }

    /// All four rings at once.
    pub fn rings_mut(&mut self) -> RingsMut<'_> {
        RingsMut {
            fill: &mut self.fill,
            completion: &mut self.completion,
            rx: &mut self.rx,
            tx: &mut self.tx,
        }
    }

    /// Validation counters of the four rings, summed.
    pub fn ring_errors(&self) -> RingErrors {
        let mut e = self.fill.errors();
        e.merge(&self.completion.errors());
        e.merge(&self.rx.errors());
        e.merge(&self.tx.errors());
        e
    }

    /// Kicks the kernel to process the fill ring / RX (`recvfrom`, MSG_DONTWAIT).
    /// Needed when `fill().needs_wakeup()` (zero-copy); copy mode never sets it.
    pub fn wakeup_rx(&self) -> Result<Wakeup, XskError> {
        classify_wakeup(sys::wake_recv(self.fd()), "recvfrom (RX wake-up)")
    }

    /// Kicks the kernel to send the TX ring (`sendto`, MSG_DONTWAIT). Copy mode needs
    /// this after every TX batch when `tx().needs_wakeup()`.
    pub fn wakeup_tx(&self) -> Result<Wakeup, XskError> {
        classify_wakeup(sys::wake_send(self.fd()), "sendto (TX wake-up)")
    }

    /// Reads and clears the socket's pending error (SO_ERROR); `None` when there is none.
    pub fn so_error(&self) -> Result<Option<io::Error>, XskError> {
        let (err, _) = sys::getsockopt::<libc::c_int>(self.fd(), libc::SOL_SOCKET, libc::SO_ERROR)
            .map_err(|e| XskError::io("getsockopt(SO_ERROR)", e))?;
        Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
    }

    /// The kernel's counters for this socket (XDP_STATISTICS).
    pub fn statistics(&self) -> Result<XdpStatistics, XskError> {
        let (s, len) =
            sys::getsockopt::<libc::xdp_statistics>(self.fd(), libc::SOL_XDP, libc::XDP_STATISTICS)
                .map_err(|e| XskError::io("getsockopt(XDP_STATISTICS)", e))?;
        // An older kernel fills only the first three fields (the rest stay zero).
        debug_assert!(len >= std::mem::size_of::<libc::xdp_statistics_v1>());
        Ok(XdpStatistics {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }

    /// Whether the kernel reports the socket as bound in zero-copy mode (XDP_OPTIONS).
    pub fn kernel_zero_copy(&self) -> Result<bool, XskError> {
        let (o, _) =
            sys::getsockopt::<libc::xdp_options>(self.fd(), libc::SOL_XDP, libc::XDP_OPTIONS)
                .map_err(|e| XskError::io("getsockopt(XDP_OPTIONS)", e))?;
        Ok(o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
    }

    /// Turns on preferred busy-polling with `budget` frames per poll
    /// (SO_PREFER_BUSY_POLL, SO_BUSY_POLL = 20 µs, SO_BUSY_POLL_BUDGET).
    pub fn set_busy_poll(&self, budget: u16) -> Result<(), XskError> {
        let set = |opt: i32, name: &'static str, v: libc::c_int| {
            sys::setsockopt(self.fd(), libc::SOL_SOCKET, opt, &v).map_err(|source| {
                XskError::BusyPollRefused {
                    option: name,
                    source,
                }
            })
        };
        set(SO_PREFER_BUSY_POLL, "SO_PREFER_BUSY_POLL", 1)?;
        set(SO_BUSY_POLL, "SO_BUSY_POLL", BUSY_POLL_USECS)?;
        set(
            SO_BUSY_POLL_BUDGET,
            "SO_BUSY_POLL_BUDGET",
            libc::c_int::from(budget),
        )
    }

    /// The NAPI instance the kernel noted for this socket (`SO_INCOMING_NAPI_ID`),
    /// set when the first frame arrives; busy-poll can drive only a socket that has
    /// one. `None` before any frame, when the driver gives none, or on error.
    pub fn napi_id(&self) -> Option<u32> {
        match sys::getsockopt::<libc::c_uint>(self.fd(), libc::SOL_SOCKET, SO_INCOMING_NAPI_ID) {
            Ok((id, _)) if id != 0 => Some(id),
            _ => None,
        }
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd()
    }
}

impl AsRawFd for XskSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd().as_raw_fd()
    }
}

impl std::fmt::Debug for XskSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskSocket")
            .field("fd", &self.fd().as_raw_fd())
            .field("ifindex", &self.ifindex)
            .field("queue", &self.queue)
            .field("zero_copy", &self.zero_copy)
            .field("shared", &self.is_shared())
            .finish()
    }
}

/// A device's NAPI interrupt deferral (`/sys/class/net/DEV/napi_defer_hard_irqs`
/// and `gro_flush_timeout`, in ns). With `SO_PREFER_BUSY_POLL` the kernel keeps the
/// device's interrupts masked while a busy-polling application keeps up only when
/// both are non-zero; otherwise every interrupt runs the NAPI itself and busy polls
/// find the frames already taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IrqDeferral {
    /// `napi_defer_hard_irqs`.
    pub defer_hard_irqs: u32,
    /// `gro_flush_timeout`, ns.
    pub gro_flush_timeout_ns: u64,
}

impl IrqDeferral {
    /// Reads DEV's settings; `None` where sysfs has none (a device not in this sysfs).
    pub fn read(iface: &str) -> Option<IrqDeferral> {
        let dir = std::path::Path::new("/sys/class/net").join(iface);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
        IrqDeferral::parse(&read("napi_defer_hard_irqs")?, &read("gro_flush_timeout")?)
    }

    /// Both files' contents.
    pub fn parse(defer: &str, timeout: &str) -> Option<IrqDeferral> {
        Some(IrqDeferral {
            defer_hard_irqs: defer.trim().parse().ok()?,
            gro_flush_timeout_ns: timeout.trim().parse().ok()?,
        })
    }

    /// Whether interrupts stay deferred while busy-polling.
    pub fn defers(&self) -> bool {
        self.defer_hard_irqs > 0 && self.gro_flush_timeout_ns > 0
    }
}

// asm-generic/socket.h values (x86, arm, arm64, riscv, ...); libc lacks them for gnu.
const SO_BUSY_POLL: i32 = 46;
/// `XDP_USE_SG` (Linux 6.6): multi-buffer frames on this socket.
const XDP_USE_SG: u16 = 1 << 4;
const SO_INCOMING_NAPI_ID: i32 = 56;
const SO_PREFER_BUSY_POLL: i32 = 69;
const SO_BUSY_POLL_BUDGET: i32 = 70;
/// `XDP_MAX_TX_SKB_BUDGET` (Linux 6.17, SOL_XDP): frames per copy-mode TX wake-up.
const XDP_MAX_TX_SKB_BUDGET: i32 = 9;
const BUSY_POLL_USECS: libc::c_int = 20;

fn sockaddr(ifindex: u32, queue: u32, flags: u16, shared_fd: u32) -> libc::sockaddr_xdp {
    libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: shared_fd,
    }
}

fn rx_and_tx(
    fd: BorrowedFd<'_>,
    config: &SocketConfig,
    shared: &UmemShared,
) -> Result<(RxRing, TxRing), XskError> {
    umem::set_ring_size(fd, libc::XDP_RX_RING, "rx", config.rx_size)?;
    if config.tx_size > 0 {
        umem::set_ring_size(fd, libc::XDP_TX_RING, "tx", config.tx_size)?;
    }
    let off = umem::mmap_offsets(fd)?;
    let d = std::mem::size_of::<XdpDesc>();
    let rx = umem::map_ring(
        fd,
        &off.rx,
        libc::XDP_PGOFF_RX_RING as u64,
        config.rx_size,
        d,
        "mmap(RX ring)",
    )?;
    // SAFETY: offsets from XDP_MMAP_OFFSETS of this socket, size just set on it,
    // xdp_desc entries.
    let rx = unsafe { rx.into_rx(shared.layout) };
    let tx = if config.tx_size > 0 {
        let tx = umem::map_ring(
            fd,
            &off.tx,
            libc::XDP_PGOFF_TX_RING as u64,
            config.tx_size,
            d,
            "mmap(TX ring)",
        )?;
        // SAFETY: as for RX.
        unsafe { tx.into_tx() }
    } else {
        TxRing::absent()
    };
    Ok((rx, tx))
}

fn bind_error(e: io::Error, ifindex: u32, queue: u32, zero_copy: bool) -> XskError {
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) if zero_copy => XskError::ZeroCopyUnsupported { ifindex, queue },
        Some(libc::EBUSY) => XskError::Busy { ifindex, queue },
        Some(libc::ENODEV) => XskError::NoDevice { ifindex },
        Some(libc::ENXIO) | Some(libc::ENETDOWN) => XskError::DeviceGone { ifindex, source: e },
        Some(libc::EINVAL) => match sys::queue_count(ifindex) {
            Some(queues) if queue >= queues => XskError::NoSuchQueue {
                ifindex,
                queue,
                queues,
            },
            _ => XskError::InvalidArgument {
                op: "bind",
                ifindex,
                queue,
                hint: "check that the queue exists (`ethtool -l`); if an earlier bind on this \
                       UMEM failed halfway, register a new UMEM",
            },
        },
        _ => XskError::io("bind(AF_XDP)", e),
    }
}

fn classify_wakeup(r: io::Result<()>, op: &'static str) -> Result<Wakeup, XskError> {
    let e = match r {
        Ok(()) => return Ok(Wakeup::Done),
        Err(e) => e,
    };
    match e.raw_os_error() {
        Some(errno @ (libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR)) => {
            Ok(Wakeup::Retry { errno })
        }
        Some(errno @ (libc::ENETDOWN | libc::ENXIO)) => Ok(Wakeup::DeviceGone { errno }),
        _ => Err(XskError::io(op, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irq_deferral_parses_sysfs_and_needs_both_settings() {
        let d = IrqDeferral::parse("2\n", "200000\n").unwrap();
        assert_eq!(
            d,
            IrqDeferral {
                defer_hard_irqs: 2,
                gro_flush_timeout_ns: 200_000
            }
        );
        assert!(d.defers());
        assert!(!IrqDeferral::parse("0\n", "200000\n").unwrap().defers());
        assert!(!IrqDeferral::parse("2\n", "0\n").unwrap().defers());
        assert_eq!(IrqDeferral::parse("x", "0"), None);
    }

    #[test]
    fn socket_is_send_and_umem_is_shareable() {
        fn send<T: Send>() {}
        fn send_sync<T: Send + Sync>() {}
        send::<XskSocket>();
        send::<FillRing>();
        send::<RxRing>();
        send_sync::<Umem>();
    }

    #[test]
    fn wakeup_errors_are_classified() {
        let err = |n| Err(io::Error::from_raw_os_error(n));
        assert_eq!(classify_wakeup(Ok(()), "x").unwrap(), Wakeup::Done);
        for n in [libc::EAGAIN, libc::EBUSY, libc::ENOBUFS] {
            assert_eq!(
                classify_wakeup(err(n), "x").unwrap(),
                Wakeup::Retry { errno: n }
            );
        }
        for n in [libc::ENETDOWN, libc::ENXIO] {
            assert_eq!(
                classify_wakeup(err(n), "x").unwrap(),
                Wakeup::DeviceGone { errno: n }
            );
        }
        assert!(matches!(
            classify_wakeup(err(libc::EBADF), "x"),
            Err(XskError::Io { .. })
        ));
    }

    #[test]
    fn bind_errors_are_typed_with_advice() {
        let e = |n| io::Error::from_raw_os_error(n);
        let zc = bind_error(e(libc::EOPNOTSUPP), 1, 0, true);
        assert!(matches!(zc, XskError::ZeroCopyUnsupported { .. }));
        assert!(zc.to_string().contains(
            "zero-copy is not supported by this driver; use copy mode (zero_copy = false)"
        ));
        let busy = bind_error(e(libc::EBUSY), 1, 0, false);
        assert!(busy.is_retryable());
        assert!(matches!(
            bind_error(e(libc::ENODEV), 1, 0, false),
            XskError::NoDevice { ifindex: 1 }
        ));
        assert!(matches!(
            bind_error(e(libc::ENXIO), 1, 0, false),
            XskError::DeviceGone { .. }
        ));
        // EOPNOTSUPP without zero-copy is not blamed on zero-copy.
        assert!(matches!(
            bind_error(e(libc::EOPNOTSUPP), 1, 0, false),
            XskError::Io { .. }
        ));
    }
}
