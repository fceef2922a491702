//! Fake upstreams that misbehave on cue, for the proxy and group tests: a signed Debian archive
//! (`Archive`: `dists/<dist>/{InRelease,Release,Release.gpg}`, `Packages` in the forms asked for,
//! `by-hash`, `pool/`) and any static tree of files (an Alpine repository's `APKINDEX.tar.gz`),
//! served over HTTP on 127.0.0.1:0 by a thread. A test can change what is served — at once, or
//! right after the next `InRelease` went out (the upstream moving on in the middle of one
//! `apt-get update`) —, take it offline (every connection closed unanswered), and read which
//! paths were asked for.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};

use md5::Digest as _;
use packyard_codecs::apt::signing::Signer;

#[derive(Default)]
struct State {
    files: HashMap<String, Vec<u8>>,
    /// Replaces `files` right after the next `InRelease` is served.
    after_inrelease: Option<HashMap<String, Vec<u8>>>,
    offline: bool,
    requests: Vec<String>,
}

/// A static HTTP server of files under `/` (paths without the leading slash).
#[derive(Clone)]
pub struct Upstream {
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl Upstream {
    pub fn start() -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let url = format!("http://{}/", listener.local_addr()?);
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || serve(conn, &state));
            }
        });
        Ok(Self { url, state })
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut s = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut s)
    }

    /// Serves exactly `files` from now on.
    pub fn publish(&self, files: HashMap<String, Vec<u8>>) {
        self.with(|s| s.files = files);
    }

    /// Adds or replaces one file.
    pub fn put(&self, path: &str, bytes: Vec<u8>) {
        self.with(|s| s.files.insert(path.to_string(), bytes));
    }

    /// Stops serving one file (an upstream dropping a superseded version from its pool).
    pub fn remove(&self, path: &str) {
        self.with(|s| s.files.remove(path));
    }

    /// Serves `files` from the moment the next `InRelease` has gone out.
    pub fn publish_after_next_inrelease(&self, files: HashMap<String, Vec<u8>>) {
        self.with(|s| s.after_inrelease = Some(files));
    }

    /// Offline: every connection is closed without an answer.
    pub fn set_offline(&self, offline: bool) {
        self.with(|s| s.offline = offline);
    }

    /// The paths asked for so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.with(|s| s.requests.clone())
    }

    pub fn forget_requests(&self) {
        self.with(|s| s.requests.clear());
    }

    /// The bytes served now for `path`.
    pub fn file(&self, path: &str) -> Option<Vec<u8>> {
        self.with(|s| s.files.get(path).cloned())
    }
}

fn serve(mut conn: std::net::TcpStream, state: &Mutex<State>) {
    let Ok(clone) = conn.try_clone() else { return };
    let mut reader = BufReader::new(clone);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut header = String::new();
        while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
            header.clear();
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
        let path = target.trim_start_matches('/').split('?').next().unwrap_or("").to_string();
        let answer = {
            let mut s = state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if s.offline {
                return;
            }
            s.requests.push(path.clone());
            let found = s.files.get(&path).cloned();
            if path.ends_with("/InRelease") && found.is_some() {
                if let Some(next) = s.after_inrelease.take() {
                    s.files = next;
                }
            }
            found
        };
        let written = match answer {
            Some(body) => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\n\r\n",
                    body.len()
                );
                conn.write_all(head.as_bytes())
                    .and_then(|()| if method == "HEAD" { Ok(()) } else { conn.write_all(&body) })
            }
            None => conn.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"),
        };
        if written.is_err() {
            return;
        }
    }
}

/// One `Packages` entry of a fake archive: the package's `.deb` (put in `pool/`) and its stanza.
pub struct Package {
    pub name: String,
    pub version: String,
    pub arch: String,
    pub deb: Vec<u8>,
    /// Extra control fields (`Depends: …\n`), as written into the stanza.
    pub extra: String,
}

impl Package {
    pub fn new(name: &str, version: &str, arch: &str) -> Self {
        let control = format!(
            "Package: {name}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: T <t@example.org>\nDescription: {name} for tests\n"
        );
        let deb = packyard_codecs::apt::testing::deb(&control, ".gz");
        Self { name: name.into(), version: version.into(), arch: arch.into(), deb, extra: String::new() }
    }

    /// The same package with `fields` added to its stanza only (what an upstream could list
    /// that its package does not say: a poisoned stanza).
    pub fn listing(mut self, fields: &str) -> Self {
        self.extra.push_str(fields);
        self
    }

    pub fn pool_path(&self) -> String {
        format!("pool/main/{}/{}/{}_{}_{}.deb", &self.name[..1], self.name, self.name, self.version, self.arch)
    }

