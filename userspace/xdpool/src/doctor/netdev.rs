//! What a device can do for XDP, as the kernel's `netdev` generic-netlink family
//! reports it (Linux 6.3+; `ynl --family netdev --do dev-get`, `xdp-loader features`).
//!
//! The family id is resolved through the generic-netlink controller
//! (netlink-packet-generic); the one request and reply of the family, `dev-get`, are
//! encoded here (include/uapi/linux/netdev.h).

use std::io;

use netlink_packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_packet_utils::nla::NlasIterator;
use netlink_packet_utils::parsers::{parse_u32, parse_u64};
use netlink_packet_utils::{DecodeError, Emitable, ParseableParametrized};
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};
use serde::Serialize;

const NETDEV_FAMILY: &str = "netdev";
const NETDEV_FAMILY_VERSION: u8 = 1;
const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NETDEV_A_DEV_XDP_ZC_MAX_SEGS: u16 = 4;

/// `enum netdev_xdp_act` bits.
pub mod act {
    /// XDP in the driver (native mode): XDP_PASS, XDP_DROP, XDP_ABORTED.
    pub const BASIC: u64 = 1 << 0;
    /// XDP_REDIRECT (to an AF_XDP socket, among others).
    pub const REDIRECT: u64 = 1 << 1;
    /// The device can be the target of a redirect (ndo_xdp_xmit).
    pub const NDO_XMIT: u64 = 1 << 2;
    /// AF_XDP zero-copy.
    pub const XSK_ZEROCOPY: u64 = 1 << 3;
    /// Offload to the NIC.
    pub const HW_OFFLOAD: u64 = 1 << 4;
    /// Multi-buffer (fragmented) frames in native XDP.
    pub const RX_SG: u64 = 1 << 5;
    /// Multi-buffer frames as a redirect target.
    pub const NDO_XMIT_SG: u64 = 1 << 6;
}

/// A device's XDP features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct XdpFeatures {
    /// `netdev_xdp_act` bits ([`act`]).
    pub bits: u64,
    /// Most buffers of one frame in zero-copy (1: zero-copy takes single-buffer frames
    /// only; 0 where the device has no zero-copy).
    pub zc_max_segs: u32,
}

impl XdpFeatures {
    /// Whether every bit of `bits` is set.
    pub fn has(&self, bits: u64) -> bool {
        self.bits & bits == bits
    }

    /// The features by name, as `xdp-loader features` spells them, comma-separated.
    pub fn names(&self) -> String {
        let all = [
            (act::BASIC, "basic"),
            (act::REDIRECT, "redirect"),
            (act::NDO_XMIT, "ndo-xmit"),
            (act::XSK_ZEROCOPY, "xsk-zerocopy"),
            (act::HW_OFFLOAD, "hw-offload"),
            (act::RX_SG, "rx-sg"),
            (act::NDO_XMIT_SG, "ndo-xmit-sg"),
        ];
        let names: Vec<&str> = all
            .iter()
            .filter(|(b, _)| self.bits & b != 0)
            .map(|(_, n)| *n)
            .collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(",")
        }
    }
}

/// One `dev-get` request or reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct DevMessage {
    cmd: u8,
    ifindex: Option<u32>,
    xdp_features: Option<u64>,
    zc_max_segs: Option<u32>,
}

impl GenlFamily for DevMessage {
    fn family_name() -> &'static str {
        NETDEV_FAMILY
    }
    fn command(&self) -> u8 {
        self.cmd
    }
    fn version(&self) -> u8 {
        NETDEV_FAMILY_VERSION
    }
}

impl Emitable for DevMessage {
    // A request carries the ifindex only: one 8-byte attribute.
    fn buffer_len(&self) -> usize {
        if self.ifindex.is_some() {
            8
        } else {
            0
        }
    }
    fn emit(&self, buffer: &mut [u8]) {
        if let Some(ifindex) = self.ifindex {
            buffer[0..2].copy_from_slice(&8u16.to_ne_bytes());
            buffer[2..4].copy_from_slice(&NETDEV_A_DEV_IFINDEX.to_ne_bytes());
            buffer[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        }
    }
}

impl ParseableParametrized<[u8], GenlHeader> for DevMessage {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        let mut m = DevMessage {
            cmd: header.cmd,
            ..DevMessage::default()
        };
        for nla in NlasIterator::new(buf) {
            let nla = nla?;
            match nla.kind() {
                NETDEV_A_DEV_IFINDEX => m.ifindex = Some(parse_u32(nla.value())?),
                NETDEV_A_DEV_XDP_FEATURES => m.xdp_features = Some(parse_u64(nla.value())?),
                NETDEV_A_DEV_XDP_ZC_MAX_SEGS => m.zc_max_segs = Some(parse_u32(nla.value())?),
                _ => {}
            }
        }
        Ok(m)
    }
}

