//! Control messages for packet functions' lanes (`xdpool control`,
//! `Harness::control`): posted by the control thread, taken by each worker between
//! batches (one relaxed load per pass while none is posted), answered per lane.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One lane's answer to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The lane's port name.
    pub port: String,
    /// Its RX queue.
    pub queue: u32,
    /// What the handler said.
    pub result: Result<(), String>,
}

/// What became of a message: each lane's answer, and how many lanes there are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Lanes that answered, in the order they did.
    pub answers: Vec<Answer>,
    /// Lanes that were to answer.
    pub lanes: usize,
}

#[derive(Default)]
struct Posted {
    seq: u64,
    handler: u16,
    text: String,
    answers: Vec<Answer>,
}

/// The one message in flight (senders take turns).
#[derive(Default)]
pub struct Mailbox {
    /// The sequence number of the message posted last (0: none yet).
    posted: AtomicU64,
    inner: Mutex<Posted>,
    answered: Condvar,
    turn: Mutex<()>,
}

impl Mailbox {
    fn lock(&self) -> MutexGuard<'_, Posted> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends `text` to every lane's state of handler `handler`, calls `wake` (to
    /// wake workers asleep in poll()), and waits up to `wait` for `lanes` answers.
    pub fn send(
        &self,
        handler: u16,
        text: &str,
        lanes: usize,
        wait: Duration,
        wake: impl Fn(),
    ) -> Delivery {
        let _turn = self.turn.lock().unwrap_or_else(|p| p.into_inner());
        let seq = self.post(handler, text);
        wake();
        let deadline = Instant::now() + wait;
        let mut inner = self.lock();
        while inner.seq == seq && inner.answers.len() < lanes {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            inner = self
                .answered
                .wait_timeout(inner, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Delivery {
            answers: std::mem::take(&mut inner.answers),
            lanes,
        }
    }

    /// Posts a message without waiting; its sequence number.
    pub(crate) fn post(&self, handler: u16, text: &str) -> u64 {
        let mut inner = self.lock();
        inner.seq += 1;
        inner.handler = handler;
        inner.text = text.to_string();
        inner.answers.clear();
        self.posted.store(inner.seq, Ordering::Release);
        inner.seq
    }

    /// The answers so far to message `seq` (taken).
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    pub(crate) fn answers(&self, seq: u64) -> Vec<Answer> {
        let mut inner = self.lock();
        if inner.seq != seq {
            return Vec::new();
        }
        std::mem::take(&mut inner.answers)
    }

    /// The sequence number of the message posted last: a worker compares it with
    /// the last it took.
    #[inline]
    pub fn posted(&self) -> u64 {
        self.posted.load(Ordering::Acquire)
    }

    /// Lets `answer` answer message `seq` (if it is still the one posted) for each
    /// lane: `answer(handler, text)` gives the lanes' answers.
    pub(crate) fn take(&self, seq: u64, answer: impl FnOnce(u16, &str) -> Vec<Answer>) {
        let mut inner = self.lock();
        if inner.seq != seq {
            return;
        }
        let got = answer(inner.handler, &inner.text);
        inner.answers.extend(got);
        self.answered.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_message_waits_for_every_lane_and_no_longer() {
        let m = Arc::new(Mailbox::default());
        let worker = {
            let m = m.clone();
            std::thread::spawn(move || {
                let mut seen = 0;
                for _ in 0..2_000 {
                    let p = m.posted();
                    if p != seen {
                        seen = p;
                        m.take(p, |h, text| {
                            (0..2)
                                .map(|q| Answer {
                                    port: "in".into(),
                                    queue: q,
                                    result: if text == "bad" {
                                        Err(format!("handler {h}: no"))
                                    } else {
                                        Ok(())
                                    },
                                })
                                .collect()
                        });
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        let d = m.send(3, "good", 2, Duration::from_secs(5), || {});
        assert_eq!(d.answers.len(), 2);
        assert!(d.answers.iter().all(|a| a.result.is_ok()));
        let d = m.send(3, "bad", 2, Duration::from_secs(5), || {});
        assert_eq!(d.answers[1].result, Err("handler 3: no".to_string()));
        // Three lanes expected, two answer: the wait ends at its deadline.
        let t = Instant::now();
        let d = m.send(3, "good", 3, Duration::from_millis(200), || {});
        assert_eq!(d.answers.len(), 2);
        assert!(t.elapsed() >= Duration::from_millis(200));
        worker.join().unwrap();
    }
}
