//! The packet parser's regression corpus and its time-bounded loop fuzzer.
//!
//! `tests/corpus/wire/*.bin` are frames (Ethernet first, no FCS), one per file, named
//! for what they are; `expected.txt` holds one line per file:
//! `name.bin -> ok ethertype=0x0800 vlans=0 proto=17 frag=none sport=1024 dport=9 payload=42..46`
//! or `name.bin -> err BadIhl ihl=4`. The files are produced by [`corpus`] below:
//! regenerate with `XDPOOL_REGEN_CORPUS=1 cargo test -p xdpool --test wire_corpus`.
//! The loop fuzzer runs for `XDPOOL_FUZZ_SECS` seconds (default 10).
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use xdpool::internal::wire::build::{ExtHeader, FrameBuilder};
use xdpool::internal::wire::{
    fuzz, parse, proto, ParseError, Parsed, ETHERTYPE_ARP, ETHERTYPE_QINQ, ETHERTYPE_VLAN,
};

/// What a corpus frame is built to show.
#[derive(Debug, Clone, Copy)]
enum Intent {
    Ok {
        proto: Option<u8>,
        dport: Option<u16>,
    },
    Err(&'static str),
}

struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    intent: Intent,
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/wire")
}

const V6A: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const V6B: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 2);

fn v4() -> FrameBuilder {
    FrameBuilder::new().ipv4(Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 19, 0, 1))
}

fn v6() -> FrameBuilder {
    FrameBuilder::new().ipv6(V6A, V6B)
}

/// `bytes` with `value` written big-endian at `at`.
fn set16(mut bytes: Vec<u8>, at: usize, value: u16) -> Vec<u8> {
    bytes[at..at + 2].copy_from_slice(&value.to_be_bytes());
    bytes
}

fn set8(mut bytes: Vec<u8>, at: usize, value: u8) -> Vec<u8> {
    bytes[at] = value;
    bytes
}

fn cut(mut bytes: Vec<u8>, len: usize) -> Vec<u8> {
    bytes.truncate(len);
    bytes
}

