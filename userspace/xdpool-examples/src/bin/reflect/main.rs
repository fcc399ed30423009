//! The minimal packet function: counts UDP frames and sends them back out of the
//! port they came in on, MACs swapped; drops everything else.
use xdpool::{Counter, Handler, LaneSetup, Mac, Packet, Verdict};

/// Reflects UDP.
pub struct Reflect;

impl Handler for Reflect {
    type Lane = Counter;
    fn lane(&self, setup: &mut LaneSetup<'_>) -> Counter {
        setup.counter("udp")
    }
    fn handle(&self, udp: &mut Counter, pkt: &mut Packet<'_>) -> Verdict {
        if pkt.parse().is_ok_and(|p| p.ip_proto() == Some(17)) {
            udp.inc();
            return Verdict::back().with_mac(Mac::Swap);
        }
        Verdict::drop()
    }
}

fn main() {
    let args = xdpool_examples::Args::parse();
    xdpool_examples::finish(args.app().handler("reflect", Reflect).run());
}

#[cfg(test)]
mod tests;
