//! `xdpool capture`: asks a running instance for the frames one rule matches and
//! writes them to a pcapng file (one interface description per socket of the rule's
//! port, named `port/interface/qN`, nanosecond timestamps).

use super::wire::{self, Decoder, Ended, Next, Request, Started};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to capture.
#[derive(Debug, Clone)]
pub struct CaptureOptions {
    /// Control socket of the running instance.
    pub socket: PathBuf,
    /// The rule: index in the running list, or name.
    pub rule: super::live::RuleRef,
    /// Frames to write (0: until Ctrl-C or the instance stops).
    pub count: u64,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// The pcapng file.
    pub file: PathBuf,
}

/// What a capture wrote.
#[derive(Debug, Clone)]
pub struct CaptureReport {
    /// What the instance said at the start.
    pub started: Started,
    /// Frames written to the file.
    pub written: u64,
    /// How it ended (the instance's closing line; `None` if the stream broke off).
    pub ended: Option<Ended>,
}

/// Why a capture failed.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The output file cannot be created.
    #[error("cannot write {path}: {source}; pass -w with a file in a directory you can write")]
    File {
        /// Output path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Nothing listens at the socket.
    #[error(transparent)]
    NotRunning(crate::stats::control::ControlError),
    /// The instance refused (its reason says what to do).
    #[error("{0}")]
    Refused(String),
    /// Reading the stream or writing the file failed.
    #[error("capture stream from {path}: {source}")]
    Io {
        /// Socket path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The stream is malformed.
    #[error(transparent)]
    Stream(#[from] wire::StreamError),
    /// The pcapng writer failed.
    #[error("writing pcapng: {0}; is the disk full?")]
    Pcap(#[from] pcap_file::PcapError),
}

/// Runs one capture until `count` frames are written, `stop` is set (Ctrl-C), or the
/// instance ends the stream.
pub fn capture(opts: &CaptureOptions, stop: &AtomicBool) -> Result<CaptureReport, CaptureError> {
    let file = File::create(&opts.file).map_err(|source| CaptureError::File {
        path: opts.file.clone(),
        source,
    })?;
    let result = capture_into(opts, file, stop);
    if matches!(
        result,
        Err(CaptureError::NotRunning(_) | CaptureError::Refused(_))
    ) {
        // Nothing was captured: leave no empty file behind.
        let _ = std::fs::remove_file(&opts.file);
    }
    result
}

fn capture_into(
    opts: &CaptureOptions,
    file: File,
    stop: &AtomicBool,
) -> Result<CaptureReport, CaptureError> {
    let io = |source| CaptureError::Io {
        path: opts.socket.clone(),
        source,
    };
    let mut stream =
        crate::stats::control::connect(&opts.socket).map_err(CaptureError::NotRunning)?;
    let req = Request {
        rule: opts.rule.clone(),
        count: opts.count,
        snaplen: opts.snaplen,
    };
    stream
        .write_all(
            format!(
                "{} {}\n",
                wire::COMMAND,
                serde_json::to_string(&req).expect("serializes")
            )
            .as_bytes(),
        )
        .map_err(io)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io)?;
    let mut first = String::new();
    let mut reader = BufReader::new(stream.try_clone().map_err(io)?);
    reader.read_line(&mut first).map_err(io)?;
    let started = parse_answer(&first)?;
    tracing::info!(rule = started.rule, port = %started.port, action = %started.action, snaplen = started.snaplen, file = %opts.file.display(), "capturing (Ctrl-C to stop)");
    let mut pcap = PcapNgWriter::new(BufWriter::new(file))?;
    let mut idb_of = std::collections::HashMap::new();
    for (i, itf) in started.interfaces.iter().enumerate() {
        idb_of.insert(itf.socket, i as u32);
        pcap.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: started.snaplen,
            options: vec![
                InterfaceDescriptionOption::IfName(Cow::Borrowed(&itf.name)),
                InterfaceDescriptionOption::IfTsResol(9),
            ],
        })?;
    }
    // What the BufReader read beyond the first line belongs to the records.
    let mut dec = Decoder::default();
    dec.push(reader.buffer());
    drop(reader);
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(io)?;
    let mut buf = vec![0u8; 1 << 16];
    let mut written = 0u64;
    let mut ended = None;
    // Once done (count, Ctrl-C) we wait this long for the instance's closing line.
    let mut closing: Option<Instant> = None;
    'read: loop {
        loop {
            match dec.next_item()? {
                Next::Record(r) => {
                    if opts.count > 0 && written >= opts.count {
                        continue;
                    }
                    let interface_id = idb_of.get(&r.socket).copied().unwrap_or(0);
                    pcap.write_pcapng_block(EnhancedPacketBlock {
                        interface_id,
                        timestamp: Duration::from_nanos(r.ts_ns),
                        original_len: r.orig_len,
                        data: Cow::Borrowed(&r.data),
                        options: vec![],
                    })?;
                    written += 1;
                }
                Next::End(e) => {
                    ended = Some(e);
                    break 'read;
                }
                Next::More => break,
            }
        }
        if closing.is_none()
            && (stop.load(Ordering::Relaxed) || (opts.count > 0 && written >= opts.count))
        {
            // Tell the instance we are done: it switches the workers off and ends.
            let _ = stream.shutdown(std::net::Shutdown::Write);
            closing = Some(Instant::now());
        }
        if closing.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => dec.push(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(io(e)),
        }
    }
    pcap.get_mut()
        .flush()
        .map_err(|source| CaptureError::File {
            path: opts.file.clone(),
            source,
        })?;
    Ok(CaptureReport {
        started,
        written,
        ended,
    })
}

