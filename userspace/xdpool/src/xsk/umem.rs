//! UMEM registration of caller-provided memory.
//!
//! A UMEM is registered on an AF_XDP socket: that socket becomes the UMEM's first
//! socket (the one `XskSocket::bind` binds first). Every later socket shares the UMEM
//! (`XDP_SHARED_UMEM`) and gets its own fill and completion ring, so one UMEM serves
//! all queues of all interfaces.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

use super::desc::{UmemLayout, XDP_PACKET_HEADROOM};
use super::error::XskError;
use super::ring::{CompletionRing, FillRing, MappedRing, RxRing, TxRing};
use super::sys;

/// Largest ring size accepted (entries).
pub const MAX_RING_SIZE: u32 = 1 << 20;

/// Parameters of a UMEM registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UmemConfig {
    /// Chunk (frame) size: 2048 or 4096.
    pub chunk_size: u32,
    /// Headroom the application keeps in front of each frame, in addition to the
    /// kernel's 256 bytes; must be below `chunk_size - 256`.
    pub headroom: u32,
    /// Fill ring size (power of two), used for every socket on this UMEM.
    pub fill_size: u32,
    /// Completion ring size (power of two), used for every socket on this UMEM.
    pub comp_size: u32,
    /// Register in unaligned-chunk mode (`XDP_UMEM_UNALIGNED_CHUNK_FLAG`).
    pub unaligned: bool,
}

impl Default for UmemConfig {
    fn default() -> Self {
        Self {
            chunk_size: 2048,
            headroom: 0,
            fill_size: 4096,
            comp_size: 2048,
            unaligned: false,
        }
    }
}

/// Checks a ring size: a power of two, 1..=MAX_RING_SIZE.
pub fn validate_ring_size(ring: &'static str, size: u32) -> Result<(), XskError> {
    if size.is_power_of_two() && size <= MAX_RING_SIZE {
        Ok(())
    } else {
        Err(XskError::InvalidRingSize {
            ring,
            size,
            max: MAX_RING_SIZE,
        })
    }
}

impl UmemConfig {
    /// Checks the configuration against an area of `len` bytes at `addr`.
    pub fn validate(&self, addr: usize, len: usize) -> Result<(), XskError> {
        let bad = |reason: String| Err(XskError::InvalidUmem { reason });
        if self.chunk_size != 2048 && self.chunk_size != 4096 {
            return bad(format!(
                "chunk size {} is not supported: use 2048 or 4096",
                self.chunk_size
            ));
        }
        if self.headroom >= self.chunk_size - XDP_PACKET_HEADROOM {
            return bad(format!(
                "headroom {} leaves no room for data in a {}-byte chunk: use a headroom below {}",
                self.headroom,
                self.chunk_size,
                self.chunk_size - XDP_PACKET_HEADROOM
            ));
        }
        let page = sys::page_size();
        if addr == 0 || !addr.is_multiple_of(page) {
            return bad(format!(
                "area address {addr:#x} is not page-aligned: allocate it with mmap"
            ));
        }
        if len < self.chunk_size as usize {
            return bad(format!(
                "area of {len} bytes holds no chunk: give at least {} bytes",
                self.chunk_size
            ));
        }
        if !self.unaligned && !len.is_multiple_of(self.chunk_size as usize) {
            return bad(format!(
                "area length {len} is not a multiple of the chunk size {}: round it down",
                self.chunk_size
            ));
        }
        if (len / self.chunk_size as usize) > u32::MAX as usize {
            return bad(format!(
                "area of {len} bytes has more than 2^32 chunks: use a smaller area"
            ));
        }
        validate_ring_size("fill", self.fill_size)?;
        validate_ring_size("completion", self.comp_size)?;
        Ok(())
    }
}

/// A registered UMEM. Cloning is cheap (shared handle). The kernel keeps the UMEM
/// (and pins its pages) until the last socket on it is closed.
#[derive(Clone)]
pub struct Umem {
    pub(crate) shared: Arc<UmemShared>,
}

/// State of the UMEM's first socket (the one the UMEM was registered on).
// Cold state, one per UMEM: size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Primary {
    /// Not bound yet: its rings wait here. `rx_tx` is set once a bind tried them.
    Unbound {
        fill: FillRing,
        comp: CompletionRing,
        rx_tx: Option<(RxRing, TxRing)>,
    },
    /// Bound: later sockets share the UMEM with it and inherit its mode.
    /// `netns`: the namespace the first socket was made in (an ifindex names a
    /// device only within one; `None` when /proc could not say).
    Bound {
        ifindex: u32,
        queue: u32,
        netns: Option<crate::netns::NetnsId>,
        zero_copy: bool,
        need_wakeup: bool,
    },
    /// Transient, while a bind runs.
    Binding,
}

