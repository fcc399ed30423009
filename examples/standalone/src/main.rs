//! A user's own program on xdpool: counts frames per rule and drops them.
use xdpool::{App, Counter, Handler, LaneSetup, Packet, Verdict};

struct CountAndDrop;

impl Handler for CountAndDrop {
    type Lane = Counter;
    fn lane(&self, setup: &mut LaneSetup<'_>) -> Counter {
        setup.counter("seen")
    }
    fn handle(&self, seen: &mut Counter, _: &mut Packet<'_>) -> Verdict {
        seen.inc();
        Verdict::drop()
    }
}

fn main() {
    let config = std::env::args().nth(1).unwrap_or_else(|| "xdpool.toml".into());
    match App::from_config(config).handler("count", CountAndDrop).run() {
        Ok(summary) => println!("{} frames", summary.packets),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
