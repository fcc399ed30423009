//! The rule list that runs now, as `xdpool capture` names its rules: by index in the
//! live list (config order of the last applied `[[rule]]` tables) or by `name`, each
//! with the key the workers know it by. The reloader replaces it after each reload
//! that changed something; a running capture looks at [`LiveRules::version`] to see
//! whether its rule is still there.

use crate::config::{Action, ValidRule};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One running rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRule {
    /// Port index.
    pub port: usize,
    /// Its key (unique per port, kept by the same rule across reloads).
    pub key: u32,
    /// Its `name`, if it has one.
    pub name: Option<String>,
    /// Its action.
    pub action: Action,
}

/// How a request names a rule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum RuleRef {
    /// Index in the live list (0 is the first `[[rule]]`).
    Index(usize),
    /// The rule's `name`.
    Name(String),
}

impl RuleRef {
    /// `3` is an index, anything else a name.
    pub fn parse(s: &str) -> RuleRef {
        s.parse()
            .map(RuleRef::Index)
            .unwrap_or_else(|_| RuleRef::Name(s.to_string()))
    }
}

impl std::fmt::Display for RuleRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleRef::Index(i) => write!(f, "{i}"),
            RuleRef::Name(n) => write!(f, "`{n}`"),
        }
    }
}

/// The live list, shared by the reloader (writer) and the capture service.
#[derive(Debug, Default)]
pub struct LiveRules {
    list: Mutex<Vec<LiveRule>>,
    version: AtomicU64,
}

impl LiveRules {
    /// The list at start: keys are each rule's position on its port (what
    /// `worker::rules::RuleSlot::new` gives).
    pub fn at_start(rules: &[ValidRule], names: &[Option<String>]) -> LiveRules {
        let mut seen = std::collections::HashMap::new();
        let list = rules
            .iter()
            .zip(names)
            .map(|(r, n)| {
                let local = seen.entry(r.port).or_insert(0u32);
                let key = *local;
                *local += 1;
                LiveRule {
                    port: r.port,
                    key,
                    name: n.clone(),
                    action: r.action,
                }
            })
            .collect();
        LiveRules {
            list: Mutex::new(list),
            version: AtomicU64::new(0),
        }
    }

    /// Replaces the list (after a reload).
    pub fn set(&self, list: Vec<LiveRule>) {
        *self.list.lock().unwrap_or_else(|e| e.into_inner()) = list;
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Bumped by every [`LiveRules::set`].
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The list now.
    pub fn list(&self) -> Vec<LiveRule> {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The rule `r` names in the list now: its index and entry, or what to do.
    pub fn find(&self, r: &RuleRef) -> Result<(usize, LiveRule), String> {
        let list = self.list();
        match r {
            RuleRef::Index(i) => list.get(*i).cloned().map(|e| (*i, e)).ok_or_else(|| {
                format!(
                    "no rule {i}: this instance runs {} rule(s) now, numbered 0..{} in the order of the last applied [[rule]] tables (see `xdpool stats`); pass --rule with one of them, or the rule's name",
                    list.len(),
                    list.len().saturating_sub(1)
                )
            }),
            RuleRef::Name(n) => {
                let hits: Vec<usize> = list.iter().enumerate().filter(|(_, e)| e.name.as_deref() == Some(n.as_str())).map(|(i, _)| i).collect();
                match hits.as_slice() {
                    [i] => Ok((*i, list[*i].clone())),
                    [] => Err(format!(
                        "no rule named `{n}` runs now (named rules: {}); pass --rule with a rule's index or name",
                        list.iter().filter_map(|e| e.name.as_deref()).collect::<Vec<_>>().join(", ")
                    )),
                    many => Err(format!("rule name `{n}` is on several ports (rules {many:?}): pass --rule with the index of the one to capture")),
                }
            }
        }
    }

    /// Where the rule of `key` on `port` is now (its index and entry), if it still runs.
    pub fn by_key(&self, port: usize, key: u32) -> Option<(usize, LiveRule)> {
        self.list()
            .into_iter()
            .enumerate()
            .find(|(_, e)| e.port == port && e.key == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MacRewrite;

    fn rule(port: usize) -> ValidRule {
        ValidRule {
            proto: Some(17),
            dst_port: Some((9, 9)),
            dst: None,
            src_port: None,
            src: None,
            vlan: None,
            action: Action::Drop,
            port,
            to: None,
            mac: MacRewrite::Swap,
            mirror_to: None,
            call: None,
        }
    }

    #[test]
    fn rules_are_found_by_index_or_name_with_a_reason_otherwise() {
        let live = LiveRules::at_start(
            &[rule(0), rule(1), rule(0)],
            &[Some("a".into()), Some("a".into()), Some("b".into())],
        );
        assert_eq!(
            live.list()
                .iter()
                .map(|e| (e.port, e.key))
                .collect::<Vec<_>>(),
            [(0, 0), (1, 0), (0, 1)],
            "keys: position on the port"
        );
        assert_eq!(
            live.find(&RuleRef::parse("2")).unwrap().1.name.as_deref(),
            Some("b")
        );
        assert_eq!(live.find(&RuleRef::parse("b")).unwrap().0, 2);
        let e = live.find(&RuleRef::parse("a")).unwrap_err();
        assert!(e.contains("several ports") && e.contains("[0, 1]"), "{e}");
        let e = live.find(&RuleRef::Index(3)).unwrap_err();
        assert!(e.contains("no rule 3") && e.contains("0..2"), "{e}");
        let e = live.find(&RuleRef::parse("zz")).unwrap_err();
        assert!(
            e.contains("no rule named `zz`") && e.contains("a, a, b"),
            "{e}"
        );
        let v = live.version();
        live.set(vec![LiveRule {
            port: 0,
            key: 7,
            name: None,
            action: Action::Drop,
        }]);
        assert!(live.version() > v);
        assert_eq!(live.by_key(0, 7).map(|(i, _)| i), Some(0));
        assert_eq!(live.by_key(0, 1), None);
    }
}
