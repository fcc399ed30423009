//! `cargo run -p pool --example bench_pool --release [-- --json] [--iterations N] [--check]`
//! The same run as `xdpool bench pool`; `--check` exits 1 when a target is missed
//! or the cross-thread threads could not be pinned.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cfg = pool::bench::BenchConfig::default();
    if let Some(i) = args.iter().position(|a| a == "--iterations") {
        match args.get(i + 1).and_then(|v| v.parse().ok()) {
            Some(n) => cfg.iterations = n,
            None => {
                eprintln!("--iterations needs a number");
                std::process::exit(2);
            }
        }
    }
    let report = pool::bench::run(&cfg);
    if args.iter().any(|a| a == "--json") {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serializes")
        );
    } else {
        print!("{}", report.table());
    }
    if args.iter().any(|a| a == "--check") {
        let failures = report.failures();
        if !failures.is_empty() {
            for f in &failures {
                eprintln!("bench pool --check: {f}");
            }
            std::process::exit(1);
        }
        eprintln!("bench pool --check: every target met");
    }
}
