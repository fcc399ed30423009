#!/bin/bash
# The `forward` lab topology of SPEC-forward.md (xdpool lab up --topology forward),
# built with ip(8) for the benchmark scripts until xdpool's own lab has it.
# Source this file, then:
#   fwd_topo_up PREFIX     namespaces PREFIX-src, PREFIX-fwd, PREFIX-dst as below
#   fwd_topo_down PREFIX   removes them (and so every device in them)
#
#   PREFIX-src  xdps0 198.18.1.1/24 2001:2:0:1::1/64 ---- xdpf0 (port in)  198.18.1.2/24  PREFIX-fwd
#   PREFIX-fwd  xdpf1 (port out) 198.18.2.2/24 2001:2:0:2::2/64 ---- xdpd0 198.18.2.1/24 PREFIX-dst
#   PREFIX-fwd  xdpf2 (port mon) 198.18.3.2/24 2001:2:0:3::2/64 ---- xdpm0 198.18.3.1/24 PREFIX-dst
#
# MACs are fixed, so configs and generators can name them: xdps0 and xdpf0 carry the
# two-namespace lab's MAC_A and MAC_B (xdpool gen's default frames, addressed to the
# lab's side b, then reach xdpf0 well addressed), the others FWD_MAC_* below.
# Permanent neighbour entries as in the spec (no ARP needed): in PREFIX-fwd
# 198.18.2.1 -> xdpd0, 198.18.3.1 -> xdpm0, 2001:2:0:2::1 -> xdpd0; in PREFIX-src
# 198.18.1.2 -> xdpf0 and routes to 198.18.2.0/24 and 198.18.3.0/24 via 198.18.1.2.
# The devices get no link-local IPv6 address and no DAD (addrgenmode none, nodad), so
# the stack sends next to nothing on its own into a count.

FWD_MAC_S0=02:78:64:70:00:0a
FWD_MAC_F0=02:78:64:70:00:0b
FWD_MAC_F1=02:78:64:70:00:f1
FWD_MAC_F2=02:78:64:70:00:f2
FWD_MAC_D0=02:78:64:70:00:d0
FWD_MAC_M0=02:78:64:70:00:e0

fwd_topo_down() {
    local n
    for n in src fwd dst; do ip netns del "$1-$n" 2>/dev/null; done
    return 0
}

fwd_topo_up() { # $1 prefix; fails (status 1, message on stderr) if a namespace exists
    local p=$1 n
    for n in src fwd dst; do
        if ip netns list | grep -qw "^$p-$n"; then
            echo "namespace $p-$n exists: another run is using prefix $p (or left it: ip netns del $p-$n)" >&2
            return 1
        fi
    done
    # Not `( ... ) || ...`: errexit does not act inside the left side of ||.
    (
        set -e
        for n in src fwd dst; do ip netns add "$p-$n"; done
        # Each pair is made directly inside its namespaces: no device ever appears in
        # the root namespace.
        ip link add name xdps0 netns "$p-src" address $FWD_MAC_S0 type veth peer name xdpf0 netns "$p-fwd" address $FWD_MAC_F0
        ip link add name xdpf1 netns "$p-fwd" address $FWD_MAC_F1 type veth peer name xdpd0 netns "$p-dst" address $FWD_MAC_D0
        ip link add name xdpf2 netns "$p-fwd" address $FWD_MAC_F2 type veth peer name xdpm0 netns "$p-dst" address $FWD_MAC_M0
        addr() { # ns dev v4 v6
            ip -n "$1" link set "$2" addrgenmode none
            ip -n "$1" addr add "$3" dev "$2"
            ip -n "$1" addr add "$4" dev "$2" nodad
            ip -n "$1" link set "$2" up
        }
        addr "$p-src" xdps0 198.18.1.1/24 2001:2:0:1::1/64
        addr "$p-fwd" xdpf0 198.18.1.2/24 2001:2:0:1::2/64
        addr "$p-fwd" xdpf1 198.18.2.2/24 2001:2:0:2::2/64
        addr "$p-fwd" xdpf2 198.18.3.2/24 2001:2:0:3::2/64
        addr "$p-dst" xdpd0 198.18.2.1/24 2001:2:0:2::1/64
        addr "$p-dst" xdpm0 198.18.3.1/24 2001:2:0:3::1/64
        for n in src fwd dst; do ip -n "$p-$n" link set lo up; done
        ip -n "$p-fwd" neigh replace 198.18.2.1 lladdr $FWD_MAC_D0 dev xdpf1 nud permanent
        ip -n "$p-fwd" neigh replace 198.18.3.1 lladdr $FWD_MAC_M0 dev xdpf2 nud permanent
        ip -n "$p-fwd" neigh replace 2001:2:0:2::1 lladdr $FWD_MAC_D0 dev xdpf1 nud permanent
        ip -n "$p-fwd" neigh replace 2001:2:0:3::1 lladdr $FWD_MAC_M0 dev xdpf2 nud permanent
        ip -n "$p-src" neigh replace 198.18.1.2 lladdr $FWD_MAC_F0 dev xdps0 nud permanent
        ip -n "$p-src" neigh replace 2001:2:0:1::2 lladdr $FWD_MAC_F0 dev xdps0 nud permanent
        ip -n "$p-src" route add 198.18.2.0/24 via 198.18.1.2
        ip -n "$p-src" route add 198.18.3.0/24 via 198.18.1.2
        ip -n "$p-src" -6 route add 2001:2:0:2::/64 via 2001:2:0:1::2
        ip -n "$p-dst" route add 198.18.1.0/24 via 198.18.2.2
    )
    local rc=$?
    if [ $rc != 0 ]; then
        echo "building the forward topology $p failed" >&2
        fwd_topo_down "$p"
        return 1
    fi
}
