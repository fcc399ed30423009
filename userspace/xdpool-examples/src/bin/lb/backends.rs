//! The backend list a rule's `arg` gives, and rendezvous hashing over it.
use std::net::Ipv4Addr;

/// One backend: where frames for it go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    /// Its MAC (the frame's new destination MAC).
    pub mac: [u8; 6],
    /// Its IPv4 address, when the destination IP is rewritten too.
    pub ip: Option<Ipv4Addr>,
    /// A hash of its identity (MAC and IP), not of its place in the list: removing
    /// another backend leaves its weights, and so its flows, unchanged.
    key: u64,
}

/// The backends of one arg.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backends(Vec<Backend>);

impl Backends {
    /// Parses `MAC[=IPv4],MAC[=IPv4],...` (at most 256 backends, no repeats).
    pub fn parse(arg: &str) -> Result<Backends, String> {
        let mut list: Vec<Backend> = Vec::new();
        for item in arg.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (mac_text, ip_text) = match item.split_once('=') {
                Some((m, i)) => (m, Some(i)),
                None => (item, None),
            };
            let mac = parse_mac(mac_text).ok_or_else(|| {
                format!("arg: `{mac_text}` is not a MAC; write backends as 02:00:00:00:01:01=198.18.2.1,...")
            })?;
            let ip = match ip_text {
                Some(t) => Some(t.parse::<Ipv4Addr>().map_err(|_| {
                    format!("arg: `{t}` is not an IPv4 address (backend {mac_text})")
                })?),
                None => None,
            };
            let mut h = Fnv::new();
            h.write(&mac);
            h.write(&ip.map_or([0; 4], |i| i.octets()));
            let b = Backend {
                mac,
                ip,
                key: h.finish(),
            };
            if list.iter().any(|o| o.mac == b.mac && o.ip == b.ip) {
                return Err(format!("arg: backend `{item}` is listed twice"));
            }
            list.push(b);
        }
        if list.is_empty() {
            return Err("arg: no backends; give MAC[=IPv4],... in the rule's arg".into());
        }
        if list.len() > 256 {
            return Err(format!("arg: {} backends, at most 256", list.len()));
        }
        Ok(Backends(list))
    }

    /// The backend of flow hash `flow`: the one with the highest weight
    /// `mix(flow ^ key)`. A flow moves only when its backend leaves the list (or a
    /// new backend outweighs it).
    #[inline]
    pub fn pick(&self, flow: u64) -> &Backend {
        let mut best = &self.0[0];
        let mut best_w = mix(flow ^ best.key);
        for b in &self.0[1..] {
            let w = mix(flow ^ b.key);
            if w > best_w {
                best = b;
                best_w = w;
            }
        }
        best
    }

    /// How many.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// `02:00:00:00:01:01` to bytes.
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The splitmix64 finalizer: every input bit moves every output bit.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A flow's hash: its fields packed into 64-bit words, each word mixed into the
/// state in turn (two words for IPv4, five for IPv6). A byte-wise hash of the same
/// 13 bytes cost 40 more instructions per frame.
pub struct FlowHash(u64);

impl FlowHash {
    /// Starts from FNV's offset basis, as [`Fnv`] does.
    pub fn new() -> FlowHash {
        FlowHash(Fnv::new().0)
    }
    /// Adds one word.
    #[inline]
    pub fn word(&mut self, w: u64) {
        self.0 = mix(self.0 ^ w);
    }
    /// The hash (the last word's mix spread it already).
    #[inline]
    pub fn finish(&self) -> u64 {
        self.0
    }
}

/// FNV-1a, 64 bits: a small hash of a backend's fields.
pub struct Fnv(u64);

impl Fnv {
    /// The offset basis.
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    /// Adds `bytes`.
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    /// The hash, mixed so that nearby tuples land far apart.
    #[inline]
    pub fn finish(&self) -> u64 {
        mix(self.0)
    }
}
