//! Builds the tools' XDP programs into `$OUT_DIR/<name>.bpf.o`: the generator's
//! (`gen.bpf.c`: BPF_PROG_RUN live frames; `count.bpf.c`: the receiver's counter) and
//! the steering benchmark's reference (`redirect.bpf.c`). The compiler driver is the
//! library's (userspace/xdpool/bpf_build.rs).
#[path = "../xdpool/bpf_build.rs"]
mod bpf_build;

fn main() {
    bpf_build::build_programs(&["gen", "count", "redirect"]);
}
