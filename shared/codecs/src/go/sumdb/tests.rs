//! A database end to end: a log built by appending, served as tiles, checked by a client that
//! sees only the tiles and the signed tree head — ours, and the real go command's.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{anyhow, ensure, Context as _};
use sha2::{Digest, Sha256};

use super::tlog::{self, TileLevel, TILE_HEIGHT};
use super::*;
use crate::go::testing::{module_zip, ZipFile};

/// A database in memory: records, stored hashes and the signed head of all of them.
struct Database {
    records: Vec<String>,
    stored: Vec<Hash>,
    ids: HashMap<(String, String), u64>,
    signed: String,
}

impl Database {
    fn new(signer: &Signer, entries: impl IntoIterator<Item = (String, String, String)>) -> anyhow::Result<Self> {
        let mut db = Self { records: Vec::new(), stored: Vec::new(), ids: HashMap::new(), signed: String::new() };
        for (module, version, text) in entries {
            let n = db.records.len() as u64;
            let read = db.read(&tlog::indexes_for_append(n));
            db.stored.extend(tlog::hashes_for_append(n, tlog::record_hash(text.as_bytes()), &read)?);
            db.records.push(text);
            db.ids.insert((module, version), n);
        }
        let size = db.records.len() as u64;
        let tree = Tree { size, hash: tlog::tree_hash(size, &db.read(&tlog::indexes_for_tree_hash(size)))? };
        db.signed = sign_tree(signer, &tree)?;
        Ok(db)
    }

    fn read(&self, indexes: &[u64]) -> Vec<Hash> {
        indexes.iter().map(|&i| self.stored[i as usize]).collect()
    }

    fn tile(&self, tile: &Tile) -> Option<Vec<u8>> {
        if !tile.is_within(self.records.len() as u64) {
            return None;
        }
        match tile.level {
            TileLevel::Data => {
                let range = tile.range();
                tile.data_tile(self.records[range.start as usize..range.end as usize].iter().map(String::as_str)).ok()
            }
            TileLevel::Hashes(_) => tile.hash_tile(&self.read(&tile.hash_indexes())).ok(),
        }
    }

    /// The body of a GET of `path`, as a sumdb server answers it.
    fn get(&self, path: &str) -> Option<Vec<u8>> {
        if path == "/latest" {
            return Some(self.signed.clone().into_bytes());
        }
        if let Some(target) = path.strip_prefix("/lookup/") {
            let key = parse_lookup_target(target).ok()?;
            let id = *self.ids.get(&key)?;
            return lookup_body(id, &self.records[id as usize], &self.signed).ok().map(String::into_bytes);
        }
        let tile = Tile::parse_path(path.strip_prefix('/')?).ok()?;
        self.tile(&tile)
    }
}

fn filler(i: usize) -> (String, String, String) {
    let module = format!("example.com/filler{i}");
    let h1 = h1_go_mod(format!("module {module}\n").as_bytes());
    (module.clone(), "v1.0.0".into(), record_text(&module, "v1.0.0", &h1, &h1))
}

/// The root over a tile's entries (its width a power of two).
fn root_of(data: &[u8]) -> Hash {
    let hashes: Vec<Hash> = data.chunks(tlog::HASH_SIZE).filter_map(|c| Hash::from_slice(c).ok()).collect();
    // A full tile's entries are a complete subtree: RFC 6962's hash of them is the stored one.
    fn merkle(h: &[Hash]) -> Hash {
        if h.len() == 1 {
            return h[0];
        }
        let (l, r) = h.split_at(h.len() / 2);
        tlog::node_hash(&merkle(l), &merkle(r))
    }
    merkle(&hashes)
}

/// What the go command does with a lookup answer, knowing only the database's key: opens the
/// signed tree head, then checks the record against it through tiles ([`check_record`]).
/// Returns the record's text.
fn client_lookup(
    verifier: &Verifier,
    height: u8,
    body: &str,
    fetch: &dyn Fn(&Tile) -> Option<Vec<u8>>,
) -> anyhow::Result<String> {
    let (id, text, signed) = parse_lookup_body(body)?;
    let tree = open_tree(verifier, signed)?;
    check_record(&tree, height, id, text, fetch)?;
    Ok(text.to_string())
}

