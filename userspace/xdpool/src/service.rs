//! Running under systemd (`Type=notify`, deploy/xdpool.service): `READY=1` once every
//! port is attached with its link's carrier up (`run.rs::Readiness`), `STOPPING=1` when
//! shutdown starts, `STATUS=` lines a person reads in `systemctl status`, and the
//! watchdog fed from the control loop, so a control loop that hangs gets the service
//! restarted. Without `NOTIFY_SOCKET` (not started by systemd) every call does nothing.

use std::time::{Duration, Instant};

/// The service manager's side of a run. Owned by the control thread.
pub struct Service {
    enabled: bool,
    /// Ping interval: half the watchdog timeout systemd gave (`WATCHDOG_USEC`).
    watchdog_every: Option<Duration>,
    last_ping: Instant,
    warned: bool,
}

impl Service {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from the environment.
    pub fn from_env() -> Service {
        let enabled = std::env::var_os("NOTIFY_SOCKET").is_some();
        let watchdog_every = if enabled {
            sd_notify::watchdog_enabled().map(|t| t / 2)
        } else {
            None
        };
        if let Some(every) = watchdog_every {
            tracing::info!(
                ping_every_ms = every.as_millis() as u64,
                "systemd watchdog enabled"
            );
        }
        Service {
            enabled,
            watchdog_every,
            last_ping: Instant::now(),
            warned: false,
        }
    }

    /// Whether a service manager listens.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Every port attached and its workers running.
    pub fn ready(&mut self, status: &str) {
        self.send(&[
            sd_notify::NotifyState::Ready,
            sd_notify::NotifyState::Status(status),
        ]);
        self.last_ping = Instant::now();
    }

    /// A one-line state for `systemctl status` (a device lost, re-attached).
    pub fn status(&mut self, status: &str) {
        self.send(&[sd_notify::NotifyState::Status(status)]);
    }

    /// Called on every pass of the control loop; pings the watchdog when due.
    pub fn tick(&mut self) {
        if let Some(every) = self.watchdog_every {
            if self.last_ping.elapsed() >= every {
                self.send(&[sd_notify::NotifyState::Watchdog]);
                self.last_ping = Instant::now();
            }
        }
    }

    /// Shutdown started (signal, --duration, or a fatal device loss).
    pub fn stopping(&mut self, status: &str) {
        self.send(&[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::Status(status),
        ]);
    }

    fn send(&mut self, state: &[sd_notify::NotifyState]) {
        if !self.enabled {
            return;
        }
        if let Err(e) = sd_notify::notify(state) {
            if !self.warned {
                self.warned = true;
                tracing::warn!(error = %e, "could not notify the service manager (NOTIFY_SOCKET); systemd will not see this instance as ready");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    // One test touches the process environment, so the whole protocol is checked in it.
    #[test]
    fn ready_watchdog_and_stopping_reach_the_notify_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        // SAFETY: no other test in this binary reads or writes these variables.
        unsafe {
            std::env::set_var("NOTIFY_SOCKET", &path);
            std::env::set_var("WATCHDOG_USEC", "400000");
            std::env::remove_var("WATCHDOG_PID");
        }
        let mut svc = Service::from_env();
        assert!(svc.enabled());
        let mut buf = [0u8; 512];
        let mut next = || {
            let n = sock.recv(&mut buf).expect("a notify datagram");
            String::from_utf8_lossy(&buf[..n]).into_owned()
        };
        svc.ready("attached: xdpb0 queues [0]");
        assert_eq!(next(), "READY=1\nSTATUS=attached: xdpb0 queues [0]\n");
        svc.tick(); // not due yet: nothing sent
        std::thread::sleep(Duration::from_millis(250));
        svc.tick();
        assert_eq!(next(), "WATCHDOG=1\n");
        svc.stopping("signal received");
        assert_eq!(next(), "STOPPING=1\nSTATUS=signal received\n");
        sock.set_nonblocking(true).unwrap();
        assert!(
            sock.recv(&mut buf).is_err(),
            "the watchdog must not be pinged before it is due"
        );
        // SAFETY: as above.
        unsafe {
            std::env::remove_var("NOTIFY_SOCKET");
            std::env::remove_var("WATCHDOG_USEC");
        }
    }
}
