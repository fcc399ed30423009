//! The one place atomics and locks come from: std normally, loom under `cfg(loom)`,
//! so the lock-free pieces are model-checked with the code that ships.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

/// Back-off inside a bounded spin; under loom it yields so the model can progress.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// A waiting loop's sleep; under loom a yield, so the model runs the threads that
/// are being waited for.
pub(crate) fn pause(d: std::time::Duration) {
    #[cfg(loom)]
    {
        let _ = d;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    std::thread::sleep(d);
}

/// Lock a mutex, ignoring poisoning: the protected data (free lists, registries) is
/// valid after any panic because every update is a single push/pop.
pub(crate) fn lock<T>(m: &Mutex<T>) -> crate::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

#[cfg(loom)]
pub(crate) use loom::sync::MutexGuard;
#[cfg(not(loom))]
pub(crate) use std::sync::MutexGuard;
