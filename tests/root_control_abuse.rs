//! The control plane under abuse, as root on the veth lab, all on loopback: one
//! `xdpool run` with its HTTP endpoint on 127.0.0.1 and its control socket, while a
//! client misbehaves (slowloris, a 256 MiB request line, 500 idle connections, a
//! control client sending a byte every 1.5 s, garbage, half-closed connections,
//! 1 000 connections), then again with TLS, client certificates and basic auth
//! (floods of another CA's certificates and of wrong passwords). For each abuse: a
//! normal scrape and a `stats` query answer within 2 s (p50/p99 printed as a
//! table), the daemon's RSS grows by less than 16 MB, every frame the sender's veth
//! delivered to xdpool meanwhile (400 000 paced at 100 000/s) is received, counted
//! exact (the veth's own refusals, from a starved worker on a shared machine, are
//! counted too and may be 1% at most), and the log names each refused client once,
//! not per byte. About 70 s.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xdpool_lab::gen::packet::PortRange;
use xdpool_lab::gen::{self, GenConfig};
use xdpool_lab::lab::LabConfig;

/// What a normal client must get within.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// The RSS bound over the whole run.
const RSS_GROWTH_MAX_KB: u64 = 16 * 1024;
/// Frames sent during each abuse, paced at RATE.
const FRAMES: u64 = 400_000;
const RATE: u64 = 100_000;

/// An abuse running in the background; `names` are the clients the log should name.
struct Abuse {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    names: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Abuse {
    fn new() -> Abuse {
        Abuse {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            names: Arc::default(),
        }
    }

    fn spawn(
        &mut self,
        f: impl FnOnce(Arc<AtomicBool>, Arc<std::sync::Mutex<Vec<String>>>) + Send + 'static,
    ) {
        let (stop, names) = (self.stop.clone(), self.names.clone());
        self.threads
            .push(std::thread::spawn(move || f(stop, names)));
    }

    fn end(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("abuse thread");
        }
        let n = self.names.lock().unwrap().clone();
        n
    }
}

/// Sleeps up to `d` in small steps; false once `stop` is set.
fn nap(stop: &AtomicBool, d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !stop.load(Ordering::Relaxed)
}

fn slowloris(a: &mut Abuse, http: SocketAddr) {
    for _ in 0..3 {
        a.spawn(move |stop, names| {
            let Ok(mut s) = TcpStream::connect(http) else {
                return;
            };
            names
                .lock()
                .unwrap()
                .push(s.local_addr().unwrap().to_string());
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n");
            while nap(&stop, Duration::from_millis(1500)) {
                if s.write_all(b"X-Slow: yes\r\n").is_err() {
                    break;
                }
            }
        });
    }
}

fn huge_request_line(a: &mut Abuse, http: SocketAddr) {
    a.spawn(move |stop, names| {
        let Ok(mut s) = TcpStream::connect(http) else {
            return;
        };
        names
            .lock()
            .unwrap()
            .push(s.local_addr().unwrap().to_string());
        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
        let chunk = vec![b'a'; 1 << 20];
        let _ = s.write_all(b"GET /");
        for _ in 0..256 {
            if stop.load(Ordering::Relaxed) || s.write_all(&chunk).is_err() {
                break;
            }
        }
        nap(&stop, Duration::from_secs(30));
    });
}

fn idle_connections(a: &mut Abuse, http: SocketAddr, n: usize) {
    a.spawn(move |stop, names| {
        let mut held = Vec::new();
        for _ in 0..n {
            if let Ok(s) = TcpStream::connect(http) {
                names
                    .lock()
                    .unwrap()
                    .push(s.local_addr().unwrap().to_string());
                held.push(s);
            }
        }
        nap(&stop, Duration::from_secs(60));
    });
}

fn control_byte_every_1_5_s(a: &mut Abuse, sock: PathBuf) {
    a.spawn(move |stop, names| {
        let Ok(mut s) = UnixStream::connect(&sock) else {
            return;
        };
        names
            .lock()
            .unwrap()
            .push(format!("pid {}", std::process::id()));
        for b in b"stats".iter().cycle() {
            if s.write_all(&[*b]).is_err() || !nap(&stop, Duration::from_millis(1500)) {
                break;
            }
        }
    });
}