/// The corpus, deterministic: same bytes on every run.
fn corpus() -> Vec<Case> {
    use Intent::{Err as E, Ok as O};
    let udp = |d| O {
        proto: Some(proto::UDP),
        dport: Some(d),
    };
    let tcp = |d| O {
        proto: Some(proto::TCP),
        dport: Some(d),
    };
    let pay = b"xdpool corpus";
    let mut c = Vec::new();
    let mut add = |name, bytes, intent| {
        c.push(Case {
            name,
            bytes,
            intent,
        })
    };

    // Well-formed.
    add(
        "ipv4_udp.bin",
        v4().udp(1024, 9).payload(pay).build().bytes,
        udp(9),
    );
    add(
        "ipv4_tcp_syn.bin",
        v4().tcp(40000, 80, 0x02)
            .tcp_options(&[2, 4, 5, 0xb4, 1, 1, 4, 2])
            .build()
            .bytes,
        tcp(80),
    );
    let mut padded = v4().udp(7, 9).build().bytes;
    padded.resize(60, 0);
    add("ipv4_udp_min_padded.bin", padded, udp(9));
    add(
        "vlan_single_udp.bin",
        v4().vlan(ETHERTYPE_VLAN, 100)
            .udp(1024, 9)
            .payload(pay)
            .build()
            .bytes,
        udp(9),
    );
    add(
        "vlan_double_udp.bin",
        v4().vlan(ETHERTYPE_QINQ, 10)
            .vlan(ETHERTYPE_VLAN, 20)
            .udp(1024, 9)
            .payload(pay)
            .build()
            .bytes,
        udp(9),
    );
    add(
        "vlan_double_8100_ipv6_tcp.bin",
        v6().vlan(ETHERTYPE_VLAN, 30)
            .vlan(ETHERTYPE_VLAN, 40)
            .tcp(5, 443, 0x10)
            .payload(pay)
            .build()
            .bytes,
        tcp(443),
    );
    add(
        "ipv4_options_rr_udp.bin",
        v4().ipv4_options(&[1, 7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0])
            .udp(1024, 53)
            .payload(pay)
            .build()
            .bytes,
        udp(53),
    );
    add(
        "ipv4_frag_first_udp.bin",
        v4().ipv4_fragment(0, true, 0x1234)
            .udp(1024, 9)
            .payload(&[0xaa; 24])
            .build()
            .bytes,
        udp(9),
    );
    add(
        "ipv4_frag_later.bin",
        v4().ipv4_fragment(1480, false, 0x1234)
            .ip_proto(proto::UDP)
            .payload(&[0xbb; 20])
            .build()
            .bytes,
        O {
            proto: Some(proto::UDP),
            dport: None,
        },
    );
    add(
        "ipv4_icmp.bin",
        v4().ip_proto(proto::ICMP)
            .payload(&[8, 0, 0xf7, 0xff, 0, 0, 0, 0])
            .build()
            .bytes,
        O {
            proto: Some(proto::ICMP),
            dport: None,
        },
    );
    add(
        "ipv4_udp_len_below_ip_len.bin",
        set16(v4().udp(1, 9).payload(&[1; 8]).build().bytes, 38, 12),
        udp(9),
    );
    add(
        "arp.bin",
        FrameBuilder::new()
            .raw_ethertype(ETHERTYPE_ARP)
            .payload(&[0, 1, 8, 0, 6, 4, 0, 1])
            .build()
            .bytes,
        O {
            proto: None,
            dport: None,
        },
    );
    add(
        "ipv6_udp.bin",
        v6().udp(1024, 9).payload(pay).build().bytes,
        udp(9),
    );
    add(
        "ipv6_tcp_options.bin",
        v6().tcp(1024, 22, 0x18)
            .tcp_options(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2])
            .payload(pay)
            .build()
            .bytes,
        tcp(22),
    );
    add(
        "ipv6_hbh_dest_udp.bin",
        v6().ipv6_ext(ExtHeader::HopByHop { len8: 0 })
            .ipv6_ext(ExtHeader::DestOpts { len8: 1 })
            .udp(1024, 9)
            .build()
            .bytes,
        udp(9),
    );
    add(
        "ipv6_frag_ext_tcp.bin",
        v6().ipv6_ext(ExtHeader::HopByHop { len8: 0 })
            .ipv6_ext(ExtHeader::Fragment {
                offset: 0,
                more: true,
                id: 7,
            })
            .tcp(1024, 80, 0x18)
            .payload(&[0xcc; 32])
            .build()
            .bytes,
        tcp(80),
    );
    add(
        "ipv6_frag_later.bin",
        v6().ipv6_ext(ExtHeader::Fragment {
            offset: 1448,
            more: false,
            id: 7,
        })
        .ip_proto(proto::TCP)
        .payload(&[0xdd; 12])
        .build()
        .bytes,
        O {
            proto: Some(proto::TCP),
            dport: None,
        },
    );
    add(
        "ipv6_atomic_frag_udp.bin",
        v6().ipv6_ext(ExtHeader::Fragment {
            offset: 0,
            more: false,
            id: 9,
        })
        .udp(1024, 9)
        .build()
        .bytes,
        udp(9),
    );
    add(
        "ipv6_routing_ah_udp.bin",
        v6().ipv6_ext(ExtHeader::Routing { len8: 2 })
            .ipv6_ext(ExtHeader::Auth { len4: 4 })
            .udp(1024, 4500)
            .build()
            .bytes,
        udp(4500),
    );
    add(
        "ipv6_no_next_header.bin",
        v6().ip_proto(proto::IPV6_NONXT).build().bytes,
        O {
            proto: Some(proto::IPV6_NONXT),
            dport: None,
        },
    );
    add(
        "ipv6_esp.bin",
        v6().ip_proto(proto::ESP)
            .payload(&[0, 0, 0x10, 0, 0, 0, 0, 1])
            .build()
            .bytes,
        O {
            proto: Some(proto::ESP),
            dport: None,
        },
    );
    let mut eight = v6();
    for _ in 0..8 {
        eight = eight.ipv6_ext(ExtHeader::DestOpts { len8: 0 });
    }
    add(
        "ipv6_ext_chain_8_udp.bin",
        eight.clone().udp(1024, 9).build().bytes,
        udp(9),
    );

    // Malformed.
    add(
        "truncated_eth_13.bin",
        cut(v4().build().bytes, 13),
        E("Truncated"),
    );
    add(
        "truncated_vlan_tag.bin",
        cut(v4().vlan(ETHERTYPE_VLAN, 1).build().bytes, 16),
        E("Truncated"),
    );
    add(
        "vlan_triple.bin",
        v4().vlan(ETHERTYPE_QINQ, 1)
            .vlan(ETHERTYPE_VLAN, 2)
            .vlan(ETHERTYPE_VLAN, 3)
            .udp(1, 9)
            .build()
            .bytes,
        E("TooManyVlanTags"),
    );
    add(
        "vlan_double_truncated_ipv4.bin",
        cut(
            v4().vlan(ETHERTYPE_QINQ, 1)
                .vlan(ETHERTYPE_VLAN, 2)
                .udp(1, 9)
                .build()
                .bytes,
            22 + 12,
        ),
        E("Truncated"),
    );
    add(
        "ipv4_truncated_hdr.bin",
        cut(v4().udp(1, 9).build().bytes, 14 + 19),
        E("Truncated"),
    );
    let base = v4().udp(1024, 9).payload(pay).build().bytes;
    add("ipv4_ihl_4.bin", set8(base.clone(), 14, 0x44), E("BadIhl"));
    add("ipv4_ihl_0.bin", set8(base.clone(), 14, 0x40), E("BadIhl"));
    add(
        "ipv4_ihl_15_short.bin",
        set8(base.clone(), 14, 0x4f),
        E("Truncated"),
    );
    add(
        "ipv4_version_6_in_ipv4_ethertype.bin",
        set8(base.clone(), 14, 0x65),
        E("BadIpVersion"),
    );
    add(
        "ipv4_total_len_over.bin",
        set16(base.clone(), 16, 200),
        E("LengthLies"),
    );
    add(
        "ipv4_total_len_under_hdr.bin",
        set16(base.clone(), 16, 12),
        E("LengthTooShort"),
    );
    add(
        "truncated_ipv4_in_udp_payload.bin",
        cut(base.clone(), base.len() - 3),
        E("LengthLies"),
    );
    add(
        "ipv4_option_len_0.bin",
        v4().ipv4_options(&[7, 0, 0, 0]).udp(1, 9).build().bytes,
        E("BadIpv4Option"),
    );
    add(
        "ipv4_option_overrun.bin",
        v4().ipv4_options(&[1, 1, 7, 40]).udp(1, 9).build().bytes,
        E("BadIpv4Option"),
    );
    add(
        "ipv4_frag_ping_of_death.bin",
        v4().ipv4_fragment(65512, false, 1)
            .ip_proto(proto::ICMP)
            .payload(&[0; 40])
            .build()
            .bytes,
        E("FragmentTooLarge"),
    );
    add(
        "ipv4_frag_first_tiny_tcp.bin",
        v4().ipv4_fragment(0, true, 2)
            .ip_proto(proto::TCP)
            .payload(&[0; 8])
            .build()
            .bytes,
        E("Truncated"),
    );
    add(
        "truncated_udp_hdr.bin",
        v4().ip_proto(proto::UDP)
            .payload(&[0x04, 0, 0, 9])
            .build()
            .bytes,
        E("Truncated"),
    );
    add(
        "udp_len_over.bin",
        set16(base.clone(), 38, 100),
        E("LengthLies"),
    );
    add(
        "udp_len_7.bin",
        set16(base.clone(), 38, 7),
        E("LengthTooShort"),
    );
    add(
        "udp_len_0.bin",
        set16(base.clone(), 38, 0),
        E("LengthTooShort"),
    );
    let t = v4().tcp(1024, 80, 0x02).payload(pay).build().bytes;
    add(
        "tcp_doff_4.bin",
        set8(t.clone(), 34 + 12, 0x40),
        E("BadTcpOffset"),
    );
    add(
        "tcp_doff_0.bin",
        set8(t.clone(), 34 + 12, 0x00),
        E("BadTcpOffset"),
    );
    add(
        "tcp_doff_15_short.bin",
        set8(t.clone(), 34 + 12, 0xf0),
        E("Truncated"),
    );
    add(
        "truncated_tcp_hdr.bin",
        v4().ip_proto(proto::TCP).payload(&[0; 12]).build().bytes,
        E("Truncated"),
    );
    let b6 = v6().udp(1024, 9).payload(pay).build().bytes;
    add(
        "ipv6_truncated_hdr.bin",
        cut(b6.clone(), 14 + 39),
        E("Truncated"),
    );
    add(
        "ipv6_version_4_in_ipv6_ethertype.bin",
        set8(b6.clone(), 14, 0x40),
        E("BadIpVersion"),
    );
    add(
        "ipv6_payload_len_over.bin",
        set16(b6.clone(), 18, 400),
        E("LengthLies"),
    );
    add(
        "ipv6_udp_len_over.bin",
        set16(b6.clone(), 54 + 4, 60),
        E("LengthLies"),
    );
    add(
        "ipv6_tcp_doff_3.bin",
        set8(v6().tcp(1, 80, 0x02).build().bytes, 54 + 12, 0x30),
        E("BadTcpOffset"),
    );
    add(
        "ipv6_hbh_not_first.bin",
        v6().ipv6_ext(ExtHeader::DestOpts { len8: 0 })
            .ipv6_ext(ExtHeader::HopByHop { len8: 0 })
            .udp(1, 9)
            .build()
            .bytes,
        E("HopByHopNotFirst"),
    );
    add(
        "ipv6_ext_chain_9.bin",
        eight
            .ipv6_ext(ExtHeader::DestOpts { len8: 0 })
            .udp(1024, 9)
            .build()
            .bytes,
        E("TooManyExtHeaders"),
    );
    add(
        "ipv6_ext_len_overrun.bin",
        set8(
            v6().ipv6_ext(ExtHeader::Routing { len8: 0 })
                .udp(1, 9)
                .build()
                .bytes,
            54 + 1,
            30,
        ),
        E("Truncated"),
    );
    add(
        "ipv6_ext_truncated_fixed.bin",
        v6().ip_proto(proto::IPV6_OPTS)
            .payload(&[17, 0, 1, 2])
            .build()
            .bytes,
        E("Truncated"),
    );
    add(
        "ipv6_ah_len_0.bin",
        set8(
            v6().ipv6_ext(ExtHeader::Auth { len4: 1 })
                .udp(1, 9)
                .build()
                .bytes,
            54 + 1,
            0,
        ),
        E("BadExtHeader"),
    );
    add(
        "ipv6_frag_ping_of_death.bin",
        v6().ipv6_ext(ExtHeader::Fragment {
            offset: 65528,
            more: false,
            id: 3,
        })
        .ip_proto(proto::UDP)
        .payload(&[0; 16])
        .build()
        .bytes,
        E("FragmentTooLarge"),
    );
    c
}

