//! The control socket: a unix stream socket, mode 0600, owned by the running user
//! (0660 of `stats.control_group` when set: its members may ask `stats`, see
//! [`Access`]).
//! A client writes one command line and reads one JSON document back:
//! - `stats`: the snapshot.
//! - `rules apply`, then the text of a rules file (or a whole config) up to the end
//!   of its stream (shut down for writing): `{"ok": true, "applied": ...}` or
//!   `{"ok": false, "kind": "invalid"|"refused"|"failed", "error": ..., "key", "line"}`.
//! - `capture {...}` (once the instance enables it): a stream of captured frames
//!   (`crate::capture::wire`) instead of one document.
//!
//! Clients are served concurrently, each on a thread of its own, at most
//! [`MAX_CLIENTS`] at once, so a slow or silent client never delays another: the
//! command line ([`MAX_COMMAND_LINE`] bytes) must arrive whole within
//! [`COMMAND_DEADLINE`] of the connect, a reply must be taken within
//! [`REPLY_DEADLINE`], and a `rules apply` text must arrive whole within
//! [`RULES_DEADLINE`]. At the cap, a new client closes the oldest one still sending
//! its command line; only when every client is being answered is the new one told
//! the instance is busy. A `capture` stream runs on the capture service's thread as
//! long as its client reads; a client that stops reading makes the bounded tap
//! fill, and the copies it cannot take are counted (`capture_dropped`). Each refused
//! client is logged once, by pid and uid ([`super::RefusalLog`]).

use super::{RefusalLog, SnapshotFn};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Clients served at once.
pub const MAX_CLIENTS: usize = 32;
/// Bytes of a command line, its newline included.
pub const MAX_COMMAND_LINE: usize = 4096;
/// From the connect to the command line's newline.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(2);
/// To hand a reply to a client that reads.
pub const REPLY_DEADLINE: Duration = Duration::from_secs(5);
/// From the command line to the end of a `rules apply` text.
pub const RULES_DEADLINE: Duration = Duration::from_secs(10);
/// How long the clients here wait for an answer (`xdpool stats`).
pub const CLIENT_WAIT: Duration = Duration::from_secs(5);

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
    /// The instance took the connection but did not answer in time.
    #[error("xdpool at {path} did not answer within {} s; it may be stuck or overloaded: look at its log, or `systemctl status xdpool`", .waited.as_secs())]
    Timeout {
        /// Socket path.
        path: PathBuf,
        /// How long the client waited.
        waited: Duration,
    },
    /// The socket's mode does not let this user in.
    #[error("permission denied: {path} is for {who}; run as root or as a member")]
    PermissionDenied {
        /// Socket path.
        path: PathBuf,
        /// Who may connect: "group G" or "its owner (uid U) only".
        who: String,
    },
    /// The instance refused the command and said why.
    #[error("xdpool at {path} refused: {reason}")]
    Refused {
        /// Socket path.
        path: PathBuf,
        /// Its words.
        reason: String,
    },
    /// The instance closed the connection before it answered: it stopped, or, under
    /// a flood of connections, it closed this client before starting on its command
    /// (which was then not carried out).
    #[error("xdpool at {path} closed the connection without an answer; it may be stopping, or flooded with connections: try again, and look at its log")]
    Unanswered {
        /// Socket path.
        path: PathBuf,
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

/// Hands a control message to a packet function's lanes (`handler NAME`): the
/// handler's name and the message; the reply.
pub type HandlerControlFn = Arc<dyn Fn(&str, &str) -> serde_json::Value + Send + Sync>;

/// The command that sends a packet function a control message: `handler NAME`,
/// then the message as the rest of the stream.
pub const HANDLER_COMMAND: &str = "handler";

/// Largest control message `handler NAME` takes.
const MAX_HANDLER_MESSAGE: u64 = 64 << 10;

/// What the socket serves.
#[derive(Clone)]
pub struct Handlers {
    /// `stats`.
    pub snapshot: SnapshotFn,
    /// `rules apply` (absent: the command is refused).
    pub rules: Option<RulesFn>,
    /// `handler NAME` (absent: the command is refused).
    pub handler_control: Option<HandlerControlFn>,
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
                handler_control: None,
                snapshot,
                rules: None,
            },
        )
    }

    /// [`ControlServer::start`] serving every command of `handlers`.
    pub fn start_with(path: &Path, handlers: Handlers) -> Result<ControlServer, ControlError> {
        Self::start_with_access(path, handlers, Access::default())
    }

    /// [`ControlServer::start_with`], with `access.group` (when set) let in to
    /// `stats`: socket 0660 and, when xdpool made it or finds it empty and its own,
    /// its directory 0750, both of that group.
    pub fn start_with_access(
        path: &Path,
        handlers: Handlers,
        access: Access,
    ) -> Result<ControlServer, ControlError> {
        let io = |source| ControlError::Io {
            path: path.to_path_buf(),
            source,
        };
        let group = access
            .group
            .as_ref()
            .map(|(_, gid)| nix::unistd::Gid::from_raw(*gid));
        let mut made_dir = false;
        if let Some(dir) = path.parent() {
            if !dir.exists() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(io)?;
                made_dir = true;
            }
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(ControlError::InUse(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(io)?; // stale, from a killed instance
        }
        if let (Some(gid), Some(dir)) = (group, path.parent()) {
            if made_dir || dir_is_ours_and_empty(dir) {
                nix::unistd::chown(dir, None, Some(gid)).map_err(|e| io(e.into()))?;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
                    .map_err(io)?;
            } else {
                tracing::warn!(dir = %dir.display(), "stats.control_group: the socket's directory is not xdpool's own, so its mode and group stay as they are; the group needs search (x) permission on it");
            }
        }
        // Create with a restrictive umask so there is no window with a wider mode.
        // SAFETY: umask only swaps the process file-mode mask; it touches no memory.
        let old = unsafe { libc::umask(0o177) };
        let bound = UnixListener::bind(path);
        // SAFETY: as above, restoring the previous mask.
        unsafe { libc::umask(old) };
        let listener = bound.map_err(io)?;
        // More than std's 128 pending connects, so a burst does not block `stats`.
        nix::sys::socket::listen(
            &listener,
            nix::sys::socket::Backlog::new(1024).expect("in range"),
        )
        .map_err(|e| io(e.into()))?;
        let mode = match group {
            Some(gid) => {
                nix::unistd::chown(path, None, Some(gid)).map_err(|e| io(e.into()))?;
                0o660
            }
            None => 0o600,
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io)?;
        let handlers = Arc::new((handlers, access));
        listener.set_nonblocking(true).map_err(io)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let capture = CaptureSlot::default();
        let capture2 = capture.clone();
        let thread = std::thread::Builder::new()
            .name("xdpool-control".into())
            .spawn(move || accept_loop(listener, handlers, capture2, stop2))
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

/// Who a client is, from SO_PEERCRED, for the log.
#[derive(Debug, Clone, Copy)]
struct Peer {
    pid: i32,
    uid: u32,
    gid: u32,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} uid {}", self.pid, self.uid)
    }
}

