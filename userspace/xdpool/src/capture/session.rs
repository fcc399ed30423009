//! The control thread's side of a capture: checks the request against the rules that
//! run now, arms the tap, streams the records to the client on a thread of its own
//! (so `xdpool stats` keeps answering), and switches the tap off at `count`, when the
//! client goes away, when the instance stops, or when a reload removed the rule.
//!
//! The capture names its rule by key (`worker::rules::RuleSet::keys`), not by
//! position: a reload that renumbers the list keeps it on the same rule (by name, or
//! an unnamed rule with the same match and action, `reload::assign_keys`); a reload
//! whose list no longer has the rule ends it with a message that says so.

use super::live::LiveRules;
use super::wire::{self, Ended, Interface, Request, Started};
use super::{CaptureTap, Target, MAX_SNAPLEN};
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

/// What the control socket needs to serve `capture`.
pub struct CaptureService {
    tap: Arc<CaptureTap>,
    rules: Arc<LiveRules>,
    /// By port: name and its sockets.
    ports: Vec<(String, Vec<Interface>)>,
    running: AtomicBool,
    snaplen_max: u32,
}

/// Gives the instance's control socket (if it has one) the `capture` command.
pub fn enable(
    servers: &(
        Option<crate::stats::control::ControlServer>,
        Option<crate::stats::http::HttpServer>,
    ),
    rules: Arc<LiveRules>,
    plan: &Plan,
    fabric: &Fabric,
) {
    if let Some(control) = &servers.0 {
        control.enable_capture(Arc::new(CaptureService::new(
            rules,
            plan,
            fabric.capture.clone(),
        )));
    }
}

/// Every socket of the plan as a pcapng interface, by port.
pub fn interfaces(plan: &Plan) -> Vec<(String, Vec<Interface>)> {
    plan.ports
        .iter()
        .map(|p| {
            let ifs = p
                .sockets
                .iter()
                .map(|&s| Interface {
                    socket: s as u32,
                    name: format!(
                        "{}/{}/q{}",
                        p.def.name, p.def.interface, plan.sockets[s].queue
                    ),
                })
                .collect();
            (p.def.name.clone(), ifs)
        })
        .collect()
}

impl CaptureService {
    /// The service over the live rule list and the ports' sockets, from the plan.
    pub fn new(rules: Arc<LiveRules>, plan: &Plan, tap: Arc<CaptureTap>) -> CaptureService {
        let ports = interfaces(plan);
        // A copy never exceeds a single-buffer frame.
        let snaplen_max = MAX_SNAPLEN.min(plan.umem.chunk_size);
        CaptureService {
            tap,
            rules,
            ports,
            running: AtomicBool::new(false),
            snaplen_max,
        }
    }

    /// Checks a request against the rules running now; the answer to send, or the
    /// error that says what to do.
    fn check(&self, req: &Request) -> Result<(Target, Started), String> {
        let (index, rule) = self.rules.find(&req.rule)?;
        if !rule.action.reaches_userspace() {
            return Err(format!(
                "rule {} has action `{}`: the XDP program settles its frames in the kernel and no worker sees them; capture a rule whose action reaches the workers (drop, l2fwd, forward, reflect-twice, copybreak), or use tcpdump for `pass`",
                req.rule,
                rule.action.name()
            ));
        }
        if req.snaplen == 0 || req.snaplen > self.snaplen_max {
            return Err(format!(
                "--snaplen {} is out of range: use 1..={} (one chunk of this instance's UMEM)",
                req.snaplen, self.snaplen_max
            ));
        }
        let (port, interfaces) = &self.ports[rule.port];
        let started = Started {
            rule: index,
            name: rule.name.clone(),
            port: port.clone(),
            action: rule.action.name().to_string(),
            snaplen: req.snaplen,
            interfaces: interfaces.clone(),
        };
        Ok((
            Target {
                port: rule.port,
                rule_key: rule.key,
                snaplen: req.snaplen,
            },
            started,
        ))
    }