/// Recomputes the tree's hash from tiles, then finds the record's leaf hash in a tile and walks
/// up, tile by tile, until reaching a tile the tree hash already proved.
fn check_record(
    tree: &Tree,
    height: u8,
    id: u64,
    text: &str,
    fetch: &dyn Fn(&Tile) -> Option<Vec<u8>>,
) -> anyhow::Result<()> {
    ensure!(id < tree.size, "record {id} is not in a tree of {}", tree.size);
    // A tile at the width it has in this tree.
    let in_tree = |tile: Tile| {
        let entries = tree.size >> tile.tree_level();
        let start = tile.number << height;
        let width = (entries - start).min(u64::from(tile.full_width())) as u32;
        Tile { width, ..tile }
    };
    let get = |tile: &Tile| fetch(tile).ok_or_else(|| anyhow!("no tile {}", tile.path()));

    let mut proven: HashMap<Tile, Vec<u8>> = HashMap::new();
    let mut hashes = Vec::new();
    for index in tlog::indexes_for_tree_hash(tree.size) {
        let tile = in_tree(Tile::for_stored_index(height, index));
        let data = get(&tile)?;
        hashes.push(tile.hash_from_data(&data, index)?);
        proven.insert(tile, data);
    }
    ensure!(tlog::tree_hash(tree.size, &hashes)? == tree.hash, "the tiles do not hash to the signed tree");

    let leaf = tlog::stored_hash_index(0, id);
    let mut tile = in_tree(Tile::for_stored_index(height, leaf));
    let mut data = get(&tile)?;
    ensure!(tile.hash_from_data(&data, leaf)? == tlog::record_hash(text.as_bytes()), "the record is not in its tile");
    while proven.get(&tile) != Some(&data) {
        ensure!(tile.is_full(), "partial tile {} is not the one the tree hash proved", tile.path());
        let above = tlog::stored_hash_index(tile.tree_level() + height, tile.number);
        let parent = in_tree(Tile::for_stored_index(height, above));
        let parent_data = get(&parent)?;
        ensure!(
            parent.hash_from_data(&parent_data, above)? == root_of(&data),
            "tile {} is not in its parent",
            tile.path()
        );
        (tile, data) = (parent, parent_data);
    }
    Ok(())
}

#[test]
fn a_client_checks_lookups_through_tiles() -> anyhow::Result<()> {
    let signer = Signer::generate("sum.example.test")?;
    let verifier = signer.verifier();
    for (height, sizes) in [(2u8, (1..=70).collect::<Vec<usize>>()), (TILE_HEIGHT, vec![1, 255, 256, 257, 600, 1000])] {
        let largest = sizes.iter().copied().max().unwrap_or_default();
        let db = Database::new(&signer, (0..largest).map(filler))?;
        let fetch = |t: &Tile| db.tile(t);
        // The whole path once: the lookup answer and its signed head.
        let last = largest - 1;
        let body = lookup_body(last as u64, &db.records[last], &db.signed)?;
        assert_eq!(client_lookup(&verifier, height, &body, &fetch)?, db.records[last]);
        // Then every record of every smaller tree: a smaller tree's tiles are prefixes of the
        // larger one's, so the same database serves them.
        for size in sizes {
            let read = db.read(&tlog::indexes_for_tree_hash(size as u64));
            let tree = Tree { size: size as u64, hash: tlog::tree_hash(size as u64, &read)? };
            let last = size - 1;
            // Every record of the smaller trees; a sample of the larger ones (a debug build is slow).
            let step = if size > 300 { 7 } else { 1 };
            for id in (0..size).step_by(step).chain([last]) {
                let text = &db.records[id];
                let seen = Mutex::new(Vec::new());
                let watched = |t: &Tile| {
                    if let Ok(mut seen) = seen.lock() {
                        seen.push(*t);
                    }
                    db.tile(t)
                };
                check_record(&tree, height, id as u64, text, &watched)
                    .with_context(|| format!("height {height}, size {size}, record {id}"))?;
                if id % 13 != 0 && id != last {
                    continue;
                }
                // Any change to any tile the client read is caught.
                let seen = seen.into_inner().map_err(|_| anyhow!("poisoned"))?;
                for bad in &seen {
                    for byte in [0, tlog::HASH_SIZE * bad.width as usize - 1] {
                        let tampered = |t: &Tile| {
                            let mut data = db.tile(t)?;
                            if t == bad {
                                data[byte] ^= 1;
                            }
                            Some(data)
                        };
                        let result = check_record(&tree, height, id as u64, text, &tampered);
                        assert!(result.is_err(), "size {size}, record {id}: tile {} changed unnoticed", bad.path());
                    }
                }
            }
            // Another record's text, or a record the tree does not hold, fails.
            assert!(size == 1 || check_record(&tree, height, last as u64, &db.records[0], &fetch).is_err());
            assert!(check_record(&tree, height, size as u64, &db.records[0], &fetch).is_err());
        }
    }
    // A head signed by another key fails before any tile is read.
    let db = Database::new(&Signer::generate("sum.example.test")?, (0..3).map(filler))?;
    let body = lookup_body(0, &db.records[0], &db.signed)?;
    let error = client_lookup(&verifier, TILE_HEIGHT, &body, &|t| db.tile(t)).err().map(|e| e.to_string());
    assert_eq!(error, Some(format!("the note has no signature by key sum.example.test+{:08x}", verifier.key_hash())));
    Ok(())
}