/// One stable text line for a parse result; the token after `ok`/`err` is what a
/// kernel-side test compares first.
fn summarize(r: &Result<Parsed, ParseError>) -> String {
    match r {
        Ok(p) => {
            let mut s = format!(
                "ok ethertype={:#06x} vlans={}",
                p.ethertype(),
                p.vlan_tags().len()
            );
            let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
            let frag = match p.fragment() {
                None => "none",
                Some(f) if !f.more && f.offset == 0 => "atomic",
                Some(f) if f.offset == 0 => "first",
                Some(_) => "later",
            };
            write!(
                s,
                " proto={} frag={} sport={} dport={} payload={}..{}",
                opt(p.ip_proto().map(|v| v.to_string())),
                frag,
                opt(p.src_port().map(|v| v.to_string())),
                opt(p.dst_port().map(|v| v.to_string())),
                p.payload().start,
                p.payload().end
            )
            .unwrap();
            s
        }
        Err(e) => {
            // `Truncated { layer: Udp, need: 8, have: 4 }` -> `Truncated layer=Udp need=8 have=4`
            let dbg = format!("{e:?}");
            let fields = dbg[e.kind().len()..]
                .trim()
                .trim_start_matches('{')
                .trim_end_matches('}')
                .trim()
                .replace(": ", "=")
                .replace(", ", " ");
            if fields.is_empty() {
                format!("err {}", e.kind())
            } else {
                format!("err {} {}", e.kind(), fields)
            }
        }
    }
}

