#!/usr/bin/env bash
# The Debian package, installed and removed on this machine (root): `make test-deb`.
#
# Builds it (`make deb`, unless DEB=path is given), installs it with dpkg, and checks
# what a user gets: the binary (`xdpool --version`, `xdpool doctor`), the man pages
# (`man -l` renders them), the completions, the systemd unit (`systemd-analyze verify`
# where the machine has it; never enabled or started), the examples and the conffile.
# Then it purges the package and checks that none of its files is left.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "test-deb: needs root (it installs the package with dpkg)" >&2; exit 1; }

step() { echo "test-deb: $*"; }
fail() { echo "test-deb: FAILED: $*" >&2; exit 1; }
t0=$(date +%s)

if dpkg -s xdpool >/dev/null 2>&1; then
  fail "a package xdpool is installed already; remove it first (dpkg --purge xdpool)"
fi
if [ -e /usr/bin/xdpool ]; then
  fail "/usr/bin/xdpool exists and belongs to no package; remove it first"
fi

deb=${DEB:-}
if [ -z "$deb" ]; then
  make --no-print-directory deb
  deb=$(ls -t target/debian/xdpool_*.deb | head -1)
fi
t_build=$(date +%s)
step "package $deb ($(du -k "$deb" | cut -f1) KiB), built in $((t_build - t0)) s"

cleanup() {
  if dpkg -s xdpool >/dev/null 2>&1; then dpkg --purge xdpool >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

dpkg -i "$deb"
files=$(dpkg -L xdpool)

# What the package holds.
for f in /usr/bin/xdpool /etc/xdpool/xdpool.toml /lib/systemd/system/xdpool.service \
         /usr/share/man/man1/xdpool.1.gz /usr/share/man/man1/xdpool-doctor.1.gz \
         /usr/share/bash-completion/completions/xdpool /usr/share/zsh/vendor-completions/_xdpool \
         /usr/share/fish/vendor_completions.d/xdpool.fish \
         /usr/share/doc/xdpool/examples/lab.toml /usr/share/doc/xdpool/copyright; do
  grep -qx "$f" <<<"$files" || fail "the package does not install $f"
  [ -e "$f" ] || fail "$f is listed but missing"
done
dpkg-query -W -f='${Conffiles}\n' xdpool | grep -q '/etc/xdpool/xdpool.toml' \
  || fail "/etc/xdpool/xdpool.toml is not a conffile"
step "installed: $(wc -l <<<"$files") paths; /etc/xdpool/xdpool.toml is a conffile"

# Never enabled or started on install.
if ls /etc/systemd/system/*.wants/xdpool.service >/dev/null 2>&1; then
  fail "the service was enabled on install"
fi
if command -v systemctl >/dev/null && systemctl is-active --quiet xdpool 2>/dev/null; then
  fail "the service was started on install"
fi
step "the service is neither enabled nor started"

v=$(/usr/bin/xdpool --version)
[[ "$v" == "xdpool "* ]] || fail "xdpool --version printed: $v"
step "$v"

# The host checks pass here (warnings allowed); the packaged config names a NIC this
# machine lacks, so checking it must fail, and say so.
/usr/bin/xdpool doctor > target/deb-doctor.txt || { cat target/deb-doctor.txt; fail "xdpool doctor failed on this machine"; }
grep -q '^ok    kernel: ' target/deb-doctor.txt || fail "xdpool doctor printed no kernel check"
step "xdpool doctor: $(tail -1 target/deb-doctor.txt)"
if /usr/bin/xdpool doctor --config /etc/xdpool/xdpool.toml > target/deb-doctor-config.txt 2>&1; then
  cat target/deb-doctor-config.txt; fail "xdpool doctor passed a config naming a NIC this machine does not have"
fi
step "xdpool doctor --config /etc/xdpool/xdpool.toml fails as it should: $(grep -m1 -E '^fail|xdpool:' target/deb-doctor-config.txt)"

# The unit, with the path the package installs.
grep -q '^ExecStart=/usr/bin/xdpool run ' /lib/systemd/system/xdpool.service \
  || fail "the unit's ExecStart does not run /usr/bin/xdpool"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /lib/systemd/system/xdpool.service
  step "systemd-analyze verify: clean"
else
  step "systemd-analyze: not on this machine, unit not verified"
fi

# Man pages render.
for page in xdpool xdpool-doctor xdpool-run; do
  out=$(MANWIDTH=80 man -l "/usr/share/man/man1/$page.1.gz" 2>&1 | col -b)
  grep -q '^NAME' <<<"$out" || fail "man -l $page.1.gz rendered no NAME section: $out"
  grep -q "$page" <<<"$out" || fail "man -l $page.1.gz does not name $page"
done
step "man pages render ($(grep -c '^/usr/share/man/man1/' <<<"$files") pages)"

# Completions load in bash.
bash -c 'source /usr/share/bash-completion/completions/xdpool && complete -p xdpool' >/dev/null \
  || fail "the bash completion does not register for xdpool"

dpkg --purge xdpool
left=""
while read -r f; do
  [ -z "$f" ] && continue
  # Directories other packages share (/usr/bin, /etc) stay; files must go.
  if [ -e "$f" ] && [ ! -d "$f" ]; then left="$left $f"; fi
done <<<"$files"
[ -z "$left" ] || fail "files left after dpkg --purge:$left"
[ ! -e /etc/xdpool ] || fail "/etc/xdpool left after dpkg --purge"
trap - EXIT
t_end=$(date +%s)
step "purged: no file left; install and checks took $((t_end - t_build)) s, $((t_end - t0)) s in all"
