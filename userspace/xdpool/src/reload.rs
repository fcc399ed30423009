//! Hot rule reload: `xdpool rules apply FILE` (over the control socket) and SIGHUP
//! (the config file read again) replace the running `[[rule]]` tables without a
//! restart, or refuse them and keep the running ones.
//!
//! Per port whose list changed: the new list is validated (the config's key-and-line
//! errors) and checked against what runs (a rule may only send frames out of a port
//! whose sockets have a TX ring); each of the port's workers is given the worker
//! side under a new generation and must take it at a batch boundary
//! (`worker::rules`); only then is the XDP side swapped (`Steering::set_rules_carrying`:
//! the idle bank, or a new program through a bpf_link update). From before the
//! workers are handed the list until each of them has settled, the XDP program tags
//! each steered frame with the generation it matched under (`Steering::set_tagging`;
//! [`Reloader::tick`] turns it off again), and a worker acts on it under that
//! generation's list, so no frame is acted on by half of two lists.
//! Counters: a rule with a `name` continues the counters of the old rule of that
//! name on its port; an unnamed (or newly named) rule starts from zero.
//! Rule keys (what `xdpool capture` follows, [`assign_keys`]): a rule keeps its key
//! when the new list has a rule of its name on its port, or, unnamed, an unnamed
//! rule with the same match and action; every other rule gets a new key.
//! Capture files (`capture = {...}`): opened before the workers get the list (a file
//! already being written continues), closed once no running list writes to them
//! (`capture::file`).

use crate::capture::file::{FileCaptures, FileSink};
use crate::capture::live::{LiveRule, LiveRules};
use crate::config::{Action, Config, ConfigError, ValidRule};
use crate::plan::PortPlan;
use crate::steer::{next_generation, RuleCounts, Steering};
use crate::worker::classify::Classifier;
use crate::worker::rules::{RuleSet, RuleSlot};
use crate::worker::PortShared;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a worker may take to pick a new rule list up (it does at its next batch,
/// or when woken from poll()).
const TAKE_WAIT: Duration = Duration::from_secs(1);

/// Why a reload did not happen; the running rules stay in every case.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file does not parse or validate.
    #[error("{0}")]
    Invalid(ConfigError),
    /// Valid rules that the running instance cannot carry out.
    #[error("{0}")]
    Refused(String),
    /// The swap itself failed (and was rolled back).
    #[error("{0}")]
    Failed(String),
}

impl ReloadError {
    /// The reply's `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            ReloadError::Invalid(_) => "invalid",
            ReloadError::Refused(_) => "refused",
            ReloadError::Failed(_) => "failed",
        }
    }
}

/// What a reload did.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    /// Generation of the lists now live.
    pub generation: u32,
    /// Rules now running, all ports.
    pub rules: usize,
    /// Ports whose list changed.
    pub ports_changed: Vec<String>,
    /// Rules that continue the counters of an old rule of the same name.
    pub carried: usize,
    /// From the first worker handed the new list to the XDP side swapped, ms.
    pub swap_ms: f64,
}

/// One port as the reloader sees it.
struct PortState {
    plan: PortPlan,
    steering: Arc<Mutex<Steering>>,
    names: Vec<Option<String>>,
    keys: Vec<u32>,
    sinks: Vec<Option<Arc<FileSink>>>,
    /// Tagging is on until each of these (socket, version) has settled.
    untag_after: Option<Vec<(usize, u64)>>,
}

/// One port's rule list with what goes with each rule (all in rule order).
struct PortList {
    rules: Vec<ValidRule>,
    names: Vec<Option<String>>,
    keys: Vec<u32>,
    sinks: Vec<Option<Arc<FileSink>>>,
}

impl PortList {
    fn same_as(&self, p: &PortState) -> bool {
        let sink_ids = |v: &[Option<Arc<FileSink>>]| {
            v.iter()
                .map(|s| s.as_ref().map(|s| s.id))
                .collect::<Vec<_>>()
        };
        self.rules == p.plan.rules
            && self.names == p.names
            && self.keys == p.keys
            && sink_ids(&self.sinks) == sink_ids(&p.sinks)
    }
}

