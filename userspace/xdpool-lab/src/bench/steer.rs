//! `xdpool bench steer`: what the steering program costs per frame, against a
//! program that only redirects (`xdp-prog/redirect.bpf.c`), under
//! `BPF_PROG_TEST_RUN`.
//!
//! Every subject runs on the same frames in one process, alternating: each round
//! runs every (frame, subject) once, starting from a different subject each round,
//! and each subject's time is divided by the reference's time on the same frame
//! in the same round. The table gives medians and ranges of those per-round
//! ratios. The kernel measures the time itself and leaves out time the task was
//! scheduled away, so ratios from one run hold on a loaded machine; absolute
//! nanoseconds move with the CPU's clock and cache state.
//!
//! No interface is touched and nothing is sent: every program runs with an empty
//! XSKMAP, so a steer verdict falls back to `XDP_PASS` (counted `no_socket`), in
//! the reference too.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use super::math::{spread, Spread};
use crate::steer::{ReferenceProgram, Rule, RuleAction, RuleMatch, SteerError, Steering};

/// The reference, built from `xdp-prog/redirect.bpf.c` by this crate's build.rs.
static REDIRECT_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/redirect.bpf.o"));
/// Its program: redirects every frame to its queue's socket, nothing else.
const REDIRECT_PROG: &str = "xdpool_redirect_ref";

/// Settings of one run.
#[derive(Debug, Clone)]
pub struct SteerBenchConfig {
    /// Rounds; every subject runs once on each frame per round.
    pub rounds: u32,
    /// `BPF_PROG_TEST_RUN` repeat count of one measurement.
    pub repeat: u32,
}

impl Default for SteerBenchConfig {
    fn default() -> Self {
        SteerBenchConfig {
            rounds: 11,
            repeat: 2_000_000,
        }
    }
}

/// Destination port of the benchmark's frames: the lab's rule (`configs/lab.toml`).
const LAB_PORT: u16 = 9;

/// A rule list measured by the benchmark.
#[derive(Debug, Clone)]
pub struct Subject {
    /// Short name for the table.
    pub name: &'static str,
    /// What it is.
    pub about: &'static str,
    /// `None`: the redirect-only reference program.
    pub rules: Option<Vec<Rule>>,
    /// The multi-buffer program (`xdpool_steer`, what a jumbo-MTU port gets)
    /// instead of the single-buffer one (`xdpool_steer_1buf`, an MTU of 1500).
    pub frags: bool,
}

fn steer(
    proto: Option<u8>,
    dst_port: Option<(u16, u16)>,
    dst_prefix: Option<(IpAddr, u8)>,
) -> Rule {
    Rule {
        matcher: RuleMatch::dst(proto, dst_port, dst_prefix),
        action: RuleAction::Steer,
    }
}

const UDP: u8 = 17;
const TCP: u8 = 6;

/// Eight rules of every kind, the benchmark frame (UDP port 9, IPv4 or IPv6)
/// matching only the last: the program walks all eight.
pub fn mixed_rules() -> Vec<Rule> {
    let v4 = |a, b, c, d, len| Some((IpAddr::V4(Ipv4Addr::new(a, b, c, d)), len));
    let v6 = |s: &str, len| Some((IpAddr::V6(s.parse::<Ipv6Addr>().expect("prefix")), len));
    vec![
        steer(Some(TCP), Some((80, 80)), None),
        Rule {
            action: RuleAction::Drop,
            ..steer(None, None, v4(198, 19, 0, 0, 16))
        },
        steer(Some(UDP), Some((4789, 4789)), v4(198, 18, 0, 0, 15)),
        Rule {
            action: RuleAction::Pass,
            ..steer(None, None, v6("2001:2:0:1::", 64))
        },
        steer(Some(TCP), None, None),
        steer(None, Some((5000, 5999)), None),
        Rule {
            action: RuleAction::Drop,
            ..steer(Some(1), None, None)
        },
        steer(Some(UDP), Some((LAB_PORT, LAB_PORT)), None),
    ]
}

/// 64 rules (the most a list holds), the frame matching only the last.
pub fn sixty_four_rules() -> Vec<Rule> {
    let mut rules: Vec<Rule> = (0..63u16)
        .map(|i| steer(Some(UDP), Some((100 + i, 100 + i)), None))
        .collect();
    rules.push(steer(Some(UDP), Some((LAB_PORT, LAB_PORT)), None));
    rules
}

