//! The borrowed view of one received frame that a packet function works on.

use super::{PortRef, Verdict};
use crate::wire;
use std::cell::Cell;
use std::fmt;

/// One received frame, lent to a handler for the length of one call.
///
/// The view covers the frame's bytes inside its UMEM chunk; the chunk's room
/// before and after them can be taken with [`push_head`](Self::push_head) and
/// [`push_tail`](Self::push_tail) (encapsulation, a VLAN tag) and given back with
/// [`pull_head`](Self::pull_head) and [`trim_tail`](Self::trim_tail). Every access
/// is bounds-checked: no input makes a method panic, and none reaches outside the
/// chunk.
///
/// A `Packet` cannot be kept past its call (it borrows the frame):
///
/// ```compile_fail
/// # use xdpool::{Packet, Verdict};
/// let mut kept: Option<&[u8]> = None;
/// let f = |pkt: &mut Packet<'_>| {
///     kept = Some(pkt.bytes());
///     Verdict::drop()
/// };
/// ```
///
/// Nor can it leave its worker's thread, even borrowed (what [`parse`](Self::parse)
/// returns may come from that thread's lookup):
///
/// ```compile_fail
/// fn elsewhere<T: Sync>(_: &T) {}
/// let f = |pkt: &mut xdpool::Packet<'_>| {
///     elsewhere(pkt);
///     xdpool::Verdict::drop()
/// };
/// ```
pub struct Packet<'a> {
    chunk: &'a mut [u8],
    head: usize,
    tail: usize,
    meta: Meta<'a>,
    emit: Option<&'a mut (dyn Emit + 'a)>,
    /// The frame was kept ([`keep`](Self::keep)): the verdict does not apply to it.
    kept: bool,
}

thread_local! {
    /// The worker's parse of the frame it is looking up or lending to a handler on
    /// this thread, when that frame's verdict is a `call` and the lookup parsed it
    /// (`Classifier::classify`): what [`Packet::parse`] returns while the frame is
    /// unchanged. Cleared by every change to the frame and by the worker after the
    /// call (and after a multi-buffer frame's lookup), so it is `None` at every
    /// other time and never another frame's. Per thread, not per lane: a worker
    /// thread has one frame in hand at a time (and a `Packet` is neither `Send` nor
    /// `Sync`), and the lookup then takes no argument more; a per-lane slot passed
    /// down to it cost a built-in action's frame 4 instructions under a list whose
    /// verdicts differ.
    static PARSED: Cell<Option<wire::Parsed>> = const { Cell::new(None) };
}

/// Keeps `p`, the parse of the frame a `call` verdict was just found for, for its
/// handler's [`Packet::parse`]. The caller clears it after the call
/// ([`forget_parse`]).
#[inline]
pub(crate) fn keep_parse(p: wire::Parsed) {
    PARSED.with(|c| c.set(Some(p)));
}

/// The kept parse, if any (for tests of who keeps one).
#[cfg(test)]
pub(crate) fn kept_parse() -> Option<wire::Parsed> {
    PARSED.with(Cell::get)
}

/// Drops the kept parse: the frame changed, or its call is over.
#[inline(always)]
pub(crate) fn forget_parse() {
    PARSED.with(|c| c.set(None));
}

/// Where [`Packet::emit`] puts a new frame (the worker's pool and queues).
pub(crate) trait Emit {
    fn emit(&mut self, to: PortRef, frame: &[u8]) -> Result<(), EmitError>;
    fn keep(&mut self) -> Option<super::Kept>;
    fn send_kept(&mut self, kept: super::Kept, verdict: super::Verdict) -> Result<(), EmitError>;
}

/// Why [`Packet::emit`] sent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitError {
    /// The port was not declared by the handler (nor is it the arrival port).
    UndeclaredPort,
    /// Shorter than an Ethernet header (14 bytes) or longer than a chunk.
    Length(usize),
    /// The lane's pool has no memory for it now (counted `no_frag_memory`).
    NoMemory,
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmitError::UndeclaredPort => f.write_str("the port was not declared by the handler"),
            EmitError::Length(n) => write!(f, "{n} bytes: a frame is 14 bytes to a chunk long"),
            EmitError::NoMemory => f.write_str("no frame memory left in the lane's pool"),
        }
    }
}

impl std::error::Error for EmitError {}

/// Where a frame came from and which rule sent it to the handler.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meta<'a> {
    pub port: PortRef,
    pub queue: u32,
    /// The `call` rule that sent the frame here.
    pub rule: Option<RuleOf<'a>>,
}

/// A lane's rule by its position, looked up only when the handler asks for its
/// name or `arg` (most never do).
#[derive(Clone, Copy)]
pub(crate) struct RuleOf<'a> {
    pub rules: &'a crate::worker::rules::LaneRules,
    pub index: u16,
}

impl<'a> RuleOf<'a> {
    #[inline]
    fn spec(self) -> Option<&'a crate::config::CallSpec> {
        self.rules
            .last_set()
            .classifier
            .rule(self.index as usize)?
            .call
            .as_ref()
    }
}

impl std::fmt::Debug for RuleOf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuleOf")
            .field("index", &self.index)
            .finish()
    }
}

/// The chunk has not that much room, or the frame not that many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom {
    /// Bytes asked for.
    pub asked: usize,
    /// Bytes there were.
    pub room: usize,
}

impl fmt::Display for NoRoom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes asked, {} available", self.asked, self.room)
    }
}

impl std::error::Error for NoRoom {}