    /// Serves one `capture {...}` line: refuses it with a JSON error, or starts the
    /// capture and streams it from a thread of its own. Context: the control thread.
    pub fn serve(
        self: &Arc<Self>,
        mut stream: UnixStream,
        args: &str,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<()> {
        let refuse = |stream: &mut UnixStream, msg: String| {
            stream.write_all(serde_json::json!({ "error": msg }).to_string().as_bytes())
        };
        let req: Request = match serde_json::from_str(args) {
            Ok(r) => r,
            Err(e) => {
                return refuse(
                    &mut stream,
                    format!(
                        "bad capture request `{args}`: {e}; use `xdpool capture --rule N -w FILE`"
                    ),
                )
            }
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
            tracing::info!(rule = %req.rule, sent = ended.sent, dropped = ended.dropped, reason = %ended.reason, "capture ended");
            me.running.store(false, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            self.running.store(false, Ordering::SeqCst);
            return Err(e);
        }
        Ok(())
    }

    /// Arms the tap, sends records until done, switches it off, sends the end.
    fn stream(
        &self,
        stream: UnixStream,
        target: Target,
        count: u64,
        started: &Started,
        stop: &AtomicBool,
    ) -> Ended {
        let mut ended = Ended {
            sent: 0,
            dropped: 0,
            reason: String::new(),
        };
        let setup = stream
            .set_nonblocking(false)
            .and_then(|_| stream.set_write_timeout(Some(WRITE_TIMEOUT)));
        let mut out = BufWriter::with_capacity(1 << 16, &stream);
        let hello = serde_json::to_string(started).expect("serializes") + "\n";
        // Armed before the client hears it started: every frame after that is seen.
        self.tap.arm(target, self.tap.capacity());
        if let Err(e) = setup
            .and_then(|_| out.write_all(hello.as_bytes()))
            .and_then(|_| out.flush())
        {
            self.tap.disarm();
            std::thread::sleep(DISARM_GRACE);
            self.tap.clear();
            ended.reason = format!("client gone before the start: {e}");
            return ended;
        }
        tracing::info!(rule = started.rule, port = %started.port, snaplen = target.snaplen, count, "capture started");
        let mut last_look = Instant::now();
        let mut rules_seen = self.rules.version();
        let mut gone = None;
        ended.reason = loop {
            if stop.load(Ordering::Relaxed) {
                break "the instance is stopping".into();
            }
            if gone.is_none() && self.rules.version() != rules_seen {
                rules_seen = self.rules.version();
                gone = self.follow(target, started);
            }
            let mut sent_now = 0;
            let mut failed = None;
            while count == 0 || ended.sent < count {
                let Some(rec) = self.tap.take() else { break };
                let res = out
                    .write_all(&wire::header(rec.len, rec.orig_len, rec.ts_ns, rec.socket))
                    .and_then(|_| out.write_all(rec.bytes()));
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
            if let Some(why) = &gone {
                if sent_now == 0 {
                    // Every copy made under the old list was sent.
                    break why.clone();
                }
                continue;
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
        let _ = out
            .write_all(&wire::header(wire::END, 0, 0, 0))
            .and_then(|_| out.write_all(bye.as_bytes()))
            .and_then(|_| out.flush());
        ended
    }
}

impl CaptureService {
    /// After a reload: whether the captured rule still runs. `None` if it does (the
    /// workers follow its key; a new index is logged), else the reason to end.
    fn follow(&self, target: Target, started: &Started) -> Option<String> {
        let what = match &started.name {
            Some(n) => format!(
                "rule `{n}` (rule {} when the capture started)",
                started.rule
            ),
            None => format!("rule {} (unnamed)", started.rule),
        };
        match self.rules.by_key(target.port, target.rule_key) {
            Some((index, _)) => {
                if index != started.rule {
                    tracing::info!(rule = %what, now = index, "the rules were reloaded: the capture follows its rule, now rule {index}");
                }
                None
            }
            None => Some(format!(
                "{what} is gone: the reloaded rules of port `{}` have no rule {}; the capture ended there (every frame it matched until then was captured)",
                started.port,
                match &started.name {
                    Some(n) => format!("named `{n}`"),
                    None => "with the same match and action (give a rule a name to capture it across reloads that change it)".to_string(),
                }
            )),
        }
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
    use crate::capture::live::{LiveRule, RuleRef};

    fn service() -> CaptureService {
        let cfg = crate::config::Config::parse(
            r#"
[interface]
name = "veth0"
[[rule]]
name = "nine"
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
        let live = Arc::new(LiveRules::at_start(&cfg.valid_rules(), &cfg.rule_names()));
        CaptureService::new(live, &plan, Arc::new(CaptureTap::with_capacity(4)))
    }

    fn req(rule: &str, count: u64, snaplen: u32) -> Request {
        Request {
            rule: RuleRef::parse(rule),
            count,
            snaplen,
        }
    }

    #[test]
    fn requests_are_checked_with_a_reason() {
        let s = service();
        let (t, started) = s.check(&req("0", 5, 128)).unwrap();
        assert_eq!(
            t,
            Target {
                port: 0,
                rule_key: 0,
                snaplen: 128
            }
        );
        assert_eq!(started.action, "l2fwd");
        assert_eq!(started.interfaces.len(), 1);
        assert!(
            started.interfaces[0]
                .name
                .starts_with(&format!("{}/veth0/q", started.port)),
            "{started:?}"
        );
        let no_rule = s.check(&req("2", 0, 128)).unwrap_err();
        assert!(
            no_rule.contains("no rule 2") && no_rule.contains("0..1"),
            "{no_rule}"
        );
        let pass = s.check(&req("1", 0, 128)).unwrap_err();
        assert!(
            pass.contains("`pass`") && pass.contains("no worker sees"),
            "{pass}"
        );
        let snap = s.check(&req("0", 0, 0)).unwrap_err();
        assert!(snap.contains("--snaplen 0"), "{snap}");
        // By name; and the list that runs now, not the config's.
        let (t, started) = s.check(&req("nine", 0, 64)).unwrap();
        assert_eq!(
            (t.rule_key, started.rule, started.name.as_deref()),
            (0, 0, Some("nine"))
        );
        let moved = vec![
            LiveRule {
                port: 0,
                key: 70,
                name: None,
                action: crate::config::Action::Drop,
            },
            LiveRule {
                port: 0,
                key: 0,
                name: Some("nine".into()),
                action: crate::config::Action::L2fwd,
            },
        ];
        s.rules.set(moved);
        let (t, started) = s.check(&req("nine", 0, 64)).unwrap();
        assert_eq!(
            (t.rule_key, started.rule),
            (0, 1),
            "the live list's index, the same key"
        );
        assert_eq!(
            s.check(&req("0", 0, 64)).unwrap().0.rule_key,
            70,
            "index 0 is the new rule now"
        );
        // A running capture follows its key, or ends naming the rule.
        assert_eq!(s.follow(t, &started), None);
        s.rules.set(vec![LiveRule {
            port: 0,
            key: 70,
            name: None,
            action: crate::config::Action::Drop,
        }]);
        let why = s.follow(t, &started).unwrap();
        assert!(
            why.contains("rule `nine` (rule 1 when the capture started) is gone")
                && why.contains("named `nine`"),
            "{why}"
        );
    }
}