/// The subjects, reference first.
pub fn subjects() -> Vec<Subject> {
    vec![
        Subject {
            name: "redirect-only",
            about: "xdpool_redirect_ref: bpf_redirect_map, nothing else",
            rules: None,
            frags: true,
        },
        Subject {
            name: "match-all",
            about: "one rule without condition, steer (no parse)",
            rules: Some(vec![Rule::all(RuleAction::Steer)]),
            frags: false,
        },
        Subject {
            name: "lab",
            about: "configs/lab.toml: udp dst_port 9, steer",
            rules: Some(vec![steer(Some(UDP), Some((LAB_PORT, LAB_PORT)), None)]),
            frags: false,
        },
        Subject {
            name: "lab, multi-buffer",
            about: "the same on the multi-buffer program (a jumbo MTU or multi_buffer = true)",
            rules: Some(vec![steer(Some(UDP), Some((LAB_PORT, LAB_PORT)), None)]),
            frags: true,
        },
        Subject {
            name: "8 mixed",
            about: "proto/port/prefix rules, v4 and v6; the 8th matches",
            rules: Some(mixed_rules()),
            frags: false,
        },
        Subject {
            name: "64 rules",
            about: "udp port rules; the 64th matches",
            rules: Some(sixty_four_rules()),
            frags: false,
        },
    ]
}

/// A 64-byte frame (without FCS): UDP from port 40000 to `LAB_PORT`, to
/// 198.18.0.2 or 2001:2::2.
pub fn frame(ipv6: bool) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    let udp = |len: u16| {
        let mut u = Vec::new();
        u.extend_from_slice(&40000u16.to_be_bytes());
        u.extend_from_slice(&LAB_PORT.to_be_bytes());
        u.extend_from_slice(&len.to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.resize(usize::from(len), 0xab);
        u
    };
    if ipv6 {
        f.extend_from_slice(&0x86ddu16.to_be_bytes());
        let payload = 64 - 14 - 40;
        let mut h = vec![0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&(payload as u16).to_be_bytes());
        h[6] = UDP;
        h[7] = 64;
        h[8..24].copy_from_slice(&"2001:2::1".parse::<Ipv6Addr>().expect("addr").octets());
        h[24..40].copy_from_slice(&"2001:2::2".parse::<Ipv6Addr>().expect("addr").octets());
        f.extend_from_slice(&h);
        f.extend_from_slice(&udp(payload as u16));
    } else {
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let total = 64 - 14;
        let mut h = vec![0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        h[8] = 64;
        h[9] = UDP;
        h[12..16].copy_from_slice(&[198, 18, 0, 1]);
        h[16..20].copy_from_slice(&[198, 18, 0, 2]);
        f.extend_from_slice(&h);
        f.extend_from_slice(&udp((total - 20) as u16));
    }
    f
}

/// One row: a subject on one frame kind.
#[derive(Debug, Clone, Serialize)]
pub struct SteerRow {
    /// Subject name.
    pub subject: String,
    /// "IPv4" or "IPv6".
    pub frame: &'static str,
    /// The program's shape (`Shape`'s display), or "reference".
    pub shape: String,
    /// Nanoseconds per run, over the rounds.
    pub ns: Spread,
    /// Per-round ratio to the reference on the same frame.
    pub ratio: Spread,
}

/// The benchmark's result.
#[derive(Debug, Clone, Serialize)]
pub struct SteerReport {
    /// Rounds run.
    pub rounds: u32,
    /// Repeats per measurement.
    pub repeat: u32,
    /// One row per (frame, subject).
    pub rows: Vec<SteerRow>,
}

impl SteerReport {
    /// The Markdown table.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "BPF_PROG_TEST_RUN, 64-byte UDP frame to port {LAB_PORT}, {} rounds x {} runs, alternating; \
             ratio = median of per-round ratios to redirect-only on the same frame [range]",
            self.rounds, self.repeat
        );
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "| frame | program | shape | ns per frame, median [range] | ratio to redirect-only |"
        );
        let _ = writeln!(t, "|---|---|---|---|---|");
        for r in &self.rows {
            let _ = writeln!(
                t,
                "| {} | {} | {} | {:.1} [{:.1}-{:.1}] | {:.3} [{:.3}-{:.3}] |",
                r.frame,
                r.subject,
                r.shape,
                r.ns.median,
                r.ns.min,
                r.ns.max,
                r.ratio.median,
                r.ratio.min,
                r.ratio.max
            );
        }
        t
    }
}

/// Per-round times of every subject on one frame kind, in subject order.
fn rows_for(
    frame: &'static str,
    subjects: &[Subject],
    shapes: &[String],
    ns: &[Vec<f64>],
) -> Vec<SteerRow> {
    let reference = &ns[0];
    subjects
        .iter()
        .zip(shapes)
        .zip(ns)
        .map(|((s, shape), times)| {
            let ratios: Vec<f64> = times.iter().zip(reference).map(|(t, r)| t / r).collect();
            SteerRow {
                subject: s.name.to_string(),
                frame,
                shape: shape.clone(),
                ns: spread(times).unwrap_or(Spread {
                    median: f64::NAN,
                    min: f64::NAN,
                    max: f64::NAN,
                    spread_pct: 0.0,
                    n: 0,
                }),
                ratio: spread(&ratios).unwrap_or(Spread {
                    median: f64::NAN,
                    min: f64::NAN,
                    max: f64::NAN,
                    spread_pct: 0.0,
                    n: 0,
                }),
            }
        })
        .collect()
}