fn garbage(a: &mut Abuse, http: SocketAddr, sock: PathBuf) {
    a.spawn(move |stop, names| {
        // Bytes of no protocol, from a fixed pseudo-random sequence.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let junk: Vec<u8> = (0..64 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        if let Ok(mut s) = TcpStream::connect(http) {
            names
                .lock()
                .unwrap()
                .push(s.local_addr().unwrap().to_string());
            let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = s.write_all(&junk);
        }
        if let Ok(mut s) = UnixStream::connect(&sock) {
            names
                .lock()
                .unwrap()
                .push(format!("pid {}", std::process::id()));
            let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = s.write_all(&junk[..2000]);
            let _ = s.write_all(b"\n");
            let mut reply = Vec::new();
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let _ = s.read_to_end(&mut reply);
        }
        nap(&stop, Duration::from_secs(30));
    });
}

fn half_closed(a: &mut Abuse, http: SocketAddr, sock: PathBuf) {
    a.spawn(move |stop, names| {
        if let Ok(mut s) = TcpStream::connect(http) {
            names
                .lock()
                .unwrap()
                .push(s.local_addr().unwrap().to_string());
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n");
            let _ = s.shutdown(Shutdown::Write);
        }
        if let Ok(mut s) = UnixStream::connect(&sock) {
            names
                .lock()
                .unwrap()
                .push(format!("pid {}", std::process::id()));
            let _ = s.write_all(b"sta");
            let _ = s.shutdown(Shutdown::Write);
        }
        nap(&stop, Duration::from_secs(30));
    });
}

fn thousand(a: &mut Abuse, http: SocketAddr, sock: PathBuf) {
    idle_connections(a, http, 1000);
    a.spawn(move |stop, names| {
        let mut held = Vec::new();
        for _ in 0..1000 {
            if let Ok(s) = UnixStream::connect(&sock) {
                held.push(s);
            }
        }
        names
            .lock()
            .unwrap()
            .push(format!("pid {}", std::process::id()));
        nap(&stop, Duration::from_secs(60));
    });
}

/// One scrape as Prometheus makes it; its latency when it answered 200 with metrics.
fn scrape(http: SocketAddr) -> Result<Duration, String> {
    let t = Instant::now();
    let mut s = TcpStream::connect_timeout(&http, ANSWER_WITHIN).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: xdpool\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut body = Vec::new();
    s.read_to_end(&mut body)
        .map_err(|e| format!("after {:?}: {e}", t.elapsed()))?;
    let text = String::from_utf8_lossy(&body);
    if !text.starts_with("HTTP/1.1 200") || !text.contains("xdpool_rx_packets_total") {
        return Err(format!("not a scrape: {}", &text[..text.len().min(200)]));
    }
    Ok(t.elapsed())
}

