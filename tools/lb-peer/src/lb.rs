//! The load balancer's per-frame work, the same as xdpool's `lb` example
//! (userspace/xdpool-examples/src/bin/lb): rendezvous hashing of the 5-tuple over
//! the backends, destination MAC (and IPv4 address, checksums updated incrementally
//! per RFC 1624) rewritten, source MAC set to the egress device's.
use std::net::Ipv4Addr;

pub struct Backend {
    pub mac: [u8; 6],
    pub ip: Option<Ipv4Addr>,
    key: u64,
}

/// Parses `MAC[=IPv4],...`, the arg of the lb example's rule.
pub fn parse_backends(arg: &str) -> Vec<Backend> {
    arg.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|item| {
            let (mac, ip) = match item.trim().split_once('=') {
                Some((m, i)) => (m, Some(i.parse::<Ipv4Addr>().expect("backend IPv4"))),
                None => (item.trim(), None),
            };
            let mac = parse_mac(mac);
            let mut h = fnv_new();
            fnv_write(&mut h, &mac);
            fnv_write(&mut h, &ip.map_or([0; 4], |i| i.octets()));
            Backend {
                mac,
                ip,
                key: mix(h),
            }
        })
        .collect()
}

pub fn parse_mac(s: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (b, p) in mac.iter_mut().zip(s.trim().split(':')) {
        *b = u8::from_str_radix(p, 16).expect("MAC");
    }
    mac
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv_new() -> u64 {
    0xcbf2_9ce4_8422_2325
}

fn fnv_write(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h = (*h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
}

fn pick(backends: &[Backend], flow: u64) -> &Backend {
    backends
        .iter()
        .max_by_key(|b| mix(flow ^ b.key))
        .expect("at least one backend")
}

/// Rewrites `frame` for its backend; `false`: not IPv4/IPv6 UDP/TCP, drop it.
pub fn handle(frame: &mut [u8], backends: &[Backend], src_mac: &[u8; 6]) -> bool {
    if frame.len() < 14 {
        return false;
    }
    let mut l3 = 14;
    let mut ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        if frame.len() < 18 {
            return false;
        }
        ethertype = u16::from_be_bytes([frame[16], frame[17]]);
        l3 = 18;
    }
    // The flow's fields packed into 64-bit words, each mixed in turn (as the lb
    // example's FlowHash does): IPv4 source and destination in one word, IPv6 in
    // four, then protocol and ports.
    let mut h = fnv_new();
    let mut word = |w: u64| h = mix(h ^ w);
    let (proto, l4, v4) = match ethertype {
        0x0800 => {
            if frame.len() < l3 + 20 || frame[l3] >> 4 != 4 {
                return false;
            }
            let ihl = usize::from(frame[l3] & 0x0f) * 4;
            if ihl < 20 || frame.len() < l3 + ihl {
                return false;
            }
            let frag = u16::from_be_bytes([frame[l3 + 6], frame[l3 + 7]]);
            let (more, offset) = (frag & 0x2000 != 0, frag & 0x1fff);
            word(u64::from_be_bytes(
                frame[l3 + 12..l3 + 20].try_into().unwrap(),
            ));
            let l4 = if offset == 0 { Some(l3 + ihl) } else { None };
            (frame[l3 + 9], l4, Some(more || offset != 0))
        }
        0x86dd => {
            if frame.len() < l3 + 40 {
                return false;
            }
            for at in [8, 16, 24, 32] {
                word(u64::from_be_bytes(
                    frame[l3 + at..l3 + at + 8].try_into().unwrap(),
                ));
            }
            (frame[l3 + 6], Some(l3 + 40), None)
        }
        _ => return false,
    };
    if proto != 6 && proto != 17 {
        return false;
    }
    let fragment = v4 == Some(true);
    let ports = match l4 {
        Some(o) if !fragment && frame.len() >= o + 4 => {
            u64::from(u32::from_be_bytes(frame[o..o + 4].try_into().unwrap()))
        }
        _ => 0,
    };
    word(u64::from(proto) << 32 | ports);
    let backend = pick(backends, h);
    if let Some(ip) = backend.ip {
        if v4.is_none() {
            return false; // an IPv4 backend for an IPv6 frame
        }
        rewrite_dst_ipv4(frame, l3, l4.map(|o| (o, proto)), ip);
    }
    frame[0..6].copy_from_slice(&backend.mac);
    frame[6..12].copy_from_slice(src_mac);
    true
}

fn rewrite_dst_ipv4(frame: &mut [u8], l3: usize, l4: Option<(usize, u8)>, ip: Ipv4Addr) {
    let (old, new) = (
        <[u8; 4]>::try_from(&frame[l3 + 16..l3 + 20]).unwrap(),
        ip.octets(),
    );
    if old == new {
        return;
    }
    frame[l3 + 16..l3 + 20].copy_from_slice(&new);
    csum_update(frame, l3 + 10, &old, &new);
    match l4 {
        Some((o, 6)) if frame.len() >= o + 18 => csum_update(frame, o + 16, &old, &new),
        Some((o, 17)) if frame.len() >= o + 8 && frame[o + 6..o + 8] != [0, 0] => {
            csum_update(frame, o + 6, &old, &new);
            if frame[o + 6..o + 8] == [0, 0] {
                frame[o + 6..o + 8].copy_from_slice(&[0xff, 0xff]);
            }
        }
        _ => {}
    }
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
fn csum_update(frame: &mut [u8], at: usize, old: &[u8; 4], new: &[u8; 4]) {
    let mut sum = u32::from(!u16::from_be_bytes([frame[at], frame[at + 1]]));
    for i in [0, 2] {
        sum += u32::from(!u16::from_be_bytes([old[i], old[i + 1]]));
        sum += u32::from(u16::from_be_bytes([new[i], new[i + 1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    frame[at..at + 2].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}
