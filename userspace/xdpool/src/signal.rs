//! SIGINT and SIGTERM set a flag that long loops check (`xdpool run`, the sweep, the
//! demo), so that teardown always runs. SIGHUP sets another: `xdpool run` reads its
//! config file's rules again (`reload`).
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs SIGINT/SIGTERM handlers that set the returned flag (and nothing else).
/// Blocking calls are restarted, so a measurement in progress finishes (it is bounded).
pub fn install_stop_flag() -> Result<&'static AtomicBool, nix::Error> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(on_stop_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to a static atomic, which is async-signal-safe.
        unsafe { sigaction(sig, &action) }?;
    }
    Ok(&STOP)
}

static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_reload_signal(_: libc::c_int) {
    RELOAD.store(true, Ordering::SeqCst);
}

/// Installs a SIGHUP handler that sets the returned flag (and nothing else).
pub fn install_reload_flag() -> Result<&'static AtomicBool, nix::Error> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(on_reload_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to a static atomic, which is async-signal-safe.
    unsafe { sigaction(Signal::SIGHUP, &action) }?;
    Ok(&RELOAD)
}
