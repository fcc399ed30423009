//! The rule list a lane acts under, and its hand-over on a hot reload.
//!
//! The control thread publishes a new [`RuleSet`] into each socket's [`RuleSlot`]
//! and waits until every worker has taken it ([`RuleSlot::taken`]) before it swaps
//! the XDP program's rules. A worker looks at the slot once per batch (one atomic
//! load; no lock unless it changed). From the moment it has taken a new set until
//! the hand-over settles, it reads each frame's tag (the generation the XDP program
//! wrote into the frame's metadata, `xdp-prog/xdpool.h`) and acts on the frame
//! under the list of that generation: a frame steered under the old list is never
//! acted on under the new one, whichever side of the swap the worker is on.
//!
//! The XDP program tags only while the control thread has tagging on (a tag costs
//! a helper call and a write per frame), from before it publishes the new set until
//! every lane of the port has settled ([`RuleSlot::settled`]). So during a
//! hand-over a frame without a tag of it was steered before tagging began, under
//! the list the lane had when the hand-over began (`untagged`). The bytes where a
//! tag would be may hold an old tag of an earlier hand-over: its generation is that
//! list's or an older one, never a generation of this hand-over (those are new
//! numbers, written only after tagging began), so it maps to `untagged` too.

use super::action::Verdict;
use super::classify::Classifier;
use crate::capture::file::FileSink;
use crate::steer::abi;
use pool::{Frame, Region};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One rule list in the worker's form, with the generation the XDP program tags
/// the frames it steers under it with.
#[derive(Debug)]
pub struct RuleSet {
    /// Generation (0: the XDP program writes no tag for it).
    pub generation: u32,
    /// The lookup.
    pub classifier: Classifier,
    /// Each rule's key, in rule order (empty: the rule's position): the same rule
    /// keeps its key across reloads (`reload::assign_keys`), and `xdpool capture`
    /// names its rule by key, so a renumbering reload does not move the capture.
    keys: Vec<u32>,
    /// Each rule's `capture` file, in rule order (empty: none).
    sinks: Vec<Option<Arc<FileSink>>>,
    any_sink: bool,
}

impl RuleSet {
    /// A list whose rules are keyed by position and capture to no file.
    pub fn new(generation: u32, classifier: Classifier) -> RuleSet {
        RuleSet::with_taps(generation, classifier, Vec::new(), Vec::new())
    }

    /// A list with its rules' keys and capture files (both in rule order).
    pub fn with_taps(
        generation: u32,
        classifier: Classifier,
        keys: Vec<u32>,
        sinks: Vec<Option<Arc<FileSink>>>,
    ) -> RuleSet {
        let any_sink = sinks.iter().any(Option::is_some);
        RuleSet {
            generation,
            classifier,
            keys,
            sinks,
            any_sink,
        }
    }

    /// The key of the rule at `pos`.
    #[inline]
    pub fn key(&self, pos: usize) -> u32 {
        self.keys.get(pos).copied().unwrap_or(pos as u32)
    }

    /// The capture file of the rule at `pos`, if it has one.
    #[inline]
    pub fn sink(&self, pos: usize) -> Option<&Arc<FileSink>> {
        self.sinks.get(pos).and_then(Option::as_ref)
    }

    /// Whether any rule captures to a file.
    #[inline]
    pub fn captures_to_file(&self) -> bool {
        self.any_sink
    }

    /// Every capture file this list writes.
    pub fn sinks(&self) -> impl Iterator<Item = &Arc<FileSink>> {
        self.sinks.iter().flatten()
    }
}

/// One socket's current rule set: written by the control thread, read by the worker.
#[derive(Debug)]
pub struct RuleSlot {
    version: AtomicU64,
    taken: AtomicU64,
    /// The version whose list the XDP program now runs.
    live: AtomicU64,
    /// The version whose hand-over the lane has finished (it reads no tags).
    settled: AtomicU64,
    set: Mutex<Arc<RuleSet>>,
}

impl RuleSlot {
    /// A slot holding `classifier` under `generation`.
    pub fn new(generation: u32, classifier: Classifier) -> Arc<RuleSlot> {
        RuleSlot::with_set(RuleSet::new(generation, classifier))
    }

