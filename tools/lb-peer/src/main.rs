//! xdpool's `lb` example written on xsk-rs 0.7, the way xsk-rs's own examples
//! (dev1_to_dev2.rs, shared_umem.rs) write theirs: one UMEM shared by a socket on the
//! `in` device and one on the `out` device (libxdp loads its default XDP program on
//! each), frames received on `in` rewritten in place and sent from `out`, completions
//! back to `in`'s fill queue. One thread, spinning.
//!
//!   lb-peer IN_DEV OUT_DEV BACKENDS [SECONDS] [FRAMES] [RING] [BATCH]
//!
//! Ends after SECONDS (default 30) or on SIGINT/SIGTERM, and prints one JSON line:
//! what it received, forwarded, dropped, and where its UMEM's frames are.
use std::{
    fs,
    sync::atomic::{AtomicBool, Ordering},
    sync::Arc,
    time::{Duration, Instant},
};
use xsk_rs::{
    config::{BindFlags, FrameSize, QueueSize, SocketConfig, UmemConfig},
    Socket, Umem,
};

mod lb;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or(default.into());
    let (in_dev, out_dev, backends) = (arg(1, "xdpf0"), arg(2, "xdpf1"), arg(3, ""));
    let seconds: f64 = arg(4, "30").parse().unwrap();
    let frame_count: u32 = arg(5, "8192").parse().unwrap();
    let ring: u32 = arg(6, "2048").parse().unwrap();
    let batch: usize = arg(7, "64").parse().unwrap();
    let backends = lb::parse_backends(&backends);
    let src_mac =
        lb::parse_mac(&fs::read_to_string(format!("/sys/class/net/{out_dev}/address")).unwrap());

    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)).unwrap();

    let umem_config = UmemConfig::builder()
        .frame_size(FrameSize::new(2048).unwrap())
        .fill_queue_size(QueueSize::new(ring).unwrap())
        .comp_queue_size(QueueSize::new(ring).unwrap())
        .build()
        .unwrap();
    let socket_config = SocketConfig::builder()
        .rx_queue_size(QueueSize::new(ring).unwrap())
        .tx_queue_size(QueueSize::new(ring).unwrap())
        .bind_flags(BindFlags::XDP_USE_NEED_WAKEUP)
        .build();

    let (umem, descs) = Umem::new(umem_config, frame_count.try_into().unwrap(), false)
        .expect("failed to build umem");
    let (_in_tx, mut in_rx, in_fq_and_cq) = unsafe {
        Socket::new(socket_config, &umem, &in_dev.parse().unwrap(), 0)
            .expect("failed to build in socket")
    };
    let (mut in_fq, _in_cq) = in_fq_and_cq.expect("missing in fill and comp queue");
    let (mut out_tx, _out_rx, out_fq_and_cq) = unsafe {
        Socket::new(socket_config, &umem, &out_dev.parse().unwrap(), 0)
            .expect("failed to build out socket")
    };
    let (_out_fq, mut out_cq) = out_fq_and_cq.expect("missing out fill and comp queue");

    // Every frame is in one of: `free`, in's fill/RX rings (filled - received), out's
    // TX/completion rings (sent - completed).
    let mut free = descs.clone();
    let mut rx_descs = descs[..batch].to_vec();
    let mut tx_descs = Vec::with_capacity(batch);
    let mut comp_descs = descs[..batch].to_vec();
    let (mut filled, mut received, mut sent, mut completed, mut dropped) =
        (0u64, 0u64, 0u64, 0u64, 0u64);

    let n = ring as usize;
    let frames_filled = unsafe { in_fq.produce(&free[free.len() - n..]) };
    assert_eq!(frames_filled, n);
    free.truncate(free.len() - n);
    filled += n as u64;

    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        // Handle rx
        let frames_rcvd = unsafe { in_rx.consume(&mut rx_descs[..]) };
        if frames_rcvd == 0 && in_fq.needs_wakeup() {
            let fd = in_rx.fd_mut();
            in_fq.wakeup(fd, 0).unwrap();
        }
        received += frames_rcvd as u64;
        for desc in rx_descs.iter_mut().take(frames_rcvd) {
            let mut data = unsafe { umem.data_mut(desc) };
            if lb::handle(data.contents_mut(), &backends, &src_mac) {
                tx_descs.push(*desc);
            } else {
                dropped += 1;
                free.push(*desc);
            }
        }

        // Send from out; loop until frames added to the tx ring.
        let mut done = 0;
        while done < tx_descs.len() && !stop.load(Ordering::Relaxed) {
            done += unsafe { out_tx.produce_and_wakeup(&tx_descs[done..]).unwrap() };
            if done < tx_descs.len() {
                let frames_done = unsafe { out_cq.consume(&mut comp_descs[..]) };
                free.extend_from_slice(&comp_descs[..frames_done]);
                completed += frames_done as u64;
            }
        }
        sent += done as u64;
        free.extend_from_slice(&tx_descs[done..]); // only when stopping
        dropped += (tx_descs.len() - done) as u64;
        tx_descs.clear();

        // Handle tx completions
        let frames_done = unsafe { out_cq.consume(&mut comp_descs[..]) };
        if frames_done == 0 && out_tx.needs_wakeup() {
            out_tx.wakeup().unwrap();
        }
        free.extend_from_slice(&comp_descs[..frames_done]);
        completed += frames_done as u64;

        // Give frames back to in's fill queue
        let n = free.len().min(batch);
        let frames_filled = unsafe { in_fq.produce(&free[free.len() - n..]) };
        free.truncate(free.len() - frames_filled);
        filled += frames_filled as u64;
    }

    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"seconds\":{secs:.3},\"received\":{received},\"forwarded\":{sent},\"completed\":{completed},\
         \"dropped\":{dropped},\"umem_frames\":{frame_count},\"free\":{},\"in_fill_or_rx\":{},\
         \"out_tx_or_completion\":{},\"rx_dropped\":{},\"rx_fill_ring_empty\":{}}}",
        free.len(),
        filled - received,
        sent - completed,
        in_rx.fd().xdp_statistics().map_or(0, |s| s.rx_dropped()),
        in_rx.fd().xdp_statistics().map_or(0, |s| s.rx_fill_ring_empty_descs()),
    );
}