/// The frame has no header for that rewrite, or one whose checksums the rewrite
/// could not keep right; it was left unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoHeader {
    /// Not an IPv4 packet (or its headers do not parse).
    Ipv4,
    /// No UDP or TCP header: another protocol, a fragment after the first, or headers
    /// that do not parse.
    Ports,
    /// A checksum over the address that the setter does not update, so it refuses
    /// rather than leave that checksum wrong: UDP-Lite or DCCP (their pseudo-header
    /// holds the addresses too, in a header the setter does not read), or, for the
    /// destination of a UDP or TCP frame, an IPv4 source route still under way (the
    /// sender's checksum then holds the route's last address, not the header's
    /// destination: which one a rewrite should change is the handler's call).
    Unsupported,
}

impl fmt::Display for NoHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NoHeader::Ipv4 => "not an IPv4 packet (or its headers do not parse)",
            NoHeader::Ports => {
                "no UDP or TCP header (another protocol, a later fragment, or headers that do not parse)"
            }
            NoHeader::Unsupported => {
                "a checksum over the address this rewrite does not update (UDP-Lite, DCCP, or an IPv4 source route under way)"
            }
        })
    }
}

impl std::error::Error for NoHeader {}

/// Byte offsets of the fields the setters write: in the IPv4 header (checksum,
/// source, destination), and of the checksum in a TCP or UDP header.
const IPV4_CHECKSUM: usize = 10;
const IPV4_SRC: usize = 12;
const IPV4_DST: usize = 16;
const TCP_CHECKSUM: usize = 16;
const UDP_CHECKSUM: usize = 6;

/// A UDP or TCP checksum in a frame: its offset, and whether it is UDP's (whose 0,
/// no checksum, stays 0).
#[derive(Clone, Copy)]
struct L4Sum {
    at: usize,
    udp: bool,
}

impl L4Sum {
    /// Whether a frame of `len` bytes holds it.
    fn fits(self, len: usize) -> bool {
        self.at + 2 <= len
    }

    /// The checksum updated for `change`.
    fn update(self, change: wire::checksum::Change, frame: &mut [u8]) {
        if self.udp {
            change.apply_udp(frame, self.at);
        } else {
            change.apply(frame, self.at);
        }
    }
}