fn peer_of(stream: &UnixStream) -> Peer {
    match nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerCredentials) {
        Ok(c) => Peer {
            pid: c.pid(),
            uid: c.uid(),
            gid: c.gid(),
        },
        Err(_) => Peer {
            pid: -1,
            uid: u32::MAX,
            gid: u32::MAX,
        },
    }
}

/// Who may use the socket beyond root and the daemon's own user.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// `stats.control_group`: its name and gid; members may ask `stats`.
    pub group: Option<(String, u32)>,
}

impl Access {
    /// Resolves `stats.control_group`; an unknown group says what to do.
    pub fn for_group(name: Option<&str>) -> Result<Access, String> {
        let Some(name) = name else {
            return Ok(Access::default());
        };
        match nix::unistd::Group::from_name(name) {
            Ok(Some(g)) => Ok(Access {
                group: Some((name.to_string(), g.gid.as_raw())),
            }),
            Ok(None) => Err(format!("stats.control_group: there is no group `{name}` on this host; create it (`groupadd {name}`) or remove the key")),
            Err(e) => Err(format!("stats.control_group: cannot look up group `{name}`: {e}")),
        }
    }

    /// Whether `peer` may run `command`: root and the daemon's user anything, the
    /// group's members (primary, or supplementary from /proc/PID/status) `stats`.
    fn allows(&self, peer: &Peer, command: &str) -> Result<(), String> {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if peer.uid == 0 || peer.uid == me {
            return Ok(());
        }
        let owner = format!("root and uid {me} (the daemon's user)");
        let Some((name, gid)) = &self.group else {
            return Err(format!("the control socket is for {owner} only"));
        };
        if command != "stats" {
            return Err(format!(
                "`{command}` is for {owner}; members of group {name} may ask `stats` only"
            ));
        }
        if peer.gid == *gid || supplementary_groups(peer.pid).contains(gid) {
            return Ok(());
        }
        Err(format!(
            "the control socket is for {owner} and group {name}"
        ))
    }
}

