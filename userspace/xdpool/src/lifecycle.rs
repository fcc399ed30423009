//! The devices under a run, port by port: bring a port up (bind its sockets on the
//! one shared UMEM, hand them to the workers, attach its XDP program), lose it
//! (detach, let the workers drain and close, reclaim the kernel's frames), and come
//! back on it. `device.rs` says *when* (link events, the pure `decide`); this says
//! *how*.
//!
//! One UMEM for every port: the first socket bound registers it (the UMEM's first
//! socket, whose descriptor lives as long as the UMEM); every later socket shares it
//! (`XDP_SHARED_UMEM`) with its own fill and completion ring. Losing a port whose
//! sockets all have their own descriptor touches that port only: once they are
//! closed the kernel no longer reads their rings, and their frames are reclaimed
//! while the other ports keep forwarding. Losing the port that holds the UMEM's
//! first socket takes every port down (that descriptor stays bound to the lost
//! device until the UMEM is closed, and no socket can share from it any more); the
//! other ports then come back on a new registration at once.
//!
//! Ports may live in different network namespaces (a router between two
//! containers): each port's steps (the UMEM registration and its sockets, the
//! attach, ethtool, rtnetlink) run inside its namespace ([`PortNetns::enter`]);
//! the kernel lets a socket made in one namespace share a UMEM registered by a
//! socket made in another (Linux 6.18: `tools/netns-shared-umem/`).

use crate::config::ZeroCopy;
use crate::device::{DeviceStats, LossKind};
use crate::netns::{NetnsError, PortNetns};
use crate::plan::Plan;
use crate::steer::{Steering, XdpAttachMode};
use crate::worker::PortShared;
use crate::xsk::{SocketConfig, Umem, UmemConfig, XskError, XskSocket};
use pool::Region;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Why bringing a port up failed.
#[derive(Debug)]
pub enum UpError {
    /// Binding a socket.
    Xsk(XskError),
    /// Loading rules or attaching the program.
    Steer(crate::steer::SteerError),
    /// The workers did not take their sockets in time.
    WorkersSlow,
    /// Entering the port's namespace.
    Netns(NetnsError),
}

impl std::fmt::Display for UpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpError::Xsk(e) => write!(f, "{e}"),
            UpError::Steer(e) => write!(f, "{e}"),
            UpError::WorkersSlow => {
                f.write_str("workers did not take their sockets within 1 s; check CPU load")
            }
            UpError::Netns(e) => write!(f, "{e}"),
        }
    }
}

/// RX queues `dev` has now (`ethtool -l`); `None` when the driver does not say.
fn device_rx_queues(dev: &str) -> Option<u32> {
    crate::netns::rx_queues(dev).ok().map(|q| q.now)
}

/// The device's queues (0..device_queues) that `served` leaves out.
pub fn unserved_queues(device_queues: Option<u32>, served: &[u32]) -> Vec<u32> {
    (0..device_queues.unwrap_or(0))
        .filter(|q| !served.contains(q))
        .collect()
}

/// What a port waits for before it is ready, from what is known of it: attached to
/// a device (`attached`), our program on it (`program`: `None` unknown), the link's
/// carrier (`carrier`, IFF_RUNNING: `None` unknown). `None`: ready.
pub fn waits_for(
    attached: Option<u32>,
    program: Option<bool>,
    carrier: Option<bool>,
) -> Option<&'static str> {
    if attached.is_none() {
        return Some("its device (away)");
    }
    if program != Some(true) {
        return Some("its XDP program to be attached");
    }
    if carrier != Some(true) {
        return Some("carrier (link down: check the cable or the peer, `ip link`)");
    }
    None
}

/// One port's device state.
pub struct PortLife {
    /// Port name.
    pub name: String,
    /// Interface name.
    pub iface: String,
    /// Queues planned (for `queues = "all"`, every queue the device can have).
    queues: Vec<u32>,
    sockets: Vec<usize>,
    /// `queues = "all"`: bind the planned queues the device has at each bring-up.
    follow_queues: bool,
    /// Queues bound at the last bring-up (their sockets, by position in `sockets`).
    pub served: Vec<u32>,
    /// RX queues the device had at the last bring-up (`None`: it does not say).
    pub device_queues: Option<u32>,
    sc: SocketConfig,
    /// Its XDP program and rule maps.
    pub steering: Arc<Mutex<Steering>>,
    mode: XdpAttachMode,
    program_id: Option<u32>,
    /// Interface we run on (`None` while the device is away).
    pub attached: Option<u32>,
    /// Last interface we ran on (for the final "program left behind" check).
    pub last_ifindex: u32,
    /// While away: the device we lost and the kind the loss was counted as.
    pub lost: Option<(u32, LossKind)>,
    /// Its namespace: an index into [`Lifecycle::netns`].
    pub ns: usize,
}