impl<'a> Packet<'a> {
    /// `chunk[head..tail]` is the frame. The caller checked `head <= tail <= len`,
    /// and that the thread's kept parse ([`keep_parse`]), if any, is this frame's.
    pub(crate) fn new(
        chunk: &'a mut [u8],
        head: usize,
        tail: usize,
        meta: Meta<'a>,
        emit: Option<&'a mut (dyn Emit + 'a)>,
    ) -> Self {
        debug_assert!(head <= tail && tail <= chunk.len());
        debug_assert!(PARSED
            .with(Cell::get)
            .is_none_or(|p| Ok(p) == wire::parse(&chunk[head..tail])));
        Packet {
            chunk,
            head,
            tail,
            meta,
            emit,
            kept: false,
        }
    }

    /// The bytes or the bounds are about to change: a kept parse no longer holds.
    #[inline(always)]
    fn frame_changes(&mut self) {
        forget_parse();
    }

    /// Keeps this frame past the call: the worker applies no verdict to it, and the
    /// handle answers for it from now on (send it later with
    /// [`send_kept`](Self::send_kept), or drop the handle to give it back). Counted
    /// `kept_taken`; the frames kept now are the gauge `kept`. `None` when this
    /// frame is kept already. Bytes written during this call stay in the kept frame.
    ///
    /// ```
    /// use std::collections::VecDeque;
    /// use xdpool::{Handler, Kept, LaneSetup, Packet, Verdict};
    ///
    /// /// Sends each frame back one frame late: a delay line of one.
    /// struct DelayOne;
    /// impl Handler for DelayOne {
    ///     type Lane = VecDeque<Kept>;
    ///     fn lane(&self, _: &mut LaneSetup<'_>) -> VecDeque<Kept> {
    ///         VecDeque::new()
    ///     }
    ///     fn handle(&self, line: &mut VecDeque<Kept>, pkt: &mut Packet<'_>) -> Verdict {
    ///         if let Some(older) = line.pop_front() {
    ///             let _ = pkt.send_kept(older, Verdict::back());
    ///         }
    ///         if let Some(k) = pkt.keep() {
    ///             line.push_back(k);
    ///         }
    ///         Verdict::drop() // not applied: this frame is kept
    ///     }
    /// }
    /// ```
    pub fn keep(&mut self) -> Option<super::Kept> {
        let k = self.emit.as_mut()?.keep();
        self.kept |= k.is_some();
        k
    }

    /// Whether [`keep`](Self::keep) took the frame.
    #[inline]
    pub(crate) fn is_kept(&self) -> bool {
        self.kept
    }

    /// Sends a frame kept earlier on this lane as `verdict` says (back, forward,
    /// mirror; a drop gives it back), once this call returns. The handle is used
    /// up either way; on an error (a port the handler did not declare) the frame
    /// goes back to the pool.
    pub fn send_kept(&mut self, kept: super::Kept, verdict: Verdict) -> Result<(), EmitError> {
        match &mut self.emit {
            Some(e) => e.send_kept(kept, verdict),
            None => Err(EmitError::NoMemory),
        }
    }

    /// Sends a new frame with these bytes out of `to` (the arrival port or a declared
    /// one), besides whatever becomes of this frame: a reply, an ICMP error, an ARP
    /// answer. The bytes are copied into a piece of a UMEM chunk (small frames share
    /// a chunk, one reference count for all) and queued after this call; the pool
    /// owns them from here, so nothing the handler does can leak them. Counted
    /// `handler_emitted`.
    pub fn emit(&mut self, to: PortRef, frame: &[u8]) -> Result<(), EmitError> {
        match &mut self.emit {
            Some(e) => e.emit(to, frame),
            None => Err(EmitError::NoMemory),
        }
    }

    /// The frame's span in its chunk after the call: (offset, length).
    pub(crate) fn span(&self) -> (usize, usize) {
        (self.head, self.tail - self.head)
    }

    /// The frame's bytes, from the destination MAC.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.chunk[self.head..self.tail]
    }

    /// The frame's bytes, writable in place (a rewrite costs no copy).
    #[inline]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.frame_changes();
        &mut self.chunk[self.head..self.tail]
    }

    /// Length of the frame in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.tail - self.head
    }

    /// Whether the frame has no bytes (only after [`trim_tail`](Self::trim_tail)).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// The frame's headers (Ethernet, VLAN tags, IPv4/IPv6, UDP/TCP), parsed by the
    /// bounds-checked parser the built-in actions use: always what
    /// [`wire::parse`]`(self.bytes())` returns now.
    ///
    /// An untagged IPv4 frame without options carrying UDP or TCP is read on a
    /// short path (about 40 instructions). Any other frame, when the port's rules
    /// have different verdicts, was parsed by the worker already to find the rule
    /// that called this handler; until the handler changes the frame
    /// ([`bytes_mut`](Self::bytes_mut), a head or tail adjustment,
    /// [`insert`](Self::insert), [`remove`](Self::remove),
    /// [`swap_macs`](Self::swap_macs)), that parse is returned and the headers are
    /// not walked again. After a change, each call parses anew.
    ///
    /// ```
    /// # use xdpool::{Packet, Verdict};
    /// let count_udp = |pkt: &mut Packet<'_>| match pkt.parse() {
    ///     Ok(p) if p.ip_proto() == Some(17) => Verdict::back(),
    ///     _ => Verdict::drop(),
    /// };
    /// # let _ = count_udp;
    /// ```
    #[inline]
    pub fn parse(&self) -> Result<wire::Parsed, wire::ParseError> {
        match PARSED.with(Cell::get) {
            Some(p) => Ok(p),
            None => wire::parse(self.bytes()),
        }
    }

    /// The port the frame arrived on.
    #[inline]
    pub fn port(&self) -> PortRef {
        self.meta.port
    }

    /// The RX queue the frame arrived on.
    #[inline]
    pub fn queue(&self) -> u32 {
        self.meta.queue
    }

    /// The `name` of the rule that sent the frame here, if it has one.
    #[inline]
    pub fn rule_name(&self) -> Option<&str> {
        self.meta.rule?.spec()?.rule_name.as_deref()
    }

    /// The `arg` of the rule that sent the frame here, if it has one.
    #[inline]
    pub fn arg(&self) -> Option<&str> {
        self.meta.rule?.spec()?.arg.as_deref()
    }

    /// The same `arg` as [`arg`](Self::arg), as the worker's rule list holds it:
    /// one `Arc` per text in a list (rules with the same text share it), new ones
    /// with each list a reload brings. A handler that parses its arg once keeps a
    /// clone of this and tells that a frame's arg is the one it parsed with one
    /// pointer compare ([`Arc::ptr_eq`](std::sync::Arc::ptr_eq); the clone keeps
    /// the text alive, so its address cannot be another text's), where comparing
    /// the text costs its length on every frame. When the pointers differ, the
    /// text may still be the same (a reload that did not change it): compare the
    /// text then.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use xdpool::{Handler, LaneSetup, Packet, Verdict};
    ///
    /// /// Sends back frames whose UDP destination port is the rule's arg.
    /// struct PortFilter;
    /// #[derive(Default)]
    /// struct Lane {
    ///     arg: Option<Arc<str>>,
    ///     port: Option<u16>,
    /// }
    /// impl Handler for PortFilter {
    ///     type Lane = Lane;
    ///     fn lane(&self, _: &mut LaneSetup<'_>) -> Lane {
    ///         Lane::default()
    ///     }
    ///     fn handle(&self, lane: &mut Lane, pkt: &mut Packet<'_>) -> Verdict {
    ///         let arg = pkt.shared_arg();
    ///         if lane.arg.as_ref().map(Arc::as_ptr) != arg.map(Arc::as_ptr) {
    ///             lane.port = arg.and_then(|a| a.parse().ok());
    ///             lane.arg = arg.cloned();
    ///         }
    ///         match pkt.parse() {
    ///             Ok(p) if lane.port.is_some() && p.dst_port() == lane.port => Verdict::back(),
    ///             _ => Verdict::drop(),
    ///         }
    ///     }
    /// }
    /// ```
    #[inline]
    pub fn shared_arg(&self) -> Option<&std::sync::Arc<str>> {
        self.meta.rule?.spec()?.arg.as_ref()
    }

    /// The generation of the rule list the frame was acted on under: each list a
    /// reload (`xdpool rules apply`, SIGHUP) brings has a new one, so a handler that
    /// keeps state per rule or per arg (parsed args, per-rule counters of its own)
    /// tells from it that the rules it keeps it for may have changed. 0 for a frame
    /// that no `call` rule sent. During a reload's hand-over, frames of the list
    /// being left may still come after the first of the new one.
    ///
    /// ```
    /// use xdpool::testing::{two_ports, FrameBuilder, Harness};
    /// use xdpool::{Packet, Verdict};
    ///
    /// let rule = |arg: &str| {
    ///     two_ports(&format!(
    ///         "[[rule]]\nport = \"in\"\naction = \"call\"\nhandler = \"see\"\narg = \"{arg}\""
    ///     ))
    /// };
    /// let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let mut h = Harness::builder(&rule("a"))
    ///     .handler("see", move |pkt: &mut Packet<'_>| {
    ///         log.lock().unwrap().push(pkt.rules_generation());
    ///         Verdict::drop()
    ///     })
    ///     .build()
    ///     .unwrap();
    /// let frame = FrameBuilder::new().udp(1024, 9).build().bytes;
    /// h.send("in", &frame);
    /// h.reload(&rule("b")).unwrap();
    /// h.send("in", &frame);
    /// h.run();
    /// let seen = seen.lock().unwrap();
    /// assert!(seen[0] != 0 && seen[1] != seen[0], "{seen:?}");
    /// ```
    #[inline]
    pub fn rules_generation(&self) -> u32 {
        self.meta.rule.map_or(0, |r| r.rules.last_set().generation)
    }

    /// Bytes free in the chunk before the frame.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.head
    }

    /// Bytes free in the chunk after the frame.
    #[inline]
    pub fn tailroom(&self) -> usize {
        self.chunk.len() - self.tail
    }

    /// Grows the frame by `n` bytes at its front (an outer header) and returns them,
    /// to be written; the bytes hold whatever the chunk held there.
    pub fn push_head(&mut self, n: usize) -> Result<&mut [u8], NoRoom> {
        self.frame_changes();
        if n > self.head {
            return Err(NoRoom {
                asked: n,
                room: self.head,
            });
        }
        self.head -= n;
        Ok(&mut self.chunk[self.head..self.head + n])
    }

    /// Removes `n` bytes from the frame's front (decapsulation).
    pub fn pull_head(&mut self, n: usize) -> Result<(), NoRoom> {
        self.frame_changes();
        if n > self.len() {
            return Err(NoRoom {
                asked: n,
                room: self.len(),
            });
        }
        self.head += n;
        Ok(())
    }

    /// Grows the frame by `n` bytes at its end and returns them, to be written.
    pub fn push_tail(&mut self, n: usize) -> Result<&mut [u8], NoRoom> {
        self.frame_changes();
        if n > self.tailroom() {
            return Err(NoRoom {
                asked: n,
                room: self.tailroom(),
            });
        }
        let at = self.tail;
        self.tail += n;
        Ok(&mut self.chunk[at..self.tail])
    }

    /// Removes `n` bytes from the frame's end.
    pub fn trim_tail(&mut self, n: usize) -> Result<(), NoRoom> {
        self.frame_changes();
        if n > self.len() {
            return Err(NoRoom {
                asked: n,
                room: self.len(),
            });
        }
        self.tail -= n;
        Ok(())
    }

    /// Inserts `len` bytes at `at` (from the frame's start), moving the bytes before
    /// `at` forward into the headroom: a VLAN tag after the MACs is
    /// `insert(12, 4)`. Returns the new bytes, to be written.
    pub fn insert(&mut self, at: usize, len: usize) -> Result<&mut [u8], NoRoom> {
        self.frame_changes();
        if at > self.len() {
            return Err(NoRoom {
                asked: at,
                room: self.len(),
            });
        }
        let old = self.head;
        self.push_head(len)?;
        self.chunk.copy_within(old..old + at, self.head);
        Ok(&mut self.chunk[self.head + at..self.head + at + len])
    }

    /// Removes `len` bytes at `at` (from the frame's start), moving the bytes before
    /// them back: popping a VLAN tag is `remove(12, 4)`.
    pub fn remove(&mut self, at: usize, len: usize) -> Result<(), NoRoom> {
        self.frame_changes();
        let end = at.saturating_add(len);
        if end > self.len() {
            return Err(NoRoom {
                asked: end,
                room: self.len(),
            });
        }
        self.chunk
            .copy_within(self.head..self.head + at, self.head + len);
        self.head += len;
        Ok(())
    }

    /// Sets the IPv4 source address, and updates the IPv4 header's checksum and the
    /// UDP or TCP checksum (whose pseudo-header holds the address) to match, without
    /// summing the frame again ([`wire::checksum`]; a UDP checksum of 0, none, stays
    /// 0). A fragment after the first has no L4 header: only the IPv4 checksum
    /// changes. [`NoHeader::Ipv4`], and the frame unchanged, for anything but IPv4;
    /// [`NoHeader::Unsupported`] for UDP-Lite and DCCP, whose checksums this does not
    /// update.
    pub fn set_ipv4_src(&mut self, ip: std::net::Ipv4Addr) -> Result<(), NoHeader> {
        self.set_ipv4_addr(IPV4_SRC, ip)
    }

    /// Sets the IPv4 destination address, as [`set_ipv4_src`](Self::set_ipv4_src)
    /// sets the source (the checksums updated the same way). Also
    /// [`NoHeader::Unsupported`] for a frame whose source route is under way (its UDP
    /// or TCP checksum holds the route's last address, not the header's destination).
    ///
    /// ```
    /// # use xdpool::{Mac, Packet, Verdict};
    /// // A NAT's inbound half: to the backend, out of the same port, to the backend's
    /// // MAC from the neighbour table (by the new destination).
    /// let backend = std::net::Ipv4Addr::new(198, 18, 2, 10);
    /// let to_backend = move |pkt: &mut Packet<'_>| match pkt.set_ipv4_dst(backend) {
    ///     Ok(()) => Verdict::back().with_mac(Mac::NextHop),
    ///     Err(_) => Verdict::drop(),
    /// };
    /// # let _ = to_backend;
    /// ```
    pub fn set_ipv4_dst(&mut self, ip: std::net::Ipv4Addr) -> Result<(), NoHeader> {
        self.set_ipv4_addr(IPV4_DST, ip)
    }

    /// Sets the UDP or TCP source port (IPv4 or IPv6), and updates that header's
    /// checksum to match (a UDP checksum of 0 stays 0). [`NoHeader::Ports`], and the
    /// frame unchanged, for a frame without one.
    pub fn set_src_port(&mut self, port: u16) -> Result<(), NoHeader> {
        self.set_port(0, port)
    }

    /// Sets the UDP or TCP destination port, as [`set_src_port`](Self::set_src_port)
    /// sets the source.
    pub fn set_dst_port(&mut self, port: u16) -> Result<(), NoHeader> {
        self.set_port(2, port)
    }

    /// The frame's UDP or TCP checksum; `None` without a header of either (a later
    /// fragment, another protocol).
    fn l4_checksum(p: &wire::Parsed) -> Option<L4Sum> {
        let l4 = p.l4_offset()?;
        p.ports()?;
        match p.ip_proto()? {
            wire::proto::TCP => Some(L4Sum {
                at: l4 + TCP_CHECKSUM,
                udp: false,
            }),
            wire::proto::UDP => Some(L4Sum {
                at: l4 + UDP_CHECKSUM,
                udp: true,
            }),
            _ => None,
        }
    }

    /// The IPv4 address at `field` bytes into the IPv4 header (12: source, 16:
    /// destination) set to `ip`, the checksums over it updated.
    fn set_ipv4_addr(&mut self, field: usize, ip: std::net::Ipv4Addr) -> Result<(), NoHeader> {
        let p = self.parse().map_err(|_| NoHeader::Ipv4)?;
        if !matches!(p.l3(), wire::L3::V4 { .. }) {
            return Err(NoHeader::Ipv4);
        }
        let (l3, l4) = (p.l3_offset(), Self::l4_checksum(&p));
        // UDP-Lite and DCCP checksum a pseudo-header with the addresses as UDP and
        // TCP do, in a header this does not read: refused, unless this is a later
        // fragment, which carries no such header.
        let later = p.fragment().is_some_and(|f| f.offset != 0);
        if matches!(p.ip_proto(), Some(wire::proto::UDPLITE | wire::proto::DCCP)) && !later {
            return Err(NoHeader::Unsupported);
        }
        // A source route under way: the L4 checksum is over its last address (without
        // an L4 checksum, only the header's own checksum is over the destination).
        if field == IPV4_DST
            && l4.is_some()
            && wire::source_route_under_way(self.bytes().get(l3..).unwrap_or_default())
        {
            return Err(NoHeader::Unsupported);
        }
        let at = l3 + field;
        // A parsed frame holds its IPv4 header and its UDP or TCP header whole; checked
        // again all the same, before anything is written, so that no input could make
        // this panic or leave a checksum behind its address.
        let Some(&old) = self.bytes().get(at..).and_then(|b| b.first_chunk::<4>()) else {
            return Err(NoHeader::Ipv4);
        };
        if l4.is_some_and(|sum| !sum.fits(self.len())) {
            return Err(NoHeader::Ipv4);
        }
        let new = ip.octets();
        if old == new {
            return Ok(());
        }
        let change = wire::checksum::Change::of32(old, new);
        let frame = self.bytes_mut();
        frame[at..at + 4].copy_from_slice(&new);
        change.apply(frame, l3 + IPV4_CHECKSUM);
        if let Some(sum) = l4 {
            sum.update(change, frame);
        }
        Ok(())
    }

    /// The UDP or TCP port at `field` bytes into its header (0: source, 2:
    /// destination) set to `port`, the L4 checksum updated.
    fn set_port(&mut self, field: usize, port: u16) -> Result<(), NoHeader> {
        let p = self.parse().map_err(|_| NoHeader::Ports)?;
        let (Some(l4), Some(sum)) = (p.l4_offset(), Self::l4_checksum(&p)) else {
            return Err(NoHeader::Ports);
        };
        let at = l4 + field;
        let (Some(&old), true) = (
            self.bytes().get(at..).and_then(|b| b.first_chunk::<2>()),
            sum.fits(self.len()),
        ) else {
            return Err(NoHeader::Ports);
        };
        let old = u16::from_be_bytes(old);
        if old == port {
            return Ok(());
        }
        let change = wire::checksum::Change::of16(old, port);
        let frame = self.bytes_mut();
        frame[at..at + 2].copy_from_slice(&port.to_be_bytes());
        sum.update(change, frame);
        Ok(())
    }

    /// Exchanges the destination and source MACs; `false` (nothing changed) for a
    /// frame shorter than two MACs.
    #[inline]
    pub fn swap_macs(&mut self) -> bool {
        // Through bytes_mut(), which drops a kept parse: any write does.
        let Some(b) = self.bytes_mut().first_chunk_mut::<12>() else {
            return false;
        };
        // Whole-array copies: a few moves, where a byte-wise swap is a loop.
        let macs = *b;
        b[..6].copy_from_slice(&macs[6..]);
        b[6..].copy_from_slice(&macs[..6]);
        true
    }
}

