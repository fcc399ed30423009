//! The one place atomics and locks come from: std normally, loom under the `loom` feature,
//! so the lock-free pieces are model-checked with the code that ships.

#[cfg(feature = "loom")]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(feature = "loom")]
pub(crate) use loom::sync::Mutex;

#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::Mutex;

/// Back-off inside a bounded spin; under loom it yields so the model can progress.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(feature = "loom")]
    loom::thread::yield_now();
    #[cfg(not(feature = "loom"))]
    std::hint::spin_loop();
}

/// A waiting loop's sleep; under loom a yield, so the model runs the threads that
/// are being waited for.
pub(crate) fn pause(d: std::time::Duration) {
    #[cfg(feature = "loom")]
    {
        let _ = d;
        loom::thread::yield_now();
    }
    #[cfg(not(feature = "loom"))]
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

#[cfg(feature = "loom")]
pub(crate) use loom::sync::MutexGuard;
#[cfg(not(feature = "loom"))]
pub(crate) use std::sync::MutexGuard;