/// The status code of `GET path`.
fn status_of(http: SocketAddr, path: &str) -> u16 {
    let mut s = TcpStream::connect(http).unwrap();
    s.set_read_timeout(Some(ANSWER_WITHIN)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
    let mut head = String::new();
    let _ = s.read_to_string(&mut head);
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn ask_stats(sock: &Path) -> Result<(Duration, u64), String> {
    let t = Instant::now();
    let v = xdpool::internal::stats::control::query(sock).map_err(|e| e.to_string())?;
    Ok((t.elapsed(), v["total"]["rx_packets"].as_u64().unwrap_or(0)))
}

fn rss_kb(pid: i32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

/// One row of the table.
struct Row {
    abuse: &'static str,
    scrapes: usize,
    scrape_p50: f64,
    scrape_p99: f64,
    stats_p50: f64,
    stats_p99: f64,
    rss_growth_kb: i64,
    sent: u64,
    received: u64,
    refused: u64,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn raise_fd_limit() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write and read only the struct passed.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
        l.rlim_cur = l.rlim_max.max(4096).min(l.rlim_max);
        libc::setrlimit(libc::RLIMIT_NOFILE, &l);
    }
}

/// What one round needs of the running instance.
struct Target<'a> {
    run: &'a XdpoolRun,
    st: &'a xdpool_lab::lab::LabStatus,
    sock: &'a Path,
    scrape: &'a dyn Fn() -> Result<Duration, String>,
    rss0: u64,
    rss_max: u64,
    log_seen: usize,
}

/// Runs one abuse for about 5.5 s with paced traffic, a normal scrape and a `stats`
/// every 100 ms; checks what the module doc says and returns its row.
fn round(
    t: &mut Target,
    name: &'static str,
    start: &dyn Fn(&mut Abuse),
    each_named_once: bool,
) -> Row {
    let rx0 = ask_stats(t.sock).expect("stats").1;
    let mut abuse = Abuse::new();
    start(&mut abuse);
    let st = t.st.clone();
    let traffic = std::thread::spawn(move || {
        let mut g = GenConfig::for_lab(&st);
        g.count = Some(FRAMES);
        g.size = 64;
        g.dst_ports = PortRange::single(9);
        g.rate_pps = Some(RATE);
        g.chunk = 2048;
        veth_delivery(&st.a.netns, &st.a.dev, FRAMES, || {
            let r = gen::run(&g).expect("generator");
            assert_eq!(r.sent, FRAMES);
        })
    });
    let (mut scrapes, mut stats) = (Vec::new(), Vec::new());
    let until = Instant::now() + Duration::from_millis(5_500);
    while Instant::now() < until {
        match (t.scrape)() {
            Ok(d) => scrapes.push(d),
            Err(e) => panic!("{name}: a normal scrape failed: {e}\nlog:\n{}", t.run.log()),
        }
        match ask_stats(t.sock) {
            Ok((d, _)) => stats.push(d),
            Err(e) => panic!("{name}: `stats` failed: {e}\nlog:\n{}", t.run.log()),
        }
        t.rss_max = t.rss_max.max(rss_kb(t.run.pid()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let (into_ring, refused) = traffic.join().expect("traffic");
    let names = abuse.end();
    // Every frame the veth delivered is counted received, exactly.
    let mut rx = 0;
    let settled = wait_for(Duration::from_secs(5), || {
        rx = ask_stats(t.sock)
            .map(|v| v.1)
            .unwrap_or(0)
            .saturating_sub(rx0);
        rx >= into_ring
    });
    assert!(
        settled && rx == into_ring,
        "{name}: {rx} frames received of the {into_ring} delivered"
    );
    assert_eq!(
        into_ring + refused,
        FRAMES,
        "{name}: frames unaccounted for"
    );
    // Frames the sender's veth refused never reached xdpool (its worker was not
    // scheduled in time: the two cores are shared); they are counted, and a few are
    // allowed on a loaded machine. Everything delivered must be received.
    assert!(
        refused <= FRAMES / 100,
        "{name}: the sender's veth refused {refused} of {FRAMES} frames at {RATE}/s"
    );
    t.rss_max = t.rss_max.max(rss_kb(t.run.pid()));
    // The log names each refused client once (not per byte or per line).
    let log = t.run.log();
    let new_log = log[t.log_seen..].to_string();
    t.log_seen = log.len();
    for who in &names {
        let lines = new_log
            .lines()
            .filter(|l| l.contains(&format!("client {who} ")))
            .count();
        if each_named_once {
            assert!(
                lines >= 1 && (lines == 1 || !who.contains(':')),
                "{name}: the log names {who} {lines} times:\n{new_log}"
            );
        }
    }
    if !each_named_once {
        let named = new_log.lines().filter(|l| l.contains("client ")).count();
        assert!(
            named >= 1
                && named <= xdpool::internal::stats::RefusalLog::NAMED_PER_WINDOW as usize * 2,
            "{name}: {named} named lines (the rest are counted):\n{new_log}"
        );
    }
    let worst = scrapes
        .iter()
        .chain(stats.iter())
        .max()
        .copied()
        .unwrap_or_default();
    assert!(worst < ANSWER_WITHIN, "{name}: an answer took {worst:?}");
    Row {
        abuse: name,
        scrapes: scrapes.len(),
        scrape_p50: pct(&mut scrapes, 0.5),
        scrape_p99: pct(&mut scrapes, 0.99),
        stats_p50: pct(&mut stats, 0.5),
        stats_p99: pct(&mut stats, 0.99),
        rss_growth_kb: t.rss_max as i64 - t.rss0 as i64,
        sent: FRAMES,
        received: rx,
        refused,
    }
}

fn print_table(rows: &[Row]) {
    println!("\n| abuse | scrapes | scrape p50 ms | scrape p99 ms | stats p50 ms | stats p99 ms | RSS growth so far MB | frames sent / received / refused by the veth |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} / {} / {} |",
            r.abuse,
            r.scrapes,
            r.scrape_p50,
            r.scrape_p99,
            r.stats_p50,
            r.stats_p99,
            r.rss_growth_kb as f64 / 1024.0,
            r.sent,
            r.received,
            r.refused
        );
    }
}

/// Makes a CA, a server certificate for 127.0.0.1 and a client certificate signed by
/// it, and a client certificate of another CA, with the openssl CLI, in `dir`.
fn make_certs(dir: &Path) {
    let sh = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl CLI");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for ca in ["ca", "other-ca"] {
        sh(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{ca}.key"),
            "-out",
            &format!("{ca}.crt"),
            "-days",
            "2",
            "-subj",
            &format!("/CN=xdpool test {ca}"),
        ]);
    }
    for (who, ca, ext) in [
        ("server", "ca", "server.ext"),
        ("client", "ca", "client.ext"),
        ("stranger", "other-ca", "client.ext"),
    ] {
        sh(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{who}.key"),
            "-out",
            &format!("{who}.csr"),
            "-subj",
            &format!("/CN={who}"),
        ]);
        sh(&[
            "x509",
            "-req",
            "-in",
            &format!("{who}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &format!("{who}.crt"),
            "-days",
            "2",
            "-extfile",
            ext,
        ]);
    }
}

/// `curl` over TLS with a client certificate and basic auth: the HTTP code.
fn curl(dir: &Path, url: &str, who: &str, user_pw: &str) -> Result<(Duration, u16), String> {
    let t = Instant::now();
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "2",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--cacert",
        ])
        .arg(dir.join("ca.crt"))
        .arg("--cert")
        .arg(dir.join(format!("{who}.crt")))
        .arg("--key")
        .arg(dir.join(format!("{who}.key")))
        .args(["-u", user_pw, url])
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    let code = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    Ok((t.elapsed(), code))
}

