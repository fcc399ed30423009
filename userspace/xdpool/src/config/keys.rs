//! Every configuration key with its type, default, valid range and meaning: the
//! source of `docs/reference/config.md`. The tests hold it to the serde types (every
//! field has a row and every row a field) and to the defaults in the code.

/// One key of the configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The table the key is in, as written in the file: `interface`, `[port]`, `umem`,
    /// `rings`, `workers`, `[rule]`, `rule.capture`, `stats`.
    pub table: &'static str,
    /// The key's name in its table.
    pub name: &'static str,
    /// Its TOML type.
    pub ty: &'static str,
    /// Its default (`required` where it has none and must be given; `none` where
    /// absence means off or any).
    pub default: &'static str,
    /// Valid values.
    pub range: &'static str,
    /// What it does.
    pub text: &'static str,
}

const fn key(
    table: &'static str,
    name: &'static str,
    ty: &'static str,
    default: &'static str,
    range: &'static str,
    text: &'static str,
) -> Key {
    Key {
        table,
        name,
        ty,
        default,
        range,
        text,
    }
}

/// The tables of the file, in the order the reference lists them, with a line each.
pub const TABLES: &[(&str, &str)] = &[
    ("[port]", "`[[port]]`, one per device xdpool serves (the queues of one device, under a name rules and stats use). All ports share one UMEM."),
    ("interface", "`[interface]`: the single-port form, one port named `main`. Use either `[interface]` or `[[port]]` tables, not both."),
    ("umem", "`[umem]`: the frame memory all sockets share."),
    ("rings", "`[rings]`: ring sizes in descriptors, per socket. Each a power of two from 64 to 32768."),
    ("workers", "`[workers]`: the worker threads, one per RX queue."),
    ("[rule]", "`[[rule]]`, 1 to 64 of them: steering rules, first match wins; match keys are ANDed, an absent one matches anything. Frames that match no rule pass to the kernel."),
    ("rule.capture", "`capture = { ... }` in a rule: the daemon also writes the rule's frames to a pcapng file."),
    ("stats", "`[stats]`: statistics export."),
];

const QUEUES: &str = "RX queues to serve, one socket (and one worker) each: a list, or `\"all\"` (every RX queue the device has, followed when the device comes back with another count; not with `workers.cores`).";
const XDP_MODE: &str = "XDP attach mode: `native` (in the driver) or `skb` (generic XDP: works on every device, slower, no zero-copy).";
const MULTI_BUFFER: &str = "Multi-buffer AF_XDP (`XDP_USE_SG`, Linux 6.6+): frames longer than a chunk (jumbo MTU) arrive as a chain of chunks. Every port must agree; `reflect-twice`, `copybreak`, `forward` and `mirror_to` take single-buffer frames only.";
const IFNAME: &str = "1-15 characters, no `/` or spaces";

