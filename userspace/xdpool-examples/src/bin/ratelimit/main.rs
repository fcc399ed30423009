//! A per-source rate limiter between two ports: frames arriving on `in` pass to
//! `out` (next-hop MACs from the neighbour table) while their source IP has tokens,
//! and are dropped above the rate. One token bucket per source in the lane's state,
//! at most `max_sources` of them.
//!
//! The rule's `arg`: `rate=PPS,burst=N[,max_sources=N]` (frames per second per
//! source, bucket depth; default 65 536 sources). Counters: `passed`, `limited`,
//! `table_full` (a new source found the table full of busy sources: limited).
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;
use xdpool::{Counter, Declaration, Handler, LaneSetup, Mac, Packet, PortRef, Verdict};

/// Where the limiter reads the time: the monotonic clock, or a test's.
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since some fixed start.
    fn now_ns(&self) -> u64;
}

/// The monotonic clock.
pub struct Monotonic(Instant);

impl Clock for Monotonic {
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// The rate limiter, reading time from `C`.
pub struct RateLimit<C> {
    clock: C,
}

/// The rule's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Frames per second per source.
    pub rate: u64,
    /// Frames a source may send at once after being quiet.
    pub burst: u64,
    /// Sources tracked at once.
    pub max_sources: usize,
}

const NS: u128 = 1_000_000_000;

impl Limits {
    /// Parses `rate=PPS,burst=N[,max_sources=N]`.
    pub fn parse(arg: &str) -> Result<Limits, String> {
        let (mut rate, mut burst, mut max_sources) = (None, None, 65_536);
        for kv in arg.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("arg: `{kv}` is not key=value; write rate=1000,burst=50"))?;
            if !matches!(k, "rate" | "burst" | "max_sources") {
                return Err(format!(
                    "arg: unknown key `{k}`; the keys are rate, burst, max_sources"
                ));
            }
            let n: u64 = v
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("arg: {k} = `{v}`: give a whole number above 0"))?;
            match k {
                "rate" => rate = Some(n),
                "burst" => burst = Some(n),
                _ => max_sources = n as usize,
            }
        }
        let rate = rate.ok_or("arg: rate=PPS is required")?;
        Ok(Limits {
            rate,
            burst: burst.unwrap_or(rate),
            max_sources,
        })
    }
}

/// One source's bucket: tokens in billionths of a frame, and when it was last filled.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    nano_tokens: u128,
    at_ns: u64,
}

/// One lane's state.
pub struct Lane {
    out: PortRef,
    arg: String,
    limits: Result<Limits, String>,
    buckets: HashMap<IpAddr, Bucket>,
    passed: Counter,
    limited: Counter,
    table_full: Counter,
    bad_arg: Counter,
}

impl<C: Clock> RateLimit<C> {
    /// A limiter reading time from `clock`.
    pub fn with_clock(clock: C) -> Self {
        RateLimit { clock }
    }
}

impl RateLimit<Monotonic> {
    /// A limiter on the monotonic clock.
    pub fn new() -> Self {
        RateLimit::with_clock(Monotonic(Instant::now()))
    }
}

impl Default for RateLimit<Monotonic> {
    fn default() -> Self {
        RateLimit::new()
    }
}

impl<C: Clock> Handler for RateLimit<C> {
    type Lane = Lane;

    fn declare(&self) -> Declaration {
        Declaration::new().sends_to("out").tx_per_frame(0)
    }

    fn lane(&self, setup: &mut LaneSetup<'_>) -> Lane {
        Lane {
            out: setup.port("out").expect("declared, so the config has it"),
            arg: String::new(),
            limits: Err("no arg yet".into()),
            buckets: HashMap::new(),
            passed: setup.counter("passed"),
            limited: setup.counter("limited"),
            table_full: setup.counter("table_full"),
            bad_arg: setup.counter("bad_arg"),
        }
    }

    fn handle(&self, lane: &mut Lane, pkt: &mut Packet<'_>) -> Verdict {
        let arg = pkt.arg().unwrap_or("");
        if arg != lane.arg {
            lane.arg = arg.to_string();
            lane.limits = Limits::parse(arg);
            if let Err(e) = &lane.limits {
                tracing::warn!(rule = ?pkt.rule_name(), "ratelimit: {e}; dropping this rule's frames");
            }
        }
        let Ok(limits) = lane.limits else {
            lane.bad_arg.inc();
            return Verdict::drop();
        };
        let Some(src) = pkt.parse().ok().and_then(|p| p.src_ip()) else {
            lane.limited.inc(); // not IP: no source to account it to
            return Verdict::drop();
        };
        let now = self.clock.now_ns();
        if !lane.buckets.contains_key(&src) && lane.buckets.len() >= limits.max_sources {
            evict_full(&mut lane.buckets, &limits, now);
            if lane.buckets.len() >= limits.max_sources {
                lane.table_full.inc();
                lane.limited.inc();
                return Verdict::drop();
            }
        }
        let full = u128::from(limits.burst) * NS;
        let b = lane.buckets.entry(src).or_insert(Bucket {
            nano_tokens: full,
            at_ns: now,
        });
        refill(b, &limits, now);
        if b.nano_tokens >= NS {
            b.nano_tokens -= NS;
            lane.passed.inc();
            Verdict::forward(lane.out).with_mac(Mac::NextHop)
        } else {
            lane.limited.inc();
            Verdict::drop()
        }
    }
}

/// Adds the tokens earned since the bucket was last filled, up to the burst.
fn refill(b: &mut Bucket, l: &Limits, now: u64) {
    let elapsed = u128::from(now.saturating_sub(b.at_ns));
    let full = u128::from(l.burst) * NS;
    b.nano_tokens = (b.nano_tokens + elapsed * u128::from(l.rate)).min(full);
    b.at_ns = now;
}

/// Forgets the sources whose buckets are full again (quiet long enough that a new
/// bucket would be the same): only busy sources keep their place.
#[cold]
fn evict_full(buckets: &mut HashMap<IpAddr, Bucket>, l: &Limits, now: u64) {
    let full = u128::from(l.burst) * NS;
    buckets.retain(|_, b| {
        refill(b, l, now);
        b.nano_tokens < full
    });
}

fn main() {
    let args = xdpool_examples::Args::parse();
    xdpool_examples::finish(args.app().handler("ratelimit", RateLimit::new()).run());
}

#[cfg(test)]
mod tests;