fn expected_text(cases: &[Case]) -> String {
    let mut s = String::from(
        "# Generated by tests/wire_corpus.rs (XDPOOL_REGEN_CORPUS=1); one line per frame.\n",
    );
    for c in cases {
        writeln!(s, "{} -> {}", c.name, summarize(&parse(&c.bytes))).unwrap();
    }
    s
}

#[test]
fn corpus_cases_show_what_they_are_named_for() {
    let cases = corpus();
    let (mut good, mut bad) = (0, 0);
    for c in &cases {
        let r = parse(&c.bytes);
        match (c.intent, &r) {
            (Intent::Ok { proto, dport }, Ok(p)) => {
                good += 1;
                assert_eq!((p.ip_proto(), p.dst_port()), (proto, dport), "{}", c.name);
            }
            (Intent::Err(kind), Err(e)) => {
                bad += 1;
                assert_eq!(e.kind(), kind, "{}: {e}", c.name);
            }
            (intent, r) => panic!("{}: meant {intent:?}, got {r:?}", c.name),
        }
    }
    assert!(
        good >= 10 && bad >= 25,
        "{good} well-formed, {bad} malformed"
    );
    let mut names: Vec<_> = cases.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "duplicate corpus names");
}

/// With `XDPOOL_REGEN_CORPUS` set, rewrites the corpus files once, before any test reads them.
fn ensure_corpus() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if std::env::var_os("XDPOOL_REGEN_CORPUS").is_none() {
            return;
        }
        let dir = corpus_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "bin") {
                std::fs::remove_file(path).unwrap();
            }
        }
        let cases = corpus();
        for c in &cases {
            std::fs::write(dir.join(c.name), &c.bytes).unwrap();
        }
        std::fs::write(dir.join("expected.txt"), expected_text(&cases)).unwrap();
    });
}