/// Every key.
pub const KEYS: &[Key] = &[
    key("[port]", "name", "string", "required", "1-15 of `a-z 0-9 _ -`, unique", "The port's name, used by rules (`port`, `to`, `mirror_to`) and as the `port` label of the metrics. One process runs at most 4096 ports."),
    key("[port]", "interface", "string", "required", IFNAME, "The network device, e.g. `enp1s0f0`. One port per device (and namespace)."),
    key("[port]", "netns", "string", "none", "a name under /run/netns", "The network namespace the device is in (none: the one xdpool starts in). Ports may be in different namespaces and still share the UMEM."),
    key("[port]", "xdp_mode", "string", "\"native\"", "`native`, `skb`", XDP_MODE),
    key("[port]", "zero_copy", "bool or string", "\"auto\"", "`true`, `false`, `\"auto\"`", "Zero-copy AF_XDP: `true` (refused where the driver lacks it, exit 7), `false` (copy mode) or `\"auto\"` (try zero-copy, fall back to copy with one log line). `true` and `false` cannot be mixed across ports."),
    key("[port]", "multi_buffer", "bool", "false", "`true`, `false`", MULTI_BUFFER),
    key("[port]", "queues", "list of integers or \"all\"", "[0]", "0..63, each once; or `\"all\"`", QUEUES),
    key("interface", "name", "string", "required", IFNAME, "The network device, e.g. `xdpb0` or `enp1s0f0`."),
    key("interface", "netns", "string", "none", "a name under /run/netns", "The network namespace to enter before anything else (none: stay)."),
    key("interface", "xdp_mode", "string", "\"native\"", "`native`, `skb`", XDP_MODE),
    key("interface", "zero_copy", "bool or string", "false", "`true`, `false`, `\"auto\"`", "Zero-copy AF_XDP: `true` (refused on veth and other drivers without it), `false` (copy mode), `\"auto\"`. The `[interface]` form defaults to copy mode."),
    key("interface", "multi_buffer", "bool", "false", "`true`, `false`", MULTI_BUFFER),
    key("interface", "queues", "list of integers or \"all\"", "[0]", "0..63, each once; or `\"all\"`", QUEUES),
    key("umem", "frames", "integer", "8192", "enough for every queue's fill + tx rings + 256, at most 4194304", "Frames (chunks) in the UMEM. Left out, 8192, or (fill + tx + 256) for each queue where that is more (the run logs the size it took), up to the limit."),
    key("umem", "chunk_size", "integer", "2048", "2048, 4096", "Bytes per chunk; a frame takes one chunk less the kernel's 256-byte headroom (or a chain of them with multi_buffer)."),
    key("umem", "hugepages", "bool", "false", "`true`, `false`", "Back the UMEM with huge pages; falls back to normal pages with a warning when too few are free."),
    key("rings", "fill", "integer", "4096", "power of two, 64..32768, at least `rx`", "Fill ring: chunks handed to the kernel to receive into."),
    key("rings", "completion", "integer", "2048", "power of two, 64..32768", "Completion ring: chunks the kernel has sent."),
    key("rings", "rx", "integer", "2048", "power of two, 64..32768", "RX ring: frames received."),
    key("rings", "tx", "integer", "2048", "power of two, 64..32768", "TX ring: frames to send."),
    key("rings", "tx_budget", "integer", "rings.tx", "32..rings.tx, or 0", "Copy mode: the most frames one TX wake-up (`sendto`) hands the kernel (`XDP_MAX_TX_SKB_BUDGET`, Linux 6.17). The kernel's own default is 32, which leaves a fuller batch waiting in the TX ring for the next pass. 0: the kernel's default. Older kernels keep 32 (one log line)."),
    key("rings", "copy_fill", "string", "\"full\"", "`full`, `rx`", "Copy mode: how many frames a socket lets the kernel hold (fill ring plus RX ring not yet read). `full`: the whole fill ring; a worker that falls behind makes the kernel copy and then drop at the full RX ring (`rx ring full`). `rx`: at most `rx`; the kernel drops at the empty fill ring, before its copy (`fill ring empty`), which spares the receiving core. Zero-copy always uses the whole fill ring."),
    key("workers", "cores", "list of integers", "[]", "online cores, one per queue", "The core of each queue's worker, in the order ports and their queues are listed. Empty: cores of each NIC's NUMA node (or all online cores)."),
    key("workers", "mode", "string", "\"poll\"", "`spin`, `poll`, `busy-poll`", "How a worker waits: `spin` (busy loop, one core at 100%), `poll` (poll(2)), `busy-poll` (SO_PREFER_BUSY_POLL: the worker drives the device's NAPI; set napi_defer_hard_irqs and gro_flush_timeout, see `xdpool doctor`)."),
    key("workers", "batch", "integer", "64", "1..256", "Descriptors per batch."),
    key("workers", "copybreak_bytes", "integer", "256", "1..chunk_size/2", "`copybreak`: frames of at most this many bytes are copied into a small frag and their RX chunk goes straight back to the fill ring; larger ones are sent as `l2fwd`."),
    key("workers", "busy_poll_budget", "integer", "64", "1..1024", "`busy-poll`: frames per busy poll (SO_BUSY_POLL_BUDGET). Above 64 the kernel asks for CAP_NET_ADMIN."),
    key("workers", "poll_coalesce_us", "integer", "100", "0..1000", "`poll`: after a pass that received frames, sleep this many microseconds before looking again, so that a busy worker wakes per nap rather than per kernel flush. This is the first nap's length; the worker then sizes its naps by what they gather: longer while a nap brings in an eighth to a third of the RX ring (up to four times this, 1000 at most), shorter past two thirds (down to a quarter), back to this under an eighth. 0: always poll()."),
    key("workers", "tx_bottleneck", "string", "\"hold\"", "`hold`, `shed`", "When the TX side is the bottleneck: `hold` frames in the RX ring (the kernel drops at its full RX ring, or with `rings.copy_fill = \"rx\"` at the empty fill ring, before its copy) or `shed` (take them and drop what TX cannot take, counted `tx_ring_full`)."),
    key("workers", "handler_panic", "string", "\"drop\"", "`drop`, `stop`", "What a packet function's panic does: `drop` the frame and go on (counted as drop reason `handler_panic`, logged once per queue) or `stop` the run (every port detached, exit 12)."),
    key("[rule]", "name", "string", "none", "1-64 of `A-Z a-z 0-9 _ . -`, unique per port", "A name for the rule's counters (`rule_name` label); a reload carries a named rule's counts to the new rule of that name."),
    key("[rule]", "port", "string", "the only port", "a port's name", "The port whose XDP program holds the rule (may be omitted with one port)."),
    key("[rule]", "proto", "string", "none (any)", "`udp`, `tcp`, `icmp`, `icmpv6` or a number 0..255", "IP protocol."),
    key("[rule]", "dst_port", "integer or string", "none (any)", "0..65535, or `\"lo-hi\"`", "Destination port or range (UDP, TCP)."),
    key("[rule]", "dst", "string", "none (any)", "an IPv4 or IPv6 address or prefix", "Destination address or prefix, e.g. `\"198.18.0.0/15\"`."),
    key("[rule]", "src_port", "integer or string", "none (any)", "0..65535, or `\"lo-hi\"`", "Source port or range."),
    key("[rule]", "src", "string", "none (any)", "an address or prefix, of `dst`'s family", "Source address or prefix."),
    key("[rule]", "vlan", "integer", "none (any)", "0..4094", "The outer VLAN tag's id: only frames tagged with it match. Needs rx-vlan-offload off on the device (`xdpool doctor` checks)."),
    key("[rule]", "action", "string", "\"drop\"", "`drop`, `l2fwd`, `forward`, `reflect-twice`, `copybreak`, `pass`, `xdpdrop`, `call`", "What to do with matching frames: count and recycle (`drop`), send back with MACs swapped (`l2fwd`), send out of port `to` (`forward`), send back twice by reference (`reflect-twice`), `l2fwd` with small frames copied (`copybreak`), leave to the kernel (`pass`), drop in the XDP program (`xdpdrop`), hand to a packet function of the program (`call`, docs/library.md)."),
    key("[rule]", "handler", "string", "none", "a name the program registered (App::handler)", "`call`: the packet function the frames go to. The `xdpool` binary registers none; a program built on the library does."),
    key("[rule]", "arg", "string", "none", "any string", "`call`: a string the handler reads with each frame of this rule (`Packet::arg`)."),
    key("[rule]", "to", "string", "none", "another port's name", "`forward`: the egress port."),
    key("[rule]", "mac", "string", "\"swap\"", "`\"swap\"`, `\"neigh\"`, a MAC", "`forward`: exchange the MACs, take the next hop's from the egress namespace's neighbour table, or set this destination MAC (the source: the egress device's)."),
    key("[rule]", "mirror_to", "string", "none", "another port's name", "`drop`, `l2fwd`, `forward`: a copy (by reference) of each matched frame also leaves this port."),
    key("[rule]", "capture", "inline table", "none", "see rule.capture", "Also write the rule's frames to a pcapng file (the frames still take their action). Not with `pass` or `xdpdrop`."),
    key("rule.capture", "file", "string", "required", "an absolute path, one file per rule", "The pcapng file, created or truncated at start and at every reload."),
    key("rule.capture", "snaplen", "integer", "umem.chunk_size", "1..4096", "Bytes kept of each frame."),
    key("rule.capture", "count", "integer", "none (no limit)", "1..", "Frames to write; then the file is flushed and closed."),
    key("stats", "prometheus", "string", "none (off)", "address:port", "Serve Prometheus text metrics here, e.g. `\"127.0.0.1:9717\"` (see the metrics reference)."),
    key("stats", "control_socket", "string", "\"/run/xdpool/xdpool.sock\"", "a path", "The control socket `xdpool stats`, `capture` and `rules apply` talk to (mode 0600)."),
    key("stats", "live", "bool", "true", "`true`, `false`", "Print the live one-line view every second."),
    key("stats", "web_config", "string", "none", "a path", "TLS and basic auth for the HTTP endpoint, a web config file in the Prometheus exporter toolkit's format (tls_server_config, basic_auth_users with bcrypt hashes); re-read when it changes."),
    key("stats", "insecure_remote", "bool", "false", "`true`, `false`", "Serve a non-loopback `prometheus` address without a web config, on purpose (refused otherwise)."),
    key("stats", "control_group", "string", "none", "a group name", "Members of this group may ask `stats` on the control socket (made 0660, its directory 0750); `rules apply` and `capture` stay with root and the daemon's user."),
];

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `docs/reference/config.md`.
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from userspace/xdpool/src/config/keys.rs by `make reference`; \
         do not edit: a test fails when this file and the code differ. -->\n\n\
         xdpool reads one TOML file (`xdpool run --config FILE`). Errors name the key, \
         the line and what would be valid; `xdpool doctor --config FILE` checks the \
         machine and devices against it. Examples: `configs/`.\n",
    );
    for (table, about) in TABLES {
        out.push_str(&format!("\n## {}\n\n{about}\n\n", heading(table)));
        out.push_str("| Key | Type | Default | Valid | Meaning |\n|---|---|---|---|---|\n");
        for k in KEYS.iter().filter(|k| k.table == *table) {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} |\n",
                k.name,
                cell(k.ty),
                cell(&default_cell(k.default)),
                cell(k.range),
                cell(k.text)
            ));
        }
    }
    out
}

