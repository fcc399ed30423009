//! A stable-Rust mutation fuzzer for [`parse`]: no sanitizers, no nightly, no extra
//! crate. It mutates seed frames with a xorshift PRNG (bit flips, interesting values in
//! the length fields it knows about, truncation, VLAN insertion, splicing), catches
//! panics, and checks [`check_invariants`] on every input. Inputs that reach a new
//! outcome (a new error kind and layer, or a new protocol shape) join the pool.
use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use super::{parse, ParseError, Parsed, ETHERTYPE_IPV4, ETHERTYPE_IPV6, L3};

/// Largest input the mutator produces.
pub const MAX_INPUT: usize = 4096;
/// Most inputs kept in the evolving pool.
const MAX_POOL: usize = 1024;

/// xorshift64* PRNG: small, fast, reproducible from its seed.
#[derive(Debug, Clone)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// A generator from `seed` (0 is replaced by a fixed non-zero constant).
    pub fn new(seed: u64) -> Self {
        Self {
            state: if seed == 0 {
                0x9e37_79b9_7f4a_7c15
            } else {
                seed
            },
        }
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-ish value in `0..n`; `n` must be non-zero.
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability 1/n.
    #[inline]
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// Checks what every `Ok` must satisfy: ranges and offsets inside `frame` and ordered,
/// and the fields consistent with one another. Returns what is violated.
pub fn check_invariants(frame: &[u8], p: &Parsed) -> Result<(), String> {
    let pl = p.payload();
    if pl.start > pl.end || pl.end > frame.len() {
        return Err(format!(
            "payload {pl:?} outside frame of {} bytes",
            frame.len()
        ));
    }
    let l3 = p.l3_offset();
    if l3 != 14 + 4 * p.vlan_tags().len() || l3 > pl.start {
        return Err(format!(
            "l3 offset {l3} inconsistent (vlans {}, payload {pl:?})",
            p.vlan_tags().len()
        ));
    }
    match (p.l3(), p.ethertype()) {
        (L3::V4 { .. }, ETHERTYPE_IPV4) | (L3::V6 { .. }, ETHERTYPE_IPV6) => {}
        (L3::None, t) if t != ETHERTYPE_IPV4 && t != ETHERTYPE_IPV6 => {}
        (l3, t) => return Err(format!("l3 {l3:?} for ethertype {t:#06x}")),
    }
    if p.ip_proto().is_some() != (p.l3() != L3::None) {
        return Err("ip_proto present without IP (or missing with IP)".into());
    }
    if p.ports().is_some() != p.l4_offset().is_some() {
        return Err("ports and l4 offset disagree".into());
    }
    if let Some(l4) = p.l4_offset() {
        if l4 <= l3 || l4 > pl.start {
            return Err(format!(
                "l4 offset {l4} not between l3 {l3} and payload {pl:?}"
            ));
        }
        if !matches!(p.ip_proto(), Some(6) | Some(17)) {
            return Err("ports on a protocol that is neither UDP nor TCP".into());
        }
    }
    if let Some(f) = p.fragment() {
        if !f.is_first() && p.ports().is_some() {
            return Err("non-first fragment has ports".into());
        }
    }
    if p.tcp_flags().is_some() && p.ip_proto() != Some(6) {
        return Err("TCP flags on a non-TCP packet".into());
    }
    Ok(())
}

/// The result of one fuzz run.
#[derive(Debug, Clone, Default)]
pub struct FuzzReport {
    /// Parser executions.
    pub execs: u64,
    /// Wall time spent.
    pub elapsed: Duration,
    /// Inputs parsed `Ok`.
    pub ok: u64,
    /// Inputs rejected with a `ParseError`.
    pub rejected: u64,
    /// Distinct outcomes seen (the pool-growth signal).
    pub outcomes: usize,
    /// Size of the evolved input pool at the end.
    pub pool: usize,
    /// Panics and invariant violations, each with the input that caused it.
    pub failures: Vec<(Vec<u8>, String)>,
}

impl FuzzReport {
    /// Executions per second.
    pub fn execs_per_sec(&self) -> f64 {
        self.execs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A coarse fingerprint of an outcome, for pool growth.
fn outcome(r: &Result<Parsed, ParseError>) -> u64 {
    match r {
        Ok(p) => {
            let frag = p.fragment().map_or(0, |f| if f.is_first() { 1 } else { 2 });
            let l3 = match p.l3() {
                L3::None => 0,
                L3::V4 { .. } => 1,
                L3::V6 { .. } => 2,
            };
            1 << 40
                | (p.vlan_tags().len() as u64) << 32
                | l3 << 28
                | frag << 24
                | u64::from(p.ip_proto().unwrap_or(0xff)) << 8
                | u64::from(p.ports().is_some())
        }
        Err(e) => {
            let layer = match e {
                ParseError::Truncated { layer, .. }
                | ParseError::LengthLies { layer, .. }
                | ParseError::LengthTooShort { layer, .. }
                | ParseError::BadIpVersion { layer, .. } => Some(*layer),
                _ => None,
            };
            let mut h = DefaultHasher::new();
            (e.kind(), layer).hash(&mut h);
            2 << 60 | h.finish() >> 4
        }
    }
}

/// Offsets of fields worth hitting with interesting values, from a frame that parses.
fn field_offsets(frame: &[u8], out: &mut Vec<usize>) {
    out.clear();
    out.push(12); // ethertype / TPID
    let Ok(p) = parse(frame) else { return };
    let l3 = p.l3_offset();
    out.push(l3 - 2); // innermost ethertype
    match p.l3() {
        L3::V4 { .. } => out.extend([l3, l3 + 2, l3 + 6, l3 + 9, l3 + 20, l3 + 21]),
        L3::V6 { .. } => out.extend([l3, l3 + 4, l3 + 6, l3 + 40, l3 + 41, l3 + 42]),
        L3::None => {}
    }
    if let Some(l4) = p.l4_offset() {
        out.extend([l4 + 4, l4 + 12]);
    }
    out.retain(|&o| o + 1 < frame.len());
}

const INTERESTING8: [u8; 10] = [0, 1, 2, 4, 5, 6, 0x0f, 0x45, 0x7f, 0xff];
const INTERESTING16: [u16; 14] = [
    0, 1, 7, 8, 19, 20, 39, 40, 0x0800, 0x86dd, 0x8100, 0x88a8, 0x7fff, 0xffff,
];

/// Applies one to four random mutations to `input`, writing the result to `out`.
pub fn mutate(
    rng: &mut XorShift64,
    input: &[u8],
    others: &[Vec<u8>],
    out: &mut Vec<u8>,
    fields: &[usize],
) {
    out.clear();
    out.extend_from_slice(input);
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        match rng.below(11) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = INTERESTING8[rng.below(INTERESTING8.len())];
            }
            2 if !fields.is_empty() => {
                // Structure-aware: a known length/type field gets an interesting value,
                // or one near the truth (off by a little either way).
                let at = fields[rng.below(fields.len())];
                if at + 1 < len {
                    let cur = u16::from_be_bytes([out[at], out[at + 1]]);
                    let v = if rng.one_in(2) {
                        INTERESTING16[rng.below(INTERESTING16.len())]
                    } else {
                        cur.wrapping_add(rng.below(17) as u16).wrapping_sub(8)
                    };
                    out[at..at + 2].copy_from_slice(&v.to_be_bytes());
                }
            }
            3 if !fields.is_empty() => {
                let at = fields[rng.below(fields.len())];
                if at < len {
                    out[at] = rng.next_u64() as u8;
                }
            }
            4 if len > 0 => out.truncate(rng.below(len)),
            5 => {
                let n = 1 + rng.below(64);
                for _ in 0..n {
                    out.push(rng.next_u64() as u8);
                }
            }
            6 if len >= 12 => {
                let tpid: u16 = if rng.one_in(2) { 0x8100 } else { 0x88a8 };
                let tci = rng.next_u64() as u16;
                let tag = [(tpid >> 8) as u8, tpid as u8, (tci >> 8) as u8, tci as u8];
                out.splice(12..12, tag);
            }
            7 if len > 1 => {
                let a = rng.below(len);
                let b = a + rng.below(len - a).min(64);
                out.drain(a..b);
            }
            8 if !others.is_empty() => {
                let o = &others[rng.below(others.len())];
                if !o.is_empty() && len > 0 {
                    let src = rng.below(o.len());
                    let n = rng.below(o.len() - src).min(64);
                    let dst = rng.below(len);
                    let n = n.min(len - dst);
                    out[dst..dst + n].copy_from_slice(&o[src..src + n]);
                }
            }
            9 if len > 1 => {
                let a = rng.below(len);
                let n = rng.below(len - a).min(40);
                let chunk: Vec<u8> = out[a..a + n].to_vec();
                let at = rng.below(len);
                out.splice(at..at, chunk);
            }
            _ if len > 0 => {
                let a = rng.below(len);
                let n = rng.below(len - a).min(16);
                for b in &mut out[a..a + n] {
                    *b = rng.next_u64() as u8;
                }
            }
            _ => out.push(rng.next_u64() as u8),
        }
    }
    out.truncate(MAX_INPUT);
}