impl fmt::Debug for Packet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Packet")
            .field("len", &self.len())
            .field("port", &self.meta.port)
            .field("queue", &self.meta.queue)
            .field("rule", &self.rule_name())
            .field("arg", &self.arg())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta<'static> {
        Meta {
            port: PortRef(0),
            queue: 0,
            rule: None,
        }
    }

    #[test]
    fn head_and_tail_move_within_the_chunk_only() {
        let mut chunk = vec![0u8; 64];
        chunk[16..28].copy_from_slice(&[1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
        let mut p = Packet::new(&mut chunk, 16, 40, meta(), None);
        assert_eq!((p.headroom(), p.len(), p.tailroom()), (16, 24, 24));
        assert_eq!(
            p.push_head(17),
            Err(NoRoom {
                asked: 17,
                room: 16
            })
        );
        p.push_head(16).unwrap().fill(9);
        assert_eq!((p.headroom(), p.len()), (0, 40));
        p.pull_head(16).unwrap();
        assert_eq!(
            p.pull_head(25),
            Err(NoRoom {
                asked: 25,
                room: 24
            })
        );
        assert_eq!(
            p.push_tail(25),
            Err(NoRoom {
                asked: 25,
                room: 24
            })
        );
        p.push_tail(24).unwrap();
        p.trim_tail(48).unwrap();
        assert!(p.is_empty() && !p.swap_macs());
        assert_eq!(p.trim_tail(1), Err(NoRoom { asked: 1, room: 0 }));
    }

    /// The parse the worker kept is what `parse` returns until a method changes the
    /// frame; after any change, `parse` is the parser's answer for the new bytes.
    /// (A kept parse of another frame stands in for the worker's, so that returning
    /// it, and not parsing, shows.)
    #[test]
    fn every_change_to_the_frame_drops_the_kept_parse() {
        use crate::wire::build::FrameBuilder;
        let udp = FrameBuilder::new()
            .ipv4("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
            .udp(1, 2)
            .payload(&[0; 26])
            .build()
            .bytes;
        let other = FrameBuilder::new()
            .vlan(0x8100, 9)
            .ipv6("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap())
            .tcp(3, 4, 0x02)
            .build()
            .bytes;
        let stand_in = wire::parse(&other).unwrap();
        type Change = fn(&mut Packet<'_>);
        let changes: [(&str, Change); 10] = [
            ("bytes_mut", |p| p.bytes_mut()[14 + 9] = 6),
            ("push_head", |p| {
                let _ = p.push_head(4);
            }),
            ("pull_head", |p| {
                let _ = p.pull_head(4);
            }),
            ("push_tail", |p| {
                let _ = p.push_tail(4);
            }),
            ("trim_tail", |p| {
                let _ = p.trim_tail(4);
            }),
            ("insert", |p| {
                let _ = p.insert(12, 4);
            }),
            ("remove", |p| {
                let _ = p.remove(12, 4);
            }),
            ("swap_macs", |p| {
                let _ = p.swap_macs();
            }),
            ("push_head too far", |p| {
                let _ = p.push_head(1000);
            }),
            ("trim_tail too far", |p| {
                let _ = p.trim_tail(1000);
            }),
        ];
        for (name, change) in changes {
            let mut chunk = vec![0u8; 256];
            chunk[64..64 + udp.len()].copy_from_slice(&udp);
            let mut p = Packet::new(&mut chunk, 64, 64 + udp.len(), meta(), None);
            keep_parse(stand_in);
            assert_eq!(
                p.parse(),
                Ok(stand_in),
                "{name}: the kept parse, not a new one"
            );
            change(&mut p);
            assert_eq!(PARSED.with(Cell::get), None, "{name}: kept parse dropped");
            assert_eq!(p.parse(), wire::parse(p.bytes()), "{name}");
        }
        // Reading the frame changes nothing: the kept parse stays.
        let mut chunk = vec![0u8; 256];
        chunk[64..64 + udp.len()].copy_from_slice(&udp);
        let p = Packet::new(&mut chunk, 64, 64 + udp.len(), meta(), None);
        keep_parse(stand_in);
        let _ = (
            p.bytes(),
            p.len(),
            p.headroom(),
            p.tailroom(),
            p.rule_name(),
            p.arg(),
        );
        assert_eq!(p.parse(), Ok(stand_in));
        forget_parse();
        assert_eq!(p.parse(), wire::parse(&udp));
    }

    #[test]
    fn insert_and_remove_a_vlan_tag_keep_the_macs() {
        let mut chunk = vec![0u8; 64];
        let frame: Vec<u8> = (1..=20).collect();
        chunk[8..28].copy_from_slice(&frame);
        let mut p = Packet::new(&mut chunk, 8, 28, meta(), None);
        p.insert(12, 4).unwrap().copy_from_slice(&[0x81, 0, 0, 7]);
        assert_eq!(&p.bytes()[..12], &frame[..12]);
        assert_eq!(&p.bytes()[12..16], &[0x81, 0, 0, 7]);
        assert_eq!(&p.bytes()[16..], &frame[12..]);
        p.remove(12, 4).unwrap();
        assert_eq!(p.bytes(), &frame[..]);
        assert!(p.remove(10, usize::MAX).is_err());
        assert!(p.insert(21, 1).is_err());
        assert!(p.insert(0, 9).is_err(), "8 bytes of headroom");
        assert!(p.swap_macs());
        assert_eq!(&p.bytes()[..6], &frame[6..12]);
    }

    /// Whether the frame's IPv4 header checksum and its UDP or TCP checksum verify
    /// (summed anew over the header, and over the pseudo-header and the segment).
    /// (A frame that does not parse does not verify.)
    fn checksums_verify(frame: &[u8]) -> bool {
        use crate::wire::build::checksum;
        let Ok(p) = wire::parse(frame) else {
            return false;
        };
        let l3 = p.l3_offset();
        if let wire::L3::V4 { .. } = p.l3() {
            let ihl = usize::from(frame[l3] & 0xf) * 4;
            if checksum(&[&frame[l3..l3 + ihl]]) != 0 {
                return false;
            }
        }
        let Some(l4) = p.l4_offset() else {
            return true;
        };
        let proto = p.ip_proto().expect("an L4 header");
        let seg = &frame[l4..];
        let len = seg.len();
        let pseudo: Vec<u8> = match p.l3() {
            wire::L3::V4 { src, dst } => [
                &src.octets()[..],
                &dst.octets(),
                &[0, proto],
                &(len as u16).to_be_bytes(),
            ]
            .concat(),
            wire::L3::V6 { src, dst } => [
                &src.octets()[..],
                &dst.octets(),
                &(len as u32).to_be_bytes(),
                &[0, 0, 0, proto],
            ]
            .concat(),
            wire::L3::None => return true,
        };
        let c = if proto == 17 { 6 } else { 16 };
        (proto == 17 && seg[c..c + 2] == [0, 0]) || checksum(&[&pseudo, seg]) == 0
    }

    proptest::proptest! {
        /// Any address and port, set on UDP and TCP frames over IPv4 (with options,
        /// a VLAN tag) and IPv6: the fields read back as set, every checksum verifies
        /// summed anew, and no other byte changed.
        #[test]
        fn addresses_and_ports_set_with_their_checksums(
            src in proptest::prelude::any::<[u8; 4]>(),
            dst in proptest::prelude::any::<[u8; 4]>(),
            sport in proptest::prelude::any::<u16>(),
            dport in proptest::prelude::any::<u16>(),
            tcp in proptest::prelude::any::<bool>(),
            v6 in proptest::prelude::any::<bool>(),
            tagged in proptest::prelude::any::<bool>(),
            options in proptest::prelude::any::<bool>(),
            payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        ) {
            use crate::wire::build::FrameBuilder;
            use std::net::Ipv4Addr;
            let mut b = FrameBuilder::new();
            if tagged {
                b = b.vlan(0x8100, 5);
            }
            b = if v6 {
                b.ipv6("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap())
            } else {
                b.ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2))
            };
            if options {
                b = b.ipv4_options(&[1, 1, 1, 1]);
            }
            b = if tcp { b.tcp(1000, 80, 0x10) } else { b.udp(1000, 53) };
            let before = b.payload(&payload).build().bytes;
            proptest::prop_assert!(checksums_verify(&before));
            let mut chunk = vec![0u8; before.len() + 64];
            chunk[32..32 + before.len()].copy_from_slice(&before);
            let mut p = Packet::new(&mut chunk, 32, 32 + before.len(), meta(), None);
            let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
            if v6 {
                proptest::prop_assert_eq!(p.set_ipv4_src(src), Err(NoHeader::Ipv4));
                proptest::prop_assert_eq!(p.set_ipv4_dst(dst), Err(NoHeader::Ipv4));
                proptest::prop_assert_eq!(p.bytes(), &before[..]);
            } else {
                proptest::prop_assert_eq!(p.set_ipv4_src(src), Ok(()));
                proptest::prop_assert_eq!(p.set_ipv4_dst(dst), Ok(()));
            }
            proptest::prop_assert_eq!(p.set_src_port(sport), Ok(()));
            proptest::prop_assert_eq!(p.set_dst_port(dport), Ok(()));
            let after = p.bytes().to_vec();
            let q = wire::parse(&after).unwrap();
            proptest::prop_assert_eq!(q.ports(), Some((sport, dport)));
            if !v6 {
                proptest::prop_assert_eq!(
                    q.l3(),
                    wire::L3::V4 { src, dst }
                );
            }
            proptest::prop_assert!(checksums_verify(&after), "{:02x?}", after);
            // Only the fields and the checksums over them changed.
            let (l3, l4) = (q.l3_offset(), q.l4_offset().unwrap());
            let c = if tcp { l4 + 16 } else { l4 + 6 };
            let mut touched = vec![c, c + 1, l4, l4 + 1, l4 + 2, l4 + 3];
            if !v6 {
                touched.extend([l3 + 10, l3 + 11]);
                touched.extend(l3 + 12..l3 + 20);
            }
            for (i, (a, z)) in before.iter().zip(&after).enumerate() {
                proptest::prop_assert!(a == z || touched.contains(&i), "byte {} changed", i);
            }
        }
    }

    proptest::proptest! {
        /// No bytes make a setter panic, and a refusal leaves every byte as it was.
        /// (Mutated real frames: an IPv4 header with options and a UDP or TCP one,
        /// most bytes random.)
        #[test]
        fn setters_never_panic_and_refusals_change_nothing(
            tcp in proptest::prelude::any::<bool>(),
            flips in proptest::collection::vec((0usize..80, proptest::prelude::any::<u8>()), 0..12),
            cut in 0usize..90,
        ) {
            use crate::wire::build::FrameBuilder;
            let b = FrameBuilder::new()
                .ipv4("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())
                .ipv4_options(&[131, 7, 4, 198, 19, 7, 7, 1]);
            let b = if tcp { b.tcp(1, 2, 0x10) } else { b.udp(1, 2) };
            let mut f = b.payload(&[7; 16]).build().bytes;
            for (at, v) in flips {
                if let Some(x) = f.get_mut(at) {
                    *x = v;
                }
            }
            f.truncate(cut.max(1));
            type Set = fn(&mut Packet<'_>) -> Result<(), NoHeader>;
            let sets: [Set; 4] = [
                |p| p.set_ipv4_src(std::net::Ipv4Addr::new(198, 18, 9, 9)),
                |p| p.set_ipv4_dst(std::net::Ipv4Addr::new(198, 18, 9, 9)),
                |p| p.set_src_port(4242),
                |p| p.set_dst_port(4242),
            ];
            let verified = checksums_verify(&f);
            for set in sets {
                let mut chunk = f.clone();
                let len = chunk.len();
                let mut p = Packet::new(&mut chunk, 0, len, meta(), None);
                match set(&mut p) {
                    Err(_) => proptest::prop_assert_eq!(p.bytes(), &f[..]),
                    // A frame whose checksums verified still verifies.
                    Ok(()) if verified => proptest::prop_assert!(checksums_verify(p.bytes())),
                    Ok(()) => {}
                }
            }
        }
    }

    #[test]
    fn a_frame_without_the_header_is_left_as_it_was() {
        use crate::wire::build::FrameBuilder;
        use std::net::Ipv4Addr;
        let a = Ipv4Addr::new(198, 18, 0, 1);
        let b = Ipv4Addr::new(198, 18, 0, 2);
        let n = Ipv4Addr::new(198, 18, 9, 9);
        let run = |frame: &[u8], f: &dyn Fn(&mut Packet<'_>)| {
            let mut chunk = frame.to_vec();
            let len = chunk.len();
            let mut p = Packet::new(&mut chunk, 0, len, meta(), None);
            f(&mut p);
            p.bytes().to_vec()
        };
        // ARP (not IP): no address, no port.
        let arp = FrameBuilder::new()
            .raw_ethertype(0x0806)
            .payload(&[1; 28])
            .build()
            .bytes;
        let same = run(&arp, &|p| {
            assert_eq!(p.set_ipv4_dst(n), Err(NoHeader::Ipv4));
            assert_eq!(p.set_dst_port(1), Err(NoHeader::Ports));
        });
        assert_eq!(same, arp);
        // ICMP over IPv4: the address (its header's checksum only), no port.
        let icmp = FrameBuilder::new()
            .ipv4(a, b)
            .ip_proto(1)
            .payload(&[8, 0, 0, 0])
            .build();
        let out = run(&icmp.bytes, &|p| {
            assert_eq!(p.set_dst_port(1), Err(NoHeader::Ports));
            assert_eq!(p.set_ipv4_dst(n), Ok(()));
        });
        assert_eq!(wire::parse(&out).unwrap().dst_ip(), Some(n.into()));
        assert!(checksums_verify(&out));
        assert_eq!(out[icmp.l4_offset..], icmp.bytes[icmp.l4_offset..]);
        // A later fragment: no L4 header to carry a port or a checksum.
        let frag = FrameBuilder::new()
            .ipv4(a, b)
            .ipv4_fragment(8, false, 7)
            .udp(1, 2)
            .build()
            .bytes;
        let out = run(&frag, &|p| {
            assert_eq!(p.set_src_port(5), Err(NoHeader::Ports));
            assert_eq!(p.set_ipv4_src(n), Ok(()));
        });
        assert_eq!(wire::parse(&out).unwrap().src_ip(), Some(n.into()));
        assert!(checksums_verify(&out));
        // DCCP's and UDP-Lite's checksums hold the addresses too: refused, unless a
        // later fragment (no such header in it, below).
        for proto in [wire::proto::DCCP, wire::proto::UDPLITE] {
            let f = FrameBuilder::new()
                .ipv4(a, b)
                .ip_proto(proto)
                .payload(&[0; 16])
                .build();
            let same = run(&f.bytes, &|p| {
                assert_eq!(p.set_ipv4_dst(n), Err(NoHeader::Unsupported));
                assert_eq!(p.set_ipv4_src(n), Err(NoHeader::Unsupported));
            });
            assert_eq!(same, f.bytes, "proto {proto}");
        }
        let later = FrameBuilder::new()
            .ipv4(a, b)
            .ipv4_fragment(8, false, 7)
            .ip_proto(136)
            .payload(&[0; 12])
            .build();
        let out = run(&later.bytes, &|p| assert_eq!(p.set_ipv4_dst(n), Ok(())));
        assert!(checksums_verify(&out));
        // A loose source route under way (pointer 4, one address left): the TCP
        // checksum holds that address, so the destination is refused; the source is
        // not in question. Once the route is done (pointer past it), it is set.
        let lsrr = |ptr: u8| {
            FrameBuilder::new()
                .ipv4(a, b)
                .ipv4_options(&[131, 7, ptr, 198, 19, 7, 7, 1])
                .tcp(1000, 80, 0x10)
                .build()
                .bytes
        };
        // A strict route behind a NOP and a record route: found all the same.
        let ssrr = FrameBuilder::new()
            .ipv4(a, b)
            .ipv4_options(&[1, 7, 7, 4, 0, 0, 0, 0, 137, 7, 4, 198, 19, 7, 7, 1])
            .udp(1000, 53)
            .build()
            .bytes;
        let same = run(&ssrr, &|p| {
            assert_eq!(p.set_ipv4_dst(n), Err(NoHeader::Unsupported));
        });
        assert_eq!(same, ssrr);
        // Without an L4 checksum (ICMP) the route does not matter: only the header's
        // own checksum is over the destination.
        let icmp_routed = FrameBuilder::new()
            .ipv4(a, b)
            .ipv4_options(&[131, 7, 4, 198, 19, 7, 7, 1])
            .ip_proto(1)
            .payload(&[8, 0, 0, 0])
            .build()
            .bytes;
        let out = run(&icmp_routed, &|p| assert_eq!(p.set_ipv4_dst(n), Ok(())));
        assert!(checksums_verify(&out));
        let under_way = lsrr(4);
        let out = run(&under_way, &|p| {
            assert_eq!(p.set_ipv4_dst(n), Err(NoHeader::Unsupported));
            assert_eq!(p.set_ipv4_src(n), Ok(()));
        });
        assert_eq!(wire::parse(&out).unwrap().dst_ip(), Some(b.into()));
        let done = lsrr(8);
        let out = run(&done, &|p| assert_eq!(p.set_ipv4_dst(n), Ok(())));
        assert_eq!(wire::parse(&out).unwrap().dst_ip(), Some(n.into()));
        assert!(checksums_verify(&out));
        // A UDP checksum of 0 (none computed) stays 0 through both rewrites.
        let mut udp = FrameBuilder::new().ipv4(a, b).udp(1, 2).build();
        let c = udp.l4_offset + 6;
        udp.bytes[c..c + 2].copy_from_slice(&[0, 0]);
        let out = run(&udp.bytes, &|p| {
            assert_eq!(p.set_ipv4_dst(n), Ok(()));
            assert_eq!(p.set_dst_port(9), Ok(()));
        });
        assert_eq!(out[c..c + 2], [0, 0]);
        assert!(checksums_verify(&out));
    }
}
