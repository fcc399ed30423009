//! The control thread's side of a capture: checks the request, arms the tap, streams
//! the records to the client on a thread of its own (so `xdpool stats` keeps
//! answering), and switches the tap off at `count`, when the client goes away, or
//! when the instance stops.

use super::wire::{self, Ended, Interface, Request, Started};
use super::{CaptureTap, Target, MAX_SNAPLEN};
use crate::config::{Action, Config};
use crate::plan::Plan;
use crate::worker::Fabric;
use std::io::{BufWriter, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a worker may still be inside the batch in which the tap was switched off.
const DISARM_GRACE: Duration = Duration::from_millis(20);

/// A write the client does not take within this long ends the capture.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// One config rule, as a capture finds it.
#[derive(Debug, Clone)]
struct RuleEntry {
    port: usize,
    local: usize,
    action: Action,
}

/// What the control socket needs to serve `capture`.
pub struct CaptureService {
    tap: Arc<CaptureTap>,
    rules: Vec<RuleEntry>,
    /// By port: name and its sockets.
    ports: Vec<(String, Vec<Interface>)>,
    running: AtomicBool,
    snaplen_max: u32,
}

/// Gives the instance's control socket (if it has one) the `capture` command.
pub fn enable(servers: &(Option<crate::stats::control::ControlServer>, Option<crate::stats::prom::PromServer>), cfg: &Config, plan: &Plan, fabric: &Fabric) {
    if let Some(control) = &servers.0 {
        control.enable_capture(Arc::new(CaptureService::new(cfg, plan, fabric.capture.clone())));
    }
}

impl CaptureService {
    /// The rule table (config order) and the ports' sockets, from the plan.
    pub fn new(cfg: &Config, plan: &Plan, tap: Arc<CaptureTap>) -> CaptureService {
        let mut seen = vec![0usize; plan.ports.len()];
        let rules = cfg
            .valid_rules()
            .iter()
            .map(|r| {
                let local = seen[r.port];
                seen[r.port] += 1;
                RuleEntry { port: r.port, local, action: r.action }
            })
            .collect();
        let ports = plan
            .ports
            .iter()
            .map(|p| {
                let ifs = p.sockets.iter().map(|&s| Interface { socket: s as u32, name: format!("{}/{}/q{}", p.def.name, p.def.interface, plan.sockets[s].queue) }).collect();
                (p.def.name.clone(), ifs)
            })
            .collect();
        // A copy never exceeds a single-buffer frame.
        let snaplen_max = MAX_SNAPLEN.min(plan.umem.chunk_size);
        CaptureService { tap, rules, ports, running: AtomicBool::new(false), snaplen_max }
    }

    /// Checks a request; the answer to send, or the error that says what to do.
    fn check(&self, req: &Request) -> Result<(Target, Started), String> {
        let Some(rule) = self.rules.get(req.rule) else {
            return Err(format!(
                "no rule {}: this instance has {} rule(s), numbered 0..{} in the order of the config's [[rule]] tables; pass --rule with one of them",
                req.rule,
                self.rules.len(),
                self.rules.len().saturating_sub(1)
            ));
        };
        if !rule.action.reaches_userspace() {
            return Err(format!(
                "rule {} has action `{}`: the XDP program settles its frames in the kernel and no worker sees them; capture a rule whose action reaches the workers (drop, l2fwd, forward, reflect-twice, copybreak), or use tcpdump for `pass`",
                req.rule,
                rule.action.name()
            ));
        }
        if req.snaplen == 0 || req.snaplen > self.snaplen_max {
            return Err(format!("--snaplen {} is out of range: use 1..={} (one chunk of this instance's UMEM)", req.snaplen, self.snaplen_max));
        }
        let (port, interfaces) = &self.ports[rule.port];
        let started = Started { rule: req.rule, port: port.clone(), action: rule.action.name().to_string(), snaplen: req.snaplen, interfaces: interfaces.clone() };
        Ok((Target { port: rule.port, local_rule: rule.local, snaplen: req.snaplen }, started))
    }

    /// Serves one `capture {...}` line: refuses it with a JSON error, or starts the
    /// capture and streams it from a thread of its own. Context: the control thread.
    pub fn serve(self: &Arc<Self>, mut stream: UnixStream, args: &str, stop: Arc<AtomicBool>) -> std::io::Result<()> {
        let refuse = |stream: &mut UnixStream, msg: String| stream.write_all(serde_json::json!({ "error": msg }).to_string().as_bytes());
        let req: Request = match serde_json::from_str(args) {
            Ok(r) => r,
            Err(e) => return refuse(&mut stream, format!("bad capture request `{args}`: {e}; use `xdpool capture --rule N -w FILE`")),
        };
        let (target, started) = match self.check(&req) {
            Ok(v) => v,
            Err(msg) => return refuse(&mut stream, msg),
        };
        if self.running.swap(true, Ordering::SeqCst) {
            return refuse(&mut stream, "a capture is already running on this instance; wait for it to end (or stop its client with Ctrl-C)".into());
        }
        let me = self.clone();
        let spawned = std::thread::Builder::new().name("xdpool-capture".into()).spawn(move || {
            let ended = me.stream(stream, target, req.count, &started, &stop);
            tracing::info!(rule = req.rule, sent = ended.sent, dropped = ended.dropped, reason = %ended.reason, "capture ended");
            me.running.store(false, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            self.running.store(false, Ordering::SeqCst);
            return Err(e);
        }
        Ok(())
    }

    /// Arms the tap, sends records until done, switches it off, sends the end.
    fn stream(&self, stream: UnixStream, target: Target, count: u64, started: &Started, stop: &AtomicBool) -> Ended {
        let mut ended = Ended { sent: 0, dropped: 0, reason: String::new() };
        let setup = stream.set_nonblocking(false).and_then(|_| stream.set_write_timeout(Some(WRITE_TIMEOUT)));
        let mut out = BufWriter::with_capacity(1 << 16, &stream);
        let hello = serde_json::to_string(started).expect("serializes") + "\n";
        // Armed before the client hears it started: every frame after that is seen.
        self.tap.arm(target, self.tap.capacity());
        if let Err(e) = setup.and_then(|_| out.write_all(hello.as_bytes())).and_then(|_| out.flush()) {
            self.tap.disarm();
            std::thread::sleep(DISARM_GRACE);
            self.tap.clear();
            ended.reason = format!("client gone before the start: {e}");
            return ended;
        }
        tracing::info!(rule = started.rule, port = %started.port, snaplen = target.snaplen, count, "capture started");
        let mut last_look = Instant::now();
        ended.reason = loop {
            if stop.load(Ordering::Relaxed) {
                break "the instance is stopping".into();
            }
            let mut sent_now = 0;
            let mut failed = None;
            while count == 0 || ended.sent < count {
                let Some(rec) = self.tap.take() else { break };
                let res = out.write_all(&wire::header(rec.len, rec.orig_len, rec.ts_ns, rec.socket)).and_then(|_| out.write_all(rec.bytes()));
                self.tap.give_back(rec);
                if let Err(e) = res {
                    failed = Some(e);
                    break;
                }
                ended.sent += 1;
                sent_now += 1;
            }
            if count > 0 && ended.sent >= count {
                self.tap.disarm();
                break format!("{count} frames captured");
            }
            if let Some(e) = failed.or_else(|| out.flush().err()) {
                break format!("the client went away ({e})");
            }
            if sent_now == 0 {
                if last_look.elapsed() >= Duration::from_millis(20) {
                    last_look = Instant::now();
                    if client_closed(&stream) {
                        break "the client went away".into();
                    }
                }
                std::thread::sleep(Duration::from_micros(500));
            }
        };
        self.tap.disarm();
        ended.dropped = self.tap.dropped();
        std::thread::sleep(DISARM_GRACE);
        self.tap.clear();
        let bye = serde_json::to_string(&ended).expect("serializes") + "\n";
        let _ = out.write_all(&wire::header(wire::END, 0, 0, 0)).and_then(|_| out.write_all(bye.as_bytes())).and_then(|_| out.flush());
        ended
    }
}

/// Whether the client closed its end (it sends nothing after its request, so
/// readable means closed).
fn client_closed(stream: &UnixStream) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) => false,
        Ok(_) => {
            let r = fds[0].revents().unwrap_or(PollFlags::empty());
            if r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
                return true;
            }
            let mut b = [0u8; 64];
            matches!((&*stream).read(&mut b), Ok(0) | Err(_))
        }
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service() -> CaptureService {
        let cfg = Config::parse(
            r#"
[interface]
name = "veth0"
[[rule]]
proto = "udp"
dst_port = 9
action = "l2fwd"
[[rule]]
proto = "udp"
action = "pass"
"#,
        )
        .unwrap();
        let plan = crate::plan::plan(&cfg, &cfg.worker_cores());
        CaptureService::new(&cfg, &plan, Arc::new(CaptureTap::with_capacity(4)))
    }

    #[test]
    fn requests_are_checked_with_a_reason() {
        let s = service();
        let (t, started) = s.check(&Request { rule: 0, count: 5, snaplen: 128 }).unwrap();
        assert_eq!(t, Target { port: 0, local_rule: 0, snaplen: 128 });
        assert_eq!(started.action, "l2fwd");
        assert_eq!(started.interfaces.len(), 1);
        assert!(started.interfaces[0].name.starts_with(&format!("{}/veth0/q", started.port)), "{started:?}");
        let no_rule = s.check(&Request { rule: 2, count: 0, snaplen: 128 }).unwrap_err();
        assert!(no_rule.contains("no rule 2") && no_rule.contains("0..1"), "{no_rule}");
        let pass = s.check(&Request { rule: 1, count: 0, snaplen: 128 }).unwrap_err();
        assert!(pass.contains("`pass`") && pass.contains("no worker sees"), "{pass}");
        let snap = s.check(&Request { rule: 0, count: 0, snaplen: 0 }).unwrap_err();
        assert!(snap.contains("--snaplen 0"), "{snap}");
    }
}
