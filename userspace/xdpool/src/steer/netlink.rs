//! Asks rtnetlink which XDP program a device runs.

use std::io;

use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use netlink_packet_route::link::{LinkAttribute, LinkMessage, LinkXdp};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use super::error::SteerError;

/// Id of the XDP program attached to `ifindex` in any mode, if any.
///
/// Sees programs attached both through bpf_link and through plain netlink,
/// so it is the check for "no stale program left behind".
pub fn xdp_program_on(ifindex: u32) -> Result<Option<u32>, SteerError> {
    match get_link(ifindex).map_err(SteerError::Netlink)? {
        Some(link) => Ok(prog_id(&link.attributes)),
        None => Err(SteerError::InterfaceMissing { ifindex }),
    }
}

/// The MTU of the link `ifindex` in the calling thread's namespace (`None`: no such link).
pub(crate) fn link_mtu(ifindex: u32) -> io::Result<Option<u32>> {
    Ok(get_link(ifindex)?.and_then(|l| {
        l.attributes.iter().find_map(|a| match a {
            LinkAttribute::Mtu(m) => Some(*m),
            _ => None,
        })
    }))
}

/// RTM_GETLINK for one index in the calling thread's namespace; `None` when no link
/// has this index (ENODEV).
pub fn get_link(ifindex: u32) -> io::Result<Option<LinkMessage>> {
    let mut link = LinkMessage::default();
    link.header.index = ifindex;
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST;
    header.sequence_number = 1;
    let mut request = NetlinkMessage::new(
        header,
        NetlinkPayload::from(RouteNetlinkMessage::GetLink(link)),
    );
    request.finalize();
    let mut buf = vec![0u8; request.buffer_len()];
    request.serialize(&mut buf);

    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    socket.send(&buf, 0)?;
    let (reply, _) = socket.recv_from_full()?;

    let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&reply)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    match message.payload {
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link)) => Ok(Some(link)),
        NetlinkPayload::Error(e) => match e.code {
            Some(code) if code.get() == -libc::ENODEV => Ok(None),
            _ => Err(e.to_io()),
        },
        other => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected rtnetlink reply {other:?}"),
        )),
    }
}

fn prog_id(attributes: &[LinkAttribute]) -> Option<u32> {
    let xdp = attributes.iter().find_map(|a| match a {
        LinkAttribute::Xdp(x) => Some(x),
        _ => None,
    })?;
    // IFLA_XDP_PROG_ID is present when exactly one mode is in use; otherwise
    // take the first of the per-mode ids.
    xdp.iter()
        .find_map(|x| match x {
            LinkXdp::ProgId(id) => Some(*id),
            _ => None,
        })
        .or_else(|| {
            xdp.iter().find_map(|x| match x {
                LinkXdp::DrvProgId(id) | LinkXdp::SkbProgId(id) | LinkXdp::HwProgId(id) => {
                    Some(*id)
                }
                _ => None,
            })
        })
        .filter(|id| *id != 0)
}