enum Loaded {
    Reference(ReferenceProgram),
    Steer(Box<Steering>),
}

impl Loaded {
    fn run(&self, frame: &[u8], repeat: u32) -> Result<(u32, std::time::Duration), SteerError> {
        match self {
            Loaded::Reference(r) => r.test_run_timed(frame, repeat),
            Loaded::Steer(s) => s.test_run_timed(frame, repeat),
        }
    }
}

/// Runs the benchmark. Needs root (BPF_PROG_TEST_RUN); `progress` gets a line per round.
pub fn run_steer_bench(
    cfg: &SteerBenchConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<SteerReport, SteerError> {
    let subjects = subjects();
    let mut loaded = Vec::new();
    let mut shapes = Vec::new();
    for s in &subjects {
        match &s.rules {
            None => {
                loaded.push(Loaded::Reference(ReferenceProgram::load(
                    REDIRECT_OBJECT,
                    REDIRECT_PROG,
                )?));
                shapes.push("reference".to_string());
            }
            Some(rules) => {
                let mut st = Steering::load()?;
                st.set_rules(rules)?;
                st.use_frags(s.frags)?;
                shapes.push(format!(
                    "{}{}",
                    st.shape(),
                    if s.frags { ", multi-buffer" } else { "" }
                ));
                loaded.push(Loaded::Steer(Box::new(st)));
            }
        }
    }
    let frames = [("IPv4", frame(false)), ("IPv6", frame(true))];
    // Every subject must give the verdict it is measured for: the reference and
    // every rule list steer the frame (XDP_PASS: the XSKMAP is empty).
    for (name, f) in &frames {
        for (s, l) in subjects.iter().zip(&loaded) {
            let (action, _) = l.run(f, 1)?;
            if action != 2 {
                return Err(SteerError::BenchVerdict {
                    subject: s.name,
                    frame: name,
                    action,
                });
            }
        }
    }
    // ns[frame][subject][round]
    let mut ns = vec![vec![Vec::with_capacity(cfg.rounds as usize); subjects.len()]; frames.len()];
    for round in 0..cfg.rounds {
        for (k, (_, f)) in frames.iter().enumerate() {
            for step in 0..subjects.len() {
                // Rotate the order so no subject always runs first or after the same one.
                let i = (step + round as usize) % subjects.len();
                let (_, took) = loaded[i].run(f, cfg.repeat)?;
                ns[k][i].push(took.as_nanos() as f64);
            }
        }
        progress(&format!("round {}/{} done", round + 1, cfg.rounds));
    }
    // The kernel reports whole nanoseconds per run: fine enough for ~10-100 ns only
    // with a long repeat, which is why the default is 2 000 000.
    let rows = frames
        .iter()
        .zip(&ns)
        .flat_map(|((name, _), times)| rows_for(name, &subjects, &shapes, times))
        .collect();
    Ok(SteerReport {
        rounds: cfg.rounds,
        repeat: cfg.repeat,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xdpool::internal::wire::parse;

    #[test]
    fn frames_parse_as_udp_to_the_lab_port() {
        for v6 in [false, true] {
            let f = frame(v6);
            assert_eq!(f.len(), 64);
            let p = parse(&f).unwrap();
            assert_eq!((p.ip_proto(), p.dst_port()), (Some(UDP), Some(LAB_PORT)));
        }
    }

    #[test]
    fn rule_lists_have_the_sizes_the_table_names() {
        assert_eq!(mixed_rules().len(), 8);
        assert_eq!(sixty_four_rules().len(), 64);
        let s = subjects();
        assert!(s[0].rules.is_none(), "reference first");
        assert_eq!(
            s.iter().map(|s| s.name).collect::<Vec<_>>(),
            [
                "redirect-only",
                "match-all",
                "lab",
                "lab, multi-buffer",
                "8 mixed",
                "64 rules"
            ]
        );
    }

    #[test]
    fn ratios_are_per_round_against_the_reference() {
        let subjects = &subjects()[..2];
        let shapes = vec!["reference".to_string(), "x".to_string()];
        // The reference slows down in round 2; the subject with it: ratio stays 1.5.
        let ns = vec![vec![10.0, 20.0, 10.0], vec![15.0, 30.0, 15.0]];
        let rows = rows_for("IPv4", subjects, &shapes, &ns);
        assert_eq!(rows[0].ratio.median, 1.0);
        assert_eq!(
            (rows[1].ratio.median, rows[1].ratio.min, rows[1].ratio.max),
            (1.5, 1.5, 1.5)
        );
        assert_eq!(rows[1].ns.median, 15.0);
        let report = SteerReport {
            rounds: 3,
            repeat: 1,
            rows,
        };
        let table = report.table();
        assert!(
            table.contains("| IPv4 | match-all | x | 15.0 [15.0-30.0] | 1.500 [1.500-1.500] |"),
            "{table}"
        );
    }
}
