//! CPU helpers for the benchmark: the cycle counter and thread affinity. The only
//! `unsafe` outside region.rs, kept to these few calls.

#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64; it only reads the time stamp counter.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn tsc() -> u64 {
    // No portable cycle counter: count nanoseconds (tsc_ghz then reads 1.0).
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos() as u64
}

pub(crate) fn pin_to_cpu(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: cpu is below CPU_SETSIZE, so the bit is inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the set pointer and size are valid.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// This thread's CPU mask, to restore after pinning.
pub(crate) fn affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; zeroed is its empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 = this thread; the pointer and size describe `set`.
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) }
            == 0;
    ok.then_some(set)
}

/// Restore a mask from `affinity`.
pub(crate) fn set_affinity(set: &libc::cpu_set_t) -> bool {
    // SAFETY: pid 0 = this thread; the pointer and size describe `set`.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_advances_and_affinity_round_trips() {
        let a = tsc();
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert!(tsc() > a);
        let mask = affinity().expect("sched_getaffinity");
        assert!(pin_to_cpu(0));
        assert!(!pin_to_cpu(1 << 20), "a CPU beyond CPU_SETSIZE is refused");
        assert!(set_affinity(&mask));
    }
}
