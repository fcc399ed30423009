# xdpool — set-up, build, test, demo and benchmarks.
# The README's two commands are `make run` and `make test`.
SHELL := /bin/bash
CLANG_VERSION := 19
APT_PACKAGES := clang-$(CLANG_VERSION) llvm-$(CLANG_VERSION) libbpf-dev libelf-dev zlib1g-dev linux-libc-dev iproute2 pkg-config ethtool tcpdump
XDPOOL := target/release/xdpool
# Tools the tests use that are unpacked, not installed.
TOOLS_CACHE := /var/cache/xdpool
PROMTOOL := $(TOOLS_CACHE)/prometheus/usr/bin/promtool
# Tools that are crates, built once into CARGO_TOOLS (`make setup` does it; later runs
# find them there). No LTO and 16 codegen units: they run for seconds, and a fresh
# machine pays for their build in `make test`. PATH is where `cargo deny`, `cargo fuzz`
# find them.
CARGO_TOOLS := $(TOOLS_CACHE)/cargo
CARGO_DENY_VERSION := 0.20.2
CARGO_FUZZ_VERSION := 0.13.2
export PATH := $(CARGO_TOOLS)/bin:$(PATH)
define install-tool
@if $(CARGO_TOOLS)/bin/$(1) --version 2>/dev/null | grep -qF ' $(2)'; then echo "tools: $(1) $(2) present"; else \
	  echo "tools: building $(1) $(2) into $(CARGO_TOOLS)"; tmp=$$(mktemp -d); \
	  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_TARGET_DIR=$$tmp \
	    cargo install --locked --root $(CARGO_TOOLS) $(1)@$(2); rc=$$?; rm -rf $$tmp; exit $$rc; fi
endef
CARGO_DEB_VERSION := 3.8.0
# cargo's target directory (CARGO_TARGET_DIR where set).
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
# Loom: bounded preemptions keep the model checks within minutes on 2 cores.
LOOM_MAX_PREEMPTIONS ?= 3

.PHONY: deb test-deb test-standalone locks reference setup lint-tools build test test-lint test-unit test-loom test-bench test-fuzz fuzz fuzz-tools fuzz-run test-vm test-vm-soak run bench pktgen clean-lab check-root

check-root:
	@if [ "$$(id -u)" != 0 ]; then echo "xdpool: this target needs root (it installs packages, loads XDP programs and creates network namespaces); run it with sudo" >&2; exit 1; fi

# Idempotent: installs only what is missing, mounts bpffs only when absent.
setup: check-root
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "setup: installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q --no-install-recommends $$missing; \
	else echo "setup: system packages present"; fi
	@# promtool (tests/metrics_conventions.rs) from Debian's prometheus package, unpacked
	@# only: installing it would start a Prometheus server on this machine.
	@if [ ! -x $(PROMTOOL) ]; then \
	  echo "setup: unpacking promtool into $(TOOLS_CACHE)"; mkdir -p $(TOOLS_CACHE) && cd $(TOOLS_CACHE) && \
	  rm -f prometheus_*.deb && apt-get download -q prometheus && dpkg -x prometheus_*.deb prometheus && rm -f prometheus_*.deb; \
	  [ -x $(PROMTOOL) ] || { echo "setup: promtool not found in Debian's prometheus package" >&2; exit 1; }; \
	else echo "setup: promtool present"; fi
	@if ! mountpoint -q /sys/fs/bpf; then mkdir -p /sys/fs/bpf && mount -t bpf bpf /sys/fs/bpf && echo "setup: mounted bpffs on /sys/fs/bpf"; \
	else echo "setup: bpffs mounted"; fi
	@$(MAKE) --no-print-directory lint-tools fuzz-tools

lint-tools:
	$(call install-tool,cargo-deny,$(CARGO_DENY_VERSION))
	$(call install-tool,cargo-deb,$(CARGO_DEB_VERSION))

build:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo build --release --workspace
	@echo "built: $(XDPOOL) (XDP objects are embedded in it)"

# The stages in order; tests/run-stages.sh stops at the first that fails and closes
# with one line per stage (its time) and `N passed, N failed, N skipped`.
TEST_STAGES := setup lint unit loom fuzz bench deb standalone vm
test:
	@MAKE="$(MAKE)" bash tests/run-stages.sh $(TEST_STAGES)

