//! The control socket: a unix stream socket, mode 0600, owned by the running user.
//! A client writes one command line and reads one JSON document back:
//! - `stats`: the snapshot.
//! - `rules apply`, then the text of a rules file (or a whole config) up to the end
//!   of its stream (shut down for writing): `{"ok": true, "applied": ...}` or
//!   `{"ok": false, "kind": "invalid"|"refused"|"failed", "error": ..., "key", "line"}`.
//! - `capture {...}` (once the instance enables it): a stream of captured frames
//!   (`crate::capture::wire`) instead of one document.

use super::SnapshotFn;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The `capture` command's handler, once the instance has set it.
type CaptureSlot = Arc<OnceLock<Arc<crate::capture::session::CaptureService>>>;

/// Errors of the control socket.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Another instance already serves this path.
    #[error(
        "{0} is in use by a running xdpool; stop it, or set stats.control_socket to another path"
    )]
    InUse(PathBuf),
    /// Nothing listens at the path.
    #[error("no xdpool is running at {path} ({source}); start one with `xdpool run --config ...`, or pass --socket PATH")]
    NotRunning {
        /// Socket path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Any other I/O failure.
    #[error("control socket {path}: {source}")]
    Io {
        /// Socket path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// Applies a rules text and answers with the reply (`rules apply`).
pub type RulesFn = Arc<dyn Fn(&str) -> serde_json::Value + Send + Sync>;

/// What the socket serves.
#[derive(Clone)]
pub struct Handlers {
    /// `stats`.
    pub snapshot: SnapshotFn,
    /// `rules apply` (absent: the command is refused).
    pub rules: Option<RulesFn>,
}

/// Largest rules text `rules apply` takes.
const MAX_RULES_TEXT: u64 = 1 << 20;

/// A listening control socket; removes its file when dropped.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    capture: CaptureSlot,
}

impl ControlServer {
    /// Creates the socket (parent directory 0700 if it is created, socket 0600) and
    /// serves snapshots from a thread.
    pub fn start(path: &Path, snapshot: SnapshotFn) -> Result<ControlServer, ControlError> {
        Self::start_with(
            path,
            Handlers {
                snapshot,
                rules: None,
            },
        )
    }

    /// [`ControlServer::start`] serving every command of `handlers`.
    pub fn start_with(path: &Path, handlers: Handlers) -> Result<ControlServer, ControlError> {
        let io = |source| ControlError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            if !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(io)?;
            }
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(ControlError::InUse(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(io)?; // stale, from a killed instance
        }
        // Create with a restrictive umask so there is no window with a wider mode.
        // SAFETY: umask only swaps the process file-mode mask; it touches no memory.
        let old = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(path);
        // SAFETY: as above, restoring the previous mask.
        unsafe { libc::umask(old) };
        let listener = bound.map_err(io)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        listener.set_nonblocking(true).map_err(io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let capture = CaptureSlot::default();
        let capture2 = capture.clone();
        let thread = std::thread::Builder::new()
            .name("xdpool-control".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let _ = serve_one(stream, &handlers, &capture2, &stop2);
                        }
                        // Wait for the next client in poll() (50 ms at most, to see
                        // `stop`): a command is served at once, not up to 50 ms late.
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            wait_readable(&listener, 50)
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(200)),
                    }
                }
            })
            .map_err(io)?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
            capture,
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Serves `capture` from now on (set once; later calls are ignored).
    pub fn enable_capture(&self, service: Arc<crate::capture::session::CaptureService>) {
        let _ = self.capture.set(service);
    }
}

fn wait_readable(listener: &UnixListener, ms: u16) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    let _ = poll(&mut fds, PollTimeout::from(ms));
}

fn serve_one(
    stream: UnixStream,
    handlers: &Handlers,
    capture: &CaptureSlot,
    stop: &Arc<AtomicBool>,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut stream = stream;
    match line.trim() {
        "stats" => {
            let body = serde_json::to_string(&(handlers.snapshot)()).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
            stream.write_all(body.as_bytes())
        }
        "rules apply" => serve_rules_apply(&mut reader, &mut stream, handlers.rules.as_ref()),
        l if l.split_whitespace().next() == Some(crate::capture::wire::COMMAND) => serve_capture(stream, l, capture, stop),
        other => stream.write_all(serde_json::json!({ "error": format!("unknown command `{other}`: the commands are `stats`, `rules apply` and `capture`") }).to_string().as_bytes()),
    }
}

