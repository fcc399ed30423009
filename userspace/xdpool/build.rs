//! Builds the XDP program the product loads, `xdp-prog/xdpool.bpf.c`, into
//! `$OUT_DIR/xdpool.bpf.o` (see bpf_build.rs). The generator's and the benchmarks'
//! programs are built by userspace/xdpool-lab's build script.
mod bpf_build;

fn main() {
    bpf_build::build_programs(&["xdpool"]);
}
