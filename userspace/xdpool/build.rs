//! Builds every `xdp-prog/*.bpf.c` into `$OUT_DIR/<name>.bpf.o` with clang -target bpf.
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

fn main() {
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
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&prog_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    sources.sort();
    for entry in std::fs::read_dir(&prog_dir).unwrap().flatten() {
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }
    for src in sources {
        let stem = src
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".c")
            .to_string();
        let obj = out.join(format!("{stem}.o"));
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
