# xdpool — set-up, build, test, demo and benchmarks.
# The README's two commands are `make run` and `make test`.
SHELL := /bin/bash
CLANG_VERSION := 19
APT_PACKAGES := clang-$(CLANG_VERSION) llvm-$(CLANG_VERSION) libbpf-dev libelf-dev zlib1g-dev linux-libc-dev iproute2 pkg-config ethtool
XDPOOL := target/release/xdpool
LOOM_TARGET := target/loom
# Loom: bounded preemptions keep the model checks within minutes on 2 cores.
LOOM_MAX_PREEMPTIONS ?= 3

.PHONY: setup build test test-unit test-loom run bench pktgen clean-lab check-root

check-root:
	@if [ "$$(id -u)" != 0 ]; then echo "xdpool: this target needs root (it installs packages, loads XDP programs and creates network namespaces); run it with sudo" >&2; exit 1; fi

# Idempotent: installs only what is missing, mounts bpffs only when absent.
setup: check-root
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "setup: installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q --no-install-recommends $$missing; \
	else echo "setup: system packages present"; fi
	@if ! mountpoint -q /sys/fs/bpf; then mkdir -p /sys/fs/bpf && mount -t bpf bpf /sys/fs/bpf && echo "setup: mounted bpffs on /sys/fs/bpf"; \
	else echo "setup: bpffs mounted"; fi

build:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo build --release --workspace
	@echo "built: $(XDPOOL) (XDP objects are embedded in it)"

test: setup test-unit test-loom

# All unit, proptest and integration tests; the root ones create and remove their own
# namespaces. Profile `checked` (Cargo.toml): release optimisation with debug_assert!s
# and overflow checks on, so the assertions the code states run in CI.
TEST_PROFILE ?= checked
test-unit:
	XDPOOL_CLANG=clang-$(CLANG_VERSION) cargo test --workspace --profile $(TEST_PROFILE) -- --test-threads=1

test-loom:
	RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) CARGO_TARGET_DIR=$(LOOM_TARGET) \
	  cargo test -p pool --profile $(TEST_PROFILE) --test 'loom_*' -- --nocapture
	XDPOOL_CLANG=clang-$(CLANG_VERSION) LOOM_MAX_PREEMPTIONS=$(LOOM_MAX_PREEMPTIONS) \
	  cargo test -p xdpool --profile $(TEST_PROFILE) --features loom --lib xsk::ring::loom_models -- --nocapture

run: setup build
	$(XDPOOL) demo

bench: build
	$(XDPOOL) bench pool

pktgen: setup build
	$(XDPOOL) bench throughput --plot out/throughput.svg --json out/throughput.json

clean-lab: check-root
	-$(XDPOOL) lab down
