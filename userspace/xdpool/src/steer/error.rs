//! Errors of the steering loader; each message says what to do next.

use std::io;

/// Why loading, configuring or attaching the XDP program failed.
#[derive(Debug, thiserror::Error)]
pub enum SteerError {
    /// The kernel refused for lack of privileges.
    #[error(
        "{what}: permission denied; run as root (needs CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON)"
    )]
    NotPermitted {
        /// The operation that was refused.
        what: &'static str,
    },
    /// The embedded BPF object could not be loaded (maps, BTF, relocations).
    #[error("loading the XDP object failed: {0}; check that the kernel has BPF and BTF enabled")]
    Object(#[source] aya::EbpfError),
    /// The verifier or the kernel refused a program.
    #[error("loading XDP program {name} failed: {source}; the kernel may be too old (needs 5.x with bpf_link)")]
    Program {
        /// Program name in the object.
        name: &'static str,
        /// The loader's error (includes the verifier log).
        #[source]
        source: aya::programs::ProgramError,
    },
    /// A map the program declares was not found or has the wrong type.
    #[error("map {name}: {source}; the embedded object and this binary disagree, rebuild xdpool")]
    Map {
        /// Map name.
        name: &'static str,
        /// The map error.
        #[source]
        source: aya::maps::MapError,
    },
    /// No interface has this index.
    #[error("no network interface with index {ifindex}; check the name with `ip link`")]
    InterfaceMissing {
        /// The interface index asked for.
        ifindex: u32,
    },
    /// The driver refused the XDP mode.
    #[error("interface {ifindex} refused XDP in {mode} mode ({source}); try --xdp-mode skb")]
    ModeRefused {
        /// The interface.
        ifindex: u32,
        /// The mode asked for.
        mode: &'static str,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// Another XDP program is already attached.
    #[error(
        "interface {ifindex} already has an XDP program (id {prog_id:?}); stop its owner or remove it with `ip link set dev <if> xdp off`"
    )]
    AlreadyAttached {
        /// The interface.
        ifindex: u32,
        /// The program found there, when known.
        prog_id: Option<u32>,
    },
    /// `attach` was called twice without `detach`.
    #[error("the steering program is already attached to interface {ifindex}; detach it first")]
    AttachedHere {
        /// Where it is attached.
        ifindex: u32,
    },
    /// `detach` without an attachment.
    #[error("the steering program is not attached; call attach first")]
    NotAttached,
    /// Attaching failed for another reason.
    #[error("attaching XDP to interface {ifindex} failed: {source}")]
    Attach {
        /// The interface.
        ifindex: u32,
        /// The kernel's answer.
        #[source]
        source: io::Error,
    },
    /// More rules than the map holds.
    #[error("{given} steering rules given, at most {max} fit; merge rules or use prefixes and port ranges")]
    TooManyRules {
        /// Rules given.
        given: usize,
        /// The limit.
        max: usize,
    },
    /// A rule that can never match.
    #[error("rule {index}: {reason}")]
    InvalidRule {
        /// Position in the list.
        index: usize,
        /// What to fix.
        reason: &'static str,
    },
    /// Queue index beyond the XSKMAP.
    #[error("queue {queue} is beyond the {max} queues the XSKMAP holds; use fewer queues")]
    QueueOutOfRange {
        /// The queue.
        queue: u32,
        /// XSKMAP size.
        max: u32,
    },
    /// Registering an AF_XDP socket failed.
    #[error("registering the AF_XDP socket of queue {queue} failed: {source}; the fd must be a bound AF_XDP socket")]
    Xsk {
        /// The queue.
        queue: u32,
        /// The map error.
        #[source]
        source: aya::maps::MapError,
    },
    /// `BPF_PROG_TEST_RUN` cannot run a frame shorter than an Ethernet header.
    #[error("BPF_PROG_TEST_RUN needs at least {min} bytes, the frame has {len}; the kernel refuses shorter input")]
    FrameTooShortForTestRun {
        /// Frame length given.
        len: usize,
        /// The kernel's minimum.
        min: usize,
    },
    /// `BPF_PROG_TEST_RUN` failed.
    #[error("BPF_PROG_TEST_RUN failed: {0}; frames must be at most about 3.5 KiB")]
    TestRun(#[source] aya::programs::ProgramError),
    /// The embedded object lacks something this binary expects.
    #[error("{what} {name} is missing from the embedded XDP object; rebuild xdpool")]
    MissingInObject {
        /// "program" or "map".
        what: &'static str,
        /// Its name.
        name: &'static str,
    },
    /// A system call failed.
    #[error("{what} failed: {source}")]
    Kernel {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A benchmark subject gave another verdict than the one it is measured for.
    #[error("bench steer: {subject} answered XDP action {action} on the {frame} frame, not XDP_PASS (2); the program or the benchmark's rules are wrong")]
    BenchVerdict {
        /// Subject name.
        subject: &'static str,
        /// Frame kind.
        frame: &'static str,
        /// The action returned.
        action: u32,
    },
    /// Netlink query failed.
    #[error("netlink query failed: {0}")]
    Netlink(#[source] io::Error),
}
