//! `cargo run -p pool --example bench_pool --release [-- --json] [--iterations N]`
//! The same run as `xdpool bench pool`.

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
}