/// The `Groups:` of /proc/PID/status (SO_PEERCRED gives only the primary gid).
fn supplementary_groups(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                g.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// A directory owned by this user, without the sticky bit, holding nothing (e.g.
/// systemd's RuntimeDirectory): xdpool may give it to the control group.
fn dir_is_ours_and_empty(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    std::fs::metadata(dir).is_ok_and(|m| m.uid() == me && m.mode() & 0o1000 == 0)
        && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
}

/// A client still sending its command line (may be closed to make room).
const READING: u8 = 0;
/// A client whose command line is whole in its socket or read, being answered
/// (never closed to make room).
const ANSWERING: u8 = 1;
/// A client closed to make room: its command, if it comes, is not carried out.
const CLOSED: u8 = 2;

/// Moves a client from [`READING`] to `to`; false when it has already left it. The
/// accept loop (closing to make room) and the client's thread (starting to answer)
/// race for the same client: exactly one of them wins.
fn leave_reading(phase: &AtomicU8, to: u8) -> bool {
    phase
        .compare_exchange(READING, to, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

struct Client {
    peer: Peer,
    since: Instant,
    phase: Arc<AtomicU8>,
    /// A handle on the same socket, to shut it down from the accept loop.
    stream: UnixStream,
}

type Clients = Arc<Mutex<HashMap<u64, Client>>>;

/// Removes a client from the table when its thread ends.
struct Forget(u64, Clients);

impl Drop for Forget {
    fn drop(&mut self) {
        if let Ok(mut t) = self.1.lock() {
            t.remove(&self.0);
        }
    }
}

fn accept_loop(
    listener: UnixListener,
    handlers: Arc<(Handlers, Access)>,
    capture: CaptureSlot,
    stop: Arc<AtomicBool>,
) {
    let clients: Clients = Arc::default();
    let refusals = Arc::new(RefusalLog::new("control socket"));
    let mut next_id = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            // Wait for the next client in poll() (50 ms at most, to see `stop`).
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                wait_readable(&listener, 50);
                continue;
            }
            Err(e) => {
                refusals.say(None, &format!("accept failed: {e}"));
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let peer = peer_of(&stream);
        if !make_room(&clients, &refusals) {
            refusals.say(
                Some(&peer),
                &format!("refused: all {MAX_CLIENTS} clients are being answered"),
            );
            let _ = stream.set_nonblocking(true);
            let _ = (&stream).write_all(
                error_reply(&format!(
                    "busy: {MAX_CLIENTS} clients are being answered; try again"
                ))
                .as_bytes(),
            );
            continue;
        }
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let phase = Arc::new(AtomicU8::new(READING));
        let id = next_id;
        next_id += 1;
        clients.lock().expect("never poisoned").insert(
            id,
            Client {
                peer,
                since: Instant::now(),
                phase: phase.clone(),
                stream: handle,
            },
        );
        let forget = Forget(id, clients.clone());
        let (h, c, st, r) = (
            handlers.clone(),
            capture.clone(),
            stop.clone(),
            refusals.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("xdpool-ctl-client".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let _forget = forget;
                serve_client(stream, peer, &phase, &h, &c, &st, &r);
            });
        if let Err(e) = spawned {
            refusals.say(
                Some(&peer),
                &format!("refused: no thread to serve it ({e})"),
            );
        }
    }
}

/// At the cap, shuts down the oldest client still sending its command line; false
/// when every client is being answered.
fn make_room(clients: &Clients, refusals: &RefusalLog) -> bool {
    let mut t = clients.lock().expect("never poisoned");
    if t.len() < MAX_CLIENTS {
        return true;
    }
    // A client whose command already waits in its socket is about to be served: in a
    // burst of connects its thread may not have run yet, and it must not be the one
    // closed. The oldest silent client goes first; one that its thread has meanwhile
    // started to answer is passed over.
    let mut candidates: Vec<_> = t
        .iter()
        .filter(|(_, c)| c.phase.load(Ordering::Acquire) == READING)
        .map(|(id, c)| (has_bytes_waiting(&c.stream), c.since, *id))
        .collect();
    candidates.sort_unstable();
    let Some(id) = candidates
        .into_iter()
        .map(|(_, _, id)| id)
        .find(|id| leave_reading(&t[id].phase, CLOSED))
    else {
        return false;
    };
    let c = t.remove(&id).expect("just found");
    let _ = c.stream.shutdown(std::net::Shutdown::Both);
    refusals.say(
        Some(&c.peer),
        &format!(
            "closed: {MAX_CLIENTS} clients connected, and this one was the oldest still sending its command line"
        ),
    );
    true
}

/// Whether bytes wait unread in `stream` (a peek, never blocking).
fn has_bytes_waiting(stream: &UnixStream) -> bool {
    use nix::sys::socket::{recv, MsgFlags};
    use std::os::fd::AsRawFd;
    let mut b = [0u8; 1];
    matches!(
        recv(
            stream.as_raw_fd(),
            &mut b,
            MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT
        ),
        Ok(1)
    )
}

/// Waits (until `deadline`) for the client's first bytes and says whether they hold
/// a whole command line; nothing is taken out of the socket.
fn line_waiting(stream: &UnixStream, deadline: Instant) -> bool {
    use nix::sys::socket::{recv, MsgFlags};
    use std::os::fd::AsRawFd;
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
        return false;
    }
    let mut b = [0u8; 512];
    match recv(stream.as_raw_fd(), &mut b, MsgFlags::MSG_PEEK) {
        Ok(n) => b[..n].contains(&b'\n'),
        Err(_) => false,
    }
}

fn wait_readable(listener: &UnixListener, ms: u16) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    let _ = poll(&mut fds, PollTimeout::from(ms));
}

fn error_reply(msg: &str) -> String {
    serde_json::json!({ "error": msg }).to_string()
}

/// Why a command line was not read.
enum LineError {
    TooLong,
    Late,
    Closed,
    Io(std::io::Error),
}

