#!/usr/bin/env bash
# Builds the guest's initramfs (an uncompressed newc cpio):
#   busybox-static as the userland, the host's xdpool (stripped copy), ip, ethtool,
#   jq, bash and date with the host libraries they link (and the peer tools of
#   XDPOOL_VM_PEERS, see below), the modules the checks need
#   (decompressed: busybox insmod reads plain .ko), tests/unbind/unbind.sh and the
#   guest scripts of tests/vm/guest/.
#
#   tests/vm/initramfs.sh KERNEL_DIR XDPOOL_BINARY OUT.cpio
set -euo pipefail
KDIR=$1 XDPOOL_BIN=$2 OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODDIR=$(ls -d "$KDIR"/usr/lib/modules/*/ | head -1)
# Load order: each module after the ones it depends on (modinfo depends= of 7.x).
MODULES=(dca i2c-algo-bit igb failover net_failover virtio_net e1000e pktgen)

[ -x "$XDPOOL_BIN" ] || { echo "initramfs: $XDPOOL_BIN missing (make build)" >&2; exit 1; }
STAGE=$(mktemp -d /tmp/xdpool-vm-initramfs.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,lib/x86_64-linux-gnu,lib/modules,proc,sys,dev,tmp,run,etc,checks,root}
ln -s /run "$STAGE/var" 2>/dev/null || true
cp /bin/busybox "$STAGE/bin/busybox"

copy_with_libs() {  # host binary -> same path in the initramfs, with its shared libraries
    local bin=$1 dest=${2:-$1}
    [ "$bin" -ef "$STAGE$dest" ] || install -D -m 0755 "$bin" "$STAGE$dest"
    ldd "$bin" | awk '/=> \// {print $3} /^\s*\/lib/ {print $1}' | while read -r lib; do
        [ -e "$STAGE$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$STAGE$lib"
    done
}
for b in /bin/bash /bin/date /sbin/ip /usr/sbin/ethtool /usr/bin/jq; do copy_with_libs "$b"; done
install -D -m 0755 /lib64/ld-linux-x86-64.so.2 "$STAGE/lib64/ld-linux-x86-64.so.2"
strip -o "$STAGE/bin/xdpool" "$XDPOOL_BIN"
copy_with_libs "$STAGE/bin/xdpool" /bin/xdpool

# XDPOOL_VM_PEERS=DIR (tools/bench/vs-guest.sh): the peer tools found there (xdpsock,
# xsk_fwd; built outside the tree, tools/bench/README.md) go to /peers with their
# libraries, and libxdp's BPF objects (its default XSK program and dispatcher, which
# it loads from the path it was built with) to the same path.
if [ -n "${XDPOOL_VM_PEERS:-}" ]; then
    for p in xdpsock xsk_fwd; do
        [ -x "$XDPOOL_VM_PEERS/$p" ] && copy_with_libs "$XDPOOL_VM_PEERS/$p" "/peers/$p"
    done
    for o in /usr/lib/x86_64-linux-gnu/bpf/xsk_def_xdp_prog*.o /usr/lib/x86_64-linux-gnu/bpf/xdp-dispatcher.o; do
        [ -e "$o" ] && install -D -m 0644 "$o" "$STAGE$o"
    done
    # XDPOOL_VM_XDPOOL_B=PATH: a second xdpool build, for an A/B (xdpvm.peer_ab=1),
    # stripped as /bin/xdpool is (with XDPOOL_VM_PEERS set: vs-guest.sh sets both).
    if [ -n "${XDPOOL_VM_XDPOOL_B:-}" ]; then
        mkdir -p "$STAGE/peers"
        strip -o "$STAGE/peers/xdpool-b" "$XDPOOL_VM_XDPOOL_B"
        copy_with_libs "$STAGE/peers/xdpool-b" /peers/xdpool-b
    fi
    echo "initramfs: peers: $(ls "$STAGE/peers" 2>/dev/null | tr '\n' ' ')"
fi

for m in "${MODULES[@]}"; do
    f=$(find "$MODDIR" -name "$m.ko*" | head -1)
    [ -n "$f" ] || { echo "initramfs: module $m not in $MODDIR" >&2; exit 1; }
    case "$f" in
        *.xz) xz -dc "$f" ;;
        *.zst) zstd -qdc "$f" ;;
        *) cat "$f" ;;
    esac > "$STAGE/lib/modules/$m.ko"
done
printf '%s\n' "${MODULES[@]}" > "$STAGE/lib/modules/order"

install -m 0755 "$HERE/guest/init" "$STAGE/init"
install -m 0755 "$HERE"/guest/*.sh "$STAGE/checks/"
install -m 0755 "$ROOT/tests/unbind/unbind.sh" "$STAGE/checks/unbind.sh"
echo 'root:x:0:0:root:/root:/bin/sh' > "$STAGE/etc/passwd"

(cd "$STAGE" && find . | LC_ALL=C sort | /bin/busybox cpio -o -H newc 2>/dev/null) > "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "initramfs: $OUT ($(( $(stat -c %s "$OUT") / 1024 / 1024 )) MiB)"