/// A fuzz seed as the reports print it (`0x5eed`) or in decimal.
pub fn parse_seed(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16).ok(),
        None => t.replace('_', "").parse().ok(),
    }
}

/// The seed in environment variable `name` (hex or decimal), or a fresh one from
/// the clock, so each run tries new inputs; the caller prints it for a replay.
///
/// # Panics
/// If the variable is set but is not a number (a typo must not fuzz a default).
pub fn seed_from_env(name: &str) -> u64 {
    match std::env::var(name) {
        Ok(v) => parse_seed(&v)
            .unwrap_or_else(|| panic!("{name}={v:?} is not a seed; use hex (0x...) or decimal")),
        Err(_) => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            (t.as_nanos() as u64) | 1
        }
    }
}

/// Parses `input` under `catch_unwind` and checks the invariants; `Err` describes a
/// panic or a violation.
pub fn exercise(input: &[u8]) -> Result<Result<Parsed, ParseError>, String> {
    let r = catch_unwind(AssertUnwindSafe(|| parse(input))).map_err(|e| {
        let msg = e
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| e.downcast_ref::<String>().cloned());
        format!("panic: {}", msg.unwrap_or_default())
    })?;
    if let Ok(p) = &r {
        check_invariants(input, p)?;
    }
    // `parse` reads untagged plain IPv4 frames on a short path: the general walk must
    // say the same of every input.
    let any = catch_unwind(AssertUnwindSafe(|| super::packet::parse_any(input)))
        .map_err(|_| "panic in the general walk".to_string())?;
    if any != r {
        return Err(format!(
            "the short path for plain IPv4 says {r:?}, the general walk {any:?}"
        ));
    }
    Ok(r)
}

