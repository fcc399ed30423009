//! `stats.web_config`: TLS and basic auth for the HTTP endpoint, read from a file in
//! the Prometheus exporter toolkit's web config format, this subset of it:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt          # PEM; relative paths are from this file's folder
//!   key_file: server.key
//!   client_ca_file: clients-ca.crt # needed by RequireAndVerifyClientCert
//!   client_auth_type: RequireAndVerifyClientCert   # or NoClientCert (the default)
//!   min_version: TLS12             # or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...         # bcrypt hashes (htpasswd -nBC 10 USER)
//! ```
//!
//! Any other key is an error that names it, with the file and line. The file, and
//! every file it names, is looked at (its mtime) at each connection and request and
//! read again when it changed, as the toolkit re-reads it per request; a file that no
//! longer reads leaves the last good one in force and is logged once. A password
//! that verified is kept in memory (per user, against the hash it verified with), so
//! bcrypt is not paid per scrape; checks the cache cannot answer are limited to
//! [`BCRYPT_BURST`] at once and [`BCRYPT_PER_SECOND`] after (429 beyond), so a flood
//! of wrong passwords costs at most that much of one core, off the HTTP thread.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A web config that does not read: the file, the line (when known), the key and why.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {key}: {msg}", .file.display(), .line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct WebConfigError {
    /// The web config file.
    pub file: PathBuf,
    /// 1-based line of the key.
    pub line: Option<usize>,
    /// Dotted key, e.g. `tls_server_config.cert_file`.
    pub key: String,
    /// What is wrong and what to do.
    pub msg: String,
}

/// Whether clients must show a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate asked for.
    NoClientCert,
    /// A certificate signed by `client_ca_file` is required.
    RequireAndVerifyClientCert,
}

/// The lowest TLS version served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinVersion {
    /// TLS 1.2 and 1.3.
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

/// `tls_server_config`, paths resolved.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// Server certificate chain (PEM).
    pub cert_file: PathBuf,
    /// Its private key (PEM).
    pub key_file: PathBuf,
    /// CA certificates client certificates must chain to (PEM).
    pub client_ca_file: Option<PathBuf>,
    /// Client certificates.
    pub client_auth: ClientAuth,
    /// Lowest version.
    pub min_version: MinVersion,
    lines: HashMap<&'static str, usize>,
}

/// A parsed web config.
#[derive(Debug, Clone, Default)]
pub struct WebConfig {
    /// TLS, when set.
    pub tls: Option<TlsSettings>,
    /// User name to bcrypt hash; empty: no basic auth.
    pub users: BTreeMap<String, String>,
}

/// A YAML node with the line it starts on.
#[derive(Debug)]
enum Node {
    Scalar(String, usize),
    Map(Vec<(String, usize, Node)>, usize),
    Seq(usize),
}

impl Node {
    fn line(&self) -> usize {
        match self {
            Node::Scalar(_, l) | Node::Map(_, l) | Node::Seq(l) => *l,
        }
    }
}

/// Builds [`Node`]s from the parser's events.
#[derive(Default)]
struct Loader {
    stack: Vec<(Node, Option<(String, usize)>)>,
    root: Option<Node>,
    alias_at: Option<usize>,
    depth_seq: usize,
}

impl Loader {
    fn put(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some((Node::Map(entries, _), key)) => match key.take() {
                None => match node {
                    Node::Scalar(k, l) => *key = Some((k, l)),
                    other => *key = Some((String::new(), other.line())),
                },
                Some((k, l)) => entries.push((k, l, node)),
            },
            Some(_) => {} // sequence items: the subset has no lists
        }
    }
}