#[test]
fn served_formats() -> anyhow::Result<()> {
    let signer = Signer::parse("PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz")?;
    let db = Database::new(&signer, (0..3).map(filler))?;
    let head = String::from_utf8(db.get("/latest").ok_or_else(|| anyhow!("no /latest"))?)?;
    let tree = open_tree(&signer.verifier(), &head)?;
    assert_eq!(tree.size, 3);
    assert!(head.starts_with(&format!("go.sum database tree\n3\n{}\n\n— PeterNeumann ", tree.hash)));

    let lookup = String::from_utf8(db.get("/lookup/example.com/filler1@v1.0.0").ok_or_else(|| anyhow!("no lookup"))?)?;
    assert_eq!(lookup, format!("1\n{}\n{head}", db.records[1]));
    assert!(lookup.starts_with("1\nexample.com/filler1 v1.0.0 h1:"));
    assert!(lookup.contains("\nexample.com/filler1 v1.0.0/go.mod h1:"));

    let data = String::from_utf8(db.get("/tile/8/data/000.p/3").ok_or_else(|| anyhow!("no data tile"))?)?;
    assert_eq!(data, format!("0\n{}\n1\n{}\n2\n{}\n", db.records[0], db.records[1], db.records[2]));
    assert_eq!(db.get("/tile/8/0/000.p/3").map(|d| d.len()), Some(3 * 32));
    assert_eq!(db.get("/tile/8/0/000.p/4"), None);
    assert_eq!(db.get("/tile/8/data/000"), None);
    Ok(())
}

#[test]
fn records_and_lookup_targets() -> anyhow::Result<()> {
    assert_eq!(
        record_text("golang.org/x/text", "v0.3.0", "h1:zip", "h1:mod"),
        "golang.org/x/text v0.3.0 h1:zip\ngolang.org/x/text v0.3.0/go.mod h1:mod\n"
    );
    let ok = |s: &str, m: &str, v: &str| assert_eq!(parse_lookup_target(s), Ok((m.into(), v.into())), "{s}");
    ok("example.com/!hello@v1.0.0", "example.com/Hello", "v1.0.0");
    ok("example.com/m@v2.0.0+incompatible", "example.com/m", "v2.0.0+incompatible");
    ok("example.com/m@v0.0.0-20191109021931-daa7c04131f5", "example.com/m", "v0.0.0-20191109021931-daa7c04131f5");
    ok("example.com/m@v1.0.0-!r!c.1", "example.com/m", "v1.0.0-RC.1");
    for bad in [
        "example.com/m",
        "@v1.0.0",
        "example.com/m@1.0.0",
        "example.com/m@v1.0",
        "example.com/m@v1.0.0+build",
        "example.com/m@v1.0.0@v1.0.0",
        "example.com/Hello@v1.0.0",
    ] {
        assert!(parse_lookup_target(bad).is_err(), "{bad}");
    }
    Ok(())
}

/// A module as a proxy serves it, and its hashes as we compute them.
struct Module {
    path: &'static str,
    version: &'static str,
    go_mod: &'static [u8],
    zip: Vec<u8>,
    h1_zip: String,
    h1_go_mod: String,
}

fn hello_module() -> anyhow::Result<Module> {
    let (path, version) = ("example.com/Hello", "v1.0.0");
    let go_mod: &[u8] = b"module example.com/Hello\n\ngo 1.16\n";
    let files = [
        ZipFile::new("go.mod", go_mod),
        ZipFile::new("hello.go", b"package hello\n\nconst Greeting = \"hello\"\n"),
        ZipFile::new("sub/", b""),
        ZipFile::new("sub/x.go", b"package sub\n"),
        ZipFile::new("LICENSE", b"Public domain.\n"),
    ];
    let zip = module_zip(path, version, &files)?;
    let entries = files.iter().map(|f| (format!("{path}@{version}/{}", f.name), Sha256::digest(&f.content).into()));
    let h1_zip = h1_zip(entries)?;
    Ok(Module { path, version, go_mod, zip, h1_go_mod: h1_go_mod(go_mod), h1_zip })
}