/// Fuzzes `parse` for `budget`, starting from `seeds`. Stops early after 16 failures.
pub fn run(seeds: &[Vec<u8>], seed: u64, budget: Duration) -> FuzzReport {
    let start = Instant::now();
    let mut rng = XorShift64::new(seed);
    let mut seen = HashSet::new();
    let mut report = FuzzReport::default();
    // Seeds run first: only inputs that parse without failing join the pool, since the
    // field finder below parses pool entries outside `catch_unwind`.
    let mut pool: Vec<Vec<u8>> = Vec::new();
    for s in seeds {
        report.execs += 1;
        match exercise(s) {
            Ok(r) => {
                if r.is_ok() {
                    report.ok += 1;
                } else {
                    report.rejected += 1;
                }
                seen.insert(outcome(&r));
                if !s.is_empty() {
                    pool.push(s.clone());
                }
            }
            Err(what) => report.failures.push((s.clone(), what)),
        }
    }
    if pool.is_empty() {
        pool.push(vec![0; 14]);
    }
    let mut buf = Vec::with_capacity(MAX_INPUT);
    let mut fields = Vec::new();
    let mut next_field_refresh = 0usize;
    let mut current = 0usize;
    'outer: loop {
        // Time is read once per batch; a batch is microseconds.
        for _ in 0..256 {
            if next_field_refresh == 0 {
                current = rng.below(pool.len());
                field_offsets(&pool[current], &mut fields);
                next_field_refresh = 64;
            }
            next_field_refresh -= 1;
            mutate(&mut rng, &pool[current], &pool, &mut buf, &fields);
            report.execs += 1;
            match exercise(&buf) {
                Ok(r) => {
                    if r.is_ok() {
                        report.ok += 1;
                    } else {
                        report.rejected += 1;
                    }
                    if seen.insert(outcome(&r)) && pool.len() < MAX_POOL {
                        pool.push(buf.clone());
                    }
                }
                Err(what) => {
                    report.failures.push((buf.clone(), what));
                    if report.failures.len() >= 16 {
                        break 'outer;
                    }
                }
            }
        }
        if start.elapsed() >= budget {
            break;
        }
    }
    report.elapsed = start.elapsed();
    report.outcomes = seen.len();
    report.pool = pool.len();
    report
}

#[cfg(test)]
mod seed_tests {
    use super::parse_seed;

    #[test]
    fn seeds_parse_as_printed_in_hex_and_in_decimal() {
        // The reports print `{seed:#x}`; replaying that string must give the same seed.
        let seed = 0x5eed_cafe_f00d_u64;
        assert_eq!(parse_seed(&format!("{seed:#x}")), Some(seed));
        assert_eq!(parse_seed("0x5eed_cafe_f00d"), Some(seed));
        assert_eq!(parse_seed("0X10"), Some(16));
        assert_eq!(parse_seed("10"), Some(10));
        assert_eq!(parse_seed(" 42\n"), Some(42));
        assert_eq!(parse_seed("0xzz"), None);
        assert_eq!(parse_seed("seed"), None);
    }
}