#[test]
fn corpus_files_match_generator() {
    ensure_corpus();
    let dir = corpus_dir();
    let cases = corpus();
    let expected = expected_text(&cases);
    for c in &cases {
        let on_disk = std::fs::read(dir.join(c.name))
            .unwrap_or_else(|e| panic!("{}: {e}; regenerate with XDPOOL_REGEN_CORPUS=1", c.name));
        assert_eq!(
            on_disk, c.bytes,
            "{} differs from the generator; regenerate with XDPOOL_REGEN_CORPUS=1",
            c.name
        );
    }
    let bins = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "bin")
        })
        .count();
    assert_eq!(bins, cases.len(), "stale .bin files in {}", dir.display());
    assert_eq!(
        std::fs::read_to_string(dir.join("expected.txt")).unwrap(),
        expected
    );
}

/// The regression check proper: files and expectations from disk, no generator.
#[test]
fn corpus_expectations_hold() {
    ensure_corpus();
    let dir = corpus_dir();
    let text =
        std::fs::read_to_string(dir.join("expected.txt")).expect("tests/corpus/wire/expected.txt");
    let mut checked = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (name, want) = line
            .split_once(" -> ")
            .unwrap_or_else(|| panic!("bad line {line:?}"));
        let bytes = std::fs::read(dir.join(name)).unwrap();
        assert_eq!(summarize(&parse(&bytes)), want, "{name}");
        checked += 1;
    }
    assert!(checked >= 35, "only {checked} corpus entries");
}