# xdpool on real PCI NIC drivers (igb, virtio-net) in a nested QEMU guest under TCG:
# tests/vm/run.sh (docs/vm.md). XDPOOL_SKIP_VM=1 skips it outside CI.
# It boots the binary test-unit built (profile TEST_PROFILE): `make test` builds the
# workspace in one profile, not in release as well, and the guest runs xdpool with its
# debug assertions on. test-unit's own command, so cargo finds it all fresh (a
# `cargo build` resolves features without the dev-dependencies: another xdpool).
test-vm: check-root
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo test --workspace --profile $(TEST_PROFILE) $(ROOT_TESTS) --no-run
	XDPOOL_VM_BIN=target/$(TEST_PROFILE)/xdpool bash tests/vm/run.sh

# The driver unbind checks only, 20 cycles per NIC kind and mode.
test-vm-soak: check-root build
	bash tests/vm/run.sh --cycles 20 --checks unbind_zc_igb,unbind_copy_igb,unbind_zc_virtio,unbind_copy_virtio --timeout 3000

# The house style, before the tests: formatting (the fuzz crate too: a workspace of
# its own), clippy and rustdoc with warnings denied, licenses and banned crates
# (deny.toml). Profile TEST_PROFILE, as test-unit: the proc-macros and build scripts
# built here serve the tests too.
test-lint: lint-tools
	cargo fmt --all --check
	cargo fmt --check --manifest-path $(FUZZ_DIR)/Cargo.toml
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo clippy --workspace --all-targets --profile $(TEST_PROFILE) -- -D warnings
	XDPOOL_CLANG=clang-$(CLANG_VERSION) RUSTDOCFLAGS='-D warnings' cargo doc --no-deps --workspace --profile $(TEST_PROFILE)
	@# cargo-deny reads `cargo metadata` offline: every crate of the lock file must be
	@# in cargo's cache, the optional ones (loom) and other platforms' too, which no
	@# build of this stage downloads on a fresh machine.
	cargo fetch
	cargo deny --offline check licenses bans

# All unit, proptest and integration tests; the root ones create and remove their own
# namespaces. Profile `checked` (Cargo.toml): release optimisation with debug_assert!s
# and overflow checks on, so the assertions the code states run in CI.
# The tests that need root are ignored without the feature root-tests: a plain
# `cargo test` lists them as ignored, `make test` (root) runs them.
TEST_PROFILE ?= checked
ROOT_TESTS := --features xdpool-cli/root-tests,xdpool-examples/root-tests
test-unit:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo test --workspace --profile $(TEST_PROFILE) $(ROOT_TESTS) -- --test-threads=1

# The pool's and xdpool's loom features switch their sync facades to loom. Features,
# not --cfg loom, and resolved over the workspace as test-unit's are: the models
# reuse the dependencies test-unit built (-p pool alone would rebuild 26 of them;
# -p xdpool alone resolves syn, num-traits and tracing-subscriber otherwise, which
# xdpool-cli's selection, without a library of its own, brings back in line).
# A crate outside the workspace that depends on xdpool by path, as a user's own crate
# does (examples/standalone; its prerequisites are in docs/library.md). Its Cargo.lock
# pins the workspace's versions, and is built --locked (so is the fuzz crate's).
test-standalone:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) CARGO_TARGET_DIR=$(abspath $(TARGET_DIR))/standalone \
	  cargo build --locked --manifest-path examples/standalone/Cargo.toml \
	  || { echo "test-standalone: if cargo said examples/standalone/Cargo.lock needs to be updated, run make locks" >&2; exit 1; }

# The lock files of the two crates outside the workspace (examples/standalone, the fuzz
# crate), made again from the workspace's Cargo.lock: the versions it pins, and the
# newest of what only they use (libfuzzer-sys). Run after a change to Cargo.lock;
# `make test` builds both --locked, so that a release on crates.io cannot change what
# CI builds, and says to run this when one is out of date.
locks:
	@for d in examples/standalone $(FUZZ_DIR); do \
	  cp Cargo.lock $$d/Cargo.lock && (cd $$d && cargo metadata --format-version 1 >/dev/null) || exit 1; \
	  echo "locks: $$d/Cargo.lock made from Cargo.lock"; \
	done

test-loom:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) \
	  cargo test --workspace --profile $(TEST_PROFILE) --features pool/loom --test 'loom_*' -- --nocapture
	XDPOOL_CLANG=clang-$(CLANG_VERSION) LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) \
	  cargo test -p xdpool -p xdpool-cli --profile $(TEST_PROFILE) --features xdpool/loom --lib loom_models -- --nocapture

# The recycler's micro-benchmark with its targets checked: ratios to references
# measured in the same run, limits about 2x above the development machine's, a target
# failing only when missed in each of up to 3 runs, so only a real slowdown of a product
# path fails (the pool crate's code, measured by xdpool-lab's example).
# The example builds xdpool-lab and so the xdpool library: in release that is a second
# build of the library beside test-unit's (2.5 minutes of a fresh run); checked, the
# default, reuses test-unit's (the pool has one debug_assert!, and its counters get
# overflow checks: every target met by the same margins, 2026-12-03).
BENCH_PROFILE ?= checked
test-bench:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo run -p xdpool-lab --profile $(BENCH_PROFILE) --example bench_pool -- --check

