#!/bin/sh
# Probes whether the kernel lets an AF_XDP socket share a UMEM registered by a
# socket of another network namespace (XDP_SHARED_UMEM across namespaces), and what
# a socket made in the wrong namespace meets. Needs root and a C compiler; makes two
# namespaces of its own (veth pairs with both ends inside them), removes them at exit.
# Result on Linux 6.18 (2026-12-02): shared across namespaces binds; a socket made in
# X bound to Y's ifindex meets X's device of that number (here the first socket's own
# queue: EINVAL) or none (ENODEV): ifindexes are per namespace and collide.
set -eu
here=$(dirname "$0")
tmp=$(mktemp -d)
X=nsprobe-x-$$ Y=nsprobe-y-$$
cleanup() { ip netns del "$X" 2>/dev/null || true; ip netns del "$Y" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT INT TERM
${CC:-cc} -O1 -o "$tmp/probe" "$here/probe.c"
ip netns add "$X"; ip netns add "$Y"
ip -n "$X" link add xa0 type veth peer name xa1
ip -n "$Y" link add ya0 type veth peer name ya1
ip -n "$Y" link add yb0 type veth peer name yb1
for d in xa0 xa1; do ip -n "$X" link set "$d" up; done
for d in ya0 ya1 yb0 yb1; do ip -n "$Y" link set "$d" up; done
echo "ifindexes: $(ip -n "$X" -o link show xa0 | cut -d: -f1) (xa0 in X), $(ip -n "$Y" -o link show ya0 | cut -d: -f1) (ya0 in Y), $(ip -n "$Y" -o link show yb0 | cut -d: -f1) (yb0 in Y)"
echo "== second socket made in Y, device ya0 of Y"
"$tmp/probe" "$X" xa0 "$Y" ya0 "$Y" || true
sleep 0.2
echo "== second socket made in X (wrong), ya0's ifindex (xa0's in X)"
"$tmp/probe" "$X" xa0 "$Y" ya0 "$X" || true
sleep 0.2
echo "== second socket made in X (wrong), yb0's ifindex (none in X)"
"$tmp/probe" "$X" xa0 "$Y" yb0 "$X" || true
