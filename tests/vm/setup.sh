#!/usr/bin/env bash
# Installs what `make test-vm` needs, idempotently:
#   - QEMU >= 8.0 (the igb device) from bookworm-backports, taken with -t so nothing
#     else moves to backports;
#   - busybox-static (the guest's userland);
#   - the guest kernel and its modules from trixie-backports, fetched with an apt
#     configuration of its own (own source list, lists and archives under the cache),
#     unpacked with dpkg -x into the cache: nothing from trixie reaches the host's apt
#     or dpkg.
# Prints the kernel's directory on the last line:  KERNEL_DIR=/var/cache/xdpool-vm/kernel/<ver>
set -euo pipefail

CACHE=${XDPOOL_VM_CACHE:-/var/cache/xdpool-vm}
MIN_KERNEL=6.15   # 6.1 and 6.12 refuse XDP_ZEROCOPY on igb and virtio_net (measured)

[ "$(id -u)" = 0 ] || { echo "tests/vm/setup.sh: needs root (apt-get)" >&2; exit 3; }
export DEBIAN_FRONTEND=noninteractive

# The mirror the machine already uses for bookworm (deb822 or one-line sources).
mirror() {
    local m
    m=$(grep -hs -A3 '^Types: deb' /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | awk '/^URIs:/ {print $2}' | grep -m1 '/debian/\?$' || true)
    [ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -m1 '/debian/\?$' || true)
    echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=$(mirror)

qemu_ok() {
    command -v qemu-system-x86_64 >/dev/null || return 1
    qemu-system-x86_64 -device help 2>/dev/null | grep -q '"igb"'
}
if qemu_ok; then
    echo "setup-vm: $(qemu-system-x86_64 --version | head -1) (has igb)"
else
    BP=/etc/apt/sources.list.d/xdpool-bookworm-backports.list
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        echo "deb $MIRROR bookworm-backports main" > "$BP"
        echo "setup-vm: added bookworm-backports ($MIRROR) in $BP (default priority 100: only -t picks from it)"
    fi
    apt-get update -q
    apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-system-x86
    qemu_ok || { echo "setup-vm: qemu-system-x86_64 has no igb device after installing from bookworm-backports (needs QEMU >= 8.0)" >&2; exit 1; }
    echo "setup-vm: installed $(qemu-system-x86_64 --version | head -1)"
fi

if [ ! -x /bin/busybox ] || ! dpkg -s busybox-static >/dev/null 2>&1; then
    apt-get install -y -q --no-install-recommends busybox-static || { apt-get update -q && apt-get install -y -q --no-install-recommends busybox-static; }
fi
command -v jq >/dev/null || apt-get install -y -q --no-install-recommends jq

# The guest kernel: its own apt world under $CACHE/apt.
A=$CACHE/apt
mkdir -p "$A/lists/partial" "$A/archives/partial" "$A/etc/preferences.d" "$A/etc/apt.conf.d" "$CACHE/kernel"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR trixie-backports main" > "$A/etc/sources.list"
: > "$A/status"
APT_OPTS=(-o Dir::Etc="$A/etc" -o Dir::Etc::SourceList="$A/etc/sources.list" -o Dir::Etc::SourceParts="$A/etc/sources.list.d"
          -o Dir::Etc::Parts="$A/etc/apt.conf.d" -o Dir::Etc::PreferencesParts="$A/etc/preferences.d"
          -o Dir::State="$A" -o Dir::State::Lists="$A/lists" -o Dir::State::status="$A/status"
          -o Dir::Cache="$A" -o Dir::Cache::Archives="$A/archives" -o APT::Architecture=amd64 -o Debug::NoLocking=1)
mkdir -p "$A/etc/sources.list.d"

have=$(ls -d "$CACHE"/kernel/*/ 2>/dev/null | xargs -rn1 basename | sort -V | tail -1 || true)
# Refresh the list at most once a day; with a kernel in the cache a failed refresh is fine.
if [ -z "$have" ] || [ -z "$(find "$A/lists" -name '*Packages*' -mtime -1 2>/dev/null)" ]; then
    if ! apt-get "${APT_OPTS[@]}" update -q >"$CACHE/apt-update.log" 2>&1; then
        [ -n "$have" ] || { echo "setup-vm: apt-get update of trixie-backports failed (see $CACHE/apt-update.log)" >&2; exit 1; }
        echo "setup-vm: trixie-backports refresh failed, using the cached kernel $have"
    fi
fi
# Newest linux-binary-<ver>-amd64 of the generic flavour (not -cloud, not -rt).
newest=$(apt-cache "${APT_OPTS[@]}" pkgnames linux-binary- 2>/dev/null | grep -E '^linux-binary-[0-9][^-]*-amd64$' \
         | sed -E 's/^linux-binary-(.*)-amd64$/\1/' | sort -V | tail -1 || true)
[ -n "$newest" ] || newest=${have:-}
[ -n "$newest" ] || { echo "setup-vm: trixie-backports offers no linux-binary-<version>-amd64 package" >&2; exit 1; }
base=${newest%%-*}
if [ "$(printf '%s\n%s\n' "$MIN_KERNEL" "$base" | sort -V | head -1)" != "$MIN_KERNEL" ]; then
    echo "setup-vm: the newest guest kernel trixie-backports offers is $newest; zero-copy on igb and virtio_net needs >= $MIN_KERNEL (6.1 and 6.12 refuse it with EOPNOTSUPP)" >&2
    exit 1
fi
K=$CACHE/kernel/$newest
if [ ! -e "$K/.done" ]; then
    rm -rf "$K.tmp" && mkdir -p "$K.tmp"
    (cd "$A/archives" && chown _apt "$A/archives" 2>/dev/null; apt-get "${APT_OPTS[@]}" download "linux-binary-$newest-amd64" "linux-modules-$newest-amd64")
    for d in "$A"/archives/linux-binary-"$newest"-amd64_*.deb "$A"/archives/linux-modules-"$newest"-amd64_*.deb; do
        dpkg -x "$d" "$K.tmp"
    done
    ls "$K.tmp"/usr/lib/modules/*/vmlinuz >/dev/null || { echo "setup-vm: no vmlinuz in linux-binary-$newest-amd64" >&2; exit 1; }
    rm -rf "$K" && mv "$K.tmp" "$K" && touch "$K/.done"
    rm -f "$A"/archives/*.deb
    echo "setup-vm: guest kernel $newest unpacked in $K"
else
    echo "setup-vm: guest kernel $newest (cached in $K)"
fi
echo "KERNEL_DIR=$K"
