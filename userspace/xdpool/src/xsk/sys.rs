//! Thin, unsafe-contained wrappers over the AF_XDP system calls (libc).

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

/// An `mmap`'d region, unmapped on drop.
pub(crate) struct MmapRegion {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory not tied to a thread.
unsafe impl Send for MmapRegion {}
// SAFETY: `MmapRegion` hands out only a raw pointer; access rules are the user's.
unsafe impl Sync for MmapRegion {}

impl MmapRegion {
    /// Maps `len` bytes of the socket's ring at page offset `pgoff` (MAP_SHARED).
    pub(crate) fn map_ring(fd: BorrowedFd<'_>, len: usize, pgoff: u64) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping of the socket's ring; no existing memory is
        // affected, and the result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Self { ptr, len })
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for MmapRegion {
    fn drop(&mut self) {
        // SAFETY: we own this mapping; the rings built on it are dropped with it.
        let rc = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        if rc != 0 {
            tracing::warn!(error = %io::Error::last_os_error(), "munmap of an AF_XDP ring failed");
        }
    }
}

/// Creates an AF_XDP socket.
pub(crate) fn xdp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// setsockopt with a plain-data value.
pub(crate) fn setsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: i32,
    name: i32,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to size_of::<T>() readable bytes.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// getsockopt into a zero-initialised plain-data value; returns it and the length the
/// kernel wrote.
pub(crate) fn getsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: i32,
    name: i32,
) -> io::Result<(T, usize)> {
    let mut value = MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` has room for `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            value.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zero-initialised, and only used with integer-only C structs (all-zero valid).
    Ok((unsafe { value.assume_init() }, len as usize))
}

/// bind(2) with a `sockaddr_xdp`.
pub(crate) fn bind_xdp(fd: BorrowedFd<'_>, addr: &libc::sockaddr_xdp) -> io::Result<()> {
    // SAFETY: `addr` is a complete sockaddr_xdp of the stated size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Zero-length recvfrom(MSG_DONTWAIT): the RX wake-up.
pub(crate) fn wake_recv(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: zero-length receive into no buffer, no address.
    let rc = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Zero-length sendto(MSG_DONTWAIT): the TX wake-up.
pub(crate) fn wake_send(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: zero-length send from no buffer, no address.
    let rc = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Current RLIMIT_MEMLOCK soft limit in bytes (None when unlimited or unknown).
pub(crate) fn memlock_limit() -> Option<u64> {
    let mut r = MaybeUninit::<libc::rlimit>::zeroed();
    // SAFETY: getrlimit writes one rlimit into `r`.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, r.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: initialised by the successful call (and zeroed before).
    let cur = unsafe { r.assume_init() }.rlim_cur;
    (cur != libc::RLIM_INFINITY).then_some(cur)
}

/// System page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Number of queues of interface `ifindex` in the caller's network namespace, as
/// AF_XDP sees it: max(rx, tx) + combined channels (ETHTOOL_GCHANNELS, read by
/// [`crate::netns::channels`]).
pub(crate) fn queue_count(ifindex: u32) -> Option<u32> {
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `name` has IF_NAMESIZE bytes as if_indextoname requires.
    if unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) }.is_null() {
        return None;
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into `name`.
    let dev = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_str()
        .ok()?;
    let ch = crate::netns::channels(dev).ok()?;
    Some(ch.rx_count.max(ch.tx_count) + ch.combined_count)
}
