//! AF_XDP sockets on a veth pair inside project network namespaces (needs root).
//!
//! Each test makes its own pair of namespaces (`xskt-<pid>-<n>-a/b`) joined by a
//! two-queue veth, addresses from 198.18.0.0/15, enters namespace `a` on the test
//! thread with setns, and deletes everything on drop, panics included.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use xdpool::internal::xsk::{
    SocketConfig, TxBudget, Umem, UmemConfig, Wakeup, XdpDesc, XdpStatistics, XskError, XskSocket,
};

#[macro_use]
mod common;

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Two namespaces joined by veth; the test thread is in namespace `a` while it lives.
struct Lab {
    ns_a: String,
    ns_b: String,
    dev_a: String,
    ifindex: u32,
    home: File,
}

impl Lab {
    fn up() -> Lab {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let ns_a = format!("xskt-{pid}-{n}-a");
        let ns_b = format!("xskt-{pid}-{n}-b");
        // Interface names: at most 15 bytes.
        let dev_a = format!("xa{}", pid * 16 + n);
        let dev_b = format!("xb{}", pid * 16 + n);
        let home = File::open("/proc/thread-self/ns/net").expect("open own netns");
        ip(&["netns", "add", &ns_a]);
        // From here on a panic deletes what exists.
        let mut lab = Lab {
            ns_a,
            ns_b,
            dev_a,
            ifindex: 0,
            home,
        };
        ip(&["netns", "add", &lab.ns_b]);
        ip(&[
            "-n",
            &lab.ns_a,
            "link",
            "add",
            &lab.dev_a,
            "numtxqueues",
            "2",
            "numrxqueues",
            "2",
            "type",
            "veth",
            "peer",
            "name",
            &dev_b,
            "netns",
            &lab.ns_b,
            "numtxqueues",
            "2",
            "numrxqueues",
            "2",
        ]);
        ip(&[
            "-n",
            &lab.ns_a,
            "addr",
            "add",
            "198.18.0.1/30",
            "dev",
            &lab.dev_a,
        ]);
        ip(&[
            "-n",
            &lab.ns_b,
            "addr",
            "add",
            "198.18.0.2/30",
            "dev",
            &dev_b,
        ]);
        ip(&["-n", &lab.ns_a, "link", "set", &lab.dev_a, "up"]);
        ip(&["-n", &lab.ns_b, "link", "set", &dev_b, "up"]);
        let target = File::open(format!("/run/netns/{}", lab.ns_a)).expect("open netns");
        // SAFETY: setns on this thread only, with a namespace fd we opened.
        let rc = unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        let name = CString::new(lab.dev_a.clone()).unwrap();
        // SAFETY: valid NUL-terminated name.
        lab.ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(lab.ifindex, 0, "veth {} not visible after setns", lab.dev_a);
        lab
    }

