//! `cargo run -p xdpool-lab --example bench_pool --release [-- --json] [--iterations N] [--check]`
//! The same run as `xdpool bench pool`; `--check` exits 1 when a target is missed
//! in each of up to 3 runs (`xdpool_lab::pool_bench::check`) or the cross-thread threads could
//! not be pinned.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut cfg = xdpool_lab::pool_bench::BenchConfig::default();
    if let Some(i) = args.iter().position(|a| a == "--iterations") {
        match args.get(i + 1).and_then(|v| v.parse().ok()) {
            Some(n) => cfg.iterations = n,
            None => {
                eprintln!("--iterations needs a number");
                std::process::exit(2);
            }
        }
    }
    let json = args.iter().any(|a| a == "--json");
    let show = |report: &xdpool_lab::pool_bench::BenchReport| {
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(report).expect("report serializes")
            );
        } else {
            print!("{}", report.table());
        }
    };
    if !args.iter().any(|a| a == "--check") {
        show(&xdpool_lab::pool_bench::run(&cfg));
        return;
    }
    let failures =
        xdpool_lab::pool_bench::check(&cfg, xdpool_lab::pool_bench::CHECK_ATTEMPTS, |n, report| {
            if n > 1 {
                eprintln!(
                    "bench pool --check: a target was missed; run {n} of at most {}",
                    xdpool_lab::pool_bench::CHECK_ATTEMPTS
                );
            }
            show(report);
        });
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("bench pool --check: {f}");
        }
        std::process::exit(1);
    }
    eprintln!("bench pool --check: every target met");
}