/// Reads up to `limit` bytes until a newline (or the end of the stream, for a
/// client that shut down its side after the command), all within `deadline`.
/// The line without its newline, and whatever followed it.
fn read_line(
    stream: &UnixStream,
    limit: usize,
    deadline: Instant,
) -> Result<(String, Vec<u8>), LineError> {
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(LineError::Late);
        }
        stream.set_read_timeout(Some(left)).map_err(LineError::Io)?;
        let n = match (&*stream).read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Err(LineError::Closed),
            Ok(0) => {
                return Ok((String::from_utf8_lossy(&buf).into_owned(), Vec::new()));
            }
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(LineError::Late)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LineError::Io(e)),
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.iter().position(|&b| b == b'\n') {
            let rest = buf.split_off(at + 1);
            buf.pop();
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() >= limit {
            return Err(LineError::TooLong);
        }
    }
}

fn serve_client(
    stream: UnixStream,
    peer: Peer,
    phase: &AtomicU8,
    served: &(Handlers, Access),
    capture: &CaptureSlot,
    stop: &Arc<AtomicBool>,
    refusals: &RefusalLog,
) {
    if stream.set_nonblocking(false).is_err()
        || stream.set_write_timeout(Some(REPLY_DEADLINE)).is_err()
    {
        return;
    }
    let mut out = &stream;
    let deadline = Instant::now() + COMMAND_DEADLINE;
    // A command line that arrived whole is marked as being answered before it is
    // taken out of the socket: from the accept loop's side the client is never both
    // silent and still closable (see `make_room`).
    if line_waiting(&stream, deadline) && !leave_reading(phase, ANSWERING) {
        return;
    }
    let (line, rest) = match read_line(&stream, MAX_COMMAND_LINE, deadline) {
        Ok(v) => v,
        Err(e) => {
            let why = match e {
                LineError::TooLong => format!("a command line is at most {MAX_COMMAND_LINE} bytes"),
                LineError::Late => format!(
                    "no whole command line within {} s of connecting",
                    COMMAND_DEADLINE.as_secs()
                ),
                LineError::Closed => return,
                LineError::Io(e) => {
                    tracing::debug!(client = %peer, error = %e, "control client gone");
                    return;
                }
            };
            refusals.say(Some(&peer), &format!("closed: {why}"));
            let _ = out.write_all(error_reply(&why).as_bytes());
            return;
        }
    };
    // Closed to make room while its line came in slowly: not carried out.
    if phase.load(Ordering::Acquire) != ANSWERING && !leave_reading(phase, ANSWERING) {
        return;
    }
    let (handlers, access) = served;
    let line = line.trim();
    let command = match line {
        "rules apply" => line,
        _ => line.split_whitespace().next().unwrap_or(""),
    };
    if let Err(why) = access.allows(&peer, command) {
        refusals.say(Some(&peer), &format!("refused `{command}`: {why}"));
        let _ = out.write_all(error_reply(&format!("permission denied: {why}")).as_bytes());
        return;
    }
    let res = match line {
        "stats" => {
            let body = serde_json::to_string(&(handlers.snapshot)())
                .unwrap_or_else(|e| error_reply(&e.to_string()));
            out.write_all(body.as_bytes())
        }
        "rules apply" => serve_rules_apply(&stream, rest, handlers.rules.as_ref(), peer, refusals),
        l if l.split_whitespace().next() == Some(HANDLER_COMMAND) => serve_handler_control(
            &stream,
            l,
            rest,
            handlers.handler_control.as_ref(),
            peer,
            refusals,
        ),
        l if l.split_whitespace().next() == Some(crate::capture::wire::COMMAND) => {
            match stream.try_clone() {
                Ok(s) => serve_capture(s, l, capture, stop),
                Err(e) => Err(e),
            }
        }
        other => {
            let shown: String = other
                .chars()
                .take(40)
                .collect::<String>()
                .escape_debug()
                .to_string();
            refusals.say(Some(&peer), &format!("refused: unknown command `{shown}`"));
            out.write_all(
                error_reply(&format!(
                    "unknown command `{shown}`: the commands are `stats`, `rules apply`, `handler NAME` and `capture`"
                ))
                .as_bytes(),
            )
        }
    };
    if let Err(e) = res {
        refusals.say(
            Some(&peer),
            &format!("closed: it did not take its answer ({e})"),
        );
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
        None => stream.write_all(error_reply("this instance does not serve capture (it is still starting, or older than the client)").as_bytes()),
    }
}

