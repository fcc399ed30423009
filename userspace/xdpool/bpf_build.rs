//! Compiles XDP programs from `xdp-prog/` into `$OUT_DIR/<name>.bpf.o` with clang
//! `-target bpf`. Shared by the build scripts of `xdpool` (the programs the product
//! loads) and `xdpool-lab` (the generator's and the benchmarks' programs).
//!
//! The clang binary is `$XDPOOL_CLANG`, else `clang-19`, else `clang`. A missing clang
//! fails the build with the command that installs it.
use std::path::{Path, PathBuf};
use std::process::Command;

fn find_clang() -> Option<String> {
    let mut candidates = Vec::new();
    if let Ok(c) = std::env::var("XDPOOL_CLANG") {
        candidates.push(c);
    }
    candidates.push("clang-19".into());
    candidates.push("clang".into());
    candidates.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

/// Builds `xdp-prog/<name>.bpf.c` for each of `programs` (names without `.bpf.c`).
pub fn build_programs(programs: &[&str]) {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let prog_dir = manifest
        .join("../../xdp-prog")
        .canonicalize()
        .expect("xdp-prog/ directory");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-env-changed=XDPOOL_CLANG");
    println!("cargo:rerun-if-changed={}", prog_dir.display());

    let Some(clang) = find_clang() else {
        panic!(
            "\n\nerror: clang not found (needed to build the XDP programs in xdp-prog/).\n\
             Run `make setup` (installs clang-19 and libbpf-dev), or set XDPOOL_CLANG to a clang binary.\n\n"
        );
    };
    let arch_include = format!(
        "/usr/include/{}-linux-gnu",
        std::env::var("CARGO_CFG_TARGET_ARCH").unwrap()
    );
    for entry in std::fs::read_dir(&prog_dir).unwrap().flatten() {
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }
    for name in programs {
        let src = prog_dir.join(format!("{name}.bpf.c"));
        let obj = out.join(format!("{name}.bpf.o"));
        compile(&clang, &src, &obj, &prog_dir, &arch_include);
    }
}

fn compile(clang: &str, src: &Path, obj: &Path, include: &Path, arch_include: &str) {
    let output = Command::new(clang)
        .args([
            "-O2",
            "-g",
            "-Wall",
            "-Werror",
            "-target",
            "bpf",
            "-D__TARGET_ARCH_x86",
        ])
        .arg(format!("-I{}", include.display()))
        .arg(format!("-I{arch_include}"))
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(obj)
        .output()
        .unwrap_or_else(|e| panic!("running {clang}: {e}"));
    if !output.status.success() {
        panic!(
            "\n\nerror: {clang} failed on {}:\n{}\nIf headers such as bpf/bpf_helpers.h are missing, run `make setup` (installs libbpf-dev).\n",
            src.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