/// What the workers know a rule list by besides its rules: each rule's key and
/// `capture` file.
pub struct RuleTaps {
    /// The list that runs now, as `xdpool capture` names its rules.
    pub live: Arc<LiveRules>,
    /// The rules' capture files.
    pub files: Arc<FileCaptures>,
    /// The starting list's capture files, in config rule order.
    pub sinks: Vec<Option<Arc<FileSink>>>,
}

/// Keys at start are positions on the port (up to 64 rules); new ones come after.
const FIRST_NEW_KEY: u32 = 64;

struct State {
    config: Config,
    config_path: Option<PathBuf>,
    ports: Vec<PortState>,
    /// Each socket's slot and shared state (to wake its worker), by socket index.
    slots: Vec<Arc<RuleSlot>>,
    sockets: Vec<Arc<PortShared>>,
    live: Arc<LiveRules>,
    files: Arc<FileCaptures>,
    next_key: u32,
    generation: u32,
    reloads: u64,
    refused: u64,
    last: Option<Value>,
    /// `XDPOOL_RELOAD_HOLD_MS` (tests): how long to hold between the workers taking
    /// a list and the XDP swap, which widens the window in which frames steered under
    /// the old list reach workers that already have the new one.
    hold: Duration,
}

/// The running rules and how to replace them; shared by the control socket and the
/// control loop (SIGHUP). Reloads are serialized.
pub struct Reloader {
    state: Mutex<State>,
}

