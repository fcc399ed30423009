//! Errors of the AF_XDP layer. Every message says what to do next.

use std::io;

/// An AF_XDP socket, UMEM or ring operation failed.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    /// A ring size is not a power of two in the accepted range.
    #[error("{ring} ring size {size} is invalid: use a power of two between 1 and {max}")]
    InvalidRingSize {
        /// Which ring ("fill", "completion", "rx", "tx").
        ring: &'static str,
        /// The size given.
        size: u32,
        /// The largest accepted size.
        max: u32,
    },

    /// The UMEM parameters cannot be registered.
    #[error("invalid UMEM: {reason}")]
    InvalidUmem {
        /// What is wrong and what is valid.
        reason: String,
    },

    /// The kernel has no AF_XDP support.
    #[error("cannot create an AF_XDP socket ({source}): the kernel needs CONFIG_XDP_SOCKETS=y (Linux >= 5.10)")]
    NoAfXdp {
        /// The socket(2) error.
        source: io::Error,
    },

    /// The kernel lacks a needed AF_XDP feature.
    #[error("kernel too old: {what}; xdpool needs Linux >= 5.10")]
    KernelTooOld {
        /// The missing feature.
        what: &'static str,
    },

    /// UMEM registration was refused for lack of lockable memory.
    #[error(
        "UMEM registration of {len} bytes was refused ({source}): for a process without \
         CAP_IPC_LOCK it counts against RLIMIT_MEMLOCK (now {limit}); run as root with \
         CAP_IPC_LOCK, or register a smaller UMEM, or raise the limit (`ulimit -l`)"
    )]
    MemlockRefused {
        /// Bytes we tried to register.
        len: usize,
        /// RLIMIT_MEMLOCK as text.
        limit: String,
        /// ENOMEM, ENOBUFS or EPERM.
        source: io::Error,
    },

    /// The driver cannot do zero-copy on this queue.
    #[error(
        "zero-copy is not supported by this driver; use copy mode (zero_copy = false) \
         (ifindex {ifindex}, queue {queue})"
    )]
    ZeroCopyUnsupported {
        /// Interface index.
        ifindex: u32,
        /// Queue id.
        queue: u32,
    },

    /// The queue already has an AF_XDP socket (possibly one being torn down).
    #[error(
        "ifindex {ifindex} queue {queue} is busy (EBUSY): another AF_XDP socket is bound to it, \
         or a closed one is still being torn down by the kernel; retry with backoff, or stop \
         the other user of this queue"
    )]
    Busy {
        /// Interface index.
        ifindex: u32,
        /// Queue id.
        queue: u32,
    },

    /// The queue id does not exist on the interface.
    #[error(
        "ifindex {ifindex} has no queue {queue} (it has {queues}): bind to a queue below \
         {queues}, or add channels (`ethtool -L`; veth: `numrxqueues`/`numtxqueues`)"
    )]
    NoSuchQueue {
        /// Interface index.
        ifindex: u32,
        /// Queue id asked for.
        queue: u32,
        /// Queues the interface has.
        queues: u32,
    },

    /// No interface with this index in the current network namespace.
    #[error(
        "no interface with index {ifindex} in this network namespace (ENODEV): check the \
         interface name and that the process runs in the interface's namespace"
    )]
    NoDevice {
        /// Interface index.
        ifindex: u32,
    },

    /// The device went away (ENXIO / ENETDOWN).
    #[error(
        "the device of ifindex {ifindex} is gone ({source}): it was deleted, unbound or moved; \
         close this socket and bind a new one when the device is back"
    )]
    DeviceGone {
        /// Interface index.
        ifindex: u32,
        /// ENXIO or ENETDOWN.
        source: io::Error,
    },

    /// The kernel rejected an argument (EINVAL).
    #[error("{op} on ifindex {ifindex} queue {queue} was rejected as invalid (EINVAL): {hint}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// Interface index.
        ifindex: u32,
        /// Queue id.
        queue: u32,
        /// What to check.
        hint: &'static str,
    },

    /// A shared-UMEM socket was asked for a mode other than the first socket's.
    #[error(
        "a shared-UMEM socket inherits its mode from the first socket bound on the UMEM \
         (zero_copy = {primary_zero_copy}, need_wakeup = {primary_need_wakeup}); use the same \
         settings, or register a separate UMEM"
    )]
    SharedModeMismatch {
        /// The first socket's zero-copy setting.
        primary_zero_copy: bool,
        /// The first socket's need_wakeup setting.
        primary_need_wakeup: bool,
    },

    /// A retried bind of the UMEM's first socket asked for other RX/TX ring sizes.
    #[error(
        "the UMEM's first socket already has RX/TX rings of {rx}/{tx} entries from an earlier \
         failed bind; retry with the same sizes, or register a new UMEM"
    )]
    RingSizeChanged {
        /// RX ring size already set.
        rx: u32,
        /// TX ring size already set.
        tx: u32,
    },

    /// Busy-poll settings were refused.
    #[error(
        "busy-poll option {option} was refused ({source}): a budget above 64 needs \
         CAP_NET_ADMIN; run as root or lower the budget, or run without busy-poll"
    )]
    BusyPollRefused {
        /// The socket option name.
        option: &'static str,
        /// The setsockopt error.
        source: io::Error,
    },

    /// Any other system call failure.
    #[error("{op} failed: {source}; check `dmesg` and the interface state")]
    Io {
        /// The operation.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

impl XskError {
    /// Whether retrying the same call later may succeed (EBUSY on bind).
    pub fn is_retryable(&self) -> bool {
        matches!(self, XskError::Busy { .. })
    }

    pub(crate) fn io(op: &'static str, source: io::Error) -> Self {
        XskError::Io { op, source }
    }
}