pub(crate) struct UmemShared {
    // Field order is drop order: rings are unmapped before the socket is closed.
    primary: Mutex<Primary>,
    pub(crate) fd: OwnedFd,
    area: NonNull<u8>,
    len: usize,
    pub(crate) layout: UmemLayout,
    pub(crate) config: UmemConfig,
}

// SAFETY: `area` is only handed out as a raw pointer; all other fields are Send+Sync.
unsafe impl Send for UmemShared {}
// SAFETY: as above; the mutable state sits behind a Mutex.
unsafe impl Sync for UmemShared {}

impl UmemShared {
    pub(crate) fn primary(&self) -> MutexGuard<'_, Primary> {
        self.primary.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Reads XDP_MMAP_OFFSETS; refuses kernels without the flags word (< 5.4).
pub(crate) fn mmap_offsets(fd: BorrowedFd<'_>) -> Result<libc::xdp_mmap_offsets, XskError> {
    let (off, len) =
        sys::getsockopt::<libc::xdp_mmap_offsets>(fd, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS)
            .map_err(|e| XskError::io("getsockopt(XDP_MMAP_OFFSETS)", e))?;
    if len != std::mem::size_of::<libc::xdp_mmap_offsets>() {
        return Err(XskError::KernelTooOld {
            what: "XDP_MMAP_OFFSETS has no ring flags (need_wakeup)",
        });
    }
    Ok(off)
}

/// Sets one ring's size on the socket.
pub(crate) fn set_ring_size(
    fd: BorrowedFd<'_>,
    opt: i32,
    name: &'static str,
    size: u32,
) -> Result<(), XskError> {
    sys::setsockopt(fd, libc::SOL_XDP, opt, &size).map_err(|e| XskError::io(ring_opt_name(name), e))
}

fn ring_opt_name(name: &'static str) -> &'static str {
    match name {
        "fill" => "setsockopt(XDP_UMEM_FILL_RING)",
        "completion" => "setsockopt(XDP_UMEM_COMPLETION_RING)",
        "rx" => "setsockopt(XDP_RX_RING)",
        _ => "setsockopt(XDP_TX_RING)",
    }
}

/// Maps one ring of `fd`.
pub(crate) fn map_ring(
    fd: BorrowedFd<'_>,
    off: &libc::xdp_ring_offset,
    pgoff: u64,
    size: u32,
    entry: usize,
    what: &'static str,
) -> Result<MappedRing, XskError> {
    let len = off.desc as usize + size as usize * entry;
    let region = sys::MmapRegion::map_ring(fd, len, pgoff).map_err(|e| XskError::io(what, e))?;
    Ok(MappedRing {
        region,
        producer: off.producer as usize,
        consumer: off.consumer as usize,
        flags: off.flags as usize,
        desc: off.desc as usize,
        size,
    })
}

/// Sets and maps a fill and a completion ring on `fd`.
pub(crate) fn fill_and_completion(
    fd: BorrowedFd<'_>,
    config: &UmemConfig,
    layout: UmemLayout,
) -> Result<(FillRing, CompletionRing), XskError> {
    set_ring_size(fd, libc::XDP_UMEM_FILL_RING, "fill", config.fill_size)?;
    set_ring_size(
        fd,
        libc::XDP_UMEM_COMPLETION_RING,
        "completion",
        config.comp_size,
    )?;
    let off = mmap_offsets(fd)?;
    let fr = map_ring(
        fd,
        &off.fr,
        libc::XDP_UMEM_PGOFF_FILL_RING,
        config.fill_size,
        8,
        "mmap(fill ring)",
    )?;
    let cr = map_ring(
        fd,
        &off.cr,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        config.comp_size,
        8,
        "mmap(completion ring)",
    )?;
    // SAFETY: offsets from XDP_MMAP_OFFSETS of this socket, sizes just set on it,
    // u64 entries for fill/completion.
    Ok(unsafe { (fr.into_fill(), cr.into_completion(layout)) })
}

impl Umem {
    /// Registers `len` bytes at `area` as a UMEM (XDP_UMEM_REG) and creates the fill
    /// and completion rings of its first socket.
    ///
    /// # Safety
    /// `area` must be page-aligned memory of `len` bytes, mapped read-write, that the
    /// caller keeps mapped and does not reuse for anything else while this `Umem` or
    /// any socket bound on it lives: the kernel writes received frames into it at any
    /// time. The caller (the recycler) owns the memory and decides which chunk goes
    /// where.
    pub unsafe fn register(
        area: *mut u8,
        len: usize,
        config: UmemConfig,
    ) -> Result<Umem, XskError> {
        config.validate(area as usize, len)?;
        let area = NonNull::new(area).ok_or_else(|| XskError::InvalidUmem {
            reason: "area pointer is NULL: allocate the area with mmap".into(),
        })?;
        let fd = sys::xdp_socket().map_err(|source| XskError::NoAfXdp { source })?;
        let reg = libc::xdp_umem_reg {
            addr: area.as_ptr() as u64,
            len: len as u64,
            chunk_size: config.chunk_size,
            headroom: config.headroom,
            flags: if config.unaligned {
                libc::XDP_UMEM_UNALIGNED_CHUNK_FLAG
            } else {
                0
            },
            tx_metadata_len: 0,
        };
        sys::setsockopt(fd.as_fd(), libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
            .map_err(|e| umem_reg_error(e, len))?;
        let layout = UmemLayout::new(
            len as u64,
            config.chunk_size,
            config.headroom,
            config.unaligned,
        );
        let (fill, comp) = fill_and_completion(fd.as_fd(), &config, layout)?;
        tracing::debug!(len, chunk = config.chunk_size, "registered UMEM");
        Ok(Umem {
            shared: Arc::new(UmemShared {
                primary: Mutex::new(Primary::Unbound {
                    fill,
                    comp,
                    rx_tx: None,
                }),
                fd,
                area,
                len,
                layout,
                config,
            }),
        })
    }

    /// Geometry used to validate descriptors.
    pub fn layout(&self) -> UmemLayout {
        self.shared.layout
    }

    /// The registration parameters.
    pub fn config(&self) -> UmemConfig {
        self.shared.config
    }

    /// Start of the registered area. Packet data of a validated descriptor lies at
    /// `area() + layout().offset_of(desc.addr)`.
    pub fn area(&self) -> *mut u8 {
        self.shared.area.as_ptr()
    }

    /// Length of the registered area in bytes.
    pub fn len(&self) -> usize {
        self.shared.len
    }

    /// Whether the area is empty (never true for a registered UMEM).
    pub fn is_empty(&self) -> bool {
        self.shared.len == 0
    }

    /// Whether the UMEM's first socket is bound (later binds share the UMEM).
    pub fn first_socket_bound(&self) -> bool {
        matches!(*self.shared.primary(), Primary::Bound { .. })
    }
}

fn umem_reg_error(e: io::Error, len: usize) -> XskError {
    match e.raw_os_error() {
        Some(libc::ENOMEM) | Some(libc::ENOBUFS) | Some(libc::EPERM) => XskError::MemlockRefused {
            len,
            limit: match sys::memlock_limit() {
                Some(l) => format!("{l} bytes"),
                None => "unlimited".into(),
            },
            source: e,
        },
        Some(libc::EINVAL) => XskError::InvalidUmem {
            reason: format!(
                "the kernel refused the registration ({e}): check that the area is page-aligned \
                 anonymous memory and the chunk size is 2048 or 4096"
            ),
        },
        _ => XskError::io("setsockopt(XDP_UMEM_REG)", e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> UmemConfig {
        UmemConfig::default()
    }

    #[test]
    fn ring_sizes_must_be_powers_of_two() {
        assert!(validate_ring_size("rx", 2048).is_ok());
        assert!(validate_ring_size("rx", 1).is_ok());
        for bad in [0, 3, 1000, MAX_RING_SIZE * 2] {
            let e = validate_ring_size("rx", bad).unwrap_err();
            assert!(matches!(e, XskError::InvalidRingSize { size, .. } if size == bad));
            assert!(e.to_string().contains("power of two"), "{e}");
        }
    }

    #[test]
    fn umem_config_rejections_say_what_is_valid() {
        let page = sys::page_size();
        let ok = cfg().validate(page, 64 * 2048);
        assert!(ok.is_ok(), "{ok:?}");
        let e = UmemConfig {
            chunk_size: 1024,
            ..cfg()
        }
        .validate(page, 1 << 20)
        .unwrap_err();
        assert!(e.to_string().contains("use 2048 or 4096"), "{e}");
        let e = UmemConfig {
            headroom: 2048 - 256,
            ..cfg()
        }
        .validate(page, 1 << 20)
        .unwrap_err();
        assert!(e.to_string().contains("below 1792"), "{e}");
        let e = cfg().validate(page + 8, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("page-aligned"), "{e}");
        let e = cfg().validate(page, 2048 * 3 + 1).unwrap_err();
        assert!(e.to_string().contains("multiple of the chunk size"), "{e}");
        let e = UmemConfig {
            fill_size: 100,
            ..cfg()
        }
        .validate(page, 1 << 20)
        .unwrap_err();
        assert!(matches!(
            e,
            XskError::InvalidRingSize {
                ring: "fill",
                size: 100,
                ..
            }
        ));
        // Unaligned mode accepts a length that is not a multiple of the chunk size.
        assert!(UmemConfig {
            unaligned: true,
            ..cfg()
        }
        .validate(page, 2048 * 3 + 1)
        .is_ok());
    }
}
