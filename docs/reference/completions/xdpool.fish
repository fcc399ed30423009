# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_xdpool_global_optspecs
    string join \n log= log-format= h/help V/version
end

function __fish_xdpool_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_xdpool_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_xdpool_using_subcommand
    set -l cmd (__fish_xdpool_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c xdpool -n "__fish_xdpool_needs_command" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_needs_command" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_needs_command" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "run" -d 'Attach to an interface and process frames until Ctrl-C or --duration'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "lab" -d 'Create or remove the built-in veth lab (two namespaces, or three with `--topology forward`; addresses from 198.18.0.0/15)'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "gen" -d 'Send a bounded number of UDP frames (the lab\'s generator side by default)'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "stats" -d 'Ask a running instance for its stats over its control socket'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "capture" -d 'Write the frames one rule matches on a running instance to a pcapng file'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "rules" -d 'Change the rules of a running instance without a restart'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "control" -d 'Send a control message to a packet function of a running program built on the xdpool library (its `Handler::control`): every lane of the handler takes it between batches and answers. Example: `xdpool control lb "remove 2"`. Exit 0 when every lane took it; 1 when a lane refused it (each refusal is printed), the handler is unknown, or no instance answers'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "bench" -d 'Benchmarks: the recycler\'s micro-benchmark, or a throughput sweep on the lab'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "demo" -d 'The demo behind `make run`: lab up, run for a few seconds under generated traffic, print the summary, lab down'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "doctor" -d 'Check this machine and each port\'s device before a run: one line per check (ok, warn or fail), what was found and the fix. Exit code 1 when a check fails'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "completions" -d 'Print a shell completion script, e.g. `xdpool completions bash > /etc/bash_completion.d/xdpool` (the Debian package installs them)'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "reference" -d 'Write the generated references (docs/reference/: config, metrics and command references, man pages, completions) from the code, or check them'
complete -c xdpool -n "__fish_xdpool_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -s c -l config -d 'TOML config file (see configs/lab.toml and the README)' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -l duration -d 'Stop after this many seconds (default: run until Ctrl-C)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -l summary-json -d 'Also write the end summary as JSON to this file' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -l xdp-mode -d 'Override the config\'s XDP attach mode' -r -f -a "native\t'Driver mode'
skb\t'Generic (skb) mode'"
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -l hold-frames -d 'Keep up to N received frames per queue as the application would (robustness tests): they stay held across device losses and are returned, checked unchanged, after each re-attach. Held frames are frames a drop rule matched: counted in action_drop when returned' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -l no-reattach -d 'Exit (code 8) when the device goes away instead of waiting for it to return'
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -l quiet -d 'No live line (the summary is still printed)'
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -l ready-line -d 'Print `ready` to stdout once every port is attached, its program is on the device and its link has carrier (for scripts); until then the log says what it waits for'
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand run" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and not __fish_seen_subcommand_from up down help" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and not __fish_seen_subcommand_from up down help" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and not __fish_seen_subcommand_from up down help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and not __fish_seen_subcommand_from up down help" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and not __fish_seen_subcommand_from up down help" -f -a "up" -d 'Create the lab (a no-op that says so when it exists)'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and not __fish_seen_subcommand_from up down help" -f -a "down" -d 'Remove the lab\'s namespaces (and with them the veth pairs), whichever topology is up'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and not __fish_seen_subcommand_from up down help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from up" -l topology -d '`pair`: namespaces PREFIX-a (xdpa0) and PREFIX-b (xdpb0), one veth pair. `forward`: PREFIX-src (xdps0), PREFIX-fwd (xdpool\'s ports xdpf0 "in", xdpf1 "out", xdpf2 "mon") and PREFIX-dst (xdpd0, xdpm0), for configs/forward.toml' -r -f -a "pair\t'Two namespaces joined by one veth pair (the default; configs/lab.toml)'
forward\t'Sender, xdpool with three ports, receiver (configs/forward.toml)'"
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from up" -l queues -d 'RX/TX queues on each veth end' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from up" -l prefix -d 'Name prefix of the namespaces (`PREFIX-a`, `PREFIX-b`; `PREFIX-src`, `PREFIX-fwd`, `PREFIX-dst` for the forward topology)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from up" -l mtu -d 'MTU of both veth ends (default 1500). For jumbo frames, e.g. 9000: xdpool then needs `interface.multi_buffer = true`' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from up" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from up" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from up" -l split-netns -d 'Forward topology: put xdpool\'s ports "out" (xdpf1) and "mon" (xdpf2) in a namespace of their own, PREFIX-fwd2, so one xdpool forwards between ports in two namespaces on one UMEM (configs/forward-split.toml), as a router between two containers does'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from up" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from up" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from down" -l prefix -d 'Name prefix of the namespaces' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from down" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from down" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from down" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from down" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "up" -d 'Create the lab (a no-op that says so when it exists)'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "down" -d 'Remove the lab\'s namespaces (and with them the veth pairs), whichever topology is up'
complete -c xdpool -n "__fish_xdpool_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l lab-topology -d 'The lab to send into. `pair` (default): from xdpa0 in xdpool-a to 198.18.0.2. `forward`: from xdps0 in PREFIX-src through xdpool\'s port "in" (destination MAC xdpf0\'s) to 198.18.2.1 behind port "out" (2001:2:0:2::1 with --ipv6)' -r -f -a "pair\t'Two namespaces joined by one veth pair (the default; configs/lab.toml)'
forward\t'Sender, xdpool with three ports, receiver (configs/forward.toml)'"
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l prefix -d 'Lab name prefix (namespaces PREFIX-a, or PREFIX-src for the forward lab)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l netns -d 'Namespace to send from (default: the lab\'s sender)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l dev -d 'Device to send from (default: the lab\'s sender; its peer receives)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l dst-ip -d 'Destination IP (IPv4, or IPv6 with --ipv6), inside 198.18.0.0/15 or 2001:2::/48' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l dst-mac -d 'Destination MAC (aa:bb:cc:dd:ee:ff), e.g. the next hop\'s' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l payload -d '`template`: one frame resent; `sequenced`: each frame numbered, its payload derived from the number and its UDP checksum recomputed, so a receiver can check every frame (needs --engine afxdp; the default with --lab-topology forward)' -r -f -a "template\t'The same template bytes over and over (every engine)'
sequenced\t'Each frame its own number and bytes derived from it, UDP checksum recomputed ([`seq`]): a receiver ([`sink::SeqSink`]) can check every frame. AF_XDP engine only'"
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l seq-first -d '`sequenced`: the first frame\'s number' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l count -d 'Frames to send in all' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l size -d 'Frame size in bytes (without FCS), 60 to the device MTU + 14 (at most 9014). Jumbo frames (above about 3.5 KiB) need `--engine afxdp`, which sends them as multi-buffer chains of 2048-byte chunks (`xdpool lab up --mtu 9000`)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l duration -d 'Stop after this many seconds even if --count is not reached' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l rate -d 'Frames per second in all (default: as fast as possible). The AF_XDP engine sends at most 256 at once after being held off the CPU: what fell due meanwhile is dropped from the schedule, not caught up in one burst' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l dst-ports -d 'UDP destination port or range (`9` or `9-16`)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l src-ports -d 'UDP source port or range; a range spreads flows over queues' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l cores -d 'Cores to send from, one thread each (comma list). Default: core 0' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l engine -d 'Engine (default: live; afxdp with --lab-topology forward)' -r -f -a "live\t'BPF_PROG_RUN with live frames (ndo_xdp_xmit, kernel speed)'
pktgen\t'The kernel\'s pktgen through /proc/net/pktgen (where the kernel has it)'
afxdp\t'AF_XDP TX ring on one queue (copy mode; --queue, default 0), where live frames are unavailable, and for jumbo frames'"
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l queue -d 'AF_XDP engine: the device\'s TX queue to send on; a veth peer receives on the same queue (`xdpool lab up --queues N`). The live engine reaches the peer queue of the sending CPU instead (choose it with --cores)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l batch -d 'Live engine: frames per kernel batch, 1..=256. Each batch ends with a flush to the device (on veth: onto the peer\'s 256-slot ring, then its NAPI runs)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l json -d 'Write the report as JSON here' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -l ipv6 -d 'Send IPv6 instead of IPv4'
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand gen" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand stats" -l socket -d 'Control socket of the running instance' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand stats" -l get -d 'Print one value of the snapshot, named by its path (`.total.rx_packets`, `.device.losses`, `.queues.0.pool.inflight`): for scripts that poll a single figure without a JSON tool. Exits 1 when the path names nothing' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand stats" -l interval -d 'Seconds between the two reads the per-second rates come from (and between refreshes with --watch); 0 shows totals only' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand stats" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand stats" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand stats" -l json -d 'Print the raw snapshot as JSON (for scripts) instead of the table'
complete -c xdpool -n "__fish_xdpool_using_subcommand stats" -l watch -d 'Refresh the table in place every --interval seconds until Ctrl-C'
complete -c xdpool -n "__fish_xdpool_using_subcommand stats" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand stats" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand capture" -l socket -d 'Control socket of the running instance' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand capture" -l rule -d 'The rule: its index in the rules that run now (0 is the first `[[rule]]` of the config, or of the last `xdpool rules apply`), or its `name`. The capture stays on that rule across reloads: by name, or for an unnamed rule while the reloaded list has one with the same match and action; a reload that removes it ends the capture, saying so' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand capture" -l count -d 'Stop after this many frames (0: until Ctrl-C or the instance stops)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand capture" -l snaplen -d 'Bytes kept of each frame (at most one UMEM chunk)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand capture" -s w -l write -d 'The pcapng file to write (read it with `tcpdump -r FILE` or Wireshark)' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand capture" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand capture" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand capture" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand capture" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and not __fish_seen_subcommand_from apply help" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and not __fish_seen_subcommand_from apply help" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and not __fish_seen_subcommand_from apply help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and not __fish_seen_subcommand_from apply help" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and not __fish_seen_subcommand_from apply help" -f -a "apply" -d 'Send FILE\'s `[[rule]]` tables to the running instance, which validates them and swaps them in atomically (the XDP program and the workers together; no frame is lost or acted on under half of two lists). FILE is a file of `[[rule]]` tables only, or a whole config file whose ports are the running ones (only its rules are applied; other settings take a restart). A rule with a `name` keeps the counters of the running rule of that name. On any error the running rules stay: exit 2 for an invalid file (key and line named), 11 for rules the running instance cannot carry out (e.g. sending out of a port opened without a TX ring), 1 when no instance answers. `kill -HUP <pid>` reads the config file\'s rules again, the same way'
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and not __fish_seen_subcommand_from apply help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and __fish_seen_subcommand_from apply" -l socket -d 'Control socket of the running instance' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and __fish_seen_subcommand_from apply" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and __fish_seen_subcommand_from apply" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and __fish_seen_subcommand_from apply" -l json -d 'Print the instance\'s reply as JSON'
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and __fish_seen_subcommand_from apply" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and __fish_seen_subcommand_from apply" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "apply" -d 'Send FILE\'s `[[rule]]` tables to the running instance, which validates them and swaps them in atomically (the XDP program and the workers together; no frame is lost or acted on under half of two lists). FILE is a file of `[[rule]]` tables only, or a whole config file whose ports are the running ones (only its rules are applied; other settings take a restart). A rule with a `name` keeps the counters of the running rule of that name. On any error the running rules stay: exit 2 for an invalid file (key and line named), 11 for rules the running instance cannot carry out (e.g. sending out of a port opened without a TX ring), 1 when no instance answers. `kill -HUP <pid>` reads the config file\'s rules again, the same way'
complete -c xdpool -n "__fish_xdpool_using_subcommand rules; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c xdpool -n "__fish_xdpool_using_subcommand control" -l socket -d 'Control socket of the running instance' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand control" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand control" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand control" -l json -d 'Print the instance\'s reply as JSON'
complete -c xdpool -n "__fish_xdpool_using_subcommand control" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand control" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -f -a "pool" -d 'The recycler micro-benchmark (mirrors the kernel\'s bench_page_pool_simple)'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -f -a "throughput" -d 'Throughput sweep on the lab: ceiling (in-kernel XDP_DROP), rxdrop, l2fwd per size'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -f -a "generator" -d 'The generator\'s own rate on the lab: receiver refusing (no NAPI), XDP_DROP with NAPI in softirq on the generator\'s core, and with threaded NAPI on another core'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -f -a "capture" -d 'The data path\'s rate without and with `xdpool capture` running (alternating), and the paced rates at which a capture writes every frame'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -f -a "steer" -d 'The steering program\'s ns per frame under BPF_PROG_TEST_RUN: a redirect-only reference, match-all, the lab\'s rule (also on the multi-buffer program), 8 mixed and 64 rules, IPv4 and IPv6, alternating; ratios to the reference'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and not __fish_seen_subcommand_from pool throughput generator capture steer help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from pool" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from pool" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from pool" -l json -d 'Print JSON instead of the table'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from pool" -l check -d 'Exit non-zero when a target is missed in each of up to 3 runs (or the cross-thread threads could not be pinned): what CI runs'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from pool" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from pool" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l sizes -d 'Frame sizes to sweep (bytes without FCS, 60..=1514)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l reps -d 'Repetitions per point (median and spread are reported)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l count -d 'Frames per measurement' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l time-limit -d 'Time limit of one measurement\'s generator run, seconds' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l json -d 'Write the results as JSON (its directory is created)' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l plot -d 'Write a plot (SVG; its directory is created)' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l gen-core -d 'Generator core' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l worker-core -d 'Worker core (the lab\'s sweep; with --iface xdpool serves every RX queue and picks the cores itself, on the NIC\'s NUMA node)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l napi -d 'NAPI mode of the lab\'s veth pair' -r -f -a "softirq\t'In softirq context on the CPU that scheduled it'
threaded\t'In a kernel thread (`/sys/class/net/DEV/threaded` = 1)'"
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l napi-core -d 'With `--napi threaded`: pin the NAPI threads to this core' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l worker-mode -d 'How the xdpool worker waits: spin, poll or busy-poll' -r -f -a "spin\t''
poll\t''
busy-poll\t''"
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l prefix -d 'Lab name prefix (namespaces PREFIX-a and PREFIX-b; built and removed)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l iface -d 'Sweep on devices that exist instead of the lab: the NIC xdpool receives on (no lab is built; rxdrop only, its frames counted against the generator\'s). Needs --gen-dev, a NIC that reaches it (cabled to it, or on the same QEMU hub)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l netns -d 'With --iface: its network namespace (default: ours)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l gen-dev -d 'With --iface: the NIC the generator sends out of, to --iface' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l gen-netns -d 'With --iface: the namespace of --gen-dev (default: ours)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l engine -d 'With --iface: the generator, `pktgen` (default; the kernel\'s, /proc/net/pktgen) or `live` (needs ndo_xdp_xmit on --gen-dev). The lab\'s sweep sends live frames' -r -f -a "live\t'BPF_PROG_RUN with live frames (ndo_xdp_xmit, kernel speed)'
pktgen\t'The kernel\'s pktgen through /proc/net/pktgen (where the kernel has it)'
afxdp\t'AF_XDP TX ring on one queue (copy mode; --queue, default 0), where live frames are unavailable, and for jumbo frames'"
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l rate -d 'With --iface: the generator\'s rate, frames per second (default: flat out)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -l quiet -d 'No progress line on stderr'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from throughput" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l size -d 'Frame size in bytes (without FCS), 60..=1514' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l count -d 'Frames per run' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l reps -d 'Runs per point (median and spread are reported)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l batches -d 'Kernel batch sizes to compare (comma list, each 1..=256)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l gen-core -d 'Generator core' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l napi-core -d 'Core of the receiver\'s NAPI thread in the threaded set-up' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l time-limit -d 'Time limit of one run, seconds' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l json -d 'Write the results as JSON (its directory is created)' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l prefix -d 'Lab name prefix (namespaces PREFIX-a and PREFIX-b; built and removed)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l peer -d 'Also run xdp-trafficgen (xdp-tools, built outside the tree: tools/bench/README.md) at this path in the same run: --reps pairs per receiver, alternating with `xdpool gen` (IPv6 UDP, core 0, batch 64, each counted over the same window the same way), and print the ratio xdpool / xdp-trafficgen' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l peer-lead -d '--peer: seconds from the first frames to the first counter read' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l peer-window -d '--peer: seconds each run is counted over' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -l quiet -d 'No progress line on stderr'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from generator" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -l count -d 'Frames per measurement' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -l reps -d 'Off/on pairs at full speed' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -l rates -d 'Paced rates (frames/s) with a capture running' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -l size -d 'Frame size (bytes without FCS)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -l prefix -d 'Lab prefix (namespaces PREFIX-a, PREFIX-b; built and removed)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -l worker-core -d 'The worker\'s core' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -l gen-core -d 'The generator\'s core' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from capture" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from steer" -l rounds -d 'Rounds (each runs every program once on each frame; medians over rounds)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from steer" -l repeat -d 'BPF_PROG_TEST_RUN repeats per measurement (the kernel reports whole ns per run)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from steer" -l json -d 'Write the results as JSON (its directory is created)' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from steer" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from steer" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from steer" -l quiet -d 'No progress line on stderr'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from steer" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from steer" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "pool" -d 'The recycler micro-benchmark (mirrors the kernel\'s bench_page_pool_simple)'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "throughput" -d 'Throughput sweep on the lab: ceiling (in-kernel XDP_DROP), rxdrop, l2fwd per size'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "generator" -d 'The generator\'s own rate on the lab: receiver refusing (no NAPI), XDP_DROP with NAPI in softirq on the generator\'s core, and with threaded NAPI on another core'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "capture" -d 'The data path\'s rate without and with `xdpool capture` running (alternating), and the paced rates at which a capture writes every frame'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "steer" -d 'The steering program\'s ns per frame under BPF_PROG_TEST_RUN: a redirect-only reference, match-all, the lab\'s rule (also on the multi-buffer program), 8 mixed and 64 rules, IPv4 and IPv6, alternating; ratios to the reference'
complete -c xdpool -n "__fish_xdpool_using_subcommand bench; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c xdpool -n "__fish_xdpool_using_subcommand demo" -l count -d 'Frames to send (default 1 000 000; 200 000 with --forward)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand demo" -l size -d 'Frame size' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand demo" -l rate -d '--forward: frames per second (default 100 000: what the receiver\'s UDP socket takes on this lab without dropping; the demo counts every frame there)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand demo" -l config -d 'Config for xdpool (default configs/lab.toml; configs/forward.toml with --forward)' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand demo" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand demo" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand demo" -l forward -d 'The forwarding demo instead: the forward lab, xdpool forwarding from port "in" to port "out" (configs/forward.toml), sequenced frames checked one by one by a UDP socket in the receiver\'s namespace'
complete -c xdpool -n "__fish_xdpool_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand demo" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand doctor" -s c -l config -d 'Check the host and every port of this config file' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand doctor" -s i -l interface -d 'Check the host and this network device (one port, zero_copy = "auto")' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand doctor" -l netns -d 'The network namespace the device is in (a name under /run/netns)' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand doctor" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand doctor" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand doctor" -l json -d 'Print the report as one JSON object (checks, and the ok/warn/fail counts)'
complete -c xdpool -n "__fish_xdpool_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand doctor" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand completions" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand completions" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand completions" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand reference" -l out -d 'The directory to write' -r -F
complete -c xdpool -n "__fish_xdpool_using_subcommand reference" -l log -d 'Log filter (tracing syntax), e.g. `debug` or `xdpool=trace`. Default: info' -r
complete -c xdpool -n "__fish_xdpool_using_subcommand reference" -l log-format -d 'Log line format on stderr: `text` for people, `json` (one object per line, with timestamp, level and fields) for a log collector' -r -f -a "text\t'Human-readable lines (coloured on a terminal)'
json\t'One JSON object per line'"
complete -c xdpool -n "__fish_xdpool_using_subcommand reference" -l check -d 'Only compare, and fail when a file differs'
complete -c xdpool -n "__fish_xdpool_using_subcommand reference" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c xdpool -n "__fish_xdpool_using_subcommand reference" -s V -l version -d 'Print version'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "run" -d 'Attach to an interface and process frames until Ctrl-C or --duration'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "lab" -d 'Create or remove the built-in veth lab (two namespaces, or three with `--topology forward`; addresses from 198.18.0.0/15)'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "gen" -d 'Send a bounded number of UDP frames (the lab\'s generator side by default)'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "stats" -d 'Ask a running instance for its stats over its control socket'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "capture" -d 'Write the frames one rule matches on a running instance to a pcapng file'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "rules" -d 'Change the rules of a running instance without a restart'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "control" -d 'Send a control message to a packet function of a running program built on the xdpool library (its `Handler::control`): every lane of the handler takes it between batches and answers. Example: `xdpool control lb "remove 2"`. Exit 0 when every lane took it; 1 when a lane refused it (each refusal is printed), the handler is unknown, or no instance answers'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "bench" -d 'Benchmarks: the recycler\'s micro-benchmark, or a throughput sweep on the lab'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "demo" -d 'The demo behind `make run`: lab up, run for a few seconds under generated traffic, print the summary, lab down'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "doctor" -d 'Check this machine and each port\'s device before a run: one line per check (ok, warn or fail), what was found and the fix. Exit code 1 when a check fails'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "completions" -d 'Print a shell completion script, e.g. `xdpool completions bash > /etc/bash_completion.d/xdpool` (the Debian package installs them)'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "reference" -d 'Write the generated references (docs/reference/: config, metrics and command references, man pages, completions) from the code, or check them'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and not __fish_seen_subcommand_from run lab gen stats capture rules control bench demo doctor completions reference help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and __fish_seen_subcommand_from lab" -f -a "up" -d 'Create the lab (a no-op that says so when it exists)'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and __fish_seen_subcommand_from lab" -f -a "down" -d 'Remove the lab\'s namespaces (and with them the veth pairs), whichever topology is up'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and __fish_seen_subcommand_from rules" -f -a "apply" -d 'Send FILE\'s `[[rule]]` tables to the running instance, which validates them and swaps them in atomically (the XDP program and the workers together; no frame is lost or acted on under half of two lists). FILE is a file of `[[rule]]` tables only, or a whole config file whose ports are the running ones (only its rules are applied; other settings take a restart). A rule with a `name` keeps the counters of the running rule of that name. On any error the running rules stay: exit 2 for an invalid file (key and line named), 11 for rules the running instance cannot carry out (e.g. sending out of a port opened without a TX ring), 1 when no instance answers. `kill -HUP <pid>` reads the config file\'s rules again, the same way'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "pool" -d 'The recycler micro-benchmark (mirrors the kernel\'s bench_page_pool_simple)'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "throughput" -d 'Throughput sweep on the lab: ceiling (in-kernel XDP_DROP), rxdrop, l2fwd per size'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "generator" -d 'The generator\'s own rate on the lab: receiver refusing (no NAPI), XDP_DROP with NAPI in softirq on the generator\'s core, and with threaded NAPI on another core'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "capture" -d 'The data path\'s rate without and with `xdpool capture` running (alternating), and the paced rates at which a capture writes every frame'
complete -c xdpool -n "__fish_xdpool_using_subcommand help; and __fish_seen_subcommand_from bench" -f -a "steer" -d 'The steering program\'s ns per frame under BPF_PROG_TEST_RUN: a redirect-only reference, match-all, the lab\'s rule (also on the multi-buffer program), 8 mixed and 64 rules, IPv4 and IPv6, alternating; ratios to the reference'
