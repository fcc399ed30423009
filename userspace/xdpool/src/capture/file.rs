//! A rule's `capture = { file, snaplen, count }`: the daemon writes the rule's frames
//! to a pcapng file itself, without a client.
//!
//! The workers copy into a [`CaptureTap`] of its own (the same bounded, preallocated
//! tap as `xdpool capture`: a full tap is counted, `file_capture_dropped`, and never
//! blocks a worker), tagging each record with its file ([`FileSink::id`]). One
//! writer thread takes the records and writes them; it flushes each file every
//! [`FLUSH_EVERY`], when its `count` is reached (and closes it), and when xdpool
//! stops. The reloader asks for the files of a new list before the workers get it
//! ([`FileCaptures::prepare`]: an open file of the same path continues, a new one is
//! created) and hands back the ones no list uses after the swap
//! ([`FileCaptures::settle`]: closed after [`RETIRE_GRACE`], the time a worker may
//! still act under the old list).

use super::wire::Interface;
use super::{CaptureTap, Record, RECORDS};
use crate::config::CaptureSpec;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the writer flushes a file it wrote to.
pub const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// How long a file no rule list uses any more stays open for records still on
/// their way (a worker drops an old list 20 ms after the swap at the earliest).
pub const RETIRE_GRACE: Duration = Duration::from_millis(200);

/// One file being written: what a worker needs of it.
#[derive(Debug)]
pub struct FileSink {
    /// The records' `sink` (never 0: that is the client's capture).
    pub id: u32,
    /// The rule's capture as configured.
    pub spec: CaptureSpec,
    done: AtomicBool,
    /// Copies the workers may still make (a `count` file); unused without a count.
    left: AtomicU64,
    dropped: AtomicU64,
}