impl MarkedEventReceiver for Loader {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        if self.depth_seq > 0 {
            match ev {
                Event::SequenceStart(..) => self.depth_seq += 1,
                Event::SequenceEnd => {
                    self.depth_seq -= 1;
                    if self.depth_seq == 0 {
                        let (seq, _) = self.stack.pop().expect("pushed at its start");
                        self.put(seq);
                    }
                }
                _ => {}
            }
            return;
        }
        match ev {
            Event::MappingStart(..) => self.stack.push((Node::Map(Vec::new(), line), None)),
            Event::MappingEnd => {
                if let Some((map, _)) = self.stack.pop() {
                    self.put(map);
                }
            }
            Event::SequenceStart(..) => {
                self.stack.push((Node::Seq(line), None));
                self.depth_seq = 1;
            }
            Event::Scalar(v, ..) => self.put(Node::Scalar(v, line)),
            Event::Alias(_) => self.alias_at = Some(line),
            _ => {}
        }
    }
}

fn yaml_line(m: &Marker) -> usize {
    m.line()
}

impl WebConfig {
    /// Reads and checks the web config at `file` (not the files it names).
    pub fn load(file: &Path) -> Result<WebConfig, WebConfigError> {
        let text = std::fs::read_to_string(file).map_err(|e| WebConfigError {
            file: file.to_path_buf(),
            line: None,
            key: "(file)".into(),
            msg: format!("cannot read it: {e}; fix stats.web_config or the file's permissions"),
        })?;
        WebConfig::parse(file, &text)
    }

    /// Parses `text`, the contents of `file` (relative paths resolve from its folder).
    pub fn parse(file: &Path, text: &str) -> Result<WebConfig, WebConfigError> {
        let err = |line: Option<usize>, key: &str, msg: String| WebConfigError {
            file: file.to_path_buf(),
            line,
            key: key.to_string(),
            msg,
        };
        let mut loader = Loader::default();
        Parser::new_from_str(text)
            .load(&mut loader, false)
            .map_err(|e| err(Some(yaml_line(e.marker())), "(yaml)", e.info().to_string()))?;
        if let Some(l) = loader.alias_at {
            return Err(err(
                Some(l),
                "(yaml)",
                "aliases are not read here; write the value out".into(),
            ));
        }
        let mut cfg = WebConfig::default();
        let entries = match loader.root {
            None => return Ok(cfg),
            Some(Node::Map(entries, _)) => entries,
            Some(other) => {
                return Err(err(
                    Some(other.line()),
                    "(top)",
                    "the file must be a mapping of tls_server_config and basic_auth_users".into(),
                ))
            }
        };
        let dir = file.parent().unwrap_or(Path::new("."));
        for (key, line, node) in entries {
            match key.as_str() {
                "tls_server_config" => cfg.tls = Some(tls_settings(node, line, dir, &err)?),
                "basic_auth_users" => {
                    let Node::Map(users, _) = node else {
                        return Err(err(Some(line), "basic_auth_users", "a mapping of user name to bcrypt hash".into()));
                    };
                    for (user, uline, hash) in users {
                        let key = format!("basic_auth_users.{user}");
                        let Node::Scalar(hash, _) = hash else {
                            return Err(err(Some(uline), &key, "the value is a bcrypt hash".into()));
                        };
                        if user.is_empty() || user.contains(':') {
                            return Err(err(Some(uline), &key, "a user name is not empty and has no `:`".into()));
                        }
                        if hash.parse::<bcrypt::HashParts>().is_err() {
                            return Err(err(Some(uline), &key, "not a bcrypt hash (`$2y$10$...`): make one with `htpasswd -nBC 10 USER`".into()));
                        }
                        cfg.users.insert(user, hash);
                    }
                }
                "http_server_config" => {
                    return Err(err(Some(line), &key, "not in the subset xdpool reads (it serves HTTP/1.1 only)".into()))
                }
                _ => {
                    return Err(err(Some(line), &key, "unknown key: xdpool reads tls_server_config (cert_file, key_file, client_ca_file, client_auth_type, min_version) and basic_auth_users".into()))
                }
            }
        }
        Ok(cfg)
    }