fn heading(table: &str) -> String {
    match table.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        Some(t) => format!("[[{t}]]"),
        None if table.contains('.') => table.to_string(),
        None => format!("[{table}]"),
    }
}

fn default_cell(d: &str) -> String {
    if d.starts_with('"')
        || d.starts_with('[')
        || d.parse::<f64>().is_ok()
        || d == "true"
        || d == "false"
    {
        format!("`{d}`")
    } else {
        d.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::*;
    use serde::de::{self, Deserialize, Visitor};
    use std::collections::BTreeSet;

    /// A deserializer that only records the field names serde's derive hands to
    /// `deserialize_struct` (renames applied), then stops.
    struct FieldNames;

    #[derive(Debug)]
    struct Stop(Vec<&'static str>);
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{:?}", self.0)
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Stop(Vec::new())
        }
    }

    impl<'de> de::Deserializer<'de> for FieldNames {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop(Vec::new()))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            Err(Stop(fields.to_vec()))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    fn fields<'de, T: Deserialize<'de> + std::fmt::Debug>() -> BTreeSet<&'static str> {
        let fields = T::deserialize(FieldNames).unwrap_err().0;
        assert!(
            !fields.is_empty(),
            "{} is a struct",
            std::any::type_name::<T>()
        );
        fields.into_iter().collect()
    }

    fn rows(table: &str) -> BTreeSet<&'static str> {
        KEYS.iter()
            .filter(|k| k.table == table)
            .map(|k| k.name)
            .collect()
    }

    #[test]
    fn every_serde_field_has_a_row_and_every_row_a_field() {
        let tables = [
            ("[port]", fields::<PortConfig>()),
            ("interface", fields::<InterfaceConfig>()),
            ("umem", fields::<UmemConfig>()),
            ("rings", fields::<RingsConfig>()),
            ("workers", fields::<WorkersConfig>()),
            ("[rule]", fields::<RuleConfig>()),
            ("rule.capture", fields::<CaptureConfig>()),
            ("stats", fields::<StatsConfig>()),
        ];
        for (table, fields) in &tables {
            assert_eq!(
                &rows(table),
                fields,
                "rows of table {table} against its serde fields"
            );
        }
        // The top level: one section per table (`port` and `rule` as arrays).
        let top: BTreeSet<String> = fields::<Config>().into_iter().map(String::from).collect();
        let listed: BTreeSet<String> = TABLES
            .iter()
            .filter(|(t, _)| !t.contains('.'))
            .map(|(t, _)| t.trim_matches(|c| c == '[' || c == ']').to_string())
            .collect();
        assert_eq!(top, listed);
        assert_eq!(
            KEYS.iter()
                .filter(|k| !TABLES.iter().any(|(t, _)| *t == k.table))
                .count(),
            0
        );
        assert!(KEYS
            .iter()
            .all(|k| !k.text.is_empty() && !k.ty.is_empty() && !k.range.is_empty()));
    }

    fn documented(table: &str, name: &str) -> &'static str {
        KEYS.iter()
            .find(|k| k.table == table && k.name == name)
            .unwrap_or_else(|| panic!("no row {table}.{name}"))
            .default
    }

    #[test]
    fn documented_defaults_are_the_codes() {
        let u = UmemConfig::default();
        let r = RingsConfig::default();
        let w = WorkersConfig::default();
        let s = StatsConfig::default();
        let q = |v: &str| format!("\"{v}\"");
        let kebab = |v: &dyn erased::Ser| q(&v.name());
        let cases: Vec<(&str, &str, String)> = vec![
            ("umem", "frames", u.frames.get_ref().to_string()),
            ("umem", "chunk_size", u.chunk_size.get_ref().to_string()),
            ("umem", "hugepages", u.hugepages.to_string()),
            ("rings", "fill", r.fill.get_ref().to_string()),
            ("rings", "completion", r.completion.get_ref().to_string()),
            ("rings", "rx", r.rx.get_ref().to_string()),
            ("rings", "tx", r.tx.get_ref().to_string()),
            (
                "rings",
                "tx_budget",
                match &r.tx_budget {
                    // Unset means the TX ring's size.
                    None if r.tx_budget() == *r.tx.get_ref() => "rings.tx".to_string(),
                    None => format!("{} (not rings.tx)", r.tx_budget()),
                    Some(b) => b.get_ref().to_string(),
                },
            ),
            ("rings", "copy_fill", kebab(&r.copy_fill)),
            ("workers", "cores", format!("{:?}", w.cores.get_ref())),
            ("workers", "mode", kebab(&w.mode)),
            ("workers", "batch", w.batch.get_ref().to_string()),
            (
                "workers",
                "copybreak_bytes",
                w.copybreak_bytes.get_ref().to_string(),
            ),
            (
                "workers",
                "busy_poll_budget",
                w.busy_poll_budget.get_ref().to_string(),
            ),
            (
                "workers",
                "poll_coalesce_us",
                w.poll_coalesce_us.get_ref().to_string(),
            ),
            ("workers", "tx_bottleneck", kebab(&w.tx_bottleneck)),
            ("workers", "handler_panic", kebab(&w.handler_panic)),
            ("stats", "insecure_remote", s.insecure_remote.to_string()),
            (
                "stats",
                "control_socket",
                q(&s.control_socket.display().to_string()),
            ),
            ("stats", "live", s.live.to_string()),
            ("[rule]", "action", q(Action::default().name())),
        ];
        for (table, name, code) in cases {
            assert_eq!(documented(table, name), code, "default of {table}.{name}");
        }
        // The port defaults, from a minimal [[port]] and [interface].
        let rule = "[[rule]]\nproto = \"udp\"\n";
        let port = Config::parse(&format!(
            "{rule}[[port]]\nname = \"a\"\ninterface = \"x\"\n"
        ))
        .unwrap()
        .ports()[0]
            .clone();
        let iface = Config::parse(&format!("{rule}[interface]\nname = \"x\"\n"))
            .unwrap()
            .ports()[0]
            .clone();
        for (table, p) in [("[port]", port), ("interface", iface)] {
            let zc = match p.zero_copy {
                ZeroCopy::On => "true".to_string(),
                ZeroCopy::Off => "false".to_string(),
                ZeroCopy::Auto => q("auto"),
            };
            assert_eq!(documented(table, "zero_copy"), zc, "{table}.zero_copy");
            assert_eq!(
                documented(table, "multi_buffer"),
                p.multi_buffer.to_string()
            );
            assert_eq!(documented(table, "queues"), format!("{:?}", p.queues));
            assert_eq!(documented(table, "xdp_mode"), kebab(&p.xdp_mode));
        }
    }

    /// The name serde gives a unit variant (`busy-poll`, `native`).
    mod erased {
        pub(super) trait Ser {
            fn name(&self) -> String;
        }
        impl<T: serde::Serialize> Ser for T {
            fn name(&self) -> String {
                serde_json::to_value(self)
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_string()
            }
        }
    }

    #[test]
    fn the_reference_lists_every_key_under_its_table() {
        let md = reference_markdown();
        assert!(md.contains("\n## [[port]]\n"), "{md}");
        assert!(md.contains("\n## rule.capture\n"));
        assert!(
            md.contains("| `busy_poll_budget` | integer | `64` | 1..1024 |"),
            "{md}"
        );
        assert_eq!(md.matches("\n| `").count(), KEYS.len());
    }
}