    fn delete_veth(&self) {
        ip(&["-n", &self.ns_a, "link", "del", &self.dev_a]);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // SAFETY: back to the namespace this thread started in.
        unsafe { libc::setns(self.home.as_raw_fd(), libc::CLONE_NEWNET) };
        for ns in [&self.ns_a, &self.ns_b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// Anonymous page-aligned memory for a UMEM, unmapped on drop.
struct Area {
    ptr: *mut u8,
    len: usize,
}

impl Area {
    fn new(len: usize) -> Area {
        // SAFETY: fresh anonymous mapping, checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        assert_ne!(
            p,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        Area { ptr: p.cast(), len }
    }

    fn umem(&self, config: UmemConfig) -> Umem {
        // SAFETY: the area is page-aligned, mapped for `len` bytes, and outlives the
        // Umem and its sockets (every test declares the Area first, so drops it last).
        unsafe { Umem::register(self.ptr, self.len, config) }.expect("register UMEM")
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: our mapping, no longer registered (Umem and sockets dropped before).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

const CHUNK: u32 = 2048;
const CHUNKS: usize = 512;

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn copy_mode_bind_with_shared_umem_fill_tx_and_statistics() {
    require_root!();
    let lab = Lab::up();
    let area = Area::new(CHUNKS * CHUNK as usize);
    let umem = area.umem(UmemConfig {
        chunk_size: CHUNK,
        fill_size: 256,
        comp_size: 256,
        ..Default::default()
    });

    let config = SocketConfig {
        rx_size: 512,
        tx_size: 512,
        zero_copy: false,
        need_wakeup: true,
        multi_buffer: false,
        tx_budget: 0,
    };
    // veth refuses zero-copy; the error is typed and the same UMEM stays usable
    // (with the same ring sizes: the rings were created on the first try).
    let zc = XskSocket::bind(
        &umem,
        lab.ifindex,
        0,
        &SocketConfig {
            zero_copy: true,
            ..config
        },
    );
    match zc {
        Err(e @ XskError::ZeroCopyUnsupported { .. }) => assert!(e.to_string().contains(
            "zero-copy is not supported by this driver; use copy mode (zero_copy = false)"
        )),
        other => panic!("expected ZeroCopyUnsupported, got {other:?}"),
    }
    assert!(!umem.first_socket_bound());
    let resized = XskSocket::bind(
        &umem,
        lab.ifindex,
        0,
        &SocketConfig {
            rx_size: 1024,
            ..config
        },
    );
    assert!(
        matches!(resized, Err(XskError::RingSizeChanged { rx: 512, tx: 512 })),
        "{resized:?}"
    );

    let mut q0 =
        XskSocket::bind(&umem, lab.ifindex, 0, &config).expect("bind queue 0 in copy mode");
    assert!(umem.first_socket_bound());
    assert!(!q0.is_shared());
    assert!(!q0.kernel_zero_copy().unwrap());

    // A mode other than the first socket's is refused before the kernel sees it.
    let zc_shared = XskSocket::bind(
        &umem,
        lab.ifindex,
        1,
        &SocketConfig {
            zero_copy: true,
            ..config
        },
    );
    assert!(
        matches!(
            zc_shared,
            Err(XskError::SharedModeMismatch {
                primary_zero_copy: false,
                ..
            })
        ),
        "{zc_shared:?}"
    );

    let mut q1 =
        XskSocket::bind(&umem, lab.ifindex, 1, &config).expect("bind queue 1 with shared UMEM");
    assert!(q1.is_shared());
    assert_ne!(q0.fd().as_raw_fd(), q1.fd().as_raw_fd());

    // Each socket has its own fill ring: fill both completely from disjoint chunks.
    let q0_addrs: Vec<u64> = (0..256u64).map(|i| i * u64::from(CHUNK)).collect();
    // q1 gets chunks 256..511; chunk 511 stays with us for TX.
    let q1_addrs: Vec<u64> = (256..511u64).map(|i| i * u64::from(CHUNK)).collect();
    assert_eq!(q0.fill().produce(&q0_addrs), 256);
    assert_eq!(
        q0.fill().produce(&q0_addrs[..1]),
        0,
        "fill ring of 256 is full"
    );
    assert_eq!(q1.fill().produce(&q1_addrs), 255);
    // Copy mode never asks for RX wake-ups; TX starts out asking for one.
    assert!(!q0.fill().needs_wakeup());
    assert!(q0.tx().needs_wakeup());

    assert_eq!(
        q0.statistics().unwrap(),
        XdpStatistics::default(),
        "no traffic yet"
    );
    assert_eq!(q1.statistics().unwrap(), XdpStatistics::default());
    assert!(q0.so_error().unwrap().is_none());
    assert_eq!(q0.wakeup_rx().unwrap(), Wakeup::Done);
    q0.set_busy_poll(64).expect("busy-poll as root");

    // One frame out of q1 from chunk 511. Broadcast, ethertype 0x88b5 (local
    // experimental): it stays on this veth.
    let tx_chunk = 511u64 * u64::from(CHUNK);
    let mut frame = [0u8; 60];
    frame[..6].copy_from_slice(&[0xff; 6]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&[0x88, 0xb5]);
    // SAFETY: tx_chunk + 60 lies inside the area, in a chunk on no fill ring, so the
    // kernel does not write it.
    unsafe {
        std::ptr::copy_nonoverlapping(frame.as_ptr(), area.ptr.add(tx_chunk as usize), frame.len())
    };
    assert_eq!(
        q1.tx().produce(&[XdpDesc {
            addr: tx_chunk,
            len: 60,
            options: 0
        }]),
        1
    );
    let mut done = [0u64; 4];
    let mut completed = 0;
    let deadline = Instant::now() + Duration::from_secs(2);
    while completed == 0 && Instant::now() < deadline {
        if q1.tx().needs_wakeup() {
            match q1.wakeup_tx().unwrap() {
                Wakeup::Done | Wakeup::Retry { .. } => {}
                gone => panic!("device gone during TX: {gone:?}"),
            }
        }
        completed = q1.completion().consume(&mut done);
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(completed, 1, "the TX frame completes");
    assert_eq!(done[0], tx_chunk);
    assert_eq!(q1.statistics().unwrap().tx_invalid_descs, 0);
    assert_eq!(q0.ring_errors().total() + q1.ring_errors().total(), 0);

    drop((q0, q1, umem));
    drop(area);
    drop(lab);
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn bind_errors_are_typed() {
    require_root!();
    let lab = Lab::up();
    let area = Area::new(CHUNKS * CHUNK as usize);
    let umem = area.umem(UmemConfig::default());
    let config = SocketConfig::default();

    match XskSocket::bind(&umem, lab.ifindex, 7, &config) {
        Err(XskError::NoSuchQueue {
            queue: 7,
            queues: 2,
            ..
        }) => {}
        other => panic!("expected NoSuchQueue(7 of 2), got {other:?}"),
    }
    match XskSocket::bind(&umem, 999_999, 0, &config) {
        Err(XskError::NoDevice { ifindex: 999_999 }) => {}
        other => panic!("expected NoDevice, got {other:?}"),
    }
    let bad_ring = XskSocket::bind(
        &umem,
        lab.ifindex,
        0,
        &SocketConfig {
            rx_size: 1000,
            ..config
        },
    );
    assert!(
        matches!(
            bad_ring,
            Err(XskError::InvalidRingSize {
                ring: "rx",
                size: 1000,
                ..
            })
        ),
        "{bad_ring:?}"
    );

    // After those failures the UMEM's first socket still binds.
    let q0 =
        XskSocket::bind(&umem, lab.ifindex, 0, &config).expect("bind queue 0 after failed binds");

    // The same queue again, through this UMEM and through another: Busy.
    let again = XskSocket::bind(&umem, lab.ifindex, 0, &config);
    assert!(
        matches!(again, Err(XskError::Busy { queue: 0, .. })),
        "{again:?}"
    );
    let area2 = Area::new(64 * CHUNK as usize);
    let umem2 = area2.umem(UmemConfig {
        fill_size: 64,
        comp_size: 64,
        ..Default::default()
    });
    let other = XskSocket::bind(&umem2, lab.ifindex, 0, &config);
    match other {
        Err(e @ XskError::Busy { .. }) => {
            assert!(e.is_retryable() && e.to_string().contains("retry with backoff"))
        }
        other => panic!("expected Busy from the kernel, got {other:?}"),
    }

    drop((q0, umem, umem2));
    drop((area, area2));
    drop(lab);
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn wakeups_report_device_gone_after_veth_delete() {
    require_root!();
    let lab = Lab::up();
    let area = Area::new(CHUNKS * CHUNK as usize);
    let umem = area.umem(UmemConfig::default());
    let q0 =
        XskSocket::bind(&umem, lab.ifindex, 0, &SocketConfig::default()).expect("bind queue 0");
    assert_eq!(q0.wakeup_tx().unwrap(), Wakeup::Done);

    lab.delete_veth();
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        outcomes.push(q0.wakeup_tx().unwrap());
    }
    assert!(
        outcomes.iter().all(|w| matches!(w, Wakeup::DeviceGone { errno } if *errno == libc::ENETDOWN || *errno == libc::ENXIO)),
        "{outcomes:?}"
    );
    assert!(matches!(q0.wakeup_rx().unwrap(), Wakeup::DeviceGone { .. }));
    // The kernel's unregister notifier left ENETDOWN as the socket error; reading
    // SO_ERROR clears it.
    let err = q0
        .so_error()
        .unwrap()
        .expect("SO_ERROR set after the device went away");
    assert_eq!(err.raw_os_error(), Some(libc::ENETDOWN));
    assert!(
        q0.so_error().unwrap().is_none(),
        "SO_ERROR is cleared by reading it"
    );
    drop((q0, umem));
    drop(area);
    drop(lab);
}

/// Queues `n` frames on `q`'s TX ring from chunks `first..first + n`, wakes the
/// kernel once, and returns how many completed in the 2 s after (waiting 300 ms past
/// the last completion seen: a second batch would need a second wake-up).
fn sent_by_one_wakeup(q: &mut XskSocket, area: &Area, first: u64, n: u64) -> usize {
    let mut frame = [0u8; 60];
    frame[..6].copy_from_slice(&[0xff; 6]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    frame[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental: stays on the veth
    let descs: Vec<XdpDesc> = (first..first + n)
        .map(|c| {
            let addr = c * u64::from(CHUNK);
            // SAFETY: each chunk lies inside the area and is on no fill ring, so the
            // kernel does not write it.
            unsafe {
                std::ptr::copy_nonoverlapping(frame.as_ptr(), area.ptr.add(addr as usize), 60)
            };
            XdpDesc {
                addr,
                len: 60,
                options: 0,
            }
        })
        .collect();
    assert_eq!(q.tx().produce(&descs), n as usize);
    match q.wakeup_tx().unwrap() {
        Wakeup::Done | Wakeup::Retry { .. } => {}
        gone => panic!("device gone during TX: {gone:?}"),
    }
    let mut done = vec![0u64; 256];
    let (mut completed, mut last) = (0, Instant::now());
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && last.elapsed() < Duration::from_millis(300) {
        let got = q.completion().consume(&mut done);
        if got > 0 {
            completed += got;
            last = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    completed
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn one_copy_mode_tx_wakeup_sends_up_to_the_tx_budget() {
    require_root!();
    let lab = Lab::up();
    let area = Area::new(CHUNKS * CHUNK as usize);
    let umem = area.umem(UmemConfig {
        chunk_size: CHUNK,
        fill_size: 256,
        comp_size: 256,
        ..Default::default()
    });
    let config = SocketConfig {
        rx_size: 256,
        tx_size: 256,
        zero_copy: false,
        need_wakeup: true,
        multi_buffer: false,
        tx_budget: 128,
    };
    // Above the TX ring's 256: refused (EACCES), and the socket keeps the kernel's 32.
    let mut q0 = XskSocket::bind(
        &umem,
        lab.ifindex,
        0,
        &SocketConfig {
            tx_budget: 512,
            ..config
        },
    )
    .expect("bind queue 0");
    assert_eq!(q0.tx_budget(), TxBudget::Refused(libc::EACCES));
    let mut q1 = XskSocket::bind(&umem, lab.ifindex, 1, &config).expect("bind queue 1");
    assert_eq!(q1.tx_budget(), TxBudget::Set(128));

    assert_eq!(
        sent_by_one_wakeup(&mut q0, &area, 0, 100),
        32,
        "the kernel's default budget: 32 frames per wake-up"
    );
    assert_eq!(
        sent_by_one_wakeup(&mut q1, &area, 100, 100),
        100,
        "a budget of 128 sends all 100 queued frames in one wake-up"
    );
    assert_eq!(q0.statistics().unwrap().tx_invalid_descs, 0);
    assert_eq!(q1.statistics().unwrap().tx_invalid_descs, 0);
    drop((q0, q1, umem));
    drop(area);
    drop(lab);
}