/// `capture {...}`: handed to the capture service, which streams from its own thread.
fn serve_capture(
    mut stream: UnixStream,
    line: &str,
    capture: &CaptureSlot,
    stop: &Arc<AtomicBool>,
) -> std::io::Result<()> {
    let args = line[crate::capture::wire::COMMAND.len()..].trim();
    match capture.get() {
        Some(service) => service.serve(stream, args, stop.clone()),
        None => stream.write_all(serde_json::json!({ "error": "this instance does not serve capture (it is still starting, or older than the client)" }).to_string().as_bytes()),
    }
}

/// `rules apply`: the rest of the stream is the rules text.
fn serve_rules_apply(
    reader: &mut impl Read,
    stream: &mut UnixStream,
    rules: Option<&RulesFn>,
) -> std::io::Result<()> {
    let mut text = String::new();
    reader.take(MAX_RULES_TEXT + 1).read_to_string(&mut text)?;
    let reply = match rules {
        _ if text.len() as u64 > MAX_RULES_TEXT => {
            serde_json::json!({"ok": false, "kind": "invalid", "error": format!("the rules text is larger than {MAX_RULES_TEXT} bytes")})
        }
        Some(apply) => apply(&text),
        None => {
            serde_json::json!({"ok": false, "kind": "refused", "error": "this instance does not reload rules"})
        }
    };
    stream.write_all(reply.to_string().as_bytes())
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Asks the instance at `path` for its snapshot.
pub fn query(path: &Path) -> Result<serde_json::Value, ControlError> {
    let mut s = UnixStream::connect(path).map_err(|source| ControlError::NotRunning {
        path: path.to_path_buf(),
        source,
    })?;
    let io = |source| ControlError::Io {
        path: path.to_path_buf(),
        source,
    };
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io)?;
    s.write_all(b"stats\n").map_err(io)?;
    let mut body = String::new();
    s.read_to_string(&mut body).map_err(io)?;
    serde_json::from_str(&body)
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Sends `text` to the instance at `path` as `rules apply`; its reply.
pub fn apply_rules(path: &Path, text: &str) -> Result<serde_json::Value, ControlError> {
    let mut s = UnixStream::connect(path).map_err(|source| ControlError::NotRunning {
        path: path.to_path_buf(),
        source,
    })?;
    let io = |source| ControlError::Io {
        path: path.to_path_buf(),
        source,
    };
    // A reload waits for every worker (1 s at most) and may load a program.
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(io)?;
    s.write_all(b"rules apply\n").map_err(io)?;
    s.write_all(text.as_bytes()).map_err(io)?;
    s.shutdown(std::net::Shutdown::Write).map_err(io)?;
    let mut body = String::new();
    s.read_to_string(&mut body).map_err(io)?;
    serde_json::from_str(&body)
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn socket_is_0600_and_answers() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("xdpool-ctl-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap();
        let path = dir.path().join("x.sock");
        let snap: SnapshotFn = Arc::new(|| serde_json::json!({"total": {"rx_packets": 9}}));
        let server = ControlServer::start(&path, snap.clone()).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw());
        assert_eq!(query(&path).unwrap()["total"]["rx_packets"], 9);
        assert!(matches!(
            ControlServer::start(&path, snap),
            Err(ControlError::InUse(_))
        ));
        drop(server);
        assert!(!path.exists());
        assert!(matches!(query(&path), Err(ControlError::NotRunning { .. })));
    }

    #[test]
    fn rules_apply_sends_the_whole_text_and_returns_the_reply() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("xdpool-ctl-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap();
        let path = dir.path().join("r.sock");
        let snap: SnapshotFn = Arc::new(|| serde_json::json!({}));
        let rules: RulesFn = Arc::new(
            |text: &str| serde_json::json!({"ok": text.ends_with("action = \"pass\"\n"), "len": text.len()}),
        );
        let server = ControlServer::start_with(
            &path,
            Handlers {
                snapshot: snap.clone(),
                rules: Some(rules),
            },
        )
        .unwrap();
        let text = format!(
            "{}[[rule]]\naction = \"pass\"\n",
            "# padding\n".repeat(2000)
        );
        let reply = apply_rules(&path, &text).unwrap();
        assert_eq!(
            reply["len"],
            text.len(),
            "every byte after the command line arrives: {reply}"
        );
        assert_eq!(reply["ok"], true);
        drop(server);
        let _plain = ControlServer::start(&path, snap).unwrap();
        let reply = apply_rules(&path, "[[rule]]\n").unwrap();
        assert_eq!(
            (reply["ok"].clone(), reply["kind"].clone()),
            (serde_json::json!(false), serde_json::json!("refused")),
            "{reply}"
        );
    }
}