/// The rest of the stream after the command line, whole within [`RULES_DEADLINE`]
/// and at most `limit` bytes (`what` names it in the refusal); `Err` inside for a
/// body too long or too slow.
fn read_body(
    stream: &UnixStream,
    first: Vec<u8>,
    limit: u64,
    what: &str,
) -> std::io::Result<(Result<(), String>, Vec<u8>)> {
    let deadline = Instant::now() + RULES_DEADLINE;
    let mut text = first;
    let mut chunk = vec![0u8; 64 * 1024];
    let complete = loop {
        if text.len() as u64 > limit {
            break Err(format!("{what} is larger than {limit} bytes"));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(format!(
                "{what} did not end within {} s (shut down the writing side after it)",
                RULES_DEADLINE.as_secs()
            ));
        }
        stream.set_read_timeout(Some(left))?;
        match (&*stream).read(&mut chunk) {
            Ok(0) => break Ok(()),
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    };
    Ok((complete, text))
}

/// `handler NAME`: the rest of the stream is the message for handler NAME's lanes.
fn serve_handler_control(
    stream: &UnixStream,
    line: &str,
    first: Vec<u8>,
    control: Option<&HandlerControlFn>,
    peer: Peer,
    refusals: &RefusalLog,
) -> std::io::Result<()> {
    let mut words = line.split_whitespace().skip(1);
    let (Some(name), None) = (words.next(), words.next()) else {
        return (&*stream).write_all(
            error_reply("say `handler NAME`, then the message as the rest of the stream")
                .as_bytes(),
        );
    };
    let (complete, text) = read_body(stream, first, MAX_HANDLER_MESSAGE, "the message")?;
    let reply = match (complete, String::from_utf8(text)) {
        (Err(why), _) => {
            refusals.say(Some(&peer), &format!("refused `handler {name}`: {why}"));
            serde_json::json!({ "error": why })
        }
        (_, Err(_)) => serde_json::json!({ "error": "the message is not UTF-8" }),
        (Ok(()), Ok(text)) => match control {
            Some(f) => f(name, &text),
            None => serde_json::json!({ "error": "this instance takes no handler messages" }),
        },
    };
    (&*stream).write_all(reply.to_string().as_bytes())
}

/// `rules apply`: the rest of the stream is the rules text, whole within
/// [`RULES_DEADLINE`] and at most [`MAX_RULES_TEXT`] bytes.
fn serve_rules_apply(
    stream: &UnixStream,
    first: Vec<u8>,
    rules: Option<&RulesFn>,
    peer: Peer,
    refusals: &RefusalLog,
) -> std::io::Result<()> {
    let (complete, text) = read_body(stream, first, MAX_RULES_TEXT, "the rules text")?;
    let reply = match (complete, String::from_utf8(text)) {
        (Err(why), _) => {
            refusals.say(Some(&peer), &format!("refused `rules apply`: {why}"));
            serde_json::json!({"ok": false, "kind": "invalid", "error": why})
        }
        (_, Err(_)) => {
            serde_json::json!({"ok": false, "kind": "invalid", "error": "the rules text is not UTF-8"})
        }
        (Ok(()), Ok(text)) => match rules {
            Some(apply) => apply(&text),
            None => {
                serde_json::json!({"ok": false, "kind": "refused", "error": "this instance does not reload rules"})
            }
        },
    };
    (&*stream).write_all(reply.to_string().as_bytes())
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

/// Connects to the instance at `path`; errors that say what is wrong.
pub fn connect(path: &Path) -> Result<UnixStream, ControlError> {
    UnixStream::connect(path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::PermissionDenied {
            ControlError::PermissionDenied {
                path: path.to_path_buf(),
                who: who_may_connect(path),
            }
        } else {
            ControlError::NotRunning {
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

/// "group G" when the socket's group may connect, else "its owner (uid U) only";
/// read from the directory when the socket itself cannot be looked at.
fn who_may_connect(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let group = |gid: u32| match nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)) {
        Ok(Some(g)) => format!("group {}", g.name),
        _ => format!("group {gid}"),
    };
    match std::fs::metadata(path) {
        Ok(m) if m.mode() & 0o060 == 0o060 => group(m.gid()),
        Ok(m) => format!("its owner (uid {}) only", m.uid()),
        Err(_) => match path.parent().map(std::fs::metadata) {
            Some(Ok(d)) if d.mode() & 0o010 != 0 => group(d.gid()),
            Some(Ok(d)) => format!("its owner (uid {}) only", d.uid()),
            _ => "its owner only".into(),
        },
    }
}

/// Sends `command` (and `body`, then the end of the stream) and reads the one JSON
/// reply within `wait`.
fn ask(
    path: &Path,
    command: &str,
    body: Option<&str>,
    wait: Duration,
) -> Result<serde_json::Value, ControlError> {
    let s = connect(path)?;
    let io = |source: std::io::Error| match source.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ControlError::Timeout {
            path: path.to_path_buf(),
            waited: wait,
        },
        _ => ControlError::Io {
            path: path.to_path_buf(),
            source,
        },
    };
    s.set_read_timeout(Some(wait)).map_err(io)?;
    s.set_write_timeout(Some(wait)).map_err(io)?;
    let mut w = &s;
    let sent = w
        .write_all(format!("{command}\n").as_bytes())
        .and_then(|()| match body {
            Some(body) => w
                .write_all(body.as_bytes())
                .and_then(|()| s.shutdown(std::net::Shutdown::Write)),
            None => Ok(()),
        });
    let mut reply = Vec::new();
    match sent {
        Ok(()) => {}
        // The instance stopped reading (it refused a body too large, say) and closed:
        // its answer, already sent, says why.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            if (&s).take(64 << 20).read_to_end(&mut reply).is_err() || reply.is_empty() {
                return Err(ControlError::Unanswered {
                    path: path.to_path_buf(),
                });
            }
        }
        Err(e) => return Err(io(e)),
    }
    if reply.is_empty() {
        match (&s).take(64 << 20).read_to_end(&mut reply) {
            Ok(_) => {}
            // Closed with the command unread in its socket.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && reply.is_empty() => {}
            Err(e) => return Err(io(e)),
        }
    }
    if reply.is_empty() {
        return Err(ControlError::Unanswered {
            path: path.to_path_buf(),
        });
    }
    let v: serde_json::Value = serde_json::from_slice(&reply)
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    if let (Some(err), 1) = (
        v.get("error").and_then(|e| e.as_str()),
        v.as_object().map_or(0, |o| o.len()),
    ) {
        return Err(ControlError::Refused {
            path: path.to_path_buf(),
            reason: err.to_string(),
        });
    }
    Ok(v)
}

/// Asks the instance at `path` for its snapshot (waits [`CLIENT_WAIT`] at most).
pub fn query(path: &Path) -> Result<serde_json::Value, ControlError> {
    // `stats` changes nothing, so a connection closed unanswered is tried again
    // within the same wait: at its cap of clients the instance closes the oldest one
    // still silent, which a client descheduled between its connect and its write can
    // be while others flood it with connections.
    let until = Instant::now() + CLIENT_WAIT;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match ask(path, "stats", None, left.max(Duration::from_millis(1))) {
            Err(ControlError::Unanswered { .. }) if left > QUERY_RETRY_PAUSE => {
                std::thread::sleep(QUERY_RETRY_PAUSE);
            }
            // The whole wait, not the last try's share of it.
            Err(ControlError::Timeout { path, .. }) => {
                return Err(ControlError::Timeout {
                    path,
                    waited: CLIENT_WAIT,
                })
            }
            r => return r,
        }
    }
}

