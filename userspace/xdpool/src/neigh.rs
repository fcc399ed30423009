//! MAC addresses `forward` writes: each egress device's own MAC, and the next hop's
//! MAC from the kernel's neighbour table of the namespace xdpool runs in
//! (`mac = "neigh"`). The control thread reads them over rtnetlink at start and again
//! whenever a worker finds a destination missing; workers read a [`MacBook`]
//! snapshot and never block on netlink.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::LinkAttribute;
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// Device MACs (by port) and next hops (by egress port and destination IP).
#[derive(Debug, Clone, Default)]
pub struct MacBook {
    device: Vec<Option<[u8; 6]>>,
    next_hop: HashMap<(usize, IpAddr), [u8; 6]>,
}

impl MacBook {
    /// A book for `ports` ports, nothing known yet.
    pub fn new(ports: usize) -> MacBook {
        MacBook {
            device: vec![None; ports],
            next_hop: HashMap::new(),
        }
    }

    /// The MAC of port `port`'s device.
    #[inline]
    pub fn device_mac(&self, port: usize) -> Option<[u8; 6]> {
        self.device.get(port).copied().flatten()
    }

    /// The MAC of the neighbour `ip` on port `port`'s device.
    #[inline]
    pub fn next_hop(&self, port: usize, ip: IpAddr) -> Option<[u8; 6]> {
        self.next_hop.get(&(port, ip)).copied()
    }

    /// Sets a device MAC.
    pub fn set_device(&mut self, port: usize, mac: [u8; 6]) {
        if let Some(slot) = self.device.get_mut(port) {
            *slot = Some(mac);
        }
    }

    /// Sets a next hop.
    pub fn set_next_hop(&mut self, port: usize, ip: IpAddr, mac: [u8; 6]) {
        self.next_hop.insert((port, ip), mac);
    }

    /// Takes port `port`'s device MAC and next hops from `other` (a book read in
    /// that port's namespace), leaving the other ports as they are.
    pub fn take_port(&mut self, other: &MacBook, port: usize) {
        if let Some(mac) = other.device_mac(port) {
            self.set_device(port, mac);
        }
        for (&(p, ip), &mac) in &other.next_hop {
            if p == port {
                self.next_hop.insert((p, ip), mac);
            }
        }
    }
}

/// The current book, shared by the control thread (writer) and workers (readers).
#[derive(Debug, Default)]
pub struct Neighbours {
    book: RwLock<Arc<MacBook>>,
    version: AtomicU64,
    missed: AtomicBool,
}

impl Neighbours {
    /// A shared book starting as `book`.
    pub fn new(book: MacBook) -> Arc<Neighbours> {
        Arc::new(Neighbours {
            book: RwLock::new(Arc::new(book)),
            version: AtomicU64::new(1),
            missed: AtomicBool::new(false),
        })
    }

    /// Bumped at every update: a worker re-reads the book when it changed.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The book now.
    pub fn current(&self) -> Arc<MacBook> {
        self.book.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the book.
    pub fn update(&self, book: MacBook) {
        *self.book.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(book);
        self.version.fetch_add(1, Ordering::Release);
    }

    /// A worker met an unknown next hop.
    pub fn report_miss(&self) {
        self.missed.store(true, Ordering::Relaxed);
    }

    /// Whether a miss was reported since the last call (clears it).
    pub fn take_miss(&self) -> bool {
        self.missed.swap(false, Ordering::Relaxed)
    }
}

/// Reads the book for `ifindexes` (by port), each port's device and neighbours in
/// its own namespace (`netns[of_port[p]]`): an ifindex means a device only within one
/// namespace, and each namespace has its own neighbour table.
pub fn read_book_in(
    netns: &[crate::netns::PortNetns],
    of_port: &[usize],
    ifindexes: &[Option<u32>],
) -> io::Result<MacBook> {
    let mut book = MacBook::new(ifindexes.len());
    for (g, ns) in netns.iter().enumerate() {
        let mine: Vec<Option<u32>> = ifindexes
            .iter()
            .zip(of_port)
            .map(|(&ifx, &n)| if n == g { ifx } else { None })
            .collect();
        if mine.iter().all(Option::is_none) {
            continue;
        }
        let part = ns.run(|| read_book(&mine)).map_err(io::Error::other)??;
        for (p, _) in mine.iter().enumerate().filter(|(_, i)| i.is_some()) {
            book.take_port(&part, p);
        }
    }
    Ok(book)
}

/// Reads the book for `ifindexes` (by port) in the calling thread's namespace.
pub fn read_book(ifindexes: &[Option<u32>]) -> io::Result<MacBook> {
    let mut book = MacBook::new(ifindexes.len());
    for (port, ifx) in ifindexes.iter().enumerate() {
        let Some(ifx) = *ifx else { continue };
        if let Some(link) = crate::steer::netlink::get_link(ifx)? {
            for a in &link.attributes {
                if let LinkAttribute::Address(mac) = a {
                    if let Ok(m) = <[u8; 6]>::try_from(mac.as_slice()) {
                        book.set_device(port, m);
                    }
                }
            }
        }
    }
    for n in dump_neighbours()? {
        let Some(port) = ifindexes.iter().position(|i| *i == Some(n.header.ifindex)) else {
            continue;
        };
        if matches!(
            n.header.state,
            NeighbourState::Incomplete | NeighbourState::Failed | NeighbourState::None
        ) {
            continue;
        }
        let (mut ip, mut mac) = (None, None);
        for a in &n.attributes {
            match a {
                NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                    ip = Some(IpAddr::V4(*v4))
                }
                NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                    ip = Some(IpAddr::V6(*v6))
                }
                NeighbourAttribute::LinkLocalAddress(l) => {
                    mac = <[u8; 6]>::try_from(l.as_slice()).ok()
                }
                _ => {}
            }
        }
        if let (Some(ip), Some(mac)) = (ip, mac) {
            book.set_next_hop(port, ip, mac);
        }
    }
    Ok(book)
}

/// RTM_GETNEIGH dump of the calling thread's namespace.
fn dump_neighbours() -> io::Result<Vec<NeighbourMessage>> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = 1;
    let mut request = NetlinkMessage::new(
        header,
        NetlinkPayload::from(RouteNetlinkMessage::GetNeighbour(
            NeighbourMessage::default(),
        )),
    );
    request.finalize();
    let mut buf = vec![0u8; request.buffer_len()];
    request.serialize(&mut buf);
    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    socket.send(&buf, 0)?;
    let mut out = Vec::new();
    loop {
        let (reply, _) = socket.recv_from_full()?;
        let mut off = 0;
        while off + 16 <= reply.len() {
            let len = u32::from_ne_bytes(reply[off..off + 4].try_into().expect("4 bytes")) as usize;
            if len < 16 || off + len > reply.len() {
                break;
            }
            let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&reply[off..off + len])
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
            match msg.payload {
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewNeighbour(n)) => out.push(n),
                NetlinkPayload::Done(_) => return Ok(out),
                NetlinkPayload::Error(e) => return Err(e.to_io()),
                _ => {}
            }
            off += (len + 3) & !3;
        }
    }
}
