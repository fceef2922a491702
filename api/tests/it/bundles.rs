//! Export and import for air-gapped sites (#42): `packyard-api export` on one instance,
//! `packyard-api import bundle` on a second one with its own data directory and database and
//! no route to the first (no proxy is configured): `apt-get` and `go` against the second
//! install the same bytes; an incremental export carries only the new blobs; a damaged or
//! altered bundle is refused before anything is stored; an import twice changes nothing; a
//! component deleted at the source goes at the target too; the tar stream is the same bundle.
//! On SQLite, PostgreSQL and MariaDB.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common;
use common::archive::Package;
use common::process::{basic, run_to_end, status_of, Server};
use common::Repo;
use packyard_model::repos::Format;
use serde_json::Value;
use sha2::Digest as _;

const PW: &str = "bundle-secret";

struct Instance {
    server: Server,
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Instance {
    fn start(backend: packyard_store::db::Backend) -> anyhow::Result<Option<Self>> {
        Self::start_with(backend, &[])
    }

    /// With more settings (`extra`), kept for its restarts.
    fn start_with(backend: packyard_store::db::Backend, extra: &[(&str, &str)]) -> anyhow::Result<Option<Self>> {
        let Some((url, dir)) = common::process::database_for(backend)? else { return Ok(None) };
        let mut env = vec![("PACKYARD_SECURITY__ADMIN_PASSWORD".to_string(), PW.to_string())];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        if let Some(url) = &url {
            env.push(("PACKYARD_DATABASE__URL".into(), url.clone()));
            env.push(("PACKYARD_SECURITY__SECRET".into(), "a-shared-secret-of-enough-length".into()));
        }
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let server = common::process::start_on(dir.path(), None, &pairs)?;
        Ok(Some(Self { server, dir, env }))
    }

    /// Stops the server and starts it again on the same data and database, with `extra`.
    fn restart(self, extra: &[(&str, &str)]) -> anyhow::Result<Self> {
        let Self { server, dir, env } = self;
        anyhow::ensure!(server.terminate()?.success(), "the server did not stop cleanly");
        let mut pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        pairs.extend_from_slice(extra);
        let server = common::process::start_on(dir.path(), None, &pairs)?;
        Ok(Self { server, dir, env })
    }

    /// A server of this instance's data and database stopped: started again with `extra`.
    fn start_again(dir: tempfile::TempDir, env: Vec<(String, String)>, extra: &[(&str, &str)]) -> anyhow::Result<Self> {
        let mut pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        pairs.extend_from_slice(extra);
        let server = common::process::start_on(dir.path(), None, &pairs)?;
        Ok(Self { server, dir, env })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.public)
    }

    /// Runs the binary where this instance's configuration and data are.
    fn run(&self, args: &[&str]) -> anyhow::Result<(i32, String, String)> {
        let pairs: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run_to_end(self.dir.path(), args, &pairs)
    }

    fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let (code, out, err) = self.run(args)?;
        anyhow::ensure!(code == 0, "{args:?}: exit {code}\n{out}{err}");
        Ok(out)
    }

    fn send(&self, method: &str, path: &str, body: &[u8]) -> anyhow::Result<()> {
        let r = ureq::request(method, &self.url(path)).set("Authorization", &basic(PW)).send_bytes(body);
        let (s, text) = status_of(r)?;
        anyhow::ensure!((200..300).contains(&s), "{method} {path}: {s} {text}");
        Ok(())
    }

    fn get(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        let r = ureq::get(&self.url(path)).set("Authorization", &basic(PW)).call()?;
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut r.into_reader(), &mut out)?;
        Ok(out)
    }

    /// Waits until the file at `path` says `what` (a publication after an import).
    fn published(&self, path: &str, what: &str) -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let text = match self.get(path) {
                Ok(bytes) => String::from_utf8(bytes)?,
                Err(e) => e.to_string(),
            };
            if text.contains(what) {
                return Ok(());
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "{path} never said {what:?}:\n{text}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// What a repository holds, by Nexus's search.
    fn holds(&self, repo: &str) -> anyhow::Result<std::collections::BTreeSet<String>> {
        common::process::catalogue(&self.server.public, &basic(PW), repo)
    }
}