impl FileSink {
    /// Whether the file has its `count` (the worker copies no more).
    #[inline]
    pub fn done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }

    /// Takes one copy of a `count` file's budget (true when there was one left), so
    /// the workers together copy exactly `count` frames. Context: any worker.
    #[inline]
    pub fn take_one(&self) -> bool {
        !self.done()
            && (self.spec.count == 0
                || self
                    .left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok())
    }

    /// A copy for this file found the tap full: counted, and its budget given back.
    /// Context: any worker.
    pub fn note_dropped(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        if self.spec.count > 0 {
            self.left.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Copies skipped for this file because the tap was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// How one file ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileReport {
    /// The file.
    pub file: PathBuf,
    /// Frames written.
    pub written: u64,
    /// Frames of the rule not captured (tap full).
    pub dropped: u64,
    /// Why it was closed.
    pub reason: String,
}

struct Open {
    sink: Arc<FileSink>,
    writer: Option<PcapNgWriter<BufWriter<File>>>,
    written: u64,
    dirty: bool,
    /// In a live list at least once (a file only a refused reload opened is removed).
    was_live: bool,
    retire_at: Option<Instant>,
}

struct Inner {
    next_id: u32,
    open: Vec<Open>,
    ended: Vec<FileReport>,
    /// Bytes each record needs room for (the largest snaplen of an open file).
    room: usize,
}

/// Every file capture of the instance and the thread that writes them.
pub struct FileCaptures {
    tap: Arc<CaptureTap>,
    interfaces: Vec<Interface>,
    inner: Arc<Mutex<Inner>>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The writer, to wake when a file opens or at the stop (it parks while no file
    /// is open, so an instance without captures has no thread waking every 2 ms).
    writer: std::sync::OnceLock<std::thread::Thread>,
}

impl FileCaptures {
    /// The writer for `tap` (the workers' file-capture tap); `interfaces` are every
    /// socket of the instance (one interface description each, in socket order).
    pub fn start(tap: Arc<CaptureTap>, interfaces: Vec<Interface>) -> Arc<FileCaptures> {
        let inner = Arc::new(Mutex::new(Inner {
            next_id: 1,
            open: Vec::new(),
            ended: Vec::new(),
            room: 0,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let fc = Arc::new(FileCaptures {
            tap,
            interfaces,
            inner,
            stop,
            thread: Mutex::new(None),
            writer: std::sync::OnceLock::new(),
        });
        let (tap, inner, stop) = (fc.tap.clone(), fc.inner.clone(), fc.stop.clone());
        let thread = std::thread::Builder::new()
            .name("xdpool-capfile".into())
            .spawn(move || write_loop(&tap, &inner, &stop));
        match thread {
            Ok(t) => {
                let _ = fc.writer.set(t.thread().clone());
                *fc.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot start the capture file writer: rule captures write nothing")
            }
        }
        fc
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sinks for a rule list's captures (by rule): a file already open continues
    /// (same snaplen and count), a new one is created. On an error (naming the rule,
    /// the path and what to do) files this call created are closed and removed.
    pub fn prepare(
        &self,
        specs: &[Option<CaptureSpec>],
    ) -> Result<Vec<Option<Arc<FileSink>>>, String> {
        let mut inner = self.lock();
        let mut created = Vec::new();
        let mut out = Vec::new();
        let mut result = Ok(());
        for (i, spec) in specs.iter().enumerate() {
            let Some(spec) = spec else {
                out.push(None);
                continue;
            };
            if let Some(o) = inner
                .open
                .iter_mut()
                .find(|o| o.sink.spec.file == spec.file)
            {
                if o.sink.spec != *spec {
                    result = Err(format!(
                        "rule[{i}].capture: {} is being written with snaplen {} and count {}; a reload cannot change them: name another file (or reload without this capture first, which closes it)",
                        spec.file.display(),
                        o.sink.spec.snaplen,
                        o.sink.spec.count
                    ));
                    break;
                }
                o.retire_at = None;
                out.push(Some(o.sink.clone()));
                continue;
            }
            let writer = match self.create(spec) {
                Ok(w) => w,
                Err(e) => {
                    result = Err(format!(
                        "rule[{i}].capture: cannot write the capture file {}: {e}; create its directory and let xdpool write there, or change rule[{i}].capture.file",
                        spec.file.display()
                    ));
                    break;
                }
            };
            let id = inner.next_id;
            inner.next_id = inner.next_id.wrapping_add(1).max(1);
            let sink = Arc::new(FileSink {
                id,
                spec: spec.clone(),
                done: AtomicBool::new(false),
                left: AtomicU64::new(spec.count),
                dropped: AtomicU64::new(0),
            });
            inner.room = inner.room.max(spec.snaplen as usize);
            inner.open.push(Open {
                sink: sink.clone(),
                writer: Some(writer),
                written: 0,
                dirty: false,
                was_live: false,
                retire_at: None,
            });
            created.push(id);
            if let Some(w) = self.writer.get() {
                w.unpark();
            }
            tracing::info!(file = %spec.file.display(), snaplen = spec.snaplen, count = spec.count, "rule capture file opened");
            out.push(Some(sink));
        }
        if let Err(e) = result {
            inner.open.retain(|o| {
                if created.contains(&o.sink.id) {
                    let _ = std::fs::remove_file(&o.sink.spec.file);
                    return false;
                }
                true
            });
            return Err(e);
        }
        if out.iter().any(Option::is_some) {
            // Records for the workers before they get a list that copies.
            let room = inner.room;
            drop(inner);
            self.tap.provision(RECORDS, room);
        }
        Ok(out)
    }

    fn create(&self, spec: &CaptureSpec) -> Result<PcapNgWriter<BufWriter<File>>, String> {
        let file = File::create(&spec.file).map_err(|e| e.to_string())?;
        let mut w = PcapNgWriter::new(BufWriter::new(file)).map_err(|e| e.to_string())?;
        for itf in &self.interfaces {
            w.write_pcapng_block(InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: spec.snaplen,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Borrowed(&itf.name)),
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            })
            .map_err(|e| e.to_string())?;
        }
        w.get_mut().flush().map_err(|e| e.to_string())?;
        Ok(w)
    }

    /// After a swap (or a failed one): `live` are the sinks the running lists use;
    /// every other open file is closed after [`RETIRE_GRACE`].
    pub fn settle(&self, live: &[Arc<FileSink>]) {
        let mut inner = self.lock();
        let at = Instant::now() + RETIRE_GRACE;
        for o in &mut inner.open {
            if live.iter().any(|s| s.id == o.sink.id) {
                o.was_live = true;
                o.retire_at = None;
            } else if o.retire_at.is_none() {
                o.retire_at = Some(at);
            }
        }
    }

    /// Files closed so far, with what they got.
    pub fn ended(&self) -> Vec<FileReport> {
        self.lock().ended.clone()
    }

    /// Writes what the tap still holds, flushes and closes every file. Context: after
    /// the workers stopped.
    pub fn finish(&self) -> Vec<FileReport> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.writer.get() {
            w.unpark();
        }
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
        self.ended()
    }
}

impl Drop for FileCaptures {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The writer thread: records to their files, flushes, closes at count, retires,
/// and at the stop drains the tap and closes everything.
fn write_loop(tap: &CaptureTap, inner: &Mutex<Inner>, stop: &AtomicBool) {
    let mut last_flush = Instant::now();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        let mut n = 0;
        let idle;
        {
            let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
            // At the stop: everything the tap holds (up to its 4096 records).
            while n < 1024 || stopping {
                let Some(rec) = tap.take() else { break };
                n += 1;
                write_record(&mut inner, &rec);
                give_back(tap, rec, inner.room);
            }
            let now = Instant::now();
            if stopping || now >= last_flush + FLUSH_EVERY {
                last_flush = now;
                for o in &mut inner.open {
                    if o.dirty {
                        if let Some(w) = &mut o.writer {
                            if let Err(e) = w.get_mut().flush() {
                                tracing::warn!(file = %o.sink.spec.file.display(), error = %e, "cannot flush the capture file (is the disk full?)");
                            }
                        }
                        o.dirty = false;
                    }
                }
            }
            let mut k = 0;
            while k < inner.open.len() {
                let o = &inner.open[k];
                if stopping || o.retire_at.is_some_and(|t| now >= t) {
                    let reason = if stopping {
                        "xdpool stopped"
                    } else {
                        "no rule list captures to it any more"
                    };
                    let o = inner.open.remove(k);
                    let report = close(o, reason);
                    inner.ended.push(report);
                    continue;
                }
                k += 1;
            }
            if inner.open.is_empty() && inner.room > 0 {
                // No file: the records go (a worker still copying finds the tap full).
                inner.room = 0;
                tap.clear();
            }
            idle = inner.open.is_empty();
        }
        if stopping {
            return;
        }
        if idle {
            // Woken by `prepare` when a file opens and by `finish`.
            std::thread::park_timeout(Duration::from_secs(1));
        } else if n == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

fn write_record(inner: &mut Inner, rec: &Record) {
    let Some(o) = inner.open.iter_mut().find(|o| o.sink.id == rec.sink) else {
        return;
    };
    let Some(w) = &mut o.writer else { return };
    let res = w.write_pcapng_block(EnhancedPacketBlock {
        interface_id: rec.socket,
        timestamp: Duration::from_nanos(rec.ts_ns),
        original_len: rec.orig_len,
        data: Cow::Borrowed(rec.bytes()),
        options: vec![],
    });
    if let Err(e) = res {
        tracing::error!(file = %o.sink.spec.file.display(), error = %e, "cannot write the capture file (is the disk full?); it is closed");
        o.sink.done.store(true, Ordering::Relaxed);
        o.writer = None;
        return;
    }
    o.written += 1;
    o.dirty = true;
    if o.sink.spec.count > 0 && o.written >= o.sink.spec.count {
        // The workers copy no more; the file is complete.
        o.sink.done.store(true, Ordering::Relaxed);
        if let Some(mut w) = o.writer.take() {
            let _ = w.get_mut().flush();
        }
        o.dirty = false;
        tracing::info!(file = %o.sink.spec.file.display(), written = o.written, dropped = o.sink.dropped(), "rule capture file complete (count reached), flushed and closed");
    }
}

fn give_back(tap: &CaptureTap, rec: Box<Record>, room: usize) {
    if rec.data.len() < room {
        // A file with a larger snaplen opened since: a record that fits it.
        tap.give_back(Record::with_room(room));
    } else {
        tap.give_back(rec);
    }
}

fn close(mut o: Open, reason: &str) -> FileReport {
    if let Some(mut w) = o.writer.take() {
        if let Err(e) = w.get_mut().flush() {
            tracing::warn!(file = %o.sink.spec.file.display(), error = %e, "cannot flush the capture file (is the disk full?)");
        }
    }
    o.sink.done.store(true, Ordering::Relaxed);
    if !o.was_live && o.written == 0 {
        // Opened for a reload that did not happen.
        let _ = std::fs::remove_file(&o.sink.spec.file);
    }
    let report = FileReport {
        file: o.sink.spec.file.clone(),
        written: o.written,
        dropped: o.sink.dropped(),
        reason: reason.to_string(),
    };
    tracing::info!(file = %report.file.display(), written = report.written, not_captured = report.dropped, reason, "rule capture file closed");
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn itfs() -> Vec<Interface> {
        vec![
            Interface {
                socket: 0,
                name: "main/veth0/q0".into(),
            },
            Interface {
                socket: 1,
                name: "main/veth0/q1".into(),
            },
        ]
    }

    fn read(file: &std::path::Path) -> Vec<(u32, u32, Vec<u8>)> {
        use pcap_file::pcapng::{Block, PcapNgReader};
        let mut r = PcapNgReader::new(File::open(file).unwrap()).unwrap();
        let mut out = Vec::new();
        while let Some(b) = r.next_block() {
            if let Block::EnhancedPacket(p) = b.unwrap() {
                out.push((p.interface_id, p.original_len, p.data.to_vec()));
            }
        }
        out
    }

    fn spec(dir: &std::path::Path, name: &str, snaplen: u32, count: u64) -> CaptureSpec {
        CaptureSpec {
            file: dir.join(name),
            snaplen,
            count,
        }
    }

    fn wait_until(f: impl Fn() -> bool) -> bool {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn records_reach_their_files_which_close_at_count_and_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let tap = Arc::new(CaptureTap::with_capacity(64));
        let fc = FileCaptures::start(tap.clone(), itfs());
        let a = spec(dir.path(), "a.pcapng", 8, 3);
        let b = spec(dir.path(), "b.pcapng", 64, 0);
        let sinks = fc
            .prepare(&[Some(a.clone()), None, Some(b.clone())])
            .unwrap();
        fc.settle(&[sinks[0].clone().unwrap(), sinks[2].clone().unwrap()]);
        let (sa, sb) = (sinks[0].clone().unwrap(), sinks[2].clone().unwrap());
        assert!(sinks[1].is_none() && sa.id != sb.id && sa.id != 0);
        let frame: Vec<u8> = (0..100).collect();
        for i in 0..5u32 {
            if sa.take_one() {
                assert_eq!(
                    tap.offer_to(sa.id, i % 2, &frame, 8, 1),
                    super::super::Offer::Queued
                );
            }
            assert_eq!(
                tap.offer_to(sb.id, 1, &frame[..50], 64, 2),
                super::super::Offer::Queued
            );
        }
        assert!(wait_until(|| sa.done()), "count 3 reached");
        assert!(
            !sa.take_one() && sb.take_one(),
            "a has its 3 copies; b has no count"
        );
        // A reload keeps b (same spec) and drops a; a different spec for b is refused.
        let again = fc.prepare(&[None, Some(b.clone())]).unwrap();
        assert_eq!(
            again[1].as_ref().unwrap().id,
            sb.id,
            "an open file continues"
        );
        let e = fc
            .prepare(&[Some(CaptureSpec {
                snaplen: 32,
                ..b.clone()
            })])
            .unwrap_err();
        assert!(
            e.contains("rule[0].capture") && e.contains("snaplen 64") && e.contains("another file"),
            "{e}"
        );
        let e = fc
            .prepare(&[
                Some(spec(dir.path(), "c.pcapng", 8, 0)),
                Some(spec(&dir.path().join("none"), "d.pcapng", 8, 0)),
            ])
            .unwrap_err();
        assert!(
            e.contains("rule[1].capture")
                && e.contains("none/d.pcapng")
                && e.contains("create its directory"),
            "{e}"
        );
        assert!(
            !dir.path().join("c.pcapng").exists(),
            "a refused list leaves no file it created"
        );
        let ended = fc.finish();
        assert_eq!(read(&a.file).len(), 3, "a: its count");
        assert_eq!(
            read(&a.file)[1],
            (1, 100, frame[..8].to_vec()),
            "socket as interface, snaplen cut, length kept"
        );
        let rb = read(&b.file);
        assert_eq!(rb.len(), 5, "b: flushed at the end");
        assert_eq!(rb[0], (1, 50, frame[..50].to_vec()));
        assert!(
            ended
                .iter()
                .any(|r| r.file == b.file && r.written == 5 && r.reason == "xdpool stopped"),
            "{ended:?}"
        );
    }

    #[test]
    fn the_stop_writes_every_record_the_tap_still_holds() {
        let dir = tempfile::tempdir().unwrap();
        let tap = Arc::new(CaptureTap::with_capacity(RECORDS));
        let fc = FileCaptures::start(tap.clone(), itfs());
        let s = fc
            .prepare(&[Some(spec(dir.path(), "a.pcapng", 16, 0))])
            .unwrap()[0]
            .clone()
            .unwrap();
        // Hold the writer so that the whole burst waits in the tap at the stop.
        let held = fc.inner.lock().unwrap();
        let queued = (0..3000u32)
            .filter(|i| {
                tap.offer_to(s.id, 0, &i.to_le_bytes(), 16, 0) == super::super::Offer::Queued
            })
            .count();
        assert_eq!(queued, 3000);
        fc.stop.store(true, Ordering::SeqCst);
        drop(held);
        let ended = fc.finish();
        assert_eq!(
            read(&dir.path().join("a.pcapng")).len(),
            3000,
            "every record written at the stop: {ended:?}"
        );
    }

    #[test]
    fn a_file_no_list_uses_is_closed_after_the_grace_and_the_tap_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let tap = Arc::new(CaptureTap::with_capacity(16));
        let fc = FileCaptures::start(tap.clone(), itfs());
        let s = fc
            .prepare(&[Some(spec(dir.path(), "a.pcapng", 16, 0))])
            .unwrap()[0]
            .clone()
            .unwrap();
        fc.settle(std::slice::from_ref(&s));
        assert_eq!(
            tap.offer_to(s.id, 0, &[7; 20], 16, 0),
            super::super::Offer::Queued
        );
        fc.settle(&[]);
        assert!(
            wait_until(|| !fc.ended().is_empty()),
            "closed after the grace"
        );
        assert_eq!(fc.ended()[0].written, 1);
        assert_eq!(read(&dir.path().join("a.pcapng")).len(), 1);
        assert!(
            wait_until(|| tap.offer_to(s.id, 0, &[7; 20], 16, 0) == super::super::Offer::Full),
            "no file: no records"
        );
        fc.finish();
    }
}