impl Reloader {
    /// The reloader of a started instance.
    pub fn new(
        config: Config,
        config_path: Option<PathBuf>,
        ports: Vec<(PortPlan, Arc<Mutex<Steering>>)>,
        slots: Vec<Arc<RuleSlot>>,
        sockets: Vec<Arc<PortShared>>,
        taps: RuleTaps,
    ) -> Arc<Reloader> {
        let names = config.rule_names();
        let valid = config.valid_rules();
        let RuleTaps { live, files, sinks } = taps;
        let generation = ports
            .iter()
            .map(|(_, st)| st.lock().unwrap_or_else(|e| e.into_inner()).generation())
            .max()
            .unwrap_or(0);
        let ports = ports
            .into_iter()
            .enumerate()
            .map(|(i, (plan, steering))| {
                let names: Vec<Option<String>> = valid
                    .iter()
                    .zip(&names)
                    .filter(|(r, _)| r.port == i)
                    .map(|(_, n)| n.clone())
                    .collect();
                let sinks = valid
                    .iter()
                    .zip(&sinks)
                    .filter(|(r, _)| r.port == i)
                    .map(|(_, s)| s.clone())
                    .collect();
                let keys = (0..names.len() as u32).collect();
                PortState {
                    plan,
                    steering,
                    names,
                    keys,
                    sinks,
                    untag_after: None,
                }
            })
            .collect();
        let hold = Duration::from_millis(
            std::env::var("XDPOOL_RELOAD_HOLD_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
                .min(1000),
        );
        Arc::new(Reloader {
            state: Mutex::new(State {
                config,
                config_path,
                ports,
                slots,
                sockets,
                live,
                files,
                next_key: FIRST_NEW_KEY,
                generation,
                reloads: 0,
                refused: 0,
                last: None,
                hold,
            }),
        })
    }

    /// SIGHUP: the config file again (its `[[rule]]` tables).
    pub fn apply_config_file(&self) -> Result<Applied, ReloadError> {
        let path = self
            .lock()
            .config_path
            .clone()
            .ok_or_else(|| ReloadError::Refused("no config file to read again".into()))?;
        let text = std::fs::read_to_string(&path).map_err(|e| {
            ReloadError::Invalid(ConfigError {
                key: "-".into(),
                line: None,
                message: format!("cannot read the config file: {e}"),
                file: Some(path.clone()),
            })
        })?;
        self.apply(&text).map_err(|e| match e {
            ReloadError::Invalid(mut c) => {
                c.file = Some(path);
                ReloadError::Invalid(c)
            }
            other => other,
        })
    }

    /// Turns tagging off on each port whose workers have all settled after its last
    /// reload, and wakes those that have not (an idle worker settles when it next
    /// runs). Called every 10 ms by the reload thread.
    pub fn tick(&self) {
        self.lock().untag_settled();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Validates `text` (a rules file or a whole config) and swaps it in, or says
    /// why not; the running rules stay on any error.
    pub fn apply(&self, text: &str) -> Result<Applied, ReloadError> {
        let mut st = self.lock();
        let res = st.apply(text);
        match &res {
            Ok(a) => {
                st.reloads += 1;
                st.last = Some(json!({"ok": true, "applied": a}));
                tracing::info!(generation = a.generation, rules = a.rules, ports = ?a.ports_changed, swap_ms = a.swap_ms, "rules reloaded");
            }
            Err(e) => {
                st.refused += 1;
                st.last = Some(json!({"ok": false, "kind": e.kind(), "error": e.to_string()}));
                tracing::warn!(error = %e, "rules not reloaded; the running rules stay");
            }
        }
        res
    }

    /// The control socket's answer to `rules apply`.
    pub fn apply_reply(&self, text: &str) -> Value {
        match self.apply(text) {
            Ok(a) => json!({"ok": true, "applied": a}),
            Err(e) => {
                let mut v = json!({"ok": false, "kind": e.kind(), "error": e.to_string()});
                if let ReloadError::Invalid(c) = &e {
                    v["key"] = json!(c.key);
                    v["line"] = json!(c.line);
                }
                v
            }
        }
    }

    /// The snapshot's `rules` section: every running rule with its counters, and
    /// the reload state.
    pub fn snapshot(&self) -> Value {
        let st = self.lock();
        let mut rules = Vec::new();
        for p in &st.ports {
            let counts = p
                .steering
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .rule_counts()
                .unwrap_or_default();
            for (i, r) in p.plan.rules.iter().enumerate() {
                let c = counts.get(i).copied().unwrap_or(RuleCounts::default());
                rules.push(json!({
                    "port": p.plan.def.name,
                    "index": i,
                    "name": p.names.get(i).cloned().flatten(),
                    "action": r.action.name(),
                    "match": describe(r),
                    "capture": p.sinks.get(i).cloned().flatten().map(|s| s.spec.file.display().to_string()),
                    "packets": c.packets,
                    "bytes": c.bytes,
                }));
            }
        }
        json!({"list": rules, "generation": st.generation, "reloads": st.reloads, "refused": st.refused, "last": st.last})
    }
}

impl State {
    fn untag_settled(&mut self) {
        for port in &mut self.ports {
            let Some(wait) = &port.untag_after else {
                continue;
            };
            if wait.iter().all(|&(s, v)| self.slots[s].settled(v)) {
                match port
                    .steering
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .set_tagging(false)
                {
                    Ok(()) => port.untag_after = None,
                    Err(e) => {
                        tracing::warn!(port = %port.plan.def.name, error = %e, "could not turn frame tagging off; will retry")
                    }
                }
            } else {
                for &(s, v) in wait {
                    if !self.slots[s].settled(v) {
                        self.sockets[s].wake();
                    }
                }
            }
        }
    }

    fn apply(&mut self, text: &str) -> Result<Applied, ReloadError> {
        self.untag_settled();
        let (valid, names, captures) = self
            .config
            .parse_rules(text)
            .map_err(ReloadError::Invalid)?;
        check_runnable(&valid, &self.ports)?;
        // Files first: a list is refused before any worker sees it when one cannot be written.
        let sinks = self
            .files
            .prepare(&captures)
            .map_err(ReloadError::Refused)?;
        let mut changed = Vec::new();
        let mut live = Vec::new();
        let mut next_key = self.next_key;
        for (p, port) in self.ports.iter().enumerate() {
            let of_port = |i: &usize| valid[*i].port == p;
            let idx: Vec<usize> = (0..valid.len()).filter(of_port).collect();
            let rules: Vec<ValidRule> = idx.iter().map(|&i| valid[i].clone()).collect();
            let n: Vec<Option<String>> = idx.iter().map(|&i| names[i].clone()).collect();
            let keys = assign_keys(
                &port.plan.rules,
                &port.names,
                &port.keys,
                &rules,
                &n,
                &mut next_key,
            );
            for (k, &i) in idx.iter().enumerate() {
                live.push((
                    i,
                    LiveRule {
                        port: p,
                        key: keys[k],
                        name: n[k].clone(),
                        action: rules[k].action,
                    },
                ));
            }
            let list = PortList {
                rules,
                names: n,
                keys,
                sinks: idx.iter().map(|&i| sinks[i].clone()).collect(),
            };
            if !list.same_as(port) {
                changed.push((p, list));
            }
        }
        // Tagging on for every port that changes before any is swapped: a frame
        // without a tag was then steered before this reload on every port, and the
        // generation below is written into no frame before that.
        for (p, _) in &changed {
            let tagging = self.ports[*p]
                .steering
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .set_tagging(true);
            if let Err(e) = tagging {
                // The files opened for this list: closed again.
                self.settle_files();
                let port = &self.ports[*p];
                return Err(ReloadError::Failed(format!(
                    "port `{}`: cannot turn frame tagging on: {e}; the old rules stay",
                    port.plan.def.name
                )));
            }
            // Off again once the workers settle (also if nothing below swaps).
            let port = &mut self.ports[*p];
            let sockets = &port.plan.sockets;
            port.untag_after
                .get_or_insert_with(Vec::new)
                .extend(sockets.iter().map(|&s| (s, self.slots[s].version())));
        }
        let generation = next_generation(self.generation);
        let started = Instant::now();
        let mut done: Vec<(usize, PortList)> = Vec::new();
        let mut carried = 0;
        for (p, list) in changed {
            match self.swap_port(p, &list, generation) {
                Ok(c) => {
                    carried += c;
                    let port = &mut self.ports[p];
                    let old = PortList {
                        rules: std::mem::replace(&mut port.plan.rules, list.rules),
                        names: std::mem::replace(&mut port.names, list.names),
                        keys: std::mem::replace(&mut port.keys, list.keys),
                        sinks: std::mem::replace(&mut port.sinks, list.sinks),
                    };
                    done.push((p, old));
                }
                Err(e) => {
                    // Ports already swapped get their old lists back, under a newer generation.
                    let back = next_generation(generation);
                    for (q, old) in done.into_iter().rev() {
                        if let Err(e2) = self.swap_port(q, &old, back) {
                            tracing::error!(port = %self.ports[q].plan.def.name, error = %e2, "could not put the old rules back");
                        }
                        let port = &mut self.ports[q];
                        port.plan.rules = old.rules;
                        port.names = old.names;
                        port.keys = old.keys;
                        port.sinks = old.sinks;
                    }
                    self.generation = back;
                    self.settle_files();
                    return Err(e);
                }
            }
        }
        let swap_ms = started.elapsed().as_secs_f64() * 1e3;
        let ports_changed: Vec<String> = done
            .iter()
            .map(|(p, _)| self.ports[*p].plan.def.name.clone())
            .collect();
        if !ports_changed.is_empty() {
            self.generation = generation;
        }
        self.next_key = next_key;
        self.settle_files();
        live.sort_by_key(|(i, _)| *i);
        self.live.set(live.into_iter().map(|(_, r)| r).collect());
        // Later reloads validate against (and SIGHUP reads) what runs now.
        if let Ok(cfg) = self.config_with_rules(text) {
            self.config = cfg;
        }
        Ok(Applied {
            generation: self.generation,
            rules: valid.len(),
            ports_changed,
            carried,
            swap_ms,
        })
    }

    /// Closes (after a grace) every capture file the running lists no longer write.
    fn settle_files(&self) {
        let live: Vec<Arc<FileSink>> = self
            .ports
            .iter()
            .flat_map(|p| p.sinks.iter().flatten().cloned())
            .collect();
        self.files.settle(&live);
    }

    fn config_with_rules(&self, text: &str) -> Result<Config, ()> {
        let table: toml::Table = toml::from_str(text).map_err(|_| ())?;
        let mut cfg = self.config.clone();
        if table.keys().any(|k| k != "rule") {
            cfg.rules = Config::parse(text).map_err(|_| ())?.rules;
        } else {
            #[derive(serde::Deserialize)]
            struct RulesOnly {
                #[serde(default, rename = "rule")]
                rules: Vec<crate::config::RuleConfig>,
            }
            cfg.rules = toml::from_str::<RulesOnly>(text).map_err(|_| ())?.rules;
        }
        Ok(cfg)
    }

    /// Hands port `p`'s workers the new list, waits until each took it, then swaps
    /// the XDP side; on failure the workers get the old list back. Returns the
    /// number of rules that carry counters by name.
    fn swap_port(
        &mut self,
        p: usize,
        list: &PortList,
        generation: u32,
    ) -> Result<usize, ReloadError> {
        let (rules, names) = (&list.rules, &list.names);
        let port = &self.ports[p];
        let name = port.plan.def.name.clone();
        let carry: Vec<Option<usize>> = names
            .iter()
            .map(|n| {
                n.as_ref().and_then(|n| {
                    port.names
                        .iter()
                        .position(|o| o.as_deref() == Some(n.as_str()))
                })
            })
            .collect();
        let mut next = port.plan.clone();
        next.rules = rules.to_vec();
        let steer = next.steer_rules();
        let sockets = port.plan.sockets.clone();
        let old: Vec<Arc<RuleSet>> = sockets.iter().map(|&s| self.slots[s].current()).collect();
        let classifier = Classifier::new(rules.to_vec());
        let versions: Vec<u64> = sockets
            .iter()
            .map(|&s| {
                let v = self.slots[s].publish(Arc::new(RuleSet::with_taps(
                    generation,
                    classifier.clone(),
                    list.keys.clone(),
                    list.sinks.clone(),
                )));
                self.sockets[s].wake();
                v
            })
            .collect();
        let deadline = Instant::now() + TAKE_WAIT;
        let restore =
            |slots: &[Arc<RuleSlot>], sockets_shared: &[Arc<PortShared>]| -> Vec<(usize, u64)> {
                sockets
                    .iter()
                    .enumerate()
                    .map(|(k, &s)| {
                        let v = slots[s].publish(old[k].clone());
                        slots[s].mark_live(v);
                        sockets_shared[s].wake();
                        (s, v)
                    })
                    .collect()
            };
        for (k, &s) in sockets.iter().enumerate() {
            while !self.slots[s].taken(versions[k]) {
                if Instant::now() >= deadline {
                    let back = restore(&self.slots, &self.sockets);
                    self.ports[p]
                        .untag_after
                        .get_or_insert_with(Vec::new)
                        .extend(back);
                    return Err(ReloadError::Failed(format!(
                        "the worker of port `{name}` queue {} did not take the new rules within {} ms (is it stuck? see `xdpool stats`); the old rules stay",
                        self.sockets[s].queue,
                        TAKE_WAIT.as_millis()
                    )));
                }
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        if !self.hold.is_zero() {
            std::thread::sleep(self.hold);
        }
        let res = port
            .steering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_rules_carrying(&steer, &carry, generation);
        if let Err(e) = res {
            let back = restore(&self.slots, &self.sockets);
            self.ports[p]
                .untag_after
                .get_or_insert_with(Vec::new)
                .extend(back);
            return Err(ReloadError::Failed(format!("port `{name}`: the XDP program did not take the new rules: {e}; the old rules stay")));
        }
        for (k, &s) in sockets.iter().enumerate() {
            self.slots[s].mark_live(versions[k]);
        }
        self.ports[p]
            .untag_after
            .get_or_insert_with(Vec::new)
            .extend(sockets.iter().copied().zip(versions.iter().copied()));
        Ok(carry.iter().filter(|c| c.is_some()).count())
    }
}

/// The snapshot with the `rules` section added.
pub fn with_rules(
    inner: crate::stats::SnapshotFn,
    reloader: Arc<Reloader>,
) -> crate::stats::SnapshotFn {
    Arc::new(move || {
        let mut v = inner();
        if let Some(o) = v.as_object_mut() {
            o.insert("rules".into(), reloader.snapshot());
        }
        v
    })
}

/// The control socket's `rules apply` handler.
pub fn control_handler(reloader: Arc<Reloader>) -> crate::stats::control::RulesFn {
    Arc::new(move |text: &str| reloader.apply_reply(text))
}

/// Reads the config file's rules again on each SIGHUP until dropped.
pub struct SighupWatch {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Installs the SIGHUP handler and the reload thread: it reloads when the signal
/// fired (looked at every 10 ms; a signal during a reload is taken after it) and
/// runs [`Reloader::tick`].
pub fn follow_sighup(reloader: Arc<Reloader>) -> SighupWatch {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let flag = match crate::signal::install_reload_flag() {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(error = %e, "no SIGHUP handler: reload rules with `xdpool rules apply` instead");
            None
        }
    };
    let stop2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name("xdpool-reload".into())
        .spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                if flag
                    .as_ref()
                    .is_some_and(|f| f.swap(false, Ordering::SeqCst))
                {
                    tracing::info!("SIGHUP: reading the config file's rules again");
                    let _ = reloader.apply_config_file();
                }
                reloader.tick();
                std::thread::sleep(Duration::from_millis(10));
            }
        })
        .ok();
    SighupWatch { stop, thread }
}

impl Drop for SighupWatch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The keys of a port's new rules: a rule keeps the key of the old rule of its name,
/// or, unnamed, of the first old unnamed rule with the same match and action not
/// taken by an earlier one; every other rule gets the next new key.
pub fn assign_keys(
    old_rules: &[ValidRule],
    old_names: &[Option<String>],
    old_keys: &[u32],
    rules: &[ValidRule],
    names: &[Option<String>],
    next: &mut u32,
) -> Vec<u32> {
    let mut taken = vec![false; old_rules.len()];
    rules
        .iter()
        .zip(names)
        .map(|(r, n)| {
            let same = match n {
                Some(n) => (0..old_rules.len())
                    .find(|&i| old_names.get(i).cloned().flatten().as_deref() == Some(n.as_str())),
                None => (0..old_rules.len()).find(|&i| {
                    !taken[i] && old_names.get(i).is_none_or(|o| o.is_none()) && old_rules[i] == *r
                }),
            };
            match same.and_then(|i| old_keys.get(i).map(|k| (i, *k))) {
                Some((i, k)) if !taken[i] => {
                    taken[i] = true;
                    k
                }
                _ => {
                    let k = *next;
                    *next = next.wrapping_add(1).max(FIRST_NEW_KEY);
                    k
                }
            }
        })
        .collect()
}

/// Ports a rule sends frames out of.
fn sends_out_of(r: &ValidRule) -> Vec<usize> {
    let mut out = match r.action {
        Action::L2fwd | Action::ReflectTwice | Action::Copybreak => vec![r.port],
        Action::Forward => r.to.into_iter().collect(),
        Action::Call => std::iter::once(r.port)
            .chain(r.call.iter().flat_map(|c| c.egress.iter().copied()))
            .collect(),
        Action::Drop | Action::Pass | Action::Xdpdrop => Vec::new(),
    };
    out.extend(r.mirror_to);
    out
}

/// Refuses rules that need a socket the running plan did not open: sending frames
/// out of a port whose sockets were bound without a TX ring.
fn check_runnable(rules: &[ValidRule], ports: &[PortState]) -> Result<(), ReloadError> {
    for (i, r) in rules.iter().enumerate() {
        for q in sends_out_of(r) {
            if !ports[q].plan.transmits {
                let what = if r.mirror_to == Some(q) {
                    "mirror_to".to_string()
                } else {
                    format!("`{}`", r.action.name())
                };
                return Err(ReloadError::Refused(format!(
                    "rule[{i}] ({what} on port `{}`) sends frames out of port `{}`, whose sockets have no TX ring (no rule sent frames out of it when xdpool started); \
                     restart xdpool with this rule, or start it with a rule that sends out of `{}`",
                    ports[r.port].plan.def.name, ports[q].plan.def.name, ports[q].plan.def.name
                )));
            }
        }
    }
    Ok(())
}

/// A rule's match, as the stats show it.
pub fn describe(r: &ValidRule) -> String {
    let mut parts = Vec::new();
    if let Some(id) = r.vlan {
        parts.push(format!("vlan {id}"));
    }
    if let Some(p) = r.proto {
        parts.push(match p {
            6 => "tcp".to_string(),
            17 => "udp".to_string(),
            1 => "icmp".to_string(),
            58 => "icmpv6".to_string(),
            n => format!("proto {n}"),
        });
    }
    if let Some((lo, hi)) = r.dst_port {
        parts.push(if lo == hi {
            format!("dst_port {lo}")
        } else {
            format!("dst_port {lo}-{hi}")
        });
    }
    if let Some((a, l)) = r.src {
        parts.push(format!("src {a}/{l}"));
    }
    if let Some((lo, hi)) = r.src_port {
        parts.push(if lo == hi {
            format!("src_port {lo}")
        } else {
            format!("src_port {lo}-{hi}")
        });
    }
    if let Some((a, l)) = r.dst {
        parts.push(format!("dst {a}/{l}"));
    }
    if parts.is_empty() {
        "all".into()
    } else {
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(action: Action, port: usize, to: Option<usize>, mirror_to: Option<usize>) -> ValidRule {
        ValidRule {
            proto: Some(17),
            dst_port: Some((9, 9)),
            mirror_to,
            ..ValidRule::every(action, port, to)
        }
    }

    #[test]
    fn a_rule_keeps_its_key_by_name_or_by_match_and_the_rest_get_new_ones() {
        let (udp9, udp10) = (
            rule(Action::Drop, 0, None, None),
            ValidRule {
                dst_port: Some((10, 10)),
                ..rule(Action::Drop, 0, None, None)
            },
        );
        let old = [udp9.clone(), udp10.clone(), udp9.clone()];
        let old_names = [None, Some("ten".to_string()), None];
        let old_keys = [0, 1, 2];
        let mut next = FIRST_NEW_KEY;
        // Renumbered: a new rule first, `ten` changed its match (a name keeps the key),
        // the unnamed udp9 rules keep theirs in order, a new unnamed one gets a new key.
        let l2 = rule(Action::L2fwd, 0, None, None);
        let new = [
            l2.clone(),
            udp9.clone(),
            udp9.clone(),
            ValidRule {
                dst_port: Some((11, 11)),
                ..udp10.clone()
            },
            udp9.clone(),
        ];
        let names = [None, None, None, Some("ten".to_string()), None];
        assert_eq!(
            assign_keys(&old, &old_names, &old_keys, &new, &names, &mut next),
            vec![64, 0, 2, 1, 65]
        );
        assert_eq!(next, 66);
        // Unnamed with another action is another rule; a name no old rule had is new.
        let new = [l2, udp10.clone()];
        assert_eq!(
            assign_keys(
                &old,
                &old_names,
                &old_keys,
                &new,
                &[None, Some("eleven".into())],
                &mut next
            ),
            vec![66, 67]
        );
        // Unnamed udp10 is not the named `ten`.
        assert_eq!(
            assign_keys(&old, &old_names, &old_keys, &[udp10], &[None], &mut next),
            vec![68]
        );
    }

    #[test]
    fn rules_name_the_ports_they_send_out_of() {
        assert_eq!(sends_out_of(&rule(Action::L2fwd, 1, None, None)), vec![1]);
        assert_eq!(
            sends_out_of(&rule(Action::Forward, 0, Some(2), Some(1))),
            vec![2, 1]
        );
        assert!(sends_out_of(&rule(Action::Drop, 0, None, None)).is_empty());
        assert!(sends_out_of(&rule(Action::Pass, 0, None, None)).is_empty());
        assert_eq!(
            describe(&rule(Action::Drop, 0, None, None)),
            "udp dst_port 9"
        );
        let src = ValidRule {
            vlan: Some(5),
            src: Some(("2001:2::".parse().unwrap(), 48)),
            src_port: Some((1024, 2047)),
            ..rule(Action::Drop, 0, None, None)
        };
        assert_eq!(
            describe(&src),
            "vlan 5 udp dst_port 9 src 2001:2::/48 src_port 1024-2047"
        );
    }
}