    /// The files this config names (their changes reload it).
    fn named_files(&self) -> Vec<PathBuf> {
        self.tls
            .iter()
            .flat_map(|t| {
                [
                    Some(t.cert_file.clone()),
                    Some(t.key_file.clone()),
                    t.client_ca_file.clone(),
                ]
            })
            .flatten()
            .collect()
    }
}

fn tls_settings(
    node: Node,
    line: usize,
    dir: &Path,
    err: &impl Fn(Option<usize>, &str, String) -> WebConfigError,
) -> Result<TlsSettings, WebConfigError> {
    let Node::Map(entries, _) = node else {
        return Err(err(
            Some(line),
            "tls_server_config",
            "a mapping (cert_file, key_file, ...)".into(),
        ));
    };
    let mut lines = HashMap::new();
    let (mut cert, mut key, mut ca, mut auth, mut min) = (
        None,
        None,
        None,
        ClientAuth::NoClientCert,
        MinVersion::Tls12,
    );
    for (k, l, v) in entries {
        let dotted = format!("tls_server_config.{k}");
        let Node::Scalar(v, _) = v else {
            return Err(err(Some(l), &dotted, "a single value".into()));
        };
        let path = || {
            let p = PathBuf::from(&v);
            if p.is_absolute() {
                p
            } else {
                dir.join(p)
            }
        };
        match k.as_str() {
            "cert_file" => { lines.insert("cert_file", l); cert = Some(path()) }
            "key_file" => { lines.insert("key_file", l); key = Some(path()) }
            "client_ca_file" => { lines.insert("client_ca_file", l); ca = Some(path()) }
            "client_auth_type" => {
                lines.insert("client_auth_type", l);
                auth = match v.as_str() {
                    "NoClientCert" | "" => ClientAuth::NoClientCert,
                    "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerifyClientCert,
                    other => return Err(err(Some(l), &dotted, format!("`{other}` is not served: use NoClientCert or RequireAndVerifyClientCert"))),
                }
            }
            "min_version" => {
                lines.insert("min_version", l);
                min = match v.as_str() {
                    "TLS12" | "" => MinVersion::Tls12,
                    "TLS13" => MinVersion::Tls13,
                    other => return Err(err(Some(l), &dotted, format!("`{other}` is not served: use TLS12 or TLS13 (TLS 1.0 and 1.1 are not spoken)"))),
                }
            }
            "cert" | "key" | "cipher_suites" | "curve_preferences" | "max_version" | "prefer_server_cipher_suites" | "client_allowed_sans" => {
                return Err(err(Some(l), &dotted, "not in the subset xdpool reads: cert_file, key_file, client_ca_file, client_auth_type, min_version".into()))
            }
            _ => return Err(err(Some(l), &dotted, "unknown key: use cert_file, key_file, client_ca_file, client_auth_type, min_version".into())),
        }
    }
    let cert_file = cert.ok_or_else(|| {
        err(
            Some(line),
            "tls_server_config.cert_file",
            "missing: TLS needs the server's certificate".into(),
        )
    })?;
    let key_file = key.ok_or_else(|| {
        err(
            Some(line),
            "tls_server_config.key_file",
            "missing: TLS needs the certificate's key".into(),
        )
    })?;
    if auth == ClientAuth::RequireAndVerifyClientCert && ca.is_none() {
        return Err(err(
            lines.get("client_auth_type").copied(),
            "tls_server_config.client_ca_file",
            "missing: RequireAndVerifyClientCert verifies clients against it".into(),
        ));
    }
    Ok(TlsSettings {
        cert_file,
        key_file,
        client_ca_file: ca,
        client_auth: auth,
        min_version: min,
        lines,
    })
}