/// Every port's lifecycle, and the UMEM they share.
pub struct Lifecycle {
    region: Arc<Region>,
    ucfg: UmemConfig,
    /// What the config asks of zero-copy, for the one UMEM.
    zero_copy: ZeroCopy,
    /// Zero-copy refused once under "auto": copy mode from then on.
    copy_only: bool,
    /// Every port.
    pub ports: Vec<PortLife>,
    sockets: Vec<Arc<PortShared>>,
    /// The kernel registration of the region (none while every port is away).
    umem: Option<Umem>,
    /// Port whose socket registered the UMEM.
    first: Option<usize>,
    /// Losses, re-attaches and their times (all ports).
    pub device: Arc<DeviceStats>,
    /// MACs `forward` writes, read again before a port comes up (when a rule needs them).
    macs: Option<Arc<crate::neigh::Neighbours>>,
    /// The namespaces the ports live in (`PortLife::ns` points here), each the
    /// incarnation followed now (`run.rs::follow_netns` reopens a replaced one).
    pub netns: Vec<PortNetns>,
}

impl Lifecycle {
    /// The lifecycle of `plan`'s ports; one loaded program per port.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        plan: &Plan,
        region: Arc<Region>,
        sockets: Vec<Arc<PortShared>>,
        steerings: Vec<Steering>,
        xdp_mode: Option<XdpAttachMode>,
        device: Arc<DeviceStats>,
        netns: Vec<PortNetns>,
        of_port: &[usize],
    ) -> Lifecycle {
        let ports = plan
            .ports
            .iter()
            .zip(steerings)
            .zip(of_port)
            .map(|((p, st), &ns)| PortLife {
                ns,
                name: p.def.name.clone(),
                iface: p.def.interface.clone(),
                queues: p.def.queues.clone(),
                sockets: p.sockets.clone(),
                follow_queues: p.def.follow_queues,
                served: Vec::new(),
                device_queues: None,
                lost: None,
                sc: SocketConfig {
                    rx_size: plan.umem.rx,
                    tx_size: if p.transmits { plan.umem.tx } else { 0 },
                    zero_copy: false,
                    need_wakeup: true,
                    multi_buffer: plan.umem.multi_buffer,
                    tx_budget: plan.umem.tx_budget,
                },
                program_id: st.program_id().ok(),
                steering: Arc::new(Mutex::new(st)),
                mode: p.xdp_mode(xdp_mode),
                attached: None,
                last_ifindex: 0,
            })
            .collect();
        let ucfg = UmemConfig {
            chunk_size: plan.umem.chunk_size,
            headroom: 0,
            fill_size: plan.umem.fill,
            comp_size: plan.umem.completion,
            unaligned: false,
        };
        Lifecycle {
            region,
            ucfg,
            zero_copy: plan.umem.zero_copy,
            copy_only: false,
            ports,
            sockets,
            umem: None,
            first: None,
            device,
            macs: None,
            netns,
        }
    }

    /// Keeps `macs` current: read again before each port comes up, so that no frame
    /// leaves a returning device with its old MAC or an old neighbour's.
    pub fn follow_macs(&mut self, macs: Arc<crate::neigh::Neighbours>) {
        self.macs = Some(macs);
    }

    fn refresh_macs(&self, p: usize, ifindex: u32) {
        let Some(macs) = &self.macs else { return };
        let ifx: Vec<Option<u32>> = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, x)| if i == p { Some(ifindex) } else { x.attached })
            .collect();
        match self.read_macs(&ifx) {
            Ok(book) => macs.update(book),
            Err(e) => tracing::warn!(error = %e, "cannot read device MACs and neighbours"),
        }
    }

    /// Device MACs and neighbours of the ports at `ifx`, each read in its port's
    /// namespace.
    pub fn read_macs(&self, ifx: &[Option<u32>]) -> std::io::Result<crate::neigh::MacBook> {
        let of_port: Vec<usize> = self.ports.iter().map(|p| p.ns).collect();
        crate::neigh::read_book_in(&self.netns, &of_port, ifx)
    }

    /// Port `p`'s namespace.
    pub fn netns_of(&self, p: usize) -> &PortNetns {
        &self.netns[self.ports[p].ns]
    }

    /// Runs `f` in port `p`'s namespace (ifindexes, device names, ethtool, rtnetlink
    /// and new sockets all mean that namespace's).
    pub fn in_netns<T>(&self, p: usize, f: impl FnOnce() -> T) -> Result<T, NetnsError> {
        self.netns_of(p).run(f)
    }

    /// A port's steering (locked).
    pub fn steering(&self, p: usize) -> MutexGuard<'_, Steering> {
        self.ports[p]
            .steering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Whether any port is attached.
    pub fn any_attached(&self) -> bool {
        self.ports.iter().any(|p| p.attached.is_some())
    }

    /// Brings every port up at start. Under zero_copy = "auto", a refusal by any
    /// port's driver puts the whole UMEM in copy mode and starts over, once.
    pub fn start(&mut self, ifindexes: &[u32]) -> Result<(), (usize, UpError)> {
        for attempt in 0..2 {
            let mut failed = None;
            for (p, &ifx) in ifindexes.iter().enumerate() {
                if let Err(e) = self.bring_up(p, ifx) {
                    failed = Some((p, e));
                    break;
                }
            }
            match failed {
                None => return Ok(()),
                Some((p, UpError::Xsk(XskError::ZeroCopyUnsupported { .. })))
                    if attempt == 0 && self.zero_copy == ZeroCopy::Auto && !self.copy_only =>
                {
                    tracing::info!(port = %self.ports[p].name, "zero_copy = \"auto\": the driver of `{}` refuses zero-copy; every port falls back to copy mode (one UMEM, one mode)", self.ports[p].iface);
                    self.copy_only = true;
                    self.bring_down_all();
                }
                Some(f) => return Err(f),
            }
        }
        Ok(())
    }

    /// Registers the UMEM if no port holds it; binds port `p`'s sockets on it, hands
    /// them to the workers, waits for full fill rings, then attaches the program.
    pub fn bring_up(&mut self, p: usize, ifindex: u32) -> Result<(), UpError> {
        self.refresh_macs(p, ifindex);
        let device_queues = self
            .in_netns(p, || device_rx_queues(&self.ports[p].iface))
            .map_err(UpError::Netns)?;
        let bind: Vec<(usize, u32)> = {
            let port = &self.ports[p];
            port.sockets
                .iter()
                .copied()
                .zip(port.queues.iter().copied())
                .filter(|&(_, q)| !port.follow_queues || device_queues.is_none_or(|n| q < n))
                .collect()
        };
        let t0 = Instant::now();
        let mut sockets = Vec::new();
        {
            // The socket (and a UMEM registered now) is made in the port's namespace:
            // the kernel looks `ifindex` up in the socket's namespace.
            let _in = self.netns_of(p).enter().map_err(UpError::Netns)?;
            for &(_, q) in &bind {
                sockets.push(self.bind(p, ifindex, q)?);
            }
        }
        let t_bound = t0.elapsed();
        {
            let mut st = self.steering(p);
            for s in &sockets {
                st.register_xsk(s.queue(), s.fd().as_raw_fd())
                    .map_err(UpError::Steer)?;
            }
        }
        let port = &mut self.ports[p];
        port.attached = Some(ifindex);
        port.last_ifindex = ifindex;
        port.served = bind.iter().map(|&(_, q)| q).collect();
        port.lost = None;
        port.device_queues = device_queues;
        for (&(s, _), sock) in bind.iter().zip(sockets) {
            self.sockets[s]
                .device_gone
                .store(false, std::sync::atomic::Ordering::SeqCst);
            drop(self.sockets[s].offer_socket(sock));
        }
        // Rings full before frames may flow.
        let deadline = Instant::now() + Duration::from_secs(1);
        while !bind
            .iter()
            .all(|&(s, _)| self.sockets[s].has_socket() && !self.sockets[s].socket_pending())
        {
            if Instant::now() >= deadline {
                return Err(UpError::WorkersSlow);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let t_filled = t0.elapsed();
        let early = self.attach_program(p, ifindex)?;
        tracing::debug!(port = %self.ports[p].name, ifindex, early, bound_ms = t_bound.as_secs_f64() * 1e3, filled_ms = t_filled.as_secs_f64() * 1e3, attached_ms = t0.elapsed().as_secs_f64() * 1e3, "bring-up steps");
        self.note_queues(p);
        Ok(())
    }

    /// Port `p`'s program on `ifindex`; `true` when it was already there (attached
    /// early, while the device was down). A program left on another device (one
    /// that went again while down) is detached first.
    fn attach_program(&mut self, p: usize, ifindex: u32) -> Result<bool, UpError> {
        let mode = self.ports[p].mode;
        let ours = self.program_present(p, ifindex);
        let mut st = self.steering(p);
        match st.attached_to() {
            Some(at) if at == ifindex && ours == Some(true) => return Ok(true),
            Some(_) => {
                let _ = st.detach();
            }
            None => {}
        }
        // In the port's namespace: the ifindex is looked up there.
        self.in_netns(p, || st.attach(ifindex, mode))
            .map_err(UpError::Netns)?
            .map_err(UpError::Steer)?;
        Ok(false)
    }

    /// A new device of port `p`'s name appeared while the port is away and not up
    /// yet: attach the program now. Drivers such as igb close and reopen a running
    /// device to attach one, which resets its link a second time (under QEMU's igb
    /// about 1.5 s for the close and open, then link-up again); on a device that is
    /// down it is only set. The sockets bind when the device comes up
    /// ([`Lifecycle::try_reattach`]), which keeps this program. A failure is not a
    /// loss: the program is attached then, the usual way.
    pub fn attach_early(&mut self, p: usize, ifindex: u32) {
        let started = Instant::now();
        match self.attach_program(p, ifindex) {
            Ok(true) => {}
            Ok(false) => {
                self.device.early_attached();
                tracing::info!(port = %self.ports[p].name, interface = %self.ports[p].iface, ifindex, ms = started.elapsed().as_secs_f64() * 1e3, "the device is back but down: XDP program attached now (bringing it up then resets its link once); the sockets bind when it is up");
            }
            Err(e) => {
                tracing::info!(port = %self.ports[p].name, ifindex, error = %e, "could not attach the XDP program while the device is down; it is attached when the device is up")
            }
        }
    }

    /// Says (WARN, and in the device report) which RX queues of port `p`'s device have
    /// no socket: frames RSS puts there are passed to the kernel by the XDP program
    /// (its `no_socket` counter), never seen by xdpool.
    fn note_queues(&mut self, p: usize) {
        let port = &self.ports[p];
        let unserved = unserved_queues(port.device_queues, &port.served);
        if !unserved.is_empty() {
            let n = port.device_queues.unwrap_or(0);
            let planned = port.queues.len();
            let fix = if port.follow_queues {
                format!("the device has {n} RX queues, more than the {planned} it could have when xdpool started; restart xdpool to serve them all")
            } else {
                format!("serve them (queues = \"all\", or list them in queues), or give the device only the queues served (ethtool -L {} ...)", port.iface)
            };
            tracing::warn!(
                port = %port.name,
                interface = %port.iface,
                device_rx_queues = n,
                served = ?port.served,
                unserved = ?unserved,
                "RX queues {unserved:?} of {} have no xdpool socket: frames the device puts there go to the kernel (the XDP program's no_socket counter); {fix}",
                port.iface
            );
        }
        self.device.set_queues(
            p,
            &port.name,
            &port.iface,
            port.device_queues,
            &port.served,
            &unserved,
        );
    }

    /// Whether port `p` should be brought up again because its device's queue count
    /// changed under it: a `queues = "all"` port that could serve other queues now, or
    /// any port whose unserved queues changed (the warning is said again).
    pub fn queues_changed(&self, p: usize) -> Option<u32> {
        let port = &self.ports[p];
        port.attached?;
        let now = self.in_netns(p, || device_rx_queues(&port.iface)).ok()??;
        (Some(now) != port.device_queues).then_some(now)
    }

    /// Port `p`'s device has `now` RX queues instead of those it had at bring-up:
    /// a `queues = "all"` port is taken down and brought up on the queues it has now
    /// (its frames reclaimed and accounted as for any loss); a listed port just warns
    /// again.
    pub fn follow_queue_count(&mut self, p: usize, now: u32) -> bool {
        let port = &self.ports[p];
        let Some(ifindex) = port.attached else {
            return false;
        };
        tracing::info!(port = %port.name, interface = %port.iface, was = ?port.device_queues, now, follow = port.follow_queues, "the device's RX queue count changed");
        if !port.follow_queues {
            self.ports[p].device_queues = Some(now);
            self.note_queues(p);
            return true;
        }
        let started = Instant::now();
        let down = self.bring_down(p);
        let mut ok = true;
        for q in down {
            let ifx = if q == p {
                ifindex
            } else {
                self.ports[q].last_ifindex
            };
            ok &= self.try_reattach(q, ifx, started);
        }
        ok
    }

    /// One socket of port `p` on the shared UMEM (registering it first if needed).
    fn bind(&mut self, p: usize, ifindex: u32, queue: u32) -> Result<XskSocket, UpError> {
        if self.umem.is_none() {
            // SAFETY: the region is page-aligned mmap'd memory of region.len() bytes,
            // an Arc held here and by every worker; every Umem made here is dropped
            // (bring_down, or the end of run) before the region, so the memory stays
            // mapped while the kernel may use it; the recycler alone decides which
            // chunk the kernel may write.
            let umem =
                unsafe { Umem::register(self.region.as_ptr(), self.region.len(), self.ucfg) }
                    .map_err(UpError::Xsk)?;
            self.umem = Some(umem);
            self.first = Some(p);
            let want_zc = match self.zero_copy {
                ZeroCopy::On => true,
                ZeroCopy::Auto => !self.copy_only,
                ZeroCopy::Off => false,
            };
            let sc = SocketConfig {
                zero_copy: want_zc,
                ..self.ports[p].sc
            };
            return match self.bind_retry(ifindex, queue, &sc) {
                Err(UpError::Xsk(e @ XskError::ZeroCopyUnsupported { .. }))
                    if self.zero_copy == ZeroCopy::Auto =>
                {
                    tracing::info!(port = %self.ports[p].name, error = %e, "zero_copy = \"auto\": zero-copy refused; copy mode for every port");
                    self.copy_only = true;
                    self.bind_retry(
                        ifindex,
                        queue,
                        &SocketConfig {
                            zero_copy: false,
                            ..self.ports[p].sc
                        },
                    )
                }
                other => other,
            };
        }
        let zc = self.umem.as_ref().is_some_and(|_| self.first_zero_copy());
        self.bind_retry(
            ifindex,
            queue,
            &SocketConfig {
                zero_copy: zc,
                ..self.ports[p].sc
            },
        )
    }

    /// The mode of the UMEM's first socket (every later socket gets it).
    fn first_zero_copy(&self) -> bool {
        match self.zero_copy {
            ZeroCopy::On => true,
            ZeroCopy::Auto => !self.copy_only,
            ZeroCopy::Off => false,
        }
    }

    /// Binds with retries: EBUSY comes from a socket the kernel is still tearing down
    /// (socket release is asynchronous; a quick rebind after a device loss meets it).
    fn bind_retry(
        &self,
        ifindex: u32,
        queue: u32,
        sc: &SocketConfig,
    ) -> Result<XskSocket, UpError> {
        let umem = self.umem.as_ref().expect("registered");
        let mut delay = Duration::from_millis(5);
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut busy = 0;
        loop {
            match XskSocket::bind(umem, ifindex, queue, sc) {
                Err(e) if e.is_retryable() && Instant::now() < deadline => {
                    busy += 1;
                    tracing::debug!(queue, error = %e, ?delay, "bind busy, retrying");
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_millis(200));
                }
                Ok(s) => {
                    tx_budget_refused(&s, sc.tx_budget);
                    if busy > 0 {
                        self.device.busy_retries(busy);
                        tracing::info!(
                            queue,
                            busy,
                            "bind met EBUSY (old socket still closing); retried"
                        );
                    }
                    return Ok(s);
                }
                Err(e) => return Err(UpError::Xsk(e)),
            }
        }
    }

    /// Takes port `p` down in the order that loses nothing: detach its program, take
    /// its sockets out of the map, let its workers drain RX, reap and close. Then
    /// the kernel's frames are reclaimed: at once when the port's sockets had their
    /// own descriptors; after closing the UMEM (and every other port) when the port
    /// holds the UMEM's first socket. Returns the ports taken down.
    pub fn bring_down(&mut self, p: usize) -> Vec<usize> {
        self.release(p);
        if self.first != Some(p) {
            self.reclaim(&[p]);
            return vec![p];
        }
        let mut down = vec![p];
        for q in 0..self.ports.len() {
            if q != p && self.ports[q].attached.is_some() {
                tracing::warn!(port = %self.ports[q].name, "the UMEM's first socket was on the lost port: this port goes down too and comes back on a new UMEM");
                self.release(q);
                down.push(q);
            }
        }
        // Only with every socket and the UMEM closed can the kernel no longer touch
        // the frames it held.
        self.umem = None;
        self.first = None;
        self.reclaim(&down);
        down
    }

    /// Ports `ports` down (their namespace was replaced); every port when one of
    /// them holds the UMEM's first socket. Returns the ports taken down.
    pub fn bring_down_ports(&mut self, ports: &[usize]) -> Vec<usize> {
        if self.first.is_some_and(|f| ports.contains(&f)) {
            if self.ports.len() > ports.len() {
                tracing::warn!("the UMEM's first socket was on a port of the replaced namespace: every port goes down and comes back on a new UMEM");
            }
            self.bring_down_all();
            return (0..self.ports.len()).collect();
        }
        for &p in ports {
            // (attached early: the program only, on a device not up yet)
            let early = self.steering(p).attached_to().is_some();
            if early
                || self.ports[p].attached.is_some()
                || self.ports[p]
                    .sockets
                    .iter()
                    .any(|&s| self.sockets[s].has_socket())
            {
                self.release(p);
            }
        }
        self.reclaim(ports);
        ports.to_vec()
    }

    /// Every port down (start-up retry, the end of the run).
    pub fn bring_down_all(&mut self) {
        for p in 0..self.ports.len() {
            // (attached early: the program only, on a device not up yet)
            let early = self.steering(p).attached_to().is_some();
            if early
                || self.ports[p].attached.is_some()
                || self.ports[p]
                    .sockets
                    .iter()
                    .any(|&s| self.sockets[s].has_socket())
            {
                self.release(p);
            }
        }
        self.umem = None;
        self.first = None;
        let all: Vec<usize> = (0..self.ports.len()).collect();
        self.reclaim(&all);
    }

    /// Detach, unregister, and have port `p`'s workers drain and close its sockets.
    fn release(&mut self, p: usize) {
        {
            let mut st = self.steering(p);
            if st.attached_to().is_some() {
                if let Err(e) = st.detach() {
                    tracing::warn!(error = %e, "detach failed");
                }
            }
            for &q in &self.ports[p].queues {
                let _ = st.unregister_xsk(q);
            }
        }
        for &s in &self.ports[p].sockets {
            self.sockets[s].request_release();
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.ports[p]
            .sockets
            .iter()
            .any(|&s| self.sockets[s].has_socket())
        {
            if Instant::now() >= deadline {
                tracing::error!(port = %self.ports[p].name, "a worker did not give its socket up within 2 s; its frames stay counted where they are");
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        for &s in &self.ports[p].sockets {
            self.sockets[s]
                .device_gone
                .store(false, std::sync::atomic::Ordering::SeqCst);
        }
        self.ports[p].attached = None;
    }

    /// The workers of `ports` take back what their closed sockets left in the
    /// kernel's rings; then the accounting is checked.
    fn reclaim(&mut self, ports: &[usize]) {
        if self.first_zero_copy() {
            // A zero-copy driver releases its buffer pool from deferred work.
            std::thread::sleep(Duration::from_millis(100));
        }
        let socks: Vec<usize> = ports
            .iter()
            .flat_map(|&p| self.ports[p].sockets.clone())
            .collect();
        for &s in &socks {
            if self.sockets[s].reclaim_pending() {
                self.sockets[s].request_reclaim();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while socks.iter().any(|&s| self.sockets[s].reclaim_pending()) {
            if Instant::now() >= deadline {
                tracing::error!("a worker did not reclaim its kernel frames within 2 s; they stay counted in the fill/TX rings");
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        // Each socket's worker audited its pool at the close and after the reclaim
        // (its own frames only: exact while other ports run).
        let audit_failed = socks
            .iter()
            .filter(|&&s| {
                self.sockets[s]
                    .teardown_audit_failed
                    .swap(false, std::sync::atomic::Ordering::SeqCst)
            })
            .count();
        if self.any_attached() {
            // Other ports run on: the region's owner map and rings move while we look,
            // so the region-wide check waits for a teardown at rest (the end of the run).
            tracing::info!(ports = ?ports, audit_failed, "teardown done; the other ports keep running");
            self.device.teardown_checked(audit_failed == 0);
            return;
        }
        let acc = self.region.accounting();
        match acc.check() {
            Ok(()) if audit_failed > 0 => {
                tracing::error!(
                    sockets = audit_failed,
                    "frame audit failed at socket teardown (see the errors above)"
                );
                self.device.teardown_checked(false);
            }
            Ok(()) => {
                tracing::info!(
                    free = acc.free,
                    cached = acc.cached,
                    ring = acc.ring,
                    fill = acc.fill,
                    tx = acc.tx,
                    application = acc.application,
                    total = acc.total,
                    "teardown done; frame accounting exact"
                );
                self.device.teardown_checked(true);
            }
            Err(e) => {
                tracing::error!("frame accounting failed after teardown: {e}");
                self.device.teardown_checked(false);
            }
        }
    }

    /// Port `p`'s device went away: tear it (and, if it held the UMEM, every port)
    /// down. Returns the ports taken down.
    pub fn lose(&mut self, p: usize, kind: LossKind) -> Vec<usize> {
        tracing::warn!(port = %self.ports[p].name, interface = %self.ports[p].iface, ifindex = self.ports[p].attached.unwrap_or(0), %kind, "device lost; tearing down");
        self.device.lost(kind);
        self.ports[p].lost = self.ports[p].attached.map(|ifx| (ifx, kind));
        let down = self.bring_down(p);
        tracing::info!(port = %self.ports[p].name, "device away; waiting for it to come back");
        down
    }

    /// The device port `p` lost as `lost.1` was then deleted or moved: count the loss
    /// as `to`.
    pub fn reclassify(&mut self, p: usize, to: LossKind) {
        let Some((ifindex, from)) = self.ports[p].lost else {
            return;
        };
        tracing::info!(port = %self.ports[p].name, interface = %self.ports[p].iface, ifindex, was = %from, now = %to, "the lost device was {to} after it was lost as `{from}`: counted as {to}");
        self.device.reclassify(from, to);
        self.ports[p].lost = Some((ifindex, to));
    }

    /// Tries to come back on `ifindex`; a failure leaves the port torn down.
    pub fn try_reattach(&mut self, p: usize, ifindex: u32, seen_up: Instant) -> bool {
        tracing::info!(port = %self.ports[p].name, ifindex, "device is back; re-attaching");
        match self.bring_up(p, ifindex) {
            Ok(()) => {
                let took = seen_up.elapsed();
                self.device.reattached(ifindex, took);
                tracing::info!(port = %self.ports[p].name, ifindex, ms = took.as_secs_f64() * 1e3, "re-attached");
                true
            }
            Err(e) => {
                tracing::warn!(port = %self.ports[p].name, ifindex, error = %e, "re-attach failed; will retry");
                self.device.reattach_failed();
                self.bring_down(p);
                false
            }
        }
    }

    /// The program is gone from a device that stayed: attach it again (sockets and
    /// rings stay as they are).
    pub fn reattach_program(&mut self, p: usize, ifindex: u32) -> bool {
        let started = Instant::now();
        let mode = self.ports[p].mode;
        let res = {
            let mut st = self.steering(p);
            if st.attached_to().is_some() {
                let _ = st.detach();
            }
            self.in_netns(p, || st.attach(ifindex, mode).map_err(|e| e.to_string()))
                .map_err(|e| e.to_string())
                .and_then(|r| r)
        };
        match res {
            Ok(()) => {
                let took = started.elapsed();
                self.device.reattached(ifindex, took);
                tracing::info!(port = %self.ports[p].name, ifindex, ms = took.as_secs_f64() * 1e3, "XDP program re-attached");
                true
            }
            Err(e) => {
                self.device.reattach_failed();
                tracing::warn!(port = %self.ports[p].name, ifindex, error = %e, "XDP program re-attach failed; will retry");
                false
            }
        }
    }

    /// What port `p` still waits for before frames can flow, or `None` when it is
    /// ready: attached, its program on the device, and the link's carrier up.
    pub fn waits_for(&self, p: usize) -> Option<&'static str> {
        let port = &self.ports[p];
        let carrier = port
            .attached
            .and_then(|ifx| self.link_now(p, ifx))
            .map(|l| l.running);
        let program = port.attached.and_then(|ifx| self.program_present(p, ifx));
        waits_for(port.attached, program, carrier)
    }

    /// Link `ifindex` in port `p`'s namespace as it is now; `None` when it is gone or
    /// cannot be read.
    pub fn link_now(&self, p: usize, ifindex: u32) -> Option<crate::device::LinkEvent> {
        self.in_netns(p, || crate::device::query_link(ifindex))
            .ok()?
            .ok()
            .flatten()
    }

    /// Whether our program still runs on `ifindex`; `None` when the device is gone.
    pub fn program_present(&self, p: usize, ifindex: u32) -> Option<bool> {
        // Under the steering lock: a rule reload of another shape replaces the
        // program (and its id) through the link; ask for ours and the device's together.
        let st = self.steering(p);
        let ours = st.program_id().ok().or(self.ports[p].program_id);
        let Ok(on) = self.in_netns(p, || crate::steer::xdp_program_on(ifindex)) else {
            return Some(true);
        };
        match on {
            Ok(Some(id)) => Some(ours.is_none_or(|o| o == id)),
            Ok(None) => Some(false),
            Err(crate::steer::SteerError::InterfaceMissing { .. }) => None,
            Err(_) => Some(true), // netlink hiccup: no evidence either way
        }
    }
}

/// Says once per process that the kernel kept its 32 frames per copy-mode TX
/// wake-up (`rings.tx_budget`): an older kernel is no error, only slower.
fn tx_budget_refused(s: &XskSocket, asked: u32) {
    static SAID: std::sync::Once = std::sync::Once::new();
    if let crate::xsk::TxBudget::Refused(errno) = s.tx_budget() {
        SAID.call_once(|| {
            let why = if errno == libc::ENOPROTOOPT {
                "this kernel has no XDP_MAX_TX_SKB_BUDGET (Linux 6.17 added it)".to_string()
            } else {
                format!("the kernel refused it: {}", std::io::Error::from_raw_os_error(errno))
            };
            tracing::info!(
                asked,
                "copy-mode TX sends at most 32 frames per wake-up: {why}; rings.tx_budget = 0 silences this"
            );
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unserved_queues_are_the_device_queues_without_a_socket() {
        assert_eq!(unserved_queues(Some(2), &[0]), vec![1]);
        assert_eq!(unserved_queues(Some(2), &[0, 1]), Vec::<u32>::new());
        assert_eq!(unserved_queues(Some(4), &[1, 3]), vec![0, 2]);
        // Listed queues the device lacks are a bind error, not "unserved".
        assert_eq!(unserved_queues(Some(1), &[0, 1]), Vec::<u32>::new());
        assert_eq!(unserved_queues(None, &[0]), Vec::<u32>::new());
    }

    #[test]
    fn ready_needs_the_device_the_program_and_carrier() {
        assert_eq!(waits_for(Some(3), Some(true), Some(true)), None);
        assert!(waits_for(None, None, None).unwrap().contains("device"));
        assert!(waits_for(Some(3), Some(false), Some(true))
            .unwrap()
            .contains("program"));
        assert!(waits_for(Some(3), Some(true), Some(false))
            .unwrap()
            .contains("carrier"));
        assert!(
            waits_for(Some(3), Some(true), None)
                .unwrap()
                .contains("carrier"),
            "unknown carrier is not ready"
        );
    }
}