#[test]
#[cfg_attr(
    not(feature = "root-tests"),
    ignore = "needs root: run as root with --features root-tests (make test does)"
)]
fn control_plane_stays_answering_and_bounded_under_abuse() {
    require_root!();
    raise_fd_limit();
    let rig = LabRig::up(
        LabConfig {
            prefix: unique_prefix("xa"),
            ..LabConfig::default()
        },
        "abuse",
    );
    let rules = "[[rule]]\nproto = \"udp\"\ndst_port = \"9\"\naction = \"drop\"\n";
    let cfg = rig.config("abuse", &[0], rules);
    let port = free_port();
    patch_config(
        &cfg,
        "[stats]\n",
        &format!("[stats]\nprometheus = \"127.0.0.1:{port}\"\n"),
    );
    let http: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let run = XdpoolRun::spawn(&cfg, &[]);
    assert!(
        run.ready_within(Duration::from_secs(30)),
        "not ready: {}",
        run.log()
    );
    let sock = rig.sock.clone();
    // Warm up both servers (first allocations), then take the baseline.
    for _ in 0..5 {
        scrape(http).expect("a scrape before any abuse");
        ask_stats(&sock).expect("stats before any abuse");
    }
    // The probes: alive, and ready (the port is attached with carrier).
    for path in ["/healthz", "/readyz"] {
        assert_eq!(status_of(http, path), 200, "{path}");
    }
    let plain = move || scrape(http);
    let mut t = Target {
        run: &run,
        st: &rig.st,
        sock: &sock,
        scrape: &plain,
        rss0: rss_kb(run.pid()),
        rss_max: 0,
        log_seen: 0,
    };
    t.rss_max = t.rss0;
    let (s1, s2, s3, s4) = (sock.clone(), sock.clone(), sock.clone(), sock.clone());
    let mut rows = vec![
        round(
            &mut t,
            "slowloris: 3 clients, a header line every 1.5 s",
            &move |a| slowloris(a, http),
            true,
        ),
        round(
            &mut t,
            "one request line of 256 MiB",
            &move |a| huge_request_line(a, http),
            true,
        ),
        round(
            &mut t,
            "500 idle connections",
            &move |a| idle_connections(a, http, 500),
            false,
        ),
        round(
            &mut t,
            "control socket: a byte every 1.5 s",
            &move |a| control_byte_every_1_5_s(a, s1.clone()),
            true,
        ),
        round(
            &mut t,
            "garbage bytes (HTTP and control)",
            &move |a| garbage(a, http, s2.clone()),
            true,
        ),
        round(
            &mut t,
            "half-closed (HTTP and control)",
            &move |a| half_closed(a, http, s3.clone()),
            true,
        ),
        round(
            &mut t,
            "1 000 connections (HTTP and control)",
            &move |a| thousand(a, http, s4.clone()),
            false,
        ),
    ];
    let (rss0, rss_max) = (t.rss0, t.rss_max);
    let (code, summary, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    assert_all_frames_back(&summary);

    // The same instance again with TLS (client certificates) and basic auth.
    make_certs(rig.dir());
    let hash = bcrypt::hash("right", 8).unwrap();
    let web = rig.dir().join("web.yml");
    std::fs::write(
        &web,
        format!("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\nbasic_auth_users:\n  prom: {hash}\n"),
    )
    .unwrap();
    patch_config(
        &cfg,
        "[stats]\n",
        &format!("[stats]\nweb_config = \"{}\"\n", web.display()),
    );
    let run = XdpoolRun::spawn(&cfg, &[]);
    assert!(
        run.ready_within(Duration::from_secs(30)),
        "not ready: {}",
        run.log()
    );
    let url = format!("https://127.0.0.1:{port}/metrics");
    let dir = rig.dir().to_path_buf();
    let (d2, u2) = (dir.clone(), url.clone());
    let good = move || match curl(&d2, &u2, "client", "prom:right")? {
        (d, 200) => Ok(d),
        (_, code) => Err(format!("HTTP {code}")),
    };
    // Refused before any abuse: no certificate, a stranger's, a wrong password, none.
    good().expect("a scrape with TLS and auth");
    let plain_http = scrape(http);
    assert!(plain_http.is_err(), "plain HTTP answered on a TLS endpoint");
    assert_ne!(
        curl(&dir, &url, "stranger", "prom:right").unwrap().1,
        200,
        "another CA's client certificate got in"
    );
    assert_eq!(curl(&dir, &url, "client", "prom:wrong").unwrap().1, 401);
    assert_eq!(curl(&dir, &url, "client", "eve:right").unwrap().1, 401);
    let probe = format!("https://127.0.0.1:{port}/healthz");
    assert_eq!(
        curl(&dir, &probe, "client", "x:y").unwrap().1,
        200,
        "the probe needs no password"
    );
    let mut t = Target {
        run: &run,
        st: &rig.st,
        sock: &sock,
        scrape: &good,
        rss0: rss_kb(run.pid()),
        rss_max: 0,
        log_seen: 0,
    };
    t.rss_max = t.rss0;
    let (d3, u3, d4, u4) = (dir.clone(), url.clone(), dir.clone(), url.clone());
    let flood = move |a: &mut Abuse, who: &'static str, pw: &'static str, d: PathBuf, u: String| {
        a.spawn(move |stop, _| {
            while !stop.load(Ordering::Relaxed) {
                let _ = curl(&d, &u, who, pw);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
    };
    rows.push(round(
        &mut t,
        "TLS: a flood of another CA's client certificates",
        &move |a| flood(a, "stranger", "prom:right", d3.clone(), u3.clone()),
        false,
    ));
    rows.push(round(
        &mut t,
        "TLS + auth: a flood of wrong passwords",
        &move |a| flood(a, "client", "prom:wrong", d4.clone(), u4.clone()),
        false,
    ));
    let (tls_rss0, tls_rss_max) = (t.rss0, t.rss_max);
    let log = run.log();
    assert!(
        log.contains("TLS handshake failed"),
        "the stranger is not named:\n{log}"
    );
    assert!(
        log.contains("wrong user or password (user `prom`)"),
        "the wrong password is not named:\n{log}"
    );
    let (code, summary, out) = run.stop();
    assert_eq!(code, Some(0), "{out}");
    assert_all_frames_back(&summary);

    print_table(&rows);
    println!("RSS {rss0} kB at the start, {rss_max} kB at most; with TLS {tls_rss0} kB, {tls_rss_max} kB at most\n");
    for (start, max) in [(rss0, rss_max), (tls_rss0, tls_rss_max)] {
        assert!(
            max - start < RSS_GROWTH_MAX_KB,
            "RSS grew {} kB (from {start} kB)",
            max - start
        );
    }
}