    /// A slot holding `set`.
    pub fn with_set(set: RuleSet) -> Arc<RuleSlot> {
        Arc::new(RuleSlot {
            version: AtomicU64::new(1),
            taken: AtomicU64::new(1),
            live: AtomicU64::new(1),
            settled: AtomicU64::new(1),
            set: Mutex::new(Arc::new(set)),
        })
    }

    /// Publishes a new set; returns the version to wait for with [`RuleSlot::taken`].
    pub fn publish(&self, set: Arc<RuleSet>) -> u64 {
        let mut cur = self.set.lock().unwrap_or_else(|p| p.into_inner());
        *cur = set;
        self.version.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// The set published last.
    pub fn current(&self) -> Arc<RuleSet> {
        self.set.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Says that the XDP program now runs the list of version `v` (from here on no
    /// frame of an older list can be steered; the worker may settle).
    pub fn mark_live(&self, v: u64) {
        self.live.fetch_max(v, Ordering::AcqRel);
    }

    /// Whether the worker has taken version `v` (or a later one).
    pub fn taken(&self, v: u64) -> bool {
        self.taken.load(Ordering::Acquire) >= v
    }

    /// Whether the worker has finished the hand-over to version `v` (or a later
    /// one): it reads no tags, so the XDP program may stop writing them.
    pub fn settled(&self, v: u64) -> bool {
        self.settled.load(Ordering::Acquire) >= v
    }

    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    #[cold]
    fn load(&self) -> (u64, Arc<RuleSet>) {
        let set = self.set.lock().unwrap_or_else(|p| p.into_inner());
        (self.version.load(Ordering::Acquire), set.clone())
    }
}

/// How long after the XDP side went live a lane keeps reading tags at least (XDP
/// runs that started on the old list on other CPUs end within microseconds), and
/// how long no frame of an older list must have come.
const SETTLE: Duration = Duration::from_millis(20);

/// Longest a hand-over lasts after the XDP side went live, whatever comes: where a
/// driver gives XDP no metadata room no frame is ever tagged, and every frame would
/// look steered before the reload.
const SETTLE_MAX: Duration = Duration::from_millis(250);

/// Older sets a lane keeps for frames still tagged with them.
const HISTORY: usize = 4;

/// A lane's view of its slot. Context: the lane's worker only.
#[derive(Debug)]
pub struct LaneRules {
    slot: Arc<RuleSlot>,
    seen: u64,
    /// The set frames without a known tag are acted on under.
    pub current: Arc<RuleSet>,
    /// Sets taken before `current`, newest first; empty once the hand-over settled.
    history: Vec<Arc<RuleSet>>,
    /// During a hand-over: the set current when it began, for frames without a tag
    /// of it (steered before tagging began).
    untagged: Option<Arc<RuleSet>>,
    /// When this lane first saw the XDP side of `current` live.
    live_since: Option<Instant>,
    /// During a hand-over: the generation the last frame was acted on under (`None`:
    /// untagged, under [`LaneRules::untagged`]).
    last_tag: Option<u32>,
    /// Some set this lane may act under captures to a file.
    any_sink: bool,
    /// Last frame tagged with an older list.
    last_old: Instant,
    seen_current: bool,
}

impl LaneRules {
    /// The lane's rules, from its slot.
    pub fn new(slot: Arc<RuleSlot>) -> LaneRules {
        let (seen, current) = slot.load();
        slot.taken.store(seen, Ordering::Release);
        slot.settled.fetch_max(seen, Ordering::AcqRel);
        let any_sink = current.captures_to_file();
        LaneRules {
            slot,
            seen,
            current,
            history: Vec::new(),
            untagged: None,
            live_since: None,
            last_tag: None,
            any_sink,
            last_old: Instant::now(),
            seen_current: false,
        }
    }

    /// Once per batch: takes a newly published set (true when it did).
    #[inline]
    pub fn refresh(&mut self) -> bool {
        if self.slot.version() == self.seen {
            if !self.history.is_empty() {
                self.settle();
            }
            return false;
        }
        self.take();
        true
    }

    #[cold]
    fn take(&mut self) {
        let (v, set) = self.slot.load();
        let old = std::mem::replace(&mut self.current, set);
        if self.history.is_empty() {
            self.untagged = Some(old.clone());
        }
        if old.generation != self.current.generation {
            self.history.insert(0, old);
            self.history.truncate(HISTORY);
        }
        self.history
            .retain(|s| s.generation != self.current.generation);
        self.seen = v;
        self.live_since = None;
        self.last_old = Instant::now();
        self.seen_current = false;
        self.any_sink = self.current.captures_to_file()
            || self
                .history
                .iter()
                .chain(self.untagged.as_ref())
                .any(|s| s.captures_to_file());
        self.slot.taken.store(v, Ordering::Release);
        if self.history.is_empty() {
            // The same list again: nothing to hand over.
            self.untagged = None;
            self.slot.settled.fetch_max(v, Ordering::AcqRel);
        }
    }

    /// Ends the hand-over once the XDP side has been live for SETTLE and either a
    /// frame of the new list came or none of an older one for SETTLE.
    #[cold]
    fn settle(&mut self) {
        let now = Instant::now();
        let Some(since) = self.live_since else {
            if self.slot.live.load(Ordering::Acquire) >= self.seen {
                self.live_since = Some(now);
            }
            return;
        };
        if now >= since + SETTLE
            && (self.seen_current || now >= self.last_old + SETTLE || now >= since + SETTLE_MAX)
        {
            if !self.seen_current && now >= since + SETTLE_MAX && now < self.last_old + SETTLE {
                tracing::warn!(
                    "a rule hand-over ended after {} ms without a tagged frame of the new list while untagged ones kept coming: \
                     does this driver give XDP no metadata room? Frames of the last {} ms may have taken the old list's action",
                    SETTLE_MAX.as_millis(),
                    SETTLE_MAX.as_millis()
                );
            }
            self.history.clear();
            self.untagged = None;
            self.slot.settled.fetch_max(self.seen, Ordering::AcqRel);
            self.any_sink = self.current.captures_to_file();
        }
    }

    /// Whether a rule of a list this lane may act under captures to a file (then
    /// each frame is looked at, as for `xdpool capture`).
    #[inline]
    pub fn captures_to_file(&self) -> bool {
        self.any_sink
    }

    /// The set the last frame given to [`LaneRules::verdict`] was acted on under: what
    /// a capture matches it against, so that the copy goes with the action taken.
    #[inline]
    pub fn last_set(&self) -> &RuleSet {
        if !self.by_tag() {
            return &self.current;
        }
        match self.last_tag {
            Some(generation) => self.of_known(generation),
            None => self.untagged(),
        }
    }

    /// Whether frames must be looked up by their tag (a hand-over is under way).
    #[inline]
    pub fn by_tag(&self) -> bool {
        !self.history.is_empty()
    }

    /// The set of generation `generation`: the current one, an older one still in
    /// flight, or `None` (not a tag of this hand-over: the caller acts under the
    /// set the hand-over began with, [`LaneRules::untagged`], and counts it).
    #[inline]
    pub fn of_generation(&mut self, generation: u32) -> Option<&RuleSet> {
        if generation == self.current.generation {
            self.seen_current = true;
            return Some(&self.current);
        }
        let old = self
            .history
            .iter()
            .find(|s| s.generation == generation)
            .map(|s| &**s);
        if old.is_some() {
            self.last_old = Instant::now();
        }
        old
    }

    /// The set for frames without a tag of this hand-over (the current set outside one).
    pub fn untagged(&self) -> &RuleSet {
        self.untagged.as_deref().unwrap_or(&self.current)
    }

    /// The verdict for a frame at `offset` (its data; the tag lies just before it)
    /// of `len` bytes in `frame`'s chunk. Outside a hand-over: the current set (a
    /// uniform one reads nothing). During one: the set of the frame's tag, which is
    /// then cleared so that the chunk's next frame cannot show it.
    ///
    /// The flag is true when the frame had no tag of this hand-over (it was steered
    /// before tagging began and is acted on under the set the hand-over began with;
    /// the caller counts `rule_untagged`).
    #[inline(always)]
    pub fn verdict(
        &mut self,
        region: &Region,
        frame: &mut Frame,
        offset: u32,
        len: u32,
    ) -> (Verdict, bool) {
        if !self.by_tag() {
            let cl = &self.current.classifier;
            return (
                if cl.is_uniform() {
                    cl.uniform()
                } else {
                    cl.classify(region.frame_bytes(frame, offset, len).unwrap_or(&[]))
                },
                false,
            );
        }
        self.verdict_by_tag(region, frame, offset, len)
    }

    #[cold]
    fn verdict_by_tag(
        &mut self,
        region: &Region,
        frame: &mut Frame,
        offset: u32,
        len: u32,
    ) -> (Verdict, bool) {
        let mut generation = 0;
        if offset >= abi::TAG_SIZE {
            let at = offset - abi::TAG_SIZE;
            if let Some(b) = region.frame_bytes(frame, at, abi::TAG_SIZE) {
                generation = tag_generation(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                let _ = region.write_frame(frame, at, &[0; abi::TAG_SIZE as usize]);
            }
        }
        let unknown = self.of_generation(generation).is_none();
        if unknown {
            // Steered before tagging began: under the list before the hand-over.
            self.last_old = Instant::now();
        }
        self.last_tag = (!unknown).then_some(generation);
        let set = if unknown {
            self.untagged()
        } else {
            self.of_known(generation)
        };
        let cl = &set.classifier;
        (
            if cl.is_uniform() {
                cl.uniform()
            } else {
                cl.classify(region.frame_bytes(frame, offset, len).unwrap_or(&[]))
            },
            unknown,
        )
    }

    fn of_known(&self, generation: u32) -> &RuleSet {
        if generation == self.current.generation {
            return &self.current;
        }
        self.history
            .iter()
            .find(|s| s.generation == generation)
            .map(|s| &**s)
            .unwrap_or(&self.current)
    }
}

/// The generation in a frame tag.
#[inline]
pub fn tag_generation(tag: u32) -> u32 {
    tag >> abi::TAG_GEN_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Action, ValidRule};
    use crate::worker::action::Act;

    fn set(action: Action) -> Classifier {
        Classifier::new(vec![ValidRule::every(action, 0, None)])
    }

    #[test]
    fn a_new_set_is_taken_at_a_batch_and_old_tags_keep_their_set() {
        let slot = RuleSlot::new(1, set(Action::Drop));
        let mut lane = LaneRules::new(slot.clone());
        assert!(!lane.refresh() && !lane.by_tag());
        let v = slot.publish(Arc::new(RuleSet::new(2, set(Action::L2fwd))));
        assert!(!slot.taken(v), "not before the worker's next batch");
        assert!(lane.refresh());
        assert!(slot.taken(v));
        assert!(
            lane.by_tag(),
            "a hand-over is under way: frames go by their tag"
        );
        assert_eq!(
            lane.of_generation(1).unwrap().classifier.uniform().act(),
            Act::Drop,
            "steered under 1: acted on under 1"
        );
        assert!(lane.of_generation(7).is_none());
        // Settles only once the XDP side is live, for SETTLE, after a frame of the new set.
        lane.refresh();
        assert!(lane.by_tag(), "the XDP side is not live yet");
        slot.mark_live(v);
        lane.refresh();
        assert!(lane.by_tag(), "live, but not for SETTLE yet");
        lane.live_since = Some(Instant::now() - SETTLE);
        let _ = lane.of_generation(1); // an old frame just now
        lane.refresh();
        assert!(
            lane.by_tag(),
            "a frame of the old list just came and none of the new"
        );
        assert_eq!(
            lane.of_generation(2).unwrap().classifier.uniform().act(),
            Act::L2fwd
        );
        lane.refresh();
        assert!(!lane.by_tag());
        assert!(lane.of_generation(1).is_none());
    }

    #[test]
    fn without_a_frame_of_the_new_set_the_old_one_stays() {
        let slot = RuleSlot::new(1, set(Action::Drop));
        let mut lane = LaneRules::new(slot.clone());
        let v = slot.publish(Arc::new(RuleSet::new(2, set(Action::L2fwd))));
        lane.refresh();
        lane.live_since = Some(Instant::now() - SETTLE);
        lane.refresh();
        assert!(
            lane.by_tag(),
            "frames of the old list came within SETTLE: keep it"
        );
        assert!(slot.live.load(Ordering::Relaxed) < v);
        // A refused reload puts the old set back under its own generation.
        slot.publish(Arc::new(RuleSet::new(1, set(Action::Drop))));
        lane.refresh();
        assert_eq!(lane.current.generation, 1);
        assert_eq!(
            lane.of_generation(2).unwrap().classifier.uniform().act(),
            Act::L2fwd
        );
    }

    /// A frame's tag bytes as the XDP program writes them.
    fn tag(generation: u32, rule: u32) -> u32 {
        (generation << abi::TAG_GEN_SHIFT) | rule
    }

    #[test]
    fn frames_without_a_tag_of_the_hand_over_go_by_the_list_it_began_with() {
        let slot = RuleSlot::new(1, set(Action::Drop));
        let mut lane = LaneRules::new(slot.clone());
        assert!(slot.settled(1), "nothing to hand over at start");
        let v2 = slot.publish(Arc::new(RuleSet::new(2, set(Action::L2fwd))));
        lane.refresh();
        assert!(!slot.settled(v2), "a hand-over is under way");
        // A second reload before the first settled: the untagged set stays the first one's.
        let v3 = slot.publish(Arc::new(RuleSet::new(3, set(Action::Pass))));
        lane.refresh();
        assert_eq!(
            lane.untagged().generation,
            1,
            "untagged frames were steered before tagging began: under 1"
        );
        assert!(lane.of_generation(0).is_none(), "no tag");
        assert!(
            lane.of_generation(tag_generation(tag(9, 0))).is_none(),
            "a stale tag of another port or an older list"
        );
        assert_eq!(lane.of_generation(2).unwrap().generation, 2);
        slot.mark_live(v3);
        lane.refresh();
        lane.live_since = Some(Instant::now() - SETTLE);
        let _ = lane.of_generation(3);
        lane.refresh();
        assert!(!lane.by_tag());
        assert!(slot.settled(v3), "the control thread may now stop tagging");
        assert_eq!(
            lane.untagged().generation,
            3,
            "outside a hand-over: the current set"
        );
    }

    #[test]
    fn untagged_frames_keep_the_hand_over_open_but_not_past_settle_max() {
        let slot = RuleSlot::new(1, set(Action::Drop));
        let mut lane = LaneRules::new(slot.clone());
        let v = slot.publish(Arc::new(RuleSet::new(2, set(Action::L2fwd))));
        lane.refresh();
        slot.mark_live(v);
        lane.refresh();
        lane.live_since = Some(Instant::now() - SETTLE);
        lane.last_old = Instant::now(); // an untagged frame just came
        lane.refresh();
        assert!(
            lane.by_tag() && !slot.settled(v),
            "untagged frames are old frames: keep the old list"
        );
        lane.live_since = Some(Instant::now() - SETTLE_MAX);
        lane.last_old = Instant::now();
        lane.refresh();
        assert!(
            !lane.by_tag() && slot.settled(v),
            "no tagged frame for SETTLE_MAX (a driver without metadata room): ended"
        );
    }

    #[test]
    fn the_same_list_again_settles_at_once() {
        let slot = RuleSlot::new(4, set(Action::Drop));
        let mut lane = LaneRules::new(slot.clone());
        let v = slot.publish(Arc::new(RuleSet::new(4, set(Action::Drop))));
        lane.refresh();
        assert!(!lane.by_tag() && slot.settled(v));
    }

    #[test]
    fn a_frame_is_acted_on_under_its_tag_and_an_untagged_one_under_the_old_list() {
        use pool::{PoolConfig, PoolOwner, RegionConfig};
        let region = Region::new(RegionConfig {
            frames: 16,
            chunk_size: 2048,
            ..RegionConfig::default()
        })
        .unwrap();
        let mut pool = PoolOwner::new(&region, PoolConfig::default());
        let slot = RuleSlot::new(1, set(Action::Drop));
        let mut lane = LaneRules::new(slot.clone());
        slot.publish(Arc::new(RuleSet::new(2, set(Action::L2fwd))));
        lane.refresh();
        let (at, len) = (256u32, 64u32);
        // (tag bytes before the frame, the action, counted untagged)
        let cases = [
            (None, Act::Drop, true),
            (Some(tag(1, 0)), Act::Drop, false),
            (Some(tag(9, 3)), Act::Drop, true),
            (Some(tag(2, 0)), Act::L2fwd, false),
        ];
        for (t, act, untagged) in cases {
            let mut f = pool.alloc().unwrap();
            region
                .write_frame(&mut f, at - abi::TAG_SIZE, &t.unwrap_or(0).to_ne_bytes())
                .unwrap();
            let (v, u) = lane.verdict(&region, &mut f, at, len);
            assert_eq!((v.act(), u), (act, untagged), "tag {t:?}");
            assert_eq!(
                region
                    .frame_bytes(&f, at - abi::TAG_SIZE, abi::TAG_SIZE)
                    .unwrap(),
                &[0; 4],
                "read and cleared"
            );
            pool.recycle(f);
        }
    }
}