/// Between two tries of a `stats` closed unanswered.
const QUERY_RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Sends `msg` to packet function `handler` of the instance at `path`; its reply
/// (`ok`, `lanes`, `answered`, `refused`: each refusing lane's port, queue, error).
pub fn control_handler(
    path: &Path,
    handler: &str,
    msg: &str,
) -> Result<serde_json::Value, ControlError> {
    ask(
        path,
        &format!("{HANDLER_COMMAND} {handler}"),
        Some(msg),
        Duration::from_secs(10),
    )
}

/// Sends `text` to the instance at `path` as `rules apply`; its reply.
pub fn apply_rules(path: &Path, text: &str) -> Result<serde_json::Value, ControlError> {
    // A reload waits for every worker (1 s at most) and may load a program.
    ask(path, "rules apply", Some(text), Duration::from_secs(30))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn socket_is_0600_and_answers() {
        let (_dir, path) = private_socket("ctl", "x.sock");
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
        let (_dir, path) = private_socket("ctl", "r.sock");
        let snap: SnapshotFn = Arc::new(|| serde_json::json!({}));
        let rules: RulesFn = Arc::new(
            |text: &str| serde_json::json!({"ok": text.ends_with("action = \"pass\"\n"), "len": text.len()}),
        );
        let server = ControlServer::start_with(
            &path,
            Handlers {
                handler_control: None,
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

    #[test]
    fn a_handler_message_reaches_its_function_whole_and_misuse_is_named() {
        let (_dir, path) = private_socket("ctl", "h.sock");
        let control: HandlerControlFn = Arc::new(|name: &str, text: &str| {
            if name != "lb" {
                return serde_json::json!({ "error": format!("no handler named `{name}`") });
            }
            serde_json::json!({ "ok": true, "handler": name, "text": text, "lanes": 2, "answered": 2 })
        });
        let _server = ControlServer::start_with(
            &path,
            Handlers {
                snapshot: Arc::new(|| serde_json::json!({})),
                rules: None,
                handler_control: Some(control),
            },
        )
        .unwrap();
        let msg = "remove 2\nweights 1 1 3\n";
        let reply = control_handler(&path, "lb", msg).unwrap();
        assert_eq!(reply["text"], msg, "the whole message arrives: {reply}");
        assert_eq!(reply["ok"], true);
        match control_handler(&path, "nat", "x") {
            Err(ControlError::Refused { reason, .. }) => {
                assert_eq!(reason, "no handler named `nat`")
            }
            other => panic!("{other:?}"),
        }
        match control_handler(&path, "lb extra", "x") {
            Err(ControlError::Refused { reason, .. }) => {
                assert!(reason.starts_with("say `handler NAME`"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        // Far larger than the limit, so that the instance refuses and closes while
        // the client is still writing: the client still reads why (it used to fail
        // with the write's broken pipe, now and then, at one byte over the limit).
        let big = "x".repeat((16 * MAX_HANDLER_MESSAGE) as usize);
        match control_handler(&path, "lb", &big) {
            Err(ControlError::Refused { reason, .. }) => {
                assert!(reason.starts_with("the message is larger than"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        // An instance without handlers says so.
        let (_d, plain, _s) = serving("noh");
        match control_handler(&plain, "lb", "x") {
            Err(ControlError::Refused { reason, .. }) => {
                assert_eq!(reason, "this instance takes no handler messages")
            }
            other => panic!("{other:?}"),
        }
    }

    /// A socket path `name` in a new 0700 directory (removed when the `TempDir` drops).
    fn private_socket(tag: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix(&format!("xdpool-{tag}-"))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap();
        let path = dir.path().join(name);
        (dir, path)
    }

    fn serving(tag: &str) -> (tempfile::TempDir, PathBuf, ControlServer) {
        let (dir, path) = private_socket(tag, "c.sock");
        let snap: SnapshotFn = Arc::new(|| serde_json::json!({"total": {"rx_packets": 9}}));
        let server = ControlServer::start(&path, snap).unwrap();
        (dir, path, server)
    }

    #[test]
    fn a_slow_client_delays_no_other_and_is_closed_at_its_deadline() {
        let (_dir, path, _server) = serving("slow");
        let slow = UnixStream::connect(&path).unwrap();
        let started = Instant::now();
        // A byte every 300 ms, for up to 4 s: each read is short; only the deadline
        // on the whole line ends it.
        let writer = slow.try_clone().unwrap();
        let trickle = std::thread::spawn(move || {
            for _ in 0..13 {
                if (&writer).write_all(b"s").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        for _ in 0..3 {
            let t = Instant::now();
            assert_eq!(query(&path).unwrap()["total"]["rx_packets"], 9);
            assert!(
                t.elapsed() < Duration::from_millis(500),
                "{:?}",
                t.elapsed()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut reply = String::new();
        let _ = (&slow).read_to_string(&mut reply);
        let took = started.elapsed();
        assert!(
            took >= COMMAND_DEADLINE && took < COMMAND_DEADLINE + Duration::from_millis(500),
            "closed after {took:?}"
        );
        assert!(
            reply.contains("no whole command line within 2 s"),
            "{reply}"
        );
        trickle.join().unwrap();
    }

    #[test]
    fn a_command_line_past_its_limit_is_refused_unread() {
        let (_dir, path, _server) = serving("long");
        let s = UnixStream::connect(&path).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut sent = 0usize;
        let junk = vec![b'x'; 8192];
        while sent < 32 << 20 {
            match (&s).write(&junk) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        assert!(sent < 32 << 20, "the server took {sent} bytes of one line");
        assert_eq!(query(&path).unwrap()["total"]["rx_packets"], 9);
    }

    #[test]
    fn a_full_cap_of_silent_clients_still_lets_stats_in() {
        let (_dir, path, _server) = serving("cap");
        let silent: Vec<UnixStream> = (0..MAX_CLIENTS + 8)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        assert_eq!(query(&path).unwrap()["total"]["rx_packets"], 9);
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        drop(silent);
    }

    #[test]
    fn stats_is_answered_through_a_flood_of_connections() {
        // Two threads connect as fast as they can, each holding its last 400
        // connections: the cap is passed thousands of times a second, and each
        // `stats` is one connect among them. Before a client's thread claimed a
        // whole line in its socket, and before `query` asked again, 1-6 of 150 were
        // closed unanswered here (2 cores, 4 runs). `query`'s retry would hide a
        // server that closed answered clients again; `serve_client`'s tests above
        // cover the claim. (Asked once, without the retry, a client descheduled
        // between its connect and its write is silent to the server and may be
        // closed: not what this checks.)
        let (_dir, path, _server) = serving("flood");
        let stop = Arc::new(AtomicBool::new(false));
        let floods: Vec<_> = (0..2)
            .map(|_| {
                let (path, stop) = (path.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut held = std::collections::VecDeque::new();
                    while !stop.load(Ordering::Relaxed) {
                        if let Ok(s) = UnixStream::connect(&path) {
                            held.push_back(s);
                        }
                        if held.len() > 400 {
                            held.pop_front();
                        }
                    }
                })
            })
            .collect();
        let failed: Vec<String> = (0..150)
            .filter_map(|_| query(&path).err().map(|e| e.to_string()))
            .collect();
        stop.store(true, Ordering::Relaxed);
        for f in floods {
            f.join().unwrap();
        }
        assert!(failed.is_empty(), "{} of 150: {failed:?}", failed.len());
    }

    #[test]
    fn garbage_gets_an_error_that_names_the_commands() {
        let (_dir, path, _server) = serving("junk");
        match ask(&path, "\u{1}\u{2}GET / HTTP/1.1", None, CLIENT_WAIT) {
            Err(ControlError::Refused { reason, .. }) => {
                assert!(reason.contains("the commands are `stats`"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_silent_instance_is_named_with_how_long_it_was_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mute.sock");
        let _listener = UnixListener::bind(&path).unwrap();
        let err = ask(&path, "stats", None, Duration::from_secs(1)).unwrap_err();
        let said = err.to_string();
        assert!(
            said.starts_with(&format!(
                "xdpool at {} did not answer within 1 s",
                path.display()
            )),
            "{said}"
        );
        assert!(!said.contains("os error"), "{said}");
    }

    /// `serve_client` for one client that sends `line`, its phase starting at
    /// `start`: the snapshots taken, the phase after, the reply. With `slow`, the
    /// line's last bytes come 100 ms later, and the client is closed to make room
    /// meanwhile.
    fn serve_one(line: &[u8], start: u8, slow: bool) -> (usize, u8, String) {
        use std::sync::atomic::AtomicUsize;
        let (server_end, client_end) = UnixStream::pair().unwrap();
        let taken = Arc::new(AtomicUsize::new(0));
        let t = taken.clone();
        let snapshot: SnapshotFn = Arc::new(move || {
            t.fetch_add(1, Ordering::Relaxed);
            serde_json::json!({"total": {"rx_packets": 9}})
        });
        let served = (
            Handlers {
                snapshot,
                rules: None,
                handler_control: None,
            },
            Access::default(),
        );
        let (first, last) = line.split_at(if slow { line.len() - 3 } else { line.len() });
        (&client_end).write_all(first).unwrap();
        let phase = AtomicU8::new(start);
        let peer = peer_of(&server_end);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                serve_client(
                    server_end,
                    peer,
                    &phase,
                    &served,
                    &CaptureSlot::default(),
                    &Arc::new(AtomicBool::new(false)),
                    &RefusalLog::new("test"),
                )
            });
            if slow {
                std::thread::sleep(Duration::from_millis(100));
                assert!(leave_reading(&phase, CLOSED));
                (&client_end).write_all(last).unwrap();
            }
        });
        let mut reply = String::new();
        client_end
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let _ = (&client_end).read_to_string(&mut reply);
        (
            taken.load(Ordering::Relaxed),
            phase.load(Ordering::Relaxed),
            reply,
        )
    }

    #[test]
    fn a_client_closed_to_make_room_is_not_answered() {
        let (taken, phase, reply) = serve_one(b"stats\n", CLOSED, false);
        assert_eq!((taken, phase, reply.as_str()), (0, CLOSED, ""));
        // Closed while the line was coming in: read whole, but not carried out.
        let (taken, phase, reply) = serve_one(b"stats\n", READING, true);
        assert_eq!((taken, phase, reply.as_str()), (0, CLOSED, ""));
        let (taken, phase, reply) = serve_one(b"stats\n", READING, false);
        assert_eq!((taken, phase), (1, ANSWERING));
        assert!(reply.contains("\"rx_packets\":9"), "{reply}");
    }

    #[test]
    fn a_whole_line_is_seen_while_still_in_the_socket() {
        let soon = || Instant::now() + Duration::from_millis(200);
        let (server_end, client_end) = UnixStream::pair().unwrap();
        (&client_end).write_all(b"sta").unwrap();
        assert!(!line_waiting(&server_end, soon()));
        (&client_end).write_all(b"ts\n").unwrap();
        assert!(line_waiting(&server_end, soon()));
        // Nothing was taken: the accept loop still sees bytes waiting, and the line
        // reads whole.
        assert!(has_bytes_waiting(&server_end));
        let (line, _) = read_line(&server_end, MAX_COMMAND_LINE, soon())
            .ok()
            .expect("the line");
        assert_eq!(line, "stats");
        // A silent client: no line by the deadline.
        let t = Instant::now();
        assert!(!line_waiting(&server_end, soon()));
        assert!(
            t.elapsed() >= Duration::from_millis(150),
            "{:?}",
            t.elapsed()
        );
    }

    /// An instance that closes its first `closes` clients unanswered, then answers
    /// `stats` once.
    fn closing_first(closes: usize) -> (tempfile::TempDir, PathBuf, std::thread::JoinHandle<()>) {
        let (dir, path) = private_socket("unanswered", "c.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            for _ in 0..closes {
                drop(listener.accept().unwrap());
            }
            let (s, _) = listener.accept().unwrap();
            let mut line = [0u8; 6];
            (&s).read_exact(&mut line).unwrap();
            assert_eq!(&line, b"stats\n");
            (&s).write_all(br#"{"total": {"rx_packets": 9}}"#).unwrap();
        });
        (dir, path, server)
    }

    #[test]
    fn stats_closed_unanswered_is_asked_again_and_nothing_else_is() {
        let (_dir, path, server) = closing_first(3);
        assert_eq!(query(&path).unwrap()["total"]["rx_packets"], 9);
        server.join().unwrap();
        // A command that changes something is not sent twice: the error says what
        // happened and what to do.
        let (_dir, path) = private_socket("unanswered", "c.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let counted = std::thread::spawn(move || {
            drop(listener.accept().unwrap());
            listener.set_nonblocking(true).unwrap();
            let mut more = 0;
            let until = Instant::now() + Duration::from_millis(300);
            while Instant::now() < until {
                if listener.accept().is_ok() {
                    more += 1;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            more
        });
        let err = apply_rules(&path, "rules: []").unwrap_err();
        assert_eq!(counted.join().unwrap(), 0, "`rules apply` was sent again");
        assert!(matches!(err, ControlError::Unanswered { .. }), "{err:?}");
        let said = err.to_string();
        assert!(
            said.contains("closed the connection without an answer") && said.contains("try again"),
            "{said}"
        );
    }
}