/// The instance's first line: the capture's description, or its refusal.
fn parse_answer(line: &str) -> Result<Started, CaptureError> {
    let v: serde_json::Value = serde_json::from_str(line.trim()).map_err(|e| {
        CaptureError::Refused(format!(
            "the instance answered `{}` ({e}): is it an older xdpool without capture?",
            line.trim()
        ))
    })?;
    if let Some(msg) = v.get("error").and_then(|m| m.as_str()) {
        return Err(CaptureError::Refused(msg.to_string()));
    }
    serde_json::from_value(v).map_err(|e| {
        CaptureError::Refused(format!("unexpected capture answer `{}`: {e}", line.trim()))
    })
}

/// One line for the user.
pub fn report_line(r: &CaptureReport, file: &Path) -> String {
    let end = match &r.ended {
        Some(e) => format!(
            "{} frames not captured (the capture queue was full); ended: {}",
            e.dropped, e.reason
        ),
        None => "the instance closed the stream without its closing line (did it stop?)".into(),
    };
    let rule = match &r.started.name {
        Some(n) => format!("rule {} `{n}`", r.started.rule),
        None => format!("rule {}", r.started.rule),
    };
    format!(
        "{rule} ({} on port {}): {} frames written to {}; {end}",
        r.started.action,
        r.started.port,
        r.written,
        file.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_its_reason() {
        match parse_answer("{\"error\":\"no rule 7: pass --rule\"}\n") {
            Err(CaptureError::Refused(m)) => assert_eq!(m, "no rule 7: pass --rule"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_answer("garbage"),
            Err(CaptureError::Refused(_))
        ));
    }

    #[test]
    fn no_instance_and_an_unwritable_file_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        let opts = CaptureOptions {
            socket: dir.path().join("none.sock"),
            rule: super::super::live::RuleRef::Index(0),
            count: 1,
            snaplen: 64,
            file: dir.path().join("out.pcapng"),
        };
        let e = capture(&opts, &stop).unwrap_err().to_string();
        assert!(
            e.contains("no xdpool is running") && e.contains("--socket"),
            "{e}"
        );
        assert!(!opts.file.exists(), "no empty file left behind");
        let bad = CaptureOptions {
            file: dir.path().join("no/such/dir/out.pcapng"),
            ..opts
        };
        let e = capture(&bad, &stop).unwrap_err().to_string();
        assert!(e.contains("cannot write") && e.contains("-w"), "{e}");
    }
}