/// Seeds: every corpus file on disk.
fn seeds() -> Vec<Vec<u8>> {
    ensure_corpus();
    let mut v: Vec<_> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    v.sort();
    v.into_iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn fuzz_loop_over_corpus() {
    let secs: f64 = std::env::var("XDPOOL_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    let seed = fuzz::seed_from_env("XDPOOL_FUZZ_SEED");
    println!("wire fuzz seed {seed:#x} (replay: XDPOOL_FUZZ_SEED={seed:#x})");
    let report = fuzz::run(&seeds(), seed, Duration::from_secs_f64(secs));
    println!(
        "wire fuzz: {} execs in {:.1} s = {:.0} execs/s; ok {} rejected {}; {} distinct outcomes; pool {}; failures {} (seed {seed:#x})",
        report.execs,
        report.elapsed.as_secs_f64(),
        report.execs_per_sec(),
        report.ok,
        report.rejected,
        report.outcomes,
        report.pool,
        report.failures.len()
    );
    for (i, (input, what)) in report.failures.iter().enumerate() {
        let path =
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("wire-fuzz-failure-{i}.bin"));
        std::fs::write(&path, input).unwrap();
        println!("failure {i}: {what}; input saved to {}", path.display());
    }
    assert!(
        report.failures.is_empty(),
        "{} fuzz failures, first: {}",
        report.failures.len(),
        report.failures[0].1
    );
    if secs >= 1.0 {
        // A short smoke run (XDPOOL_FUZZ_SECS=0) only checks for failures.
        assert!(
            report.execs > 1000,
            "fuzzer barely ran: {} execs",
            report.execs
        );
        assert!(
            report.ok > 0 && report.rejected > 0,
            "mutations never reach both outcomes"
        );
        assert!(
            report.outcomes >= 20,
            "only {} distinct outcomes",
            report.outcomes
        );
    }
}

/// Parser cost on the corpus mix, etherparse's strict slicer alongside for scale:
/// `cargo test --release -p xdpool --test wire_corpus -- --ignored --nocapture`.
#[test]
#[ignore = "measurement; run in release"]
fn parse_throughput() {
    let seeds = seeds();
    let rounds = 200_000;
    let n = (rounds * seeds.len()) as f64;
    let start = Instant::now();
    let mut sink = 0usize;
    for _ in 0..rounds {
        for s in &seeds {
            sink = sink.wrapping_add(match std::hint::black_box(parse(std::hint::black_box(s))) {
                Ok(p) => p.payload().end,
                Err(_) => 1,
            });
        }
    }
    let ours = start.elapsed();
    let start = Instant::now();
    for _ in 0..rounds {
        for s in &seeds {
            sink = sink.wrapping_add(
                std::hint::black_box(etherparse::SlicedPacket::from_ethernet(
                    std::hint::black_box(s),
                ))
                .is_ok() as usize,
            );
        }
    }
    let theirs = start.elapsed();
    println!(
        "| parser ({} corpus frames) | ns/frame | Mframes/s |\n|---|---|---|",
        seeds.len()
    );
    for (name, el) in [
        ("xdpool::internal::wire::parse", ours),
        ("etherparse::SlicedPacket", theirs),
    ] {
        println!(
            "| {name} | {:.1} | {:.1} |",
            el.as_nanos() as f64 / n,
            n / el.as_secs_f64() / 1e6
        );
    }
    assert!(sink > 0);
}