    pub fn stanza(&self) -> String {
        format!(
            "Package: {}\nVersion: {}\nArchitecture: {}\nMaintainer: T <t@example.org>\n{}Description: {} for tests\nFilename: {}\nSize: {}\nMD5sum: {}\nSHA256: {}\n",
            self.name,
            self.version,
            self.arch,
            self.extra,
            self.name,
            self.pool_path(),
            self.deb.len(),
            hex::encode(md5::Md5::digest(&self.deb)),
            hex::encode(sha2::Sha256::digest(&self.deb)),
        )
    }
}

/// How a distribution of a fake archive is written.
pub struct Dist<'a> {
    pub name: &'a str,
    /// Per architecture, its `Packages` (component `main`); an `all` package listed in each
    /// architecture it should appear in.
    pub indexes: Vec<(&'a str, Vec<&'a Package>)>,
    /// `Acquire-By-Hash: yes` and the `by-hash/SHA256/` copies.
    pub by_hash: bool,
    /// The forms served (`""`, `".gz"`, `".xz"`); `Release` lists all three's hashes either way.
    pub forms: &'a [&'a str],
    /// `Valid-Until`, as milliseconds since the epoch.
    pub valid_until: Option<i64>,
}

/// A signed Debian archive's files for `dist` and `signer`: what [`Upstream::publish`] takes.
/// Keeps the `by-hash` files of `keep` (an earlier generation, as Debian keeps them a while).
pub fn archive_files(
    dist: &Dist<'_>,
    signer: &Signer,
    keep: Option<&HashMap<String, Vec<u8>>>,
) -> anyhow::Result<HashMap<String, Vec<u8>>> {
    let mut files: HashMap<String, Vec<u8>> = HashMap::new();
    if let Some(old) = keep {
        for (p, b) in old.iter().filter(|(p, _)| p.contains("/by-hash/")) {
            files.insert(p.clone(), b.clone());
        }
    }
    let mut listed: BTreeMap<String, (Vec<u8>, Vec<u8>)> = BTreeMap::new(); // path → (md5, sha256)
    let mut sizes = HashMap::new();
    let archs: Vec<&str> = dist.indexes.iter().map(|(a, _)| *a).collect();
    for (arch, packages) in &dist.indexes {
        let text: String = packages.iter().map(|p| format!("{}\n", p.stanza())).collect();
        for p in packages {
            files.insert(p.pool_path(), p.deb.clone());
        }
        for form in ["", ".gz", ".xz"] {
            let bytes = packyard_codecs::apt::testing::compress(form, text.as_bytes());
            let rel = format!("main/binary-{arch}/Packages{form}");
            let sha = sha2::Sha256::digest(&bytes).to_vec();
            listed.insert(rel.clone(), (md5::Md5::digest(&bytes).to_vec(), sha.clone()));
            sizes.insert(rel.clone(), bytes.len());
            if dist.forms.contains(&form) {
                files.insert(format!("dists/{}/{rel}", dist.name), bytes.clone());
                if dist.by_hash {
                    files.insert(
                        format!("dists/{}/main/binary-{arch}/by-hash/SHA256/{}", dist.name, hex::encode(&sha)),
                        bytes,
                    );
                }
            }
        }
    }
    let now = packyard_store::db::now_ms();
    let mut release = format!(
        "Origin: Fake\nLabel: Fake\nSuite: {0}\nCodename: {0}\nDate: {1}\n",
        dist.name,
        packyard_model::time::rfc1123_utc(dist.valid_until.map_or(now, |v| v.min(now)) - 60_000)
    );
    if let Some(v) = dist.valid_until {
        release.push_str(&format!("Valid-Until: {}\n", packyard_model::time::rfc1123_utc(v)));
    }
    release.push_str(&format!("Architectures: {}\nComponents: main\n", archs.join(" ")));
    if dist.by_hash {
        release.push_str("Acquire-By-Hash: yes\n");
    }
    for (section, which) in [("MD5Sum", 0), ("SHA256", 1)] {
        release.push_str(&format!("{section}:\n"));
        for (path, (md5, sha)) in &listed {
            let sum = if which == 0 { md5 } else { sha };
            release.push_str(&format!(" {} {:>10} {path}\n", hex::encode(sum), sizes[path]));
        }
    }
    files.insert(format!("dists/{}/Release", dist.name), release.clone().into_bytes());
    files.insert(format!("dists/{}/InRelease", dist.name), signer.clearsign(&release)?.into_bytes());
    files.insert(format!("dists/{}/Release.gpg", dist.name), signer.detached(release.as_bytes())?.into_bytes());
    Ok(files)
}