/// Why the features could not be read.
#[derive(Debug, thiserror::Error)]
pub enum NetdevError {
    /// The kernel has no `netdev` family (before Linux 6.3).
    #[error("the kernel has no netdev generic-netlink family (Linux 6.3+ reports XDP features)")]
    NoFamily,
    /// A socket or protocol error.
    #[error("netdev generic netlink: {0}")]
    Io(#[from] io::Error),
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

fn request<F>(socket: &Socket, payload: GenlMessage<F>) -> io::Result<Vec<u8>>
where
    F: GenlFamily + Emitable + std::fmt::Debug,
{
    let mut payload = payload;
    payload.finalize();
    let mut msg = NetlinkMessage::from(payload);
    msg.header.flags = NLM_F_REQUEST;
    msg.header.sequence_number = 1;
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    socket.send(&buf, 0)?;
    let (reply, _) = socket.recv_from_full()?;
    Ok(reply)
}

fn family_id(socket: &Socket) -> Result<u16, NetdevError> {
    let ask = GenlMessage::from_payload(GenlCtrl {
        cmd: GenlCtrlCmd::GetFamily,
        nlas: vec![GenlCtrlAttrs::FamilyName(NETDEV_FAMILY.into())],
    });
    let reply = request(socket, ask)?;
    let msg = NetlinkMessage::<GenlMessage<GenlCtrl>>::deserialize(&reply).map_err(invalid)?;
    match msg.payload {
        NetlinkPayload::InnerMessage(m) => m
            .payload
            .nlas
            .iter()
            .find_map(|a| match a {
                GenlCtrlAttrs::FamilyId(id) => Some(*id),
                _ => None,
            })
            .ok_or_else(|| invalid("no family id in the controller's reply").into()),
        NetlinkPayload::Error(e) if e.code.map(|c| c.get()) == Some(-libc::ENOENT) => {
            Err(NetdevError::NoFamily)
        }
        NetlinkPayload::Error(e) => Err(e.to_io().into()),
        other => Err(invalid(format!("unexpected reply {other:?}")).into()),
    }
}

/// The XDP features of device `ifindex` in the calling thread's namespace.
pub fn xdp_features(ifindex: u32) -> Result<XdpFeatures, NetdevError> {
    let mut socket = Socket::new(NETLINK_GENERIC)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let id = family_id(&socket)?;
    let mut ask = GenlMessage::from_payload(DevMessage {
        cmd: NETDEV_CMD_DEV_GET,
        ifindex: Some(ifindex),
        ..DevMessage::default()
    });
    ask.set_resolved_family_id(id);
    let reply = request(&socket, ask)?;
    let msg = NetlinkMessage::<GenlMessage<DevMessage>>::deserialize(&reply).map_err(invalid)?;
    match msg.payload {
        NetlinkPayload::InnerMessage(m) => Ok(XdpFeatures {
            bits: m
                .payload
                .xdp_features
                .ok_or_else(|| invalid("no xdp-features in the reply"))?,
            zc_max_segs: m.payload.zc_max_segs.unwrap_or(0),
        }),
        NetlinkPayload::Error(e) => Err(e.to_io().into()),
        other => Err(invalid(format!("unexpected reply {other:?}")).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dev_get_reply_parses_into_features() {
        // genlmsghdr: cmd 1, version 1; then ifindex 7, xdp-features (u64), zc-max-segs.
        let mut buf = vec![1u8, 1, 0, 0];
        buf.extend_from_slice(&8u16.to_ne_bytes());
        buf.extend_from_slice(&NETDEV_A_DEV_IFINDEX.to_ne_bytes());
        buf.extend_from_slice(&7u32.to_ne_bytes());
        buf.extend_from_slice(&12u16.to_ne_bytes());
        buf.extend_from_slice(&NETDEV_A_DEV_XDP_FEATURES.to_ne_bytes());
        buf.extend_from_slice(&(act::BASIC | act::REDIRECT | act::XSK_ZEROCOPY).to_ne_bytes());
        buf.extend_from_slice(&8u16.to_ne_bytes());
        buf.extend_from_slice(&NETDEV_A_DEV_XDP_ZC_MAX_SEGS.to_ne_bytes());
        buf.extend_from_slice(&1u32.to_ne_bytes());
        let header = GenlHeader { cmd: 1, version: 1 };
        let m = DevMessage::parse_with_param(&buf[4..], header).unwrap();
        assert_eq!(m.ifindex, Some(7));
        assert_eq!(m.xdp_features, Some(0b1011));
        assert_eq!(m.zc_max_segs, Some(1));
    }

    #[test]
    fn a_request_carries_the_ifindex() {
        let m = DevMessage {
            cmd: NETDEV_CMD_DEV_GET,
            ifindex: Some(0x0102_0304),
            ..DevMessage::default()
        };
        let mut buf = vec![0u8; m.buffer_len()];
        m.emit(&mut buf);
        let back = DevMessage::parse_with_param(&buf, GenlHeader { cmd: 1, version: 1 }).unwrap();
        assert_eq!(back.ifindex, Some(0x0102_0304));
    }

    #[test]
    fn feature_names_follow_xdp_loader() {
        let f = XdpFeatures {
            bits: act::BASIC | act::REDIRECT | act::RX_SG,
            zc_max_segs: 0,
        };
        assert_eq!(f.names(), "basic,redirect,rx-sg");
        assert!(f.has(act::BASIC | act::REDIRECT));
        assert!(!f.has(act::XSK_ZEROCOPY));
    }
}