fn sha(b: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(b))
}

/// Every file under `dir` and its size.
fn sizes(dir: &Path) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            if e.file_type()?.is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir)?.to_string_lossy().into_owned();
                out.insert(rel, e.metadata()?.len());
            }
        }
    }
    Ok(out)
}

fn air_gap_on(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    let Some(a) = Instance::start(backend)? else { return Ok(()) };
    let Some(b) = Instance::start(backend)? else { return Ok(()) };
    let auth = basic(PW);
    common::process::create_repository(&a.server.public, &auth, Repo::hosted("debs", Format::Apt).0)?;
    common::process::create_repository(&a.server.public, &auth, Repo::hosted("mods", Format::Go).0)?;
    let (hello, tool) = (Package::new("hello", "1.0", "amd64"), Package::new("tool", "2.0", "amd64"));
    a.send("POST", "/repository/debs/?wait=true", &hello.deb)?;
    a.send("POST", "/repository/debs/?wait=true", &tool.deb)?;
    let zip = packyard_codecs::go::testing::simple_module("example.com/kept", "v1.0.0", "v1.0.0", 100)?;
    a.send("PUT", "/repository/mods/example.com/kept/@v/v1.0.0.zip", &zip)?;

    // Export both, import both into the second instance (whose repositories do not exist yet).
    let out = tempfile::tempdir()?;
    let dir = |name: &str| out.path().join(name).to_string_lossy().into_owned();
    let said = a.ok(&["export", "--repository", "debs", "--to", &dir("debs1")])?;
    assert!(said.contains("exported 2 components: 2 blobs"), "{said}");
    a.ok(&["export", "--repository", "mods", "--to", &dir("mods1")])?;
    let said = b.ok(&["import", "bundle", "--from", &dir("debs1")])?;
    assert!(said.contains("into repository debs (created)"), "{said}");
    assert!(said.contains("2 components stored, 0 unchanged, 0 deleted"), "{said}");
    b.ok(&["import", "bundle", "--from", &dir("mods1"), "--key", &format!("{}/manifest.sig", dir("debs1"))])?;

    // The same bytes through the real clients; the indexes the same but for their signatures.
    let packages = "/repository/debs/dists/stable/main/binary-amd64/Packages";
    b.published(packages, "Package: tool")?;
    b.published("/repository/mods/example.com/kept/@v/list", "v1.0.0")?;
    let (wait_a, wait_b) = (a.get(packages)?, b.get(packages)?);
    assert_eq!(String::from_utf8(wait_b)?, String::from_utf8(wait_a)?, "the same Packages");
    let key = b.get("/repository/debs/gpg.key")?;
    assert_ne!(key, a.get("/repository/debs/gpg.key")?, "the second instance signs with its own key");
    let root = crate::apt::apt_root(&key, &b.url("/repository/debs"))?;
    crate::apt::update_ok(root.path())?;
    assert_eq!(crate::apt::download(root.path(), "hello")?, hello.deb);
    assert_eq!(crate::apt::download(root.path(), "tool")?, tool.deb);
    let work = tempfile::tempdir()?;
    let home = tempfile::tempdir()?;
    let go = common::golang::command(
        work.path(),
        home.path(),
        &b.url("/repository/mods"),
        &["mod", "download", "-json", "example.com/kept@latest"],
    )
    .output()?;
    anyhow::ensure!(go.status.success(), "go mod download: {}", String::from_utf8_lossy(&go.stderr));
    let v: Value = serde_json::from_slice(&go.stdout)?;
    assert_eq!(v["Version"], "v1.0.0");
    assert_eq!(sha(&std::fs::read(v["Zip"].as_str().unwrap_or_default())?), sha(&zip), "the same module zip");

    // Twice: nothing changes.
    let said = b.ok(&["import", "bundle", "--from", &dir("debs1")])?;
    assert!(said.contains("0 components stored, 2 unchanged, 0 deleted"), "{said}");

    // Incremental: ten new packages, one deleted; the bundle carries the ten blobs and the
    // manifest, nothing more.
    let new: Vec<Package> = (0..10).map(|i| Package::new(&format!("new{i}"), "1.0", "amd64")).collect();
    for p in &new {
        a.send("POST", "/repository/debs/", &p.deb)?;
    }
    a.send("DELETE", &format!("/repository/debs/{}?wait=true", tool.pool_path()), b"")?;
    let said = a.ok(&["export", "--repository", "debs", "--since", &dir("debs1"), "--to", &dir("debs2")])?;
    assert!(said.contains("exported 11 components: 10 blobs"), "{said}");
    let files = sizes(&out.path().join("debs2"))?;
    let blob_bytes: u64 = new.iter().map(|p| p.deb.len() as u64).sum();
    let manifest = files.get("manifest.json").copied().unwrap_or_default();
    let signature = files.get("manifest.sig").copied().unwrap_or_default();
    assert_eq!(files.len(), 12, "ten blobs, the manifest and its signature: {files:?}");
    assert_eq!(files.values().sum::<u64>(), blob_bytes + manifest + signature, "{files:?}");
    let m: Value = serde_json::from_slice(&std::fs::read(out.path().join("debs2/manifest.json"))?)?;
    assert_eq!(m["follows"], sha(&std::fs::read(out.path().join("debs1/manifest.json"))?));
    let started = std::time::Instant::now();
    let said = b.ok(&["import", "bundle", "--from", &dir("debs2")])?;
    eprintln!("the incremental import of 10 packages took {:?}", started.elapsed());
    assert!(said.contains("10 components stored, 1 unchanged, 1 deleted"), "{said}");
    assert_eq!(b.holds("debs")?, a.holds("debs")?, "the same components");
    // The second instance's worker publishes what the import recorded.
    b.published(packages, "Package: new9")?;
    crate::apt::update_ok(root.path())?;
    assert_eq!(crate::apt::download(root.path(), "new7")?, new[7].deb);

    // Refused before anything is stored: an incremental bundle without the one it follows, a
    // damaged blob, an altered manifest, another instance's key.
    let copy = out.path().join("damaged");
    std::fs::create_dir_all(&copy)?;
    let _ = std::process::Command::new("cp").arg("-r").arg(format!("{}/.", dir("debs1"))).arg(&copy).status()?;
    let victim = copy.join(format!("blobs/{}/{}", &sha(&hello.deb)[..2], sha(&hello.deb)));
    // On an instance that has none of these blobs (the second reads none it holds already).
    if let Some(c) = Instance::start(backend)? {
        let (code, _, err) = c.run(&["import", "bundle", "--from", &dir("debs2")])?;
        assert_ne!(code, 0);
        assert!(err.contains("which is not imported here: import that one first"), "{err}");
        let mut bytes = std::fs::read(&victim)?;
        bytes[100] ^= 1;
        std::fs::write(&victim, &bytes)?;
        let (code, _, err) = c.run(&["import", "bundle", "--from", &copy.to_string_lossy()])?;
        assert_ne!(code, 0);
        assert!(err.contains(&format!("blob {} is damaged", sha(&hello.deb))), "{err}");
        std::fs::write(&victim, &hello.deb)?;
        let r = ureq::get(&c.url("/api/v1/repositories/debs")).set("Authorization", &auth).call();
        assert_eq!(status_of(r)?.0, 404, "no repository was made for a refused bundle");
        assert!(c.server.terminate()?.success());
    }
    let text = std::fs::read_to_string(copy.join("manifest.json"))?;
    std::fs::write(copy.join("manifest.json"), text.replace("\"tool\"", "\"t00l\""))?;
    let (code, _, err) = b.run(&["import", "bundle", "--from", &copy.to_string_lossy(), "--into", "damaged"])?;
    assert_ne!(code, 0);
    assert!(err.contains("does not match its signature: it was changed after export"), "{err}");
    std::fs::write(copy.join("manifest.json"), text)?;
    b.ok(&["export", "--repository", "debs", "--to", &dir("from-b")])?;
    let theirs = format!("{}/manifest.sig", dir("from-b"));
    let (code, _, err) =
        b.run(&["import", "bundle", "--from", &copy.to_string_lossy(), "--into", "damaged", "--key", &theirs])?;
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("not by the key given"), "{err}");
    let r = ureq::get(&b.url("/api/v1/repositories/damaged")).set("Authorization", &auth).call();
    assert_eq!(status_of(r)?.0, 404, "no repository was made for a refused bundle");
    assert!(!b.holds("debs")?.is_empty());

    // The tar stream: the same bundle, read from a file.
    let (code, tar, err) = {
        let pairs: Vec<(&str, &str)> = a.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let out = common::process::command(a.dir.path(), &pairs)
            .args(["export", "--repository", "debs", "--to", "-"])
            .output()?;
        (out.status.code().unwrap_or(-1), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("exported 11 components: 11 blobs"), "{err}");
    let tar_file = out.path().join("debs.tar");
    std::fs::write(&tar_file, &tar)?;
    let listing = std::process::Command::new("tar").arg("-tf").arg(&tar_file).output()?;
    let names = String::from_utf8_lossy(&listing.stdout).into_owned();
    assert!(names.starts_with("manifest.json\nmanifest.sig\nblobs/"), "{names}");
    let said = b.ok(&["import", "bundle", "--from", &tar_file.to_string_lossy(), "--into", "from-tar"])?;
    assert!(said.contains("11 components stored"), "{said}");
    b.published("/repository/from-tar/dists/stable/main/binary-amd64/Packages", "Package: new9")?;
    assert_eq!(b.get("/repository/from-tar/dists/stable/main/binary-amd64/Packages")?, b.get(packages)?);

    assert!(a.server.terminate()?.success());
    assert!(b.server.terminate()?.success());
    Ok(())
}

