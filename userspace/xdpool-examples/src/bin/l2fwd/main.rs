//! The built-in `l2fwd` action as a packet function: every frame back out of the
//! port it came in on, MACs swapped. It does what the built-in does, so that the two
//! can be compared on the lab (`HANDLER_B` in `tools/bench/vs-xskref.sh`, figures in
//! `docs/benchmarks.md`) and under callgrind (`tools/bench/handler-cost.sh`).
use xdpool::{Mac, Packet, Verdict};

fn main() {
    let args = xdpool_examples::Args::parse();
    let l2fwd = |_: &mut Packet<'_>| Verdict::back().with_mac(Mac::Swap);
    xdpool_examples::finish(args.app().handler("l2fwd", l2fwd).run());
}
