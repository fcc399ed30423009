# xdpool — set-up, build, test, demo and benchmarks.
# The README's two commands are `make run` and `make test`.
SHELL := /bin/bash
CLANG_VERSION := 19
APT_PACKAGES := clang-$(CLANG_VERSION) llvm-$(CLANG_VERSION) libbpf-dev libelf-dev zlib1g-dev linux-libc-dev iproute2 pkg-config ethtool tcpdump
XDPOOL := target/release/xdpool
LOOM_TARGET := target/loom
# Tools the tests use that are unpacked, not installed.
TOOLS_CACHE := /var/cache/xdpool
PROMTOOL := $(TOOLS_CACHE)/prometheus/usr/bin/promtool
# Loom: bounded preemptions keep the model checks within minutes on 2 cores.
LOOM_MAX_PREEMPTIONS ?= 3

.PHONY: setup build test test-unit test-standalone test-loom test-bench test-fuzz fuzz fuzz-tools fuzz-run test-vm test-vm-soak run bench pktgen clean-lab check-root

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

build:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo build --release --workspace
	@echo "built: $(XDPOOL) (XDP objects are embedded in it)"

test: setup test-unit test-loom test-fuzz test-bench test-vm

# xdpool on real PCI NIC drivers (igb, virtio-net) in a nested QEMU guest under TCG:
# tests/vm/run.sh (docs/vm.md). XDPOOL_SKIP_VM=1 skips it outside CI.
test-vm: check-root build
	bash tests/vm/run.sh

# The driver unbind checks only, 20 cycles per NIC kind and mode.
test-vm-soak: check-root build
	bash tests/vm/run.sh --cycles 20 --checks unbind_zc_igb,unbind_copy_igb,unbind_zc_virtio,unbind_copy_virtio --timeout 3000

# All unit, proptest and integration tests; the root ones create and remove their own
# namespaces. Profile `checked` (Cargo.toml): release optimisation with debug_assert!s
# and overflow checks on, so the assertions the code states run in CI.
TEST_PROFILE ?= checked
test-unit:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo test --workspace --profile $(TEST_PROFILE) -- --test-threads=1

# A crate outside the workspace that depends on xdpool by path, as a user's own crate
# does (examples/standalone; its prerequisites are in docs/library.md). Its Cargo.lock
# pins the workspace's versions.
test-standalone:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo build --manifest-path examples/standalone/Cargo.toml

test-loom:
	RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) CARGO_TARGET_DIR=$(LOOM_TARGET) \
	  cargo test -p pool --profile $(TEST_PROFILE) --test 'loom_*' -- --nocapture
	XDPOOL_CLANG=clang-$(CLANG_VERSION) LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) \
	  cargo test -p xdpool --profile $(TEST_PROFILE) --features loom --lib loom_models -- --nocapture

# The recycler's micro-benchmark with its targets checked: ratios to references
# measured in the same run, limits about 2x above the development machine's, a target
# failing only when missed in each of up to 3 runs, so only a real slowdown of a product
# path fails (release build of the pool crate only).
test-bench:
	cargo run -p pool --release --example bench_pool -- --check

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
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

fuzz: fuzz-tools
	$(MAKE) fuzz-run SECS=$(FUZZ_SECS)

test-fuzz: fuzz-tools
	$(MAKE) fuzz-run SECS=$(FUZZ_CI_SECS)

fuzz-run:
	@set -o pipefail; seed=$${FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	echo "fuzz: seed $$seed, $(SECS) s per target (replay: make fuzz FUZZ_SEED=$$seed)"; \
	root=$$(pwd); cd $(FUZZ_DIR) && \
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