/// A follower of another instance's repositories converges after uploads, deletes and a
/// restart of either side, keeping what its filters keep; `apt-get` and `go` install from it.
fn replication_on(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    let port = common::process::free_port()?.to_string();
    let bind = format!("127.0.0.1:{port}");
    let source_env = [("PACKYARD_SERVER__BIND", bind.as_str())];
    let Some(a) = Instance::start_with(backend, &source_env)? else { return Ok(()) };
    let loopback = [("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)];
    let Some(b) = Instance::start_with(backend, &loopback)? else { return Ok(()) };
    let auth = basic(PW);
    let archs = serde_json::json!({"apt": {"architectures": ["amd64", "arm64"]}});
    common::process::create_repository(
        &a.server.public,
        &auth,
        Repo::hosted("debs", Format::Apt).with(archs.clone()).0,
    )?;
    common::process::create_repository(&a.server.public, &auth, Repo::hosted("mods", Format::Go).0)?;
    let hello = |v: &str| Package::new("hello", v, "amd64");
    let (hello_arm, tool, other) = (
        Package::new("hello", "1.1", "arm64"),
        Package::new("tool", "1.0", "amd64"),
        Package::new("other", "1.0", "amd64"),
    );
    for p in [&hello("1.0"), &hello("1.1"), &hello_arm, &tool, &other] {
        a.send("POST", "/repository/debs/", &p.deb)?;
    }
    let zip = |v: &str| packyard_codecs::go::testing::simple_module("example.com/followed", v, v, 100);
    a.send("PUT", "/repository/mods/example.com/followed/@v/v1.0.0.zip", &zip("v1.0.0")?)?;
    let old_mods = a.get("/repository/mods/-/export/manifest")?;
    let source = a.server.public.clone();
    // Plain http: the follower checks the source's key (its fingerprint, as its manifest says).
    let signed: Value = serde_json::from_slice(&a.get("/repository/debs/-/export/manifest")?)?;
    let manifest: Value = serde_json::from_str(signed["manifest"].as_str().unwrap_or_default())?;
    let key = manifest["instance"].as_str().unwrap_or_default().to_string();
    assert_eq!(key.len(), 32, "{manifest}");
    let follow = serde_json::json!({"replication": {"url": source, "repository": "debs", "names": ["hello", "t*"],
        "architectures": ["amd64"], "newest": 1, "every_secs": 1, "key": key}});
    common::process::create_repository(
        &b.server.public,
        &auth,
        Repo::hosted("mirror", Format::Apt).with(archs).with(follow).0,
    )?;
    let follow = serde_json::json!({"replication": {"url": a.server.public, "repository": "mods", "every_secs": 1,
        "key": key}});
    common::process::create_repository(&b.server.public, &auth, Repo::hosted("mods", Format::Go).with(follow).0)?;
    // A password over plain http would travel in clear: refused.
    let clear = serde_json::json!({"replication": {"url": a.server.public, "repository": "mods", "key": key,
        "username": "admin", "password": PW}});
    let r = ureq::post(&b.url("/api/v1/repositories"))
        .set("Authorization", &auth)
        .send_json(Repo::hosted("in-clear", Format::Go).with(clear).0);
    let (s, text) = status_of(r)?;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("over plain http would be sent in clear"), "{text}");
    // Another key than the source's: nothing is taken from it.
    let wrong = serde_json::json!({"replication": {"url": a.server.public, "repository": "debs", "every_secs": 1,
        "key": "0123456789abcdef0123456789abcdef"}});
    common::process::create_repository(&b.server.public, &auth, Repo::hosted("wrong-key", Format::Apt).with(wrong).0)?;
    // Other format settings than the source's (its packages would go to another component):
    // refused, every run, rather than stored and deleted again each time.
    let astray = serde_json::json!({"apt": {"components": ["contrib"], "architectures": ["amd64"]},
        "replication": {"url": a.server.public, "repository": "debs", "names": ["tool"], "every_secs": 1, "key": key}});
    common::process::create_repository(&b.server.public, &auth, Repo::hosted("astray", Format::Apt).with(astray).0)?;
    // Plain http without a key is refused when the repository is made.
    let unkeyed = serde_json::json!({"replication": {"url": a.server.public, "repository": "debs"}});
    let r = ureq::post(&b.url("/api/v1/repositories"))
        .set("Authorization", &auth)
        .send_json(Repo::hosted("unkeyed", Format::Apt).with(unkeyed).0);
    let (s, text) = status_of(r)?;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("plain http: give `replication.key`"), "{text}");
    let converges = |b: &Instance, repo: &str, want: &[&str]| -> anyhow::Result<()> {
        let want: std::collections::BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let held = b.holds(repo)?;
            if held == want {
                return Ok(());
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "{repo} holds {held:?}, not {want:?}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    // The newest hello for amd64 and tool: not hello 1.0, not arm64's, not other.
    converges(&b, "mirror", &["hello 1.1", "tool 1.0"])?;
    converges(&b, "mods", &["followed v1.0.0"])?;
    let packages = "/repository/mirror/dists/stable/main/binary-amd64/Packages";
    b.published(packages, "Package: tool")?;
    let text = String::from_utf8(b.get("/repository/mirror/dists/stable/main/binary-arm64/Packages")?)?;
    assert!(!text.contains("Package: hello"), "arm64 is filtered out:\n{text}");
    let root = crate::apt::apt_root(&b.get("/repository/mirror/gpg.key")?, &b.url("/repository/mirror"))?;
    crate::apt::update_ok(root.path())?;
    assert_eq!(crate::apt::download(root.path(), "hello")?, hello("1.1").deb);
    // A follower takes no writes of its own: an upload or a delete would be undone by its next
    // run.
    let refused = |method: &str, path: &str, body: &[u8]| -> anyhow::Result<()> {
        let r = ureq::request(method, &b.url(path)).set("Authorization", &auth).send_bytes(body);
        let (s, text) = status_of(r)?;
        assert_eq!(s, 403, "{method} {path}: {text}");
        assert!(text.contains("follows repository") && text.contains("takes no writes of its own"), "{text}");
        Ok(())
    };
    // The source's manifest has an entity tag: the same while nothing changes (a follower's
    // runs then get a 304 and do nothing), another after a change.
    let manifest_at = a.url("/repository/debs/-/export/manifest");
    let tag_now = || -> anyhow::Result<String> {
        let r = ureq::get(&manifest_at).set("Authorization", &auth).call()?;
        Ok(r.header("ETag").unwrap_or_default().to_string())
    };
    let tag = tag_now()?;
    assert!(tag.starts_with('"') && tag.len() == 34, "{tag}");
    assert_eq!(tag_now()?, tag);
    let r = ureq::get(&manifest_at).set("Authorization", &auth).set("If-None-Match", &tag).call()?;
    assert_eq!(r.status(), 304);
    let statuses = |status: &str| -> anyhow::Result<u64> {
        let metrics = ureq::get(&format!("{}/metrics", a.server.management)).call()?.into_string()?;
        let name = format!(
            "packyard_http_requests_total{{format=\"apt\",method=\"GET\",repository=\"debs\",status=\"{status}\"}}"
        );
        Ok(metrics.lines().find_map(|l| l.strip_prefix(&name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0))
    };
    let before = statuses("304")?;
    std::thread::sleep(std::time::Duration::from_millis(3500));
    assert!(statuses("304")? >= before + 2, "the follower's runs are answered 304 while nothing changes");
    refused("POST", "/repository/mirror/", &other.deb)?;
    refused("DELETE", "/repository/mods/example.com/followed/@v/v1.0.0.zip", b"")?;
    assert_eq!(b.holds("mirror")?.len(), 2);

    // Uploads and deletes at the source.
    a.send("POST", "/repository/debs/", &hello("1.2").deb)?;
    assert_ne!(tag_now()?, tag, "another tag after an upload");
    a.send("DELETE", &format!("/repository/debs/{}", tool.pool_path()), b"")?;
    a.send("PUT", "/repository/mods/example.com/followed/@v/v1.1.0.zip", &zip("v1.1.0")?)?;
    converges(&b, "mirror", &["hello 1.2"])?;
    converges(&b, "mods", &["followed v1.0.0", "followed v1.1.0"])?;
    b.published(packages, "Version: 1.2")?;

    // A replayed manifest: a source (here a stand-in serving the source's signed answers)
    // that answers with an older one than the follower took is refused, and nothing goes.
    let fake = common::archive::Upstream::start()?;
    let new_mods = a.get("/repository/mods/-/export/manifest")?;
    let signed: Value = serde_json::from_slice(&new_mods)?;
    let listed: Value = serde_json::from_str(signed["manifest"].as_str().unwrap_or_default())?;
    for c in listed["components"].as_array().into_iter().flatten() {
        for f in c["files"].as_array().into_iter().flatten() {
            let sha = f["sha256"].as_str().unwrap_or_default();
            let blob = a.get(&format!("/repository/mods/-/export/blobs/{sha}"))?;
            fake.put(&format!("repository/mods/-/export/blobs/{sha}"), blob);
        }
    }
    fake.put("repository/mods/-/export/manifest", new_mods);
    let follow =
        serde_json::json!({"replication": {"url": fake.url, "repository": "mods", "every_secs": 1, "key": key}});
    common::process::create_repository(&b.server.public, &auth, Repo::hosted("replayed", Format::Go).with(follow).0)?;
    converges(&b, "replayed", &["followed v1.0.0", "followed v1.1.0"])?;
    fake.put("repository/mods/-/export/manifest", old_mods);
    fake.forget_requests();
    let failed_runs = |b: &Instance| -> anyhow::Result<String> {
        let metrics = ureq::get(&format!("{}/metrics", b.server.management)).call()?.into_string()?;
        let name = "packyard_replication_runs_total{outcome=\"failed\",repository=\"replayed\"}";
        Ok(metrics.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while failed_runs(&b)?.is_empty() || failed_runs(&b)?.ends_with(" 0") {
        anyhow::ensure!(std::time::Instant::now() < deadline, "the replay was not refused");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(fake.requests().iter().any(|p| p.ends_with("/manifest")), "{:?}", fake.requests());
    // (The log line may reach the captured output a moment after the metric moved.)
    let logged = |b: &Instance, what: &str| -> anyhow::Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let log = b.server.stderr.lock().map(|s| s.clone()).unwrap_or_default();
            if log.contains(what) {
                return Ok(());
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "not logged: {what}\n{log}");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    logged(&b, "older than the one taken last")?;
    assert_eq!(
        b.holds("replayed")?,
        ["followed v1.0.0", "followed v1.1.0"].into_iter().map(String::from).collect(),
        "nothing deleted on the older manifest's word"
    );
    crate::apt::update_ok(root.path())?;
    assert_eq!(crate::apt::download(root.path(), "hello")?, hello("1.2").deb);

    // The follower restarted: it goes on.
    let b = b.restart(&loopback)?;
    let tool_2 = Package::new("tool", "2.0", "amd64");
    a.send("POST", "/repository/debs/", &tool_2.deb)?;
    converges(&b, "mirror", &["hello 1.2", "tool 2.0"])?;

    // The source down: runs fail, counted; back on the same address, the follower catches up.
    let Instance { server, dir, env } = a;
    assert!(server.terminate()?.success());
    std::thread::sleep(std::time::Duration::from_secs(3));
    let metrics =
        String::from_utf8(ureq::get(&format!("{}/metrics", b.server.management)).call()?.into_string()?.into_bytes())?;
    let line = |name: &str| metrics.lines().find(|l| l.starts_with(name)).map(str::to_string);
    let failed = line("packyard_replication_runs_total{outcome=\"failed\",repository=\"mirror\"}");
    assert!(failed.is_some_and(|l| !l.ends_with(" 0")), "{metrics}");
    let astray = line("packyard_replication_runs_total{outcome=\"failed\",repository=\"astray\"}");
    assert!(astray.is_some_and(|l| !l.ends_with(" 0")), "{metrics}");
    logged(&b, "its format settings place it elsewhere")?;
    assert!(b.holds("astray")?.is_empty(), "nothing stored under other keys");
    let wrong = line("packyard_replication_runs_total{outcome=\"failed\",repository=\"wrong-key\"}");
    assert!(wrong.is_some_and(|l| !l.ends_with(" 0")), "{metrics}");
    assert!(b.holds("wrong-key")?.is_empty(), "nothing from a source signed by another key");
    let held = line("packyard_replication_components{repository=\"mirror\",state=\"held\"}");
    assert_eq!(held.as_deref().and_then(|l| l.rsplit(' ').next()), Some("2"), "{metrics}");
    let lag: f64 = line("packyard_replication_lag_seconds{repository=\"mirror\"}")
        .and_then(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok()))
        .unwrap_or(-1.0);
    assert!(lag >= 1.0, "behind while the source is down: {lag}\n{metrics}");
    let a = Instance::start_again(dir, env, &[])?;
    anyhow::ensure!(a.server.public == source, "the source came back at {}, not {source}", a.server.public);
    a.send("POST", "/repository/debs/", &hello("1.3").deb)?;
    converges(&b, "mirror", &["hello 1.3", "tool 2.0"])?;
    b.published(packages, "Version: 1.3")?;

    assert!(a.server.terminate()?.success());
    assert!(b.server.terminate()?.success());
    Ok(())
}

#[test]
fn replication_converges_on_sqlite() -> anyhow::Result<()> {
    replication_on(packyard_store::db::Backend::Sqlite)
}

#[test]
fn replication_converges_on_postgres() -> anyhow::Result<()> {
    replication_on(packyard_store::db::Backend::Postgres)
}

#[test]
fn replication_converges_on_mariadb() -> anyhow::Result<()> {
    replication_on(packyard_store::db::Backend::MySql)
}

#[test]
fn export_and_import_between_instances_on_sqlite() -> anyhow::Result<()> {
    air_gap_on(packyard_store::db::Backend::Sqlite)
}

#[test]
fn export_and_import_between_instances_on_postgres() -> anyhow::Result<()> {
    air_gap_on(packyard_store::db::Backend::Postgres)
}

#[test]
fn export_and_import_between_instances_on_mariadb() -> anyhow::Result<()> {
    air_gap_on(packyard_store::db::Backend::MySql)
}