// The same module's hashes, from `go mod download -json` (go1.19.8, the go_command_* tests).
const HELLO_H1_ZIP: &str = "h1:mmteXDo/wo/NgVJwTwkb8J0PUWMnkUfCpzvh3sYxjHE=";
const HELLO_H1_GO_MOD: &str = "h1:fAiPEVYmaFXd3OqSQazpo2vuWuhn3l2Yua9bqKpJwEk=";

/// The zip check's `h1:`, taken on its one pass over the entries.
fn checked_h1(zip: &[u8]) -> anyhow::Result<String> {
    use crate::go::zip::{check_entries, locate, parse_central, tail_len, verify_data, Limits};
    let tail = &zip[zip.len() - tail_len(zip.len() as u64) as usize..];
    let (offset, size, count) = locate(tail, zip.len() as u64)?;
    let entries = parse_central(&zip[offset as usize..(offset + size) as usize], count, offset)?;
    let (m, v) = check_entries(&entries, None, &Limits::default())?;
    Ok(verify_data(zip, &entries, &format!("{m}@{v}/go.mod"))?.h1)
}

#[test]
fn h1_vectors() -> anyhow::Result<()> {
    let hello = hello_module()?;
    assert_eq!((hello.h1_zip.as_str(), hello.h1_go_mod.as_str()), (HELLO_H1_ZIP, HELLO_H1_GO_MOD));
    // The zip check computes the same hash on its way through the entries, whatever their
    // compression: the hash is of the content.
    assert_eq!(checked_h1(&hello.zip)?, HELLO_H1_ZIP);
    let files = [
        ZipFile { deflate: false, ..ZipFile::new("go.mod", hello.go_mod) },
        ZipFile { deflate: false, ..ZipFile::new("hello.go", b"package hello\n\nconst Greeting = \"hello\"\n") },
        ZipFile::new("sub/", b""),
        ZipFile { deflate: false, ..ZipFile::new("sub/x.go", b"package sub\n") },
        ZipFile::new("LICENSE", b"Public domain.\n"),
    ];
    let stored = module_zip(hello.path, hello.version, &files)?;
    assert_ne!(stored, hello.zip);
    assert_eq!(checked_h1(&stored)?, HELLO_H1_ZIP);
    let other = module_zip(hello.path, hello.version, &[ZipFile::new("go.mod", b"module example.com/Hello\n")])?;
    assert_ne!(checked_h1(&other)?, HELLO_H1_ZIP);
    Ok(())
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> anyhow::Result<Self> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
        let dir = std::env::temp_dir().join(format!("packyard-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A GOPROXY directory (`file://`) serving one module.
fn write_proxy(root: &Path, module: &Module) -> anyhow::Result<()> {
    let dir = root.join(crate::go::escape(module.path)).join("@v");
    std::fs::create_dir_all(&dir)?;
    let v = module.version;
    std::fs::write(dir.join("list"), format!("{v}\n"))?;
    std::fs::write(
        dir.join(format!("{v}.info")),
        format!("{{\"Version\":\"{v}\",\"Time\":\"2024-01-01T00:00:00Z\"}}"),
    )?;
    std::fs::write(dir.join(format!("{v}.mod")), module.go_mod)?;
    std::fs::write(dir.join(format!("{v}.zip")), &module.zip)?;
    Ok(())
}

fn go_available() -> bool {
    let found = Command::new("go").arg("version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: no `go` on PATH");
    }
    found
}

/// `go mod download -json <module>@<version>` in a fresh GOPATH, from the proxy directory, with
/// this GOSUMDB: its JSON answer, which has an `Error` when the go command failed.
fn go_mod_download(scratch: &Path, run: &str, module: &Module, gosumdb: &str) -> anyhow::Result<serde_json::Value> {
    let home = scratch.join(run);
    std::fs::create_dir_all(&home)?;
    let output = Command::new("go")
        .args(["mod", "download", "-json", &format!("{}@{}", module.path, module.version)])
        .current_dir(&home)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("GOPATH", home.join("gopath"))
        .env("GOCACHE", home.join("cache"))
        .env("GOENV", "off")
        .env("GOFLAGS", "-modcacherw")
        .env("GO111MODULE", "on")
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", format!("file://{}", scratch.join("proxy").display()))
        .env("GOSUMDB", gosumdb)
        .env("NO_PROXY", "127.0.0.1")
        .output()?;
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("go: {}", String::from_utf8_lossy(&output.stderr)))?;
    ensure!(output.status.success() == json.get("Error").is_none(), "go: {json}");
    Ok(json)
}

#[test]
fn go_command_agrees_on_h1() -> anyhow::Result<()> {
    if !go_available() {
        return Ok(());
    }
    let scratch = Scratch::new("sumdb-h1")?;
    let hello = hello_module()?;
    write_proxy(&scratch.0.join("proxy"), &hello)?;
    let json = go_mod_download(&scratch.0, "off", &hello, "off")?;
    eprintln!("go: Sum {} GoModSum {}", json["Sum"], json["GoModSum"]);
    assert_eq!(json["Sum"].as_str(), Some(hello.h1_zip.as_str()));
    assert_eq!(json["GoModSum"].as_str(), Some(hello.h1_go_mod.as_str()));
    Ok(())
}

/// A tiny HTTP/1.1 server on an ephemeral port, recording the paths it is asked for.
struct HttpServer {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    fn start(db: Database) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, halt) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if halt.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let _ = Self::answer(stream, &db, &log);
                }
            }
        });
        Ok(Self { addr, requests, stop, thread: Some(thread) })
    }

    fn answer(stream: TcpStream, db: &Database, log: &Mutex<Vec<String>>) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut request = String::new();
        reader.read_line(&mut request)?;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 || header == "\r\n" {
                break;
            }
        }
        let path = request.split(' ').nth(1).unwrap_or_default().to_string();
        let body = db.get(&path);
        if let Ok(mut log) = log.lock() {
            log.push(path);
        }
        let (status, body) = match body {
            Some(body) => ("200 OK", body),
            None => ("404 Not Found", b"not found\n".to_vec()),
        };
        let mut stream = stream;
        write!(stream, "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len())?;
        stream.write_all(&body)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A log of 600 records with the module's at id 300: its leaf sits in a full tile, the tree's
/// edge in partial ones.
fn database_with(signer: &Signer, module: &Module, h1_zip: &str) -> anyhow::Result<Database> {
    let record = (
        module.path.into(),
        module.version.into(),
        record_text(module.path, module.version, h1_zip, &module.h1_go_mod),
    );
    Database::new(signer, (0..300).map(filler).chain([record]).chain((301..600).map(filler)))
}

#[test]
fn go_command_verifies_our_database() -> anyhow::Result<()> {
    if !go_available() {
        return Ok(());
    }
    let scratch = Scratch::new("sumdb-e2e")?;
    let hello = hello_module()?;
    write_proxy(&scratch.0.join("proxy"), &hello)?;
    let signer = Signer::generate("sum.example.test")?;

    let server = HttpServer::start(database_with(&signer, &hello, &hello.h1_zip)?)?;
    let gosumdb = format!("{} http://{}", signer.verifier(), server.addr);
    let json = go_mod_download(&scratch.0, "good", &hello, &gosumdb)?;
    let requests = server.requests();
    assert_eq!(json["Sum"].as_str(), Some(hello.h1_zip.as_str()), "{json}");
    assert!(requests.contains(&"/lookup/example.com/!hello@v1.0.0".to_string()), "{requests:?}");
    assert!(requests.iter().any(|r| r.starts_with("/tile/8/0/")), "{requests:?}");
    eprintln!("go asked for {requests:?}");
    let known = std::fs::read_to_string(scratch.0.join("good/gopath/pkg/sumdb/sum.example.test/latest"))?;
    assert!(known.starts_with("go.sum database tree\n600\n"), "{known}");

    // The same log, but the module's record says another zip hash: the go command refuses it.
    let other = h1_zip([(format!("{}@{}/go.mod", hello.path, hello.version), [0u8; 32])])?;
    let liar = HttpServer::start(database_with(&signer, &hello, &other)?)?;
    let gosumdb = format!("{} http://{}", signer.verifier(), liar.addr);
    let json = go_mod_download(&scratch.0, "liar", &hello, &gosumdb)?;
    let error = json["Error"].as_str().unwrap_or_default();
    assert!(error.contains("checksum mismatch") && error.contains(&other), "{json}");

    // Signed by another key than GOSUMDB names: refused.
    let impostor = Signer::generate("sum.example.test")?;
    let forged = HttpServer::start(database_with(&impostor, &hello, &hello.h1_zip)?)?;
    let gosumdb = format!("{} http://{}", signer.verifier(), forged.addr);
    let json = go_mod_download(&scratch.0, "forged", &hello, &gosumdb)?;
    let error = json["Error"].as_str().unwrap_or_default();
    assert!(error.contains("reading tree note: note has no verifiable signatures"), "{json}");
    Ok(())
}