# Coverage-guided fuzzing (cargo fuzz: libFuzzer on the nightly toolchain). Targets
# live in userspace/xdpool/fuzz/; their committed corpora are copied to a scratch
# corpus under target/ so a run never dirties the tree. A crash stops the run with its
# input in userspace/xdpool/fuzz/artifacts/<target>/ (replay: cargo +nightly fuzz run
# --fuzz-dir userspace/xdpool/fuzz <target> <file>). `make fuzz` runs each target for
# FUZZ_SECS; `make test` for FUZZ_CI_SECS. FUZZ_SEED replays a run's seed.
FUZZ_DIR := userspace/xdpool/fuzz
FUZZ_TARGETS := wire_parse xsk_rings config_parse netlink_link_events
FUZZ_SECS ?= 300
FUZZ_CI_SECS ?= 30

fuzz-tools:
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	$(call install-tool,cargo-fuzz,$(CARGO_FUZZ_VERSION))

fuzz: fuzz-tools
	$(MAKE) fuzz-run SECS=$(FUZZ_SECS)

test-fuzz: fuzz-tools
	$(MAKE) fuzz-run SECS=$(FUZZ_CI_SECS)

fuzz-run:
	@set -o pipefail; seed=$${FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	echo "fuzz: seed $$seed, $(SECS) s per target (replay: make fuzz FUZZ_SEED=$$seed)"; \
	root=$$(pwd); cd $(FUZZ_DIR) && \
	{ cargo +nightly metadata --locked --format-version 1 >/dev/null || { echo "fuzz: $(FUZZ_DIR)/Cargo.lock is out of date: run make locks" >&2; exit 1; }; } && \
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo +nightly fuzz build --fuzz-dir . && \
	for t in $(FUZZ_TARGETS); do \
	  work=$$root/target/fuzz-corpus/$$t; mkdir -p $$work artifacts/$$t; \
	  XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo +nightly fuzz run --fuzz-dir . $$t $$work corpus/$$t -- \
	    -max_total_time=$(SECS) -seed=$$seed -artifact_prefix=artifacts/$$t/ -print_final_stats=1 \
	    > $$root/target/fuzz-$$t.log 2>&1 \
	  || { tail -40 $$root/target/fuzz-$$t.log; echo "fuzz: $$t FAILED (seed $$seed); input saved in $(FUZZ_DIR)/artifacts/$$t/"; exit 1; }; \
	  echo "fuzz: $$t: $$(grep -E '^#[0-9]+[[:space:]]+DONE' $$root/target/fuzz-$$t.log | tail -1)"; \
	done

run: setup build
	$(XDPOOL) demo
	$(XDPOOL) demo --forward

bench: build
	$(XDPOOL) bench pool

pktgen: setup build
	$(XDPOOL) bench throughput --plot out/throughput.svg --json out/throughput.json

clean-lab: check-root
	-$(XDPOOL) lab down

# The generated references (docs/reference/: config, metrics and command references,
# man pages, completions) written again from the code; a test fails while they differ.
reference:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo run -q -p xdpool-cli -- reference --out docs/reference

# The Debian package: target/debian/xdpool_VERSION-1_ARCH.deb (cargo-deb, from `make
# setup`). The unit is deploy/xdpool.service with the package's binary path; the
# package has no maintainer scripts, so it never enables or starts the service.
# The package holds the `xdpool` binary only: its release build, not the workspace's.
deb:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo build --release -p xdpool-cli
	@[ -x $(CARGO_TOOLS)/bin/cargo-deb ] || { echo "deb: cargo-deb is missing; run make setup" >&2; exit 1; }
	sed -e 's|/usr/local/bin/xdpool|/usr/bin/xdpool|' \
	    -e '/^# systemd unit for one xdpool instance/,/^#   systemctl enable/c\# systemd unit for one xdpool instance, installed by the xdpool package and\n# neither enabled nor started: edit /etc/xdpool/xdpool.toml (xdpool doctor --config\n# /etc/xdpool/xdpool.toml checks it), then systemctl enable --now xdpool.' \
	    deploy/xdpool.service > $(TARGET_DIR)/release/xdpool.service
	PATH=$(TOOLS_CACHE)/cargo/bin:$$PATH cargo deb --no-build --strip -p xdpool-cli --output target/debian/

# Builds the package, installs it with dpkg, checks it and purges it (tests/deb/check.sh).
test-deb: check-root
	bash tests/deb/check.sh