/// Builds the rustls server config of `tls`; errors name the key of the file at fault.
fn server_config(
    file: &Path,
    tls: &TlsSettings,
) -> Result<Arc<rustls::ServerConfig>, WebConfigError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let err = |key: &'static str, msg: String| WebConfigError {
        file: file.to_path_buf(),
        line: tls.lines.get(key).copied(),
        key: format!("tls_server_config.{key}"),
        msg,
    };
    let certs =
        |key: &'static str, path: &Path| -> Result<Vec<CertificateDer<'static>>, WebConfigError> {
            let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
                .map_err(|e| err(key, format!("{}: {e}", path.display())))?
                .collect();
            let certs = certs.map_err(|e| err(key, format!("{}: {e}", path.display())))?;
            if certs.is_empty() {
                return Err(err(
                    key,
                    format!("{}: no PEM certificate in it", path.display()),
                ));
            }
            Ok(certs)
        };
    // ring: the one provider the workspace enables (rustls' `ring` feature). rustls
    // 0.23.48 deprecates it for its lack of post-quantum key exchange; a user's crate
    // that resolves that version must still build without a warning.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match tls.min_version {
        MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        MinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| err("min_version", e.to_string()))?;
    let builder = match (&tls.client_auth, &tls.client_ca_file) {
        (ClientAuth::RequireAndVerifyClientCert, Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs("client_ca_file", ca)? {
                roots
                    .add(c)
                    .map_err(|e| err("client_ca_file", format!("{}: {e}", ca.display())))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| err("client_ca_file", format!("{}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
        _ => builder.with_no_client_auth(),
    };
    let chain = certs("cert_file", &tls.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&tls.key_file)
        .map_err(|e| err("key_file", format!("{}: {e}", tls.key_file.display())))?;
    let mut cfg = builder.with_single_cert(chain, key).map_err(|e| {
        err(
            "key_file",
            format!("{} does not go with cert_file: {e}", tls.key_file.display()),
        )
    })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Checks the cache cannot answer: at most this many at once.
pub const BCRYPT_BURST: f64 = 5.0;
/// ... and this many a second after.
pub const BCRYPT_PER_SECOND: f64 = 5.0;

/// One loaded web config, ready to serve.
pub struct Active {
    /// The TLS acceptor, when TLS is on.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    users: BTreeMap<String, String>,
    /// user -> (the hash it verified against, the password that verified).
    verified: Mutex<HashMap<String, (String, Vec<u8>)>>,
}

/// What an `Authorization` header earned.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// In (or no auth configured).
    Allowed,
    /// No or malformed credentials.
    Missing,
    /// Wrong user or password (the user, as given).
    Wrong(String),
    /// Too many checks the cache could not answer just now.
    Limited,
}

impl Active {
    /// Whether `/metrics` asks for basic auth.
    pub fn needs_auth(&self) -> bool {
        !self.users.is_empty()
    }
}

/// The web config file as it is now, re-read when it or a file it names changes.
pub struct Web {
    path: PathBuf,
    state: Mutex<WebState>,
    bucket: Mutex<(f64, Instant)>,
}

struct WebState {
    stamps: Vec<(PathBuf, Option<SystemTime>)>,
    active: Arc<Active>,
    last_error: Option<String>,
}

fn stamp(files: &[PathBuf]) -> Vec<(PathBuf, Option<SystemTime>)> {
    files
        .iter()
        .map(|f| {
            (
                f.clone(),
                std::fs::metadata(f).and_then(|m| m.modified()).ok(),
            )
        })
        .collect()
}

fn activate(path: &Path) -> Result<(Arc<Active>, Vec<PathBuf>), WebConfigError> {
    let cfg = WebConfig::load(path)?;
    let tls = match &cfg.tls {
        Some(t) => Some(tokio_rustls::TlsAcceptor::from(server_config(path, t)?)),
        None => None,
    };
    let mut files = vec![path.to_path_buf()];
    files.extend(cfg.named_files());
    Ok((
        Arc::new(Active {
            tls,
            users: cfg.users,
            verified: Mutex::default(),
        }),
        files,
    ))
}

impl Web {
    /// Reads `path` and every file it names; an error says which file, line and key.
    pub fn open(path: &Path) -> Result<Arc<Web>, WebConfigError> {
        let (active, files) = activate(path)?;
        Ok(Arc::new(Web {
            path: path.to_path_buf(),
            state: Mutex::new(WebState {
                stamps: stamp(&files),
                active,
                last_error: None,
            }),
            bucket: Mutex::new((BCRYPT_BURST, Instant::now())),
        }))
    }

    /// The config in force: read again first when a file changed since (a file that
    /// no longer reads keeps the last good config, logged once per change).
    pub fn current(&self) -> Arc<Active> {
        let mut st = self.state.lock().expect("never poisoned");
        let files: Vec<PathBuf> = st.stamps.iter().map(|(f, _)| f.clone()).collect();
        let now = stamp(&files);
        if now == st.stamps {
            return st.active.clone();
        }
        st.stamps = now;
        match activate(&self.path) {
            Ok((active, files)) => {
                tracing::info!(file = %self.path.display(), tls = active.tls.is_some(), users = active.users.len(), "web config read again");
                st.stamps = stamp(&files);
                st.active = active;
                st.last_error = None;
            }
            Err(e) => {
                let said = e.to_string();
                if st.last_error.as_deref() != Some(&said) {
                    tracing::error!(error = %said, "the web config changed and no longer reads; the last good one stays in force");
                    st.last_error = Some(said);
                }
            }
        }
        st.active.clone()
    }

    /// Checks an `Authorization` header against `active`'s users. A bcrypt check
    /// runs on tokio's blocking thread, not the HTTP thread.
    pub async fn check(&self, active: &Arc<Active>, header: Option<&[u8]>) -> Verdict {
        if !active.needs_auth() {
            return Verdict::Allowed;
        }
        let Some((user, password)) = header.and_then(basic_credentials) else {
            return Verdict::Missing;
        };
        let Some(hash) = active.users.get(&user).cloned() else {
            return Verdict::Wrong(user);
        };
        if let Some((h, p)) = active.verified.lock().expect("never poisoned").get(&user) {
            if *h == hash && same(p, &password) {
                return Verdict::Allowed;
            }
        }
        if !self.take_token() {
            return Verdict::Limited;
        }
        let pw = password.clone();
        let h = hash.clone();
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(&pw, &h).unwrap_or(false))
            .await
            .unwrap_or(false);
        if ok {
            active
                .verified
                .lock()
                .expect("never poisoned")
                .insert(user, (hash, password));
            Verdict::Allowed
        } else {
            Verdict::Wrong(user)
        }
    }

    fn take_token(&self) -> bool {
        let mut b = self.bucket.lock().expect("never poisoned");
        let now = Instant::now();
        b.0 = (b.0 + now.duration_since(b.1).as_secs_f64() * BCRYPT_PER_SECOND).min(BCRYPT_BURST);
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Constant-time equality of two byte strings (their lengths are not secret).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Basic BASE64(user:password)` into its parts.
fn basic_credentials(header: &[u8]) -> Option<(String, Vec<u8>)> {
    use base64::Engine;
    let text = std::str::from_utf8(header).ok()?;
    let (scheme, rest) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let at = raw.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(raw[..at].to_vec()).ok()?;
    Some((user, raw[at + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<WebConfig, WebConfigError> {
        WebConfig::parse(Path::new("/etc/xdpool/web.yml"), text)
    }

    #[test]
    fn the_subset_parses_with_paths_from_the_files_folder() {
        let hash = bcrypt::hash("pw", 4).unwrap();
        let cfg = parse(&format!(
            "tls_server_config:\n  cert_file: s.crt\n  key_file: /k/s.key\n  client_ca_file: ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n  min_version: TLS13\nbasic_auth_users:\n  prom: {hash}\n"
        ))
        .unwrap();
        let tls = cfg.tls.unwrap();
        assert_eq!(tls.cert_file, Path::new("/etc/xdpool/s.crt"));
        assert_eq!(tls.key_file, Path::new("/k/s.key"));
        assert_eq!(tls.client_auth, ClientAuth::RequireAndVerifyClientCert);
        assert_eq!(tls.min_version, MinVersion::Tls13);
        assert_eq!(cfg.users["prom"], hash);
    }

    #[test]
    fn errors_name_the_file_line_and_key() {
        let e = parse("tls_server_config:\n  cert_file: a\n  key_file: b\n  max_version: TLS13\n")
            .unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(4), "tls_server_config.max_version"),
            "{e}"
        );
        assert!(
            e.to_string().starts_with(
                "/etc/xdpool/web.yml:4: tls_server_config.max_version: not in the subset"
            ),
            "{e}"
        );
        let e = parse("basic_auth_users:\n  a: $2y$10$abc\n  bob: plain\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(2), "basic_auth_users.a"),
            "{e}"
        );
        let e = parse("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequestClientCert\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(4), "tls_server_config.client_auth_type"),
            "{e}"
        );
        let e = parse(
            "tls_server_config:\n  cert_file: a\n  client_auth_type: RequireAndVerifyClientCert\n",
        )
        .unwrap_err();
        assert_eq!(e.key, "tls_server_config.key_file", "{e}");
        let e = parse("\n\nhttp_server_config:\n  http2: false\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(3), "http_server_config"),
            "{e}"
        );
        let e = parse("basic_auth_users: [a, b]\nfoo: 1\n").unwrap_err();
        assert_eq!(e.key, "basic_auth_users", "{e}");
        let e = parse("a: [b\n").unwrap_err();
        assert_eq!(e.key, "(yaml)", "{e}");
    }

    #[test]
    fn a_verified_password_is_cached_and_failures_are_rate_limited() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("web.yml");
        let hash = bcrypt::hash("right", 4).unwrap();
        std::fs::write(&path, format!("basic_auth_users:\n  prom: {hash}\n")).unwrap();
        let web = Web::open(&path).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let basic = |u: &str, p: &str| {
            use base64::Engine;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        };
        let active = web.current();
        rt.block_on(async {
            assert_eq!(web.check(&active, None).await, Verdict::Missing);
            assert_eq!(
                web.check(&active, Some(basic("prom", "right").as_bytes()))
                    .await,
                Verdict::Allowed
            );
            // The burst is spent on wrong passwords; the right one still gets in from
            // the cache, a wrong one is refused unchecked.
            let mut checked = 0;
            loop {
                match web
                    .check(&active, Some(basic("prom", "wrong").as_bytes()))
                    .await
                {
                    Verdict::Wrong(u) if u == "prom" => checked += 1,
                    Verdict::Limited => break,
                    other => panic!("{other:?}"),
                }
                assert!(
                    checked <= BCRYPT_BURST as usize + 2,
                    "no limit after {checked} checks"
                );
            }
            assert_eq!(
                web.check(&active, Some(basic("prom", "right").as_bytes()))
                    .await,
                Verdict::Allowed
            );
            assert_eq!(
                web.check(&active, Some(basic("eve", "x").as_bytes())).await,
                Verdict::Wrong("eve".into())
            );
        });
        // A change is read at the next request; a broken file keeps the last good one.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let other = bcrypt::hash("x", 4).unwrap();
        std::fs::write(&path, format!("basic_auth_users:\n  other: {other}\n")).unwrap();
        let active = web.current();
        assert!(active.users.contains_key("other") && !active.users.contains_key("prom"));
        std::fs::write(&path, "basic_auth_users: [\n").unwrap();
        let active = web.current();
        assert!(
            active.users.contains_key("other"),
            "the last good config stays"
        );
    }
}
