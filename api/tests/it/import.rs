//! `packyard-api import apt` from real sources: a repository published by aptly and one by
//! reprepro (directories), and one Packyard publishes (a URL, its InRelease verified against
//! the key); then the real apt-get installs from Packyard exactly the bytes the source had. A
//! second run copies nothing, a later one only what is new; a run killed in the middle goes on
//! from its ledger with nothing copied twice and nothing missing; a file whose bytes are not
//! those its index lists is refused and nothing of it is kept.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{admin_json, basic, get_bytes, Server};
use sha2::{Digest, Sha256};

const PW: &str = "import-admin";

fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Generated packages `<prefix>-<i>` (amd64 and all), by file name.
fn packages(dir: &Path, prefix: &str, range: std::ops::Range<usize>) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    std::fs::create_dir_all(dir)?;
    let mut out = BTreeMap::new();
    for i in range {
        let arch = if i % 5 == 0 { "all" } else { "amd64" };
        let name = format!("{prefix}-{i}");
        let control = format!(
            "Package: {name}\nVersion: 1.{i}-1\nArchitecture: {arch}\nSection: misc\nPriority: optional\nMaintainer: T <t@example.org>\nDescription: imported package {i}\n"
        );
        let bytes = packyard_codecs::apt::testing::deb(&control, ".xz");
        let file = format!("{name}_1.{i}-1_{arch}.deb");
        std::fs::write(dir.join(&file), &bytes)?;
        out.insert(name, bytes);
    }
    Ok(out)
}

fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output()?;
    anyhow::ensure!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An aptly root publishing `debs` (unsigned) as `stable/main`: its `public/` directory.
fn aptly(root: &Path, debs: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(root)?;
    let conf = root.join("aptly.conf");
    std::fs::write(&conf, format!("{{\"rootDir\": \"{}\", \"architectures\": [\"amd64\"]}}", root.display()))?;
    let aptly = || {
        let mut c = Command::new("aptly");
        c.arg(format!("-config={}", conf.display())).env("HOME", root);
        c
    };
    if !root.join("db").exists() {
        run(aptly().args(["repo", "create", "-distribution=stable", "-component=main", "src"]))?;
    }
    run(aptly().args(["repo", "add", "src"]).arg(debs))?;
    let published = root.join("public/dists/stable");
    if published.exists() {
        run(aptly().args(["publish", "update", "-skip-signing", "stable"]))?;
    } else {
        run(aptly().args(["publish", "repo", "-skip-signing", "-architectures=amd64", "src"]))?;
    }
    Ok(root.join("public"))
}

/// A reprepro base directory with `debs` in `stable/main` (unsigned).
fn reprepro(base: &Path, debs: &[PathBuf]) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(base.join("conf"))?;
    std::fs::write(
        base.join("conf/distributions"),
        "Codename: stable\nSuite: stable\nComponents: main\nArchitectures: amd64 source\nDescription: reprepro test\n",
    )?;
    for d in debs {
        run(Command::new("reprepro").arg("-b").arg(base).args(["includedeb", "stable"]).arg(d))?;
    }
    Ok(base.to_path_buf())
}

/// `packyard-api import apt ARGS` where the server's configuration and data are.
fn import(dir: &Path, args: &[&str]) -> anyhow::Result<(i32, String, String)> {
    let mut all = vec!["import", "apt"];
    all.extend_from_slice(args);
    common::process::run_to_end(dir, &all, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])
}

/// What `apt-get download` fetches of each package, through Packyard's repository `repo`, once
/// its index lists all of `names`.
fn downloaded(server: &Server, repo: &str, names: &[&String]) -> anyhow::Result<BTreeMap<String, String>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, body) = get_bytes(server, &format!("/repository/{repo}/dists/stable/main/binary-amd64/Packages"))?;
        let text = String::from_utf8_lossy(&body);
        if s == 200 && names.iter().all(|n| text.contains(&format!("Package: {n}\n"))) {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "{repo} does not list every imported package:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (_, key) = get_bytes(server, &format!("/repository/{repo}/gpg.key"))?;
    let root = crate::apt::apt_root(&key, &format!("{}/repository/{repo}", server.public))?;
    crate::apt::update_ok(root.path())?;
    let mut out = BTreeMap::new();
    for n in names {
        out.insert(n.to_string(), sha256(&crate::apt::download(root.path(), n)?));
    }
    Ok(out)
}

fn create(server: &Server, name: &str) -> anyhow::Result<()> {
    let body = serde_json::json!({"name": name, "format": "apt", "type": "hosted",
        "apt": {"distribution": "stable", "components": ["main"], "architectures": ["amd64"]}});
    admin_json(&server.public, &basic(PW), "POST", "/api/v1/repositories", Some(body)).map(|_| ())
}

fn summary_line(out: &str) -> &str {
    out.lines().rev().find(|l| l.contains(" planned, ")).unwrap_or_default()
}

#[test]
fn import_apt_from_aptly_reprepro_and_a_url() -> anyhow::Result<()> {
    anyhow::ensure!(
        have("reprepro") && have("apt-get"),
        "reprepro and apt-get are needed (scripts/test.sh installs them)"
    );
    anyhow::ensure!(Command::new("aptly").arg("version").output().is_ok(), "aptly is not installed");
    let Some((server, dir)) = common::process::server_on(
        packyard_store::db::Backend::Sqlite,
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_WORKER__DEBOUNCE_MS", "50")],
    )?
    else {
        return Ok(());
    };
    let work = tempfile::tempdir()?;

    // aptly: 30 packages, published as a directory.
    let first = packages(&work.path().join("debs-1"), "aptly", 0..30)?;
    let public = aptly(&work.path().join("aptly"), &work.path().join("debs-1"))?;
    create(&server, "from-aptly")?;
    let from = public.display().to_string();
    let (code, out, err) = import(dir.path(), &["--from", &from, "--into", "from-aptly", "--dry-run"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("would copy 30 items ("), "{out}");
    assert!(out.contains("stable/main/pool/main/a/aptly-7/aptly-7_1.7-1_amd64.deb"), "{out}");
    let catalogue = || common::process::catalogue(&server.public, &basic(PW), "from-aptly");
    assert_eq!(catalogue()?.len(), 0, "a dry run copies nothing");

    let (code, out, err) = import(dir.path(), &["--from", &from, "--into", "from-aptly"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(summary_line(&out).starts_with("30 planned, 0 already copied, 30 copied"), "{out}");
    let names: Vec<&String> = first.keys().collect();
    let got = downloaded(&server, "from-aptly", &names)?;
    for (n, bytes) in &first {
        assert_eq!(got.get(n), Some(&sha256(bytes)), "apt-get downloads {n} as aptly published it");
    }

    // Again: nothing to copy. Then two new packages: only they are copied, quickly.
    let (code, out, _) = import(dir.path(), &["--from", &from, "--into", "from-aptly"])?;
    assert_eq!(code, 0);
    assert!(summary_line(&out).starts_with("30 planned, 30 already copied, 0 copied"), "{out}");
    let more = packages(&work.path().join("debs-2"), "aptly", 30..32)?;
    aptly(&work.path().join("aptly"), &work.path().join("debs-2"))?;
    let started = Instant::now();
    let (code, out, err) = import(dir.path(), &["--from", &from, "--into", "from-aptly"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(summary_line(&out).starts_with("32 planned, 30 already copied, 2 copied"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(5), "an incremental run took {:?}", started.elapsed());
    let names: Vec<&String> = more.keys().collect();
    let got = downloaded(&server, "from-aptly", &names)?;
    for (n, bytes) in &more {
        assert_eq!(got.get(n), Some(&sha256(bytes)));
    }

    // reprepro: the real Debian packages and generated ones.
    let mut debs: Vec<PathBuf> =
        std::fs::read_dir(work.path().join("debs-1"))?.filter_map(|e| e.ok().map(|e| e.path())).take(5).collect();
    if let Ok(real) = std::env::var("TEST_DEBS_DIR") {
        debs.extend(
            std::fs::read_dir(real)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "deb")),
        );
    }
    let base = reprepro(&work.path().join("reprepro"), &debs)?;
    // And a real source package (Debian's hello), when the test command fetched one.
    let mut source_files: Vec<(String, Vec<u8>)> = Vec::new();
    if let Ok(srcs) = std::env::var("TEST_SRCS_DIR") {
        for e in std::fs::read_dir(&srcs)? {
            let p = e?.path();
            let name = p.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
            if name.starts_with("hello_") {
                source_files.push((name, std::fs::read(&p)?));
            }
        }
        let dsc = source_files.iter().find(|(n, _)| n.ends_with(".dsc")).map(|(n, _)| Path::new(&srcs).join(n));
        let dsc = dsc.ok_or_else(|| anyhow::anyhow!("no hello_*.dsc in {srcs}"))?;
        run(Command::new("reprepro")
            .arg("-b")
            .arg(&base)
            .args(["-S", "devel", "-P", "optional", "includedsc", "stable"])
            .arg(&dsc))?;
    }
    create(&server, "from-reprepro")?;
    let (code, out, err) =
        import(dir.path(), &["--from", &base.display().to_string(), "--into", "from-reprepro", "--concurrency", "4"])?;
    assert_eq!(code, 0, "{out}{err}");
    // Each package by its name (the file name's first part).
    let expected: BTreeMap<String, String> = debs
        .iter()
        .map(|p| {
            let file = p.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
            let name = file.split('_').next().unwrap_or_default().to_string();
            (name, sha256(&std::fs::read(p).unwrap_or_default()))
        })
        .collect();
    let files = debs.len() + usize::from(!source_files.is_empty());
    assert!(summary_line(&out).contains(&format!(", {files} copied")), "{out}");
    let names: Vec<String> = expected.keys().cloned().collect();
    let name_refs: Vec<&String> = names.iter().collect();
    let got = downloaded(&server, "from-reprepro", &name_refs)?;
    assert_eq!(got, expected, "apt-get downloads what reprepro published, byte for byte");
    if !source_files.is_empty() {
        // The source package: in Sources, each of its files served as reprepro had it.
        let (s, body) = get_bytes(&server, "/repository/from-reprepro/dists/stable/main/source/Sources")?;
        let sources = String::from_utf8_lossy(&body).into_owned();
        assert!(s == 200 && sources.contains("Package: hello\n"), "{sources}");
        let dir = sources
            .lines()
            .find_map(|l| l.strip_prefix("Directory: "))
            .ok_or_else(|| anyhow::anyhow!("no Directory in {sources}"))?;
        for (name, bytes) in &source_files {
            let (s, served) = get_bytes(&server, &format!("/repository/from-reprepro/{dir}/{name}"))?;
            assert_eq!((s, sha256(&served)), (200, sha256(bytes)), "{dir}/{name}");
            assert!(sources.contains(&sha256(bytes)), "Sources lists {name}'s SHA-256");
        }
    }

    // From a URL: Packyard's own repository, its InRelease verified against its key.
    let (_, key) = get_bytes(&server, "/repository/from-aptly/gpg.key")?;
    std::fs::write(work.path().join("key.asc"), &key)?;
    create(&server, "from-url")?;
    let url = format!("{}/repository/from-aptly/", server.public);
    let key_file = work.path().join("key.asc").display().to_string();
    let (code, out, err) = import(dir.path(), &["--from", &url, "--into", "from-url", "--key", &key_file])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(summary_line(&out).starts_with("32 planned, 0 already copied, 32 copied"), "{out}");
    // A key that did not sign it: refused before anything is copied.
    let wrong = packyard_codecs::apt::signing::Signer::generate("wrong <wrong@example.org>")?;
    std::fs::write(work.path().join("wrong.asc"), wrong.public_armored()?)?;
    create(&server, "from-url-wrong")?;
    let wrong_file = work.path().join("wrong.asc").display().to_string();
    let (code, out, err) = import(dir.path(), &["--from", &url, "--into", "from-url-wrong", "--key", &wrong_file])?;
    assert_ne!(code, 0);
    assert!(
        err.contains("is not signed by the key given with --key") && err.contains("nothing was copied"),
        "{out}{err}"
    );

    // A package whose bytes are not those its index lists: refused, nothing of it kept.
    create(&server, "from-tampered")?;
    let victim = public.join("pool/main/a/aptly-3/aptly-3_1.3-1_amd64.deb");
    let mut bytes = std::fs::read(&victim)?;
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&victim, &bytes)?;
    let (code, out, err) = import(dir.path(), &["--from", &from, "--into", "from-tampered"])?;
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        out.contains("failed: stable/main/pool/main/a/aptly-3/aptly-3_1.3-1_amd64.deb: the bytes fetched"),
        "{out}"
    );
    assert!(summary_line(&out).starts_with("32 planned, 0 already copied, 31 copied"), "{out}");
    let listed = common::process::catalogue(&server.public, &basic(PW), "from-tampered")?;
    assert!(!listed.iter().any(|c| c.starts_with("aptly-3 ")), "the tampered package is not stored: {listed:?}");
    Ok(())
}

/// A run killed (SIGKILL) in the middle, then run again: every package once, none missing.
#[test]
fn an_import_killed_midway_goes_on_from_its_ledger() -> anyhow::Result<()> {
    anyhow::ensure!(Command::new("aptly").arg("version").output().is_ok(), "aptly is not installed");
    let Some((server, dir)) = common::process::server_on(
        packyard_store::db::Backend::Sqlite,
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_WORKER__DEBOUNCE_MS", "50")],
    )?
    else {
        return Ok(());
    };
    let work = tempfile::tempdir()?;
    let all = packages(&work.path().join("debs"), "resumed", 0..200)?;
    let public = aptly(&work.path().join("aptly"), &work.path().join("debs"))?;
    create(&server, "resumed")?;
    let from = public.display().to_string();
    let mut child = common::process::command(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])
        .args(["import", "apt", "--from", &from, "--into", "resumed", "--concurrency", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // Killed once some are stored (the catalogue shows them), long before all are.
    let stored = || common::process::catalogue(&server.public, &basic(PW), "resumed").map(|c| c.len());
    let deadline = Instant::now() + Duration::from_secs(60);
    while stored()? < 20 {
        anyhow::ensure!(Instant::now() < deadline, "the import copied nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill()?;
    child.wait()?;
    let before = stored()?;
    assert!(before < 200, "killed after {before} of 200");
    let (code, out, err) = import(dir.path(), &["--from", &from, "--into", "resumed"])?;
    assert_eq!(code, 0, "{out}{err}");
    let line = summary_line(&out);
    // The number before a label of the summary.
    let number = |label: &str| -> i64 {
        line.find(label).and_then(|at| line[..at].split_whitespace().last()).and_then(|n| n.parse().ok()).unwrap_or(-1)
    };
    let (skipped, copied, present) = (number(" already copied"), number(" copied ("), number(" stored before"));
    assert!(
        skipped >= i64::try_from(before)? - 2 && skipped <= i64::try_from(before)?,
        "{before} stored when killed: {line}"
    );
    assert!(present <= 2, "at most the packages in flight when it was killed were stored and not recorded: {line}");
    assert_eq!(skipped + copied + present, 200, "{line}");
    let listed = common::process::catalogue(&server.public, &basic(PW), "resumed")?;
    assert_eq!(listed.len(), 200, "every package once");
    let names: Vec<&String> = all.keys().collect();
    let got = downloaded(&server, "resumed", &names)?;
    for (n, bytes) in &all {
        assert_eq!(got.get(n), Some(&sha256(bytes)), "{n}");
    }
    Ok(())
}

/// `import go` from a module cache the real `go mod download` filled (from another Packyard
/// repository: this machine reaches no public proxy), and from that repository's URL as a
/// `GOPROXY`: then `go mod download` through the repository imported into pins the same
/// `go.sum` hashes and gets the same zips. A zip whose `h1:` is not the one the cache recorded,
/// or whose `go.mod` is not the `.mod` the proxy serves, is refused and nothing of it is kept.
#[test]
fn import_go_from_a_module_cache() -> anyhow::Result<()> {
    if Command::new("go").arg("version").output().is_err() {
        anyhow::bail!("no go command (scripts/test.sh installs golang-go)");
    }
    let Some((server, dir)) =
        common::process::server_on(packyard_store::db::Backend::Sqlite, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?
    else {
        return Ok(());
    };
    let auth = basic(PW);
    for name in ["upstream", "gomods", "tampered", "goproxy", "proxy-tampered"] {
        let body = serde_json::json!({"name": name, "format": "go", "type": "hosted"});
        admin_json(&server.public, &auth, "POST", "/api/v1/repositories", Some(body))?;
    }
    let modules = [("example.com/alpha", "v1.0.0"), ("example.com/alpha", "v1.1.0"), ("example.com/Beta/v2", "v2.3.0")];
    for (m, v) in modules {
        let zip = packyard_codecs::go::testing::simple_module(m, v, &format!("{m} {v}"), 0)?;
        let (s, body) = common::process::status_of(
            ureq::put(&format!("{}/repository/upstream/{}/@v/{v}.zip", server.public, packyard_codecs::go::escape(m)))
                .set("Authorization", &auth)
                .send_bytes(&zip),
        )?;
        anyhow::ensure!(s == 201, "{m}@{v}: {s} {body}");
    }
    // The real go command fills a module cache.
    let download = |proxy: &str, home: &Path| -> anyhow::Result<BTreeMap<String, (String, String, String)>> {
        let work = tempfile::tempdir()?;
        let mut out = BTreeMap::new();
        for (m, v) in modules {
            let o =
                common::golang::command(work.path(), home, proxy, &["mod", "download", "-json", &format!("{m}@{v}")])
                    .output()?;
            // (`-json` reports its error on stdout.)
            anyhow::ensure!(
                o.status.success(),
                "go mod download {m}@{v}: {}{}",
                String::from_utf8_lossy(&o.stderr),
                String::from_utf8_lossy(&o.stdout)
            );
            let info: serde_json::Value = serde_json::from_slice(&o.stdout)?;
            let zip = std::fs::read(info["Zip"].as_str().unwrap_or_default())?;
            let sum = |k: &str| info[k].as_str().unwrap_or_default().to_string();
            out.insert(format!("{m}@{v}"), (sum("Sum"), sum("GoModSum"), sha256(&zip)));
        }
        Ok(out)
    };
    let cache = tempfile::tempdir()?;
    let first = download(&format!("{}/repository/upstream", server.public), cache.path())?;
    let modcache = cache.path().join("modcache");
    // (The go command leaves its cache read-only.)
    let _ = Command::new("chmod").args(["-R", "u+w"]).arg(&modcache).status();

    let from = modcache.display().to_string();
    let (code, out, err) = common::process::run_to_end(
        dir.path(),
        &["import", "go", "--from", &from, "--into", "gomods"],
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)],
    )?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(summary_line(&out).starts_with("3 planned, 0 already copied, 3 copied"), "{out}");
    let again = tempfile::tempdir()?;
    // Published by the server's worker.
    let deadline = Instant::now() + Duration::from_secs(30);
    while get_bytes(&server, "/repository/gomods/example.com/alpha/@v/list")?.1 != b"v1.0.0\nv1.1.0\n" {
        anyhow::ensure!(Instant::now() < deadline, "the imported versions are not listed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = download(&format!("{}/repository/gomods", server.public), again.path())?;
    assert_eq!(second, first, "the same go.sum hashes and zips through the repository imported into");
    let (code, out, _) = common::process::run_to_end(
        dir.path(),
        &["import", "go", "--from", &from, "--into", "gomods"],
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)],
    )?;
    assert_eq!(code, 0);
    assert!(summary_line(&out).starts_with("3 planned, 3 already copied, 0 copied"), "{out}");

    // From a module proxy's URL (`GOPROXY`): the modules named, every version its list names.
    let proxy = format!("{}/repository/upstream/", server.public);
    let (code, out, err) = common::process::run_to_end(
        dir.path(),
        &["import", "go", "--from", &proxy, "--into", "goproxy"],
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)],
    )?;
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("a module proxy lists no modules: name those to copy with --only module=PATH"), "{err}");
    let only = ["--only", "module=example.com/alpha", "--only", "module=example.com/Beta/v2"];
    let args = [&["import", "go", "--from", &proxy, "--into", "goproxy"][..], &only[..]].concat();
    let (code, out, err) =
        common::process::run_to_end(dir.path(), &args, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(summary_line(&out).starts_with("3 planned, 0 already copied, 3 copied"), "{out}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while get_bytes(&server, "/repository/goproxy/example.com/!beta/v2/@v/list")?.1 != b"v2.3.0\n" {
        anyhow::ensure!(Instant::now() < deadline, "the versions imported from the proxy are not listed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let third = tempfile::tempdir()?;
    let through_proxy = download(&format!("{}/repository/goproxy", server.public), third.path())?;
    assert_eq!(through_proxy, first, "the same go.sum hashes and zips through the repository imported into");
    let (code, out, _) = common::process::run_to_end(dir.path(), &args, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    assert_eq!(code, 0);
    assert!(summary_line(&out).starts_with("3 planned, 3 already copied, 0 copied"), "{out}");
    // A proxy whose .mod is not the zip's go.mod: refused (the module cache's files, served by
    // a plain web server, one .mod changed).
    let served = tempfile::tempdir()?;
    run(Command::new("cp").arg("-r").arg(modcache.join("cache/download")).arg(served.path()))?;
    let root = served.path().join("download");
    std::fs::write(root.join("example.com/alpha/@v/v1.0.0.mod"), "module example.com/alpha\n\ngo 1.99\n")?;
    let web = StaticServer::start(&root, "example.com/alpha/@v/list")?;
    let args = ["import", "go", "--from", &web.url, "--into", "proxy-tampered", "--only", "module=example.com/alpha"];
    let (code, out, err) =
        common::process::run_to_end(dir.path(), &args, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        out.contains("failed: example.com/alpha@v1.0.0: example.com/alpha@v1.0.0: the zip's go.mod (h1:")
            && out.contains("is not the .mod the proxy serves (h1:"),
        "{out}"
    );
    assert!(summary_line(&out).starts_with("2 planned, 0 already copied, 1 copied"), "{out}");
    let listed = common::process::catalogue(&server.public, &auth, "proxy-tampered")?;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert!(listed.iter().all(|c| c.contains("v1.1.0")), "{listed:?}");

    // A recorded hash the zip does not have: refused, nothing of it kept.
    let hash = modcache.join("cache/download/example.com/alpha/@v/v1.1.0.ziphash");
    std::fs::write(&hash, "h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")?;
    let (code, out, err) = common::process::run_to_end(
        dir.path(),
        &["import", "go", "--from", &from, "--into", "tampered"],
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)],
    )?;
    assert_ne!(code, 0, "{out}{err}");
    assert!(out.contains("failed: example.com/alpha@v1.1.0: example.com/alpha@v1.1.0: the zip's hash is h1:"), "{out}");
    let listed = common::process::catalogue(&server.public, &auth, "tampered")?;
    assert!(listed.iter().all(|c| !c.contains("v1.1.0")), "{listed:?}");
    assert_eq!(listed.len(), 2, "{listed:?}");
    Ok(())
}

/// `import apk` from Packyard's own APK repository over HTTP (its indexes verified against its
/// key) and from a directory laid out as a mirror is; a package whose control member is not the
/// one its index's `C:` names is refused, and an index another key signed stops the import.
#[test]
fn import_apk_from_a_url_and_a_directory() -> anyhow::Result<()> {
    use packyard_codecs::apk::testing::{build_apk, Fixture};
    let Some((server, dir)) =
        common::process::server_on(packyard_store::db::Backend::Sqlite, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?
    else {
        return Ok(());
    };
    let auth = basic(PW);
    for name in ["alpine-up", "alpine-url", "alpine-dir", "alpine-bad", "alpine-wrong"] {
        let body = serde_json::json!({"name": name, "format": "apk", "type": "hosted"});
        admin_json(&server.public, &auth, "POST", "/api/v1/repositories", Some(body))?;
    }
    let mut packages = BTreeMap::new();
    for (name, version) in [("hello", "2.12-r1"), ("tool", "1.0-r0"), ("lib", "3.1-r2")] {
        let bytes = build_apk(&Fixture::new(name, version, "x86_64"))?.bytes;
        let file = format!("{name}-{version}.apk");
        let (s, body) = common::process::status_of(
            ureq::put(&format!("{}/repository/alpine-up/v3.20/main/x86_64/{file}?wait=true", server.public))
                .set("Authorization", &auth)
                .send_bytes(&bytes),
        )?;
        anyhow::ensure!(s == 201, "{file}: {s} {body}");
        packages.insert(file, bytes);
    }
    let (_, names) = get_bytes(&server, "/repository/alpine-up/keys/")?;
    let key_name = String::from_utf8_lossy(&names).lines().next().unwrap_or_default().to_string();
    let (_, key) = get_bytes(&server, &format!("/repository/alpine-up/keys/{key_name}"))?;
    let work = tempfile::tempdir()?;
    std::fs::write(work.path().join("key.pem"), &key)?;
    let key_file = work.path().join("key.pem").display().to_string();
    let import = |args: &[&str]| {
        let mut all = vec!["import", "apk"];
        all.extend_from_slice(args);
        common::process::run_to_end(dir.path(), &all, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])
    };
    let served = |repo: &str| -> anyhow::Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for file in packages.keys() {
            let (s, bytes) = get_bytes(&server, &format!("/repository/{repo}/v3.20/main/x86_64/{file}"))?;
            anyhow::ensure!(s == 200, "{repo}: {file}: {s}");
            out.insert(file.clone(), sha256(&bytes));
        }
        Ok(out)
    };
    let expected: BTreeMap<String, String> = packages.iter().map(|(f, b)| (f.clone(), sha256(b))).collect();

    // From a URL, verified against the key.
    let url = format!("{}/repository/alpine-up/", server.public);
    let only = ["--only", "branch=v3.20", "--only", "repository=main", "--only", "architecture=x86_64"];
    let mut args = vec!["--from", url.as_str(), "--into", "alpine-url", "--key", key_file.as_str()];
    args.extend_from_slice(&only);
    let (code, out, err) = import(&args)?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(summary_line(&out).starts_with("3 planned, 0 already copied, 3 copied"), "{out}");
    assert_eq!(served("alpine-url")?, expected);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, index) = get_bytes(&server, "/repository/alpine-url/v3.20/main/x86_64/APKINDEX.tar.gz")?;
        if s == 200
            && packages.keys().all(|f| {
                crate::apk::index_text(&index)
                    .is_ok_and(|t| t.contains(&format!("P:{}\n", f.split('-').next().unwrap_or_default())))
            })
        {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "alpine-url's index does not list every imported package");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Another key: refused before anything is copied.
    let other = packyard_codecs::apk::signing::ApkKey::generate(2048)?;
    std::fs::write(work.path().join("other.pem"), other.public_pem()?)?;
    let other_file = work.path().join("other.pem").display().to_string();
    let mut args = vec!["--from", url.as_str(), "--into", "alpine-wrong", "--key", other_file.as_str()];
    args.extend_from_slice(&only);
    let (code, out, err) = import(&args)?;
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("is not signed by the key given with --key"), "{err}");

    // From a directory laid out as a mirror is.
    let tree = work.path().join("mirror/v3.20/main/x86_64");
    std::fs::create_dir_all(&tree)?;
    let (_, index) = get_bytes(&server, "/repository/alpine-up/v3.20/main/x86_64/APKINDEX.tar.gz")?;
    std::fs::write(tree.join("APKINDEX.tar.gz"), &index)?;
    for (file, bytes) in &packages {
        std::fs::write(tree.join(file), bytes)?;
    }
    let mirror = work.path().join("mirror").display().to_string();
    let (code, out, err) = import(&["--from", &mirror, "--into", "alpine-dir"])?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(summary_line(&out).starts_with("3 planned, 0 already copied, 3 copied"), "{out}");
    assert_eq!(served("alpine-dir")?, expected);

    // Another package under a listed name: its control member is not the index's `C:`.
    let impostor =
        build_apk(&Fixture { payload: b"not the same".to_vec(), ..Fixture::new("tool", "1.0-r0", "x86_64") })?.bytes;
    std::fs::write(tree.join("tool-1.0-r0.apk"), &impostor)?;
    let (code, out, err) = import(&["--from", &mirror, "--into", "alpine-bad"])?;
    assert_ne!(code, 0, "{out}{err}");
    assert!(out.contains("failed: v3.20/main/x86_64/tool-1.0-r0.apk:"), "{out}");
    let (s, _) = get_bytes(&server, "/repository/alpine-bad/v3.20/main/x86_64/tool-1.0-r0.apk")?;
    assert_eq!(s, 404, "the impostor is not stored");
    Ok(())
}

/// A plain web server (`python3 -m http.server`) of a directory; stopped when dropped.
pub(crate) struct StaticServer {
    child: std::process::Child,
    pub(crate) url: String,
}

impl StaticServer {
    /// Serves `root`, once `probe` (a file below it) answers.
    pub(crate) fn start(root: &Path, probe: &str) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", &port.to_string()])
            .current_dir(root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let server = Self { child, url: format!("http://127.0.0.1:{port}/") };
        let deadline = Instant::now() + Duration::from_secs(20);
        while ureq::get(&format!("{}{probe}", server.url)).call().is_err() {
            anyhow::ensure!(Instant::now() < deadline, "python3 -m http.server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real conan_server (PyPI's `conan-server`, run from scripts/test.sh's venv) on a free port,
/// with one user who may write; stopped when dropped.
struct ConanServer {
    child: std::process::Child,
    dir: tempfile::TempDir,
    url: String,
}

impl ConanServer {
    fn start() -> anyhow::Result<Self> {
        let program = std::env::var("CONAN_SERVER").unwrap_or_else(|_| "conan_server".into());
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let conf = format!(
            "[server]\njwt_secret: import-test-jwt\njwt_expire_minutes: 120\nssl_enabled: False\nport: {port}\n\
             public_port:\nhost_name: 127.0.0.1\nauthorize_timeout: 1800\ndisk_storage_path: {}\n\
             disk_authorize_timeout: 1800\nupdown_secret: import-test-updown\n\n\
             [write_permissions]\n*/*@*/*: importer\n\n[read_permissions]\n*/*@*/*: importer\n\n\
             [users]\nimporter: s3cret\n",
            dir.path().join("data").display()
        );
        std::fs::write(dir.path().join("server.conf"), conf)?;
        let child = Command::new(&program)
            .arg("-d")
            .arg(dir.path())
            .stdout(std::fs::File::create(dir.path().join("log"))?)
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| anyhow::anyhow!("{program}: {e} (scripts/test.sh installs conan-server)"))?;
        let server = Self { child, dir, url: format!("http://127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(30);
        while ureq::get(&format!("{}/v2/ping", server.url)).call().is_err() {
            anyhow::ensure!(Instant::now() < deadline, "conan_server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// Where it keeps a revision's files.
    fn storage(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for ConanServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `import conan` from a real conan_server holding references with and without user and
/// channel, two recipe revisions, and packages: every revision copied, the latest the latest,
/// then `conan install` through Packyard installs the same files. A second run copies nothing.
/// A package whose archive holds a file that is not the one its `conanmanifest.txt` lists is
/// refused, and nothing of it is kept.
#[test]
fn import_conan_from_a_conan_server() -> anyhow::Result<()> {
    if !have("conan") {
        anyhow::bail!("no conan command (scripts/test.sh installs it)");
    }
    let remote = ConanServer::start()?;
    let Some((server, dir)) =
        common::process::server_on(packyard_store::db::Backend::Sqlite, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?
    else {
        return Ok(());
    };
    let auth = basic(PW);
    for name in ["conan-imported", "conan-tampered", "conan-tampered2"] {
        let body = serde_json::json!({"name": name, "format": "conan", "type": "hosted"});
        admin_json(&server.public, &auth, "POST", "/api/v1/repositories", Some(body))?;
    }
    let home = tempfile::tempdir()?;
    let h = home.path();
    let conan = |args: &[&str], cwd: &Path| -> anyhow::Result<String> {
        let out = Command::new("conan").args(args).current_dir(cwd).env("CONAN_HOME", h).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "conan {args:?}: {text}");
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    conan(&["profile", "detect"], h)?;
    conan(&["remote", "remove", "conancenter"], h)?;
    conan(&["remote", "add", "source", &remote.url], h)?;
    conan(&["remote", "add", "packyard", &format!("{}/repository/conan-imported", server.public)], h)?;
    conan(&["remote", "add", "tampered", &format!("{}/repository/conan-tampered", server.public)], h)?;
    conan(&["remote", "add", "tampered2", &format!("{}/repository/conan-tampered2", server.public)], h)?;
    conan(&["remote", "login", "source", "importer", "-p", "s3cret"], h)?;
    // hdr/0.1: two recipe revisions, each with its package; tool/1.0@acme/stable: one.
    let proj = h.join("hdr");
    std::fs::create_dir_all(&proj)?;
    conan(&["new", "header_lib", "-d", "name=hdr", "-d", "version=0.1"], &proj)?;
    conan(&["create", ".", "-tf="], &proj)?;
    let recipe = proj.join("conanfile.py");
    std::fs::write(&recipe, format!("{}\n# the second revision\n", std::fs::read_to_string(&recipe)?))?;
    conan(&["create", ".", "-tf="], &proj)?;
    let tool = h.join("tool");
    std::fs::create_dir_all(&tool)?;
    conan(&["new", "header_lib", "-d", "name=tool", "-d", "version=1.0"], &tool)?;
    conan(&["create", ".", "-tf=", "--user=acme", "--channel=stable"], &tool)?;
    conan(&["upload", "*#*", "-r", "source", "-c"], h)?;
    let everything = |remote: &str| -> anyhow::Result<serde_json::Value> {
        let v: serde_json::Value =
            serde_json::from_str(&conan(&["list", "*#*:*#*", "-r", remote, "--format=json"], h)?)?;
        Ok(v[remote].clone())
    };
    // (Times differ: the target stamps its own; revisions and their order must not.)
    let shape = |v: &serde_json::Value| -> BTreeMap<String, Vec<(String, Vec<String>)>> {
        let mut out = BTreeMap::new();
        for (reference, info) in v.as_object().into_iter().flatten() {
            let mut revs: Vec<(i64, String, Vec<String>)> = Vec::new();
            for (rrev, r) in info["revisions"].as_object().into_iter().flatten() {
                let mut prevs = Vec::new();
                for (id, p) in r["packages"].as_object().into_iter().flatten() {
                    for prev in p["revisions"].as_object().into_iter().flatten().map(|(k, _)| k) {
                        prevs.push(format!("{id}#{prev}"));
                    }
                }
                prevs.sort();
                let time = (r["timestamp"].as_f64().unwrap_or_default() * 1000.0) as i64;
                revs.push((time, rrev.clone(), prevs));
            }
            revs.sort();
            out.insert(reference.clone(), revs.into_iter().map(|(_, r, p)| (r, p)).collect());
        }
        out
    };
    let source = shape(&everything("source")?);
    assert_eq!(source.get("hdr/0.1").map(Vec::len), Some(2), "{source:?}");

    let from = format!("http://importer:s3cret@{}", remote.url.trim_start_matches("http://"));
    let import_conan = |into: &str| {
        let args = ["import", "conan", "--from", &from, "--into", into];
        common::process::run_to_end(dir.path(), &args, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])
    };
    let (code, out, err) = import_conan("conan-imported")?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(summary_line(&out).starts_with("6 planned, 0 already copied, 6 copied"), "{out}");
    assert!(!out.contains("s3cret") && !err.contains("s3cret"), "the password is never shown: {out}{err}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let copied = shape(&everything("packyard")?);
        if copied == source {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "not every revision is listed, in order: {copied:?} {source:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The real client installs from Packyard what was uploaded.
    let header = std::fs::read(proj.join("include/hdr.h"))?;
    conan(&["remove", "*", "-c"], h)?;
    conan(&["install", "--requires=hdr/0.1", "--requires=tool/1.0@acme/stable", "-r", "packyard"], h)?;
    let folder = conan(&["cache", "path", "hdr/0.1:da39a3ee5e6b4b0d3255bfef95601890afd80709"], h)?;
    assert_eq!(std::fs::read(Path::new(folder.trim()).join("include/hdr.h"))?, header);
    let check = conan(&["cache", "check-integrity", "*"], h);
    assert!(check.is_ok(), "{check:?}");
    // Again: nothing new.
    let (code, out, err) = import_conan("conan-imported")?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(summary_line(&out).starts_with("6 planned, 6 already copied, 0 copied"), "{out}");

    // The first hdr package's archive changed on the remote: its header is not the one the
    // manifest lists. That package revision is refused; the later revisions come.
    let (rrev, prevs) = source["hdr/0.1"].first().cloned().unwrap_or_default();
    let (pkgid, prev) = prevs.first().and_then(|p| p.split_once('#')).unwrap_or_default();
    let pkg = remote.storage().join(format!("hdr/0.1/_/_/{rrev}/package/{pkgid}/{prev}"));
    let unpacked = tempfile::tempdir()?;
    run(Command::new("tar").arg("xzf").arg(pkg.join("conan_package.tgz")).arg("-C").arg(unpacked.path()))?;
    std::fs::write(unpacked.path().join("include/hdr.h"), "// not the header the manifest lists\n")?;
    run(Command::new("tar")
        .arg("czf")
        .arg(pkg.join("conan_package.tgz"))
        .arg("-C")
        .arg(unpacked.path())
        .arg("include"))?;
    let (code, out, err) = import_conan("conan-tampered")?;
    assert_ne!(code, 0, "{out}{err}");
    let coordinate = format!("hdr/0.1#{rrev}:{pkgid}#{prev}");
    assert!(out.contains(&format!("failed: {coordinate}: include/hdr.h: conanmanifest.txt lists MD5 ")), "{out}");
    assert!(summary_line(&out).starts_with("6 planned, 0 already copied, 5 copied"), "{out}");
    // Everything but that package revision, once published.
    let mut want = source.clone();
    if let Some(first) = want.get_mut("hdr/0.1").and_then(|revs| revs.first_mut()) {
        first.1.clear();
    }
    let listed = |remote: &str, want: &BTreeMap<String, Vec<(String, Vec<String>)>>| -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = shape(&everything(remote)?);
            if got == *want {
                return Ok(());
            }
            anyhow::ensure!(Instant::now() < deadline, "{remote} lists {got:?}, not {want:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    listed("tampered", &want)?;

    // The first recipe revision's conanfile.py changed: it is refused, and the later revisions
    // of hdr wait (they would become older than it when it comes); tool comes.
    let conanfile = remote.storage().join(format!("hdr/0.1/_/_/{rrev}/export/conanfile.py"));
    let mut bytes = std::fs::read(&conanfile)?;
    bytes.extend_from_slice(b"# changed\n");
    std::fs::write(&conanfile, bytes)?;
    let (code, out, err) = import_conan("conan-tampered2")?;
    assert_ne!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("failed: hdr/0.1#{rrev}: conanfile.py: conanmanifest.txt lists MD5 ")), "{out}");
    let (rrev2, _) = source["hdr/0.1"].last().cloned().unwrap_or_default();
    assert!(
        out.contains(&format!("failed: hdr/0.1#{rrev2}: not copied: hdr/0.1#{rrev}, before it in its chain, failed")),
        "{out}"
    );
    assert!(summary_line(&out).starts_with("6 planned, 0 already copied, 2 copied"), "{out}");
    let only_tool: BTreeMap<_, _> =
        source.iter().filter(|(r, _)| r.starts_with("tool/")).map(|(k, v)| (k.clone(), v.clone())).collect();
    listed("tampered2", &only_tool)?;

    // Without credentials, and with a wrong password: a message that says what to do.
    let bare = ["import", "conan", "--from", &remote.url, "--into", "conan-tampered2"];
    let (code, _, err) = common::process::run_to_end(dir.path(), &bare, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    assert_ne!(code, 0);
    assert!(err.contains("give its credentials in the URL (https://USER:PASSWORD@HOST/…) or in PACKYARD_IMPORT_USERNAME and PACKYARD_IMPORT_PASSWORD"), "{err}");
    let wrong = [
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
        ("PACKYARD_IMPORT_USERNAME", "importer"),
        ("PACKYARD_IMPORT_PASSWORD", "wrong"),
    ];
    let (code, _, err) = common::process::run_to_end(dir.path(), &bare, &wrong)?;
    assert_ne!(code, 0);
    assert!(
        err.contains("v2/users/authenticate: the source answered 401 to the credentials given: a wrong password"),
        "{err}"
    );
    assert!(!err.contains("wrong@"), "{err}");
    Ok(())
}

/// `import nexus` against recorded answers in the shapes of Nexus's OpenAPI document (3.63),
/// served as files, with a hosted APT repository's client URL serving what aptly published:
/// repositories mapped (groups after their members, a member Packyard does not have left out,
/// a format it does not serve reported), roles flattened through the privilege mapping (an
/// unmappable privilege reported), local users created without a usable password, a
/// directory's user reported, and the hosted repository's packages at the same paths, byte for
/// byte. A second run changes nothing.
#[test]
fn import_nexus_from_recorded_answers() -> anyhow::Result<()> {
    anyhow::ensure!(Command::new("aptly").arg("version").output().is_ok(), "aptly is not installed");
    let Some((server, dir)) =
        common::process::server_on(packyard_store::db::Backend::Sqlite, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?
    else {
        return Ok(());
    };
    let auth = basic(PW);
    let work = tempfile::tempdir()?;
    let root = work.path().join("nexus");
    let rest = root.join("service/rest/v1");
    std::fs::create_dir_all(rest.join("security"))?;
    // The hosted repository's client URL: what aptly published.
    let debs = work.path().join("debs");
    packages(&debs, "nx", 0..6)?;
    let public = aptly(&work.path().join("aptly"), &debs)?;
    std::fs::create_dir_all(root.join("repository"))?;
    std::fs::rename(&public, root.join("repository/apt-hosted"))?;
    let storage = serde_json::json!({"blobStoreName": "default", "strictContentTypeValidation": true});
    let http = |auth: serde_json::Value| serde_json::json!({"blocked": false, "autoBlock": true, "connection": null, "authentication": auth});
    let settings = serde_json::json!([
        {"name": "apt-hosted", "format": "apt", "type": "hosted", "url": "http://nexus/repository/apt-hosted",
         "online": true, "storage": {"blobStoreName": "default", "strictContentTypeValidation": true,
         "writePolicy": "ALLOW_ONCE"}, "cleanup": {"policyNames": ["weekly"]},
         "component": {"proprietaryComponents": false},
         "apt": {"distribution": "stable"}, "aptSigning": {"keypair": null, "passphrase": null}},
        {"name": "apt-proxy", "format": "apt", "type": "proxy", "url": "http://nexus/repository/apt-proxy",
         "online": true, "storage": storage, "cleanup": null,
         "proxy": {"remoteUrl": "http://deb.debian.org/debian/", "contentMaxAge": 1440, "metadataMaxAge": 60},
         "negativeCache": {"enabled": true, "timeToLive": 1440},
         "httpClient": http(serde_json::json!({"type": "username", "username": "mirror", "password": null,
            "ntlmHost": null, "ntlmDomain": null})),
         "routingRuleName": null, "apt": {"distribution": "bookworm", "flat": false}},
        {"name": "go-proxy", "format": "go", "type": "proxy", "url": "http://nexus/repository/go-proxy",
         "online": true, "storage": storage, "cleanup": null,
         "proxy": {"remoteUrl": "https://proxy.golang.org/", "contentMaxAge": 1440, "metadataMaxAge": 1440},
         "negativeCache": {"enabled": true, "timeToLive": 1440}, "httpClient": http(serde_json::Value::Null),
         "routingRuleName": null},
        {"name": "apt-routed", "format": "apt", "type": "proxy", "url": "http://nexus/repository/apt-routed",
         "online": true, "storage": storage, "cleanup": null,
         "proxy": {"remoteUrl": "http://deb.debian.org/debian/", "contentMaxAge": -1, "metadataMaxAge": 60},
         "negativeCache": {"enabled": true, "timeToLive": 1440}, "httpClient": http(serde_json::Value::Null),
         "routingRuleName": "internal-only", "apt": {"distribution": "bookworm", "flat": false}},
        {"name": "go-a-top", "format": "go", "type": "group", "url": "http://nexus/repository/go-a-top",
         "online": true, "storage": storage, "group": {"memberNames": ["go-all"]}},
        {"name": "go-all", "format": "go", "type": "group", "url": "http://nexus/repository/go-all",
         "online": true, "storage": storage, "group": {"memberNames": ["go-proxy", "go-private"]}},
        {"name": "maven-releases", "format": "maven2", "type": "hosted", "url": "http://nexus/repository/maven-releases",
         "online": true, "storage": storage, "cleanup": null,
         "maven": {"versionPolicy": "RELEASE", "layoutPolicy": "STRICT", "contentDisposition": "INLINE"}}
    ]);
    let roles = serde_json::json!([
        {"id": "nx-admin", "source": "default", "name": "nx-admin", "description": "Administrator Role",
         "readOnly": true, "privileges": ["nx-all"], "roles": []},
        {"id": "nx-anonymous", "source": "default", "name": "nx-anonymous", "description": "Anonymous Role",
         "readOnly": true, "privileges": ["nx-search-read", "nx-repository-view-*-*-browse", "nx-repository-view-*-*-read"],
         "roles": []},
        {"id": "apt-readers", "source": "default", "name": "apt-readers", "description": "Reads APT",
         "readOnly": false, "privileges": ["nx-repository-view-apt-apt-hosted-read", "nx-repository-view-apt-apt-hosted-browse"],
         "roles": []},
        {"id": "deployers", "source": "default", "name": "deployers", "description": "Deploys",
         "readOnly": false, "privileges": ["nx-repository-view-apt-apt-hosted-add", "nx-repository-view-apt-apt-hosted-edit",
         "nx-component-upload"], "roles": ["apt-readers"]}
    ]);
    let users = serde_json::json!([
        {"userId": "admin", "firstName": "Administrator", "lastName": "User", "emailAddress": "admin@example.org",
         "source": "default", "status": "active", "readOnly": false, "roles": ["nx-admin"], "externalRoles": []},
        {"userId": "anonymous", "firstName": "Anonymous", "lastName": "User", "emailAddress": "anonymous@example.org",
         "source": "default", "status": "active", "readOnly": false, "roles": ["nx-anonymous"], "externalRoles": []},
        {"userId": "ci-bot", "firstName": "CI", "lastName": "Bot", "emailAddress": "ci@example.org",
         "source": "default", "status": "active", "readOnly": false, "roles": ["deployers", "nx-custom"],
         "externalRoles": []},
        {"userId": "jdoe", "firstName": "Jane", "lastName": "Doe", "emailAddress": "jdoe@example.org",
         "source": "LDAP", "status": "active", "readOnly": true, "roles": ["apt-readers"], "externalRoles": ["devs"]}
    ]);
    std::fs::write(rest.join("repositorySettings"), settings.to_string())?;
    std::fs::write(rest.join("security/roles"), roles.to_string())?;
    std::fs::write(rest.join("security/users"), users.to_string())?;
    let nexus = StaticServer::start(&root, "service/rest/v1/repositorySettings")?;

    let run = || {
        common::process::run_to_end(
            dir.path(),
            &["import", "nexus", "--url", &nexus.url],
            &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)],
        )
    };
    // The plan first: nothing is created.
    let (code, out, err) = common::process::run_to_end(
        dir.path(),
        &["import", "nexus", "--url", &nexus.url, "--dry-run"],
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)],
    )?;
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "repository go-all (go group): would be created",
        "role deployers: would be created",
        "user ci-bot: would be created, roles deployers",
        "packages of apt-hosted: copied once the repository is created",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
    let (s, _) = common::process::status_of(
        ureq::get(&format!("{}/api/v1/repositories/go-all", server.public)).set("Authorization", &auth).call(),
    )?;
    assert_eq!(s, 404, "a dry run creates nothing");

    let (code, out, err) = run()?;
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "repository apt-hosted (apt hosted): cleanup policy weekly: Packyard has no apt policy of that name: left out",
        "repository apt-proxy (apt proxy): proxy.contentMaxAge 1440 ignored",
        "repository apt-proxy (apt proxy): httpClient.autoBlock ignored",
        "repository apt-routed (apt proxy): left out: routingRule: Packyard has no routing rules",
        "repository apt-hosted (apt hosted): created",
        "repository apt-hosted (apt hosted): signed with a key of its own",
        "repository apt-proxy (apt proxy): created",
        "repository apt-proxy (apt proxy): Nexus does not export the upstream's password (user mirror)",
        "repository go-proxy (go proxy): created",
        "repository go-all (go group): members go-private are not in Packyard: left out of the group",
        "repository go-all (go group): created",
        "repository go-a-top (go group): created",
        "repository maven-releases (maven2 hosted): left out: Packyard serves",
        "role apt-readers: created",
        "role deployers: privilege left out: privilege \"nx-component-upload\" has no counterpart in Packyard",
        "role deployers: created",
        "user admin: exists, kept as it is",
        "user ci-bot: role nx-custom left out (not imported)",
        "user ci-bot: created with roles deployers and no usable password",
        "user jdoe: left out: a user of the LDAP source signs in through the directory",
        "packages of apt-hosted: 6 planned, 0 already copied, 6 copied",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
    assert!(out.lines().last().unwrap_or_default().starts_with("5 repositories, 2 roles and 1 users created"), "{out}");
    // The repositories as Packyard has them.
    let group = admin_json(&server.public, &auth, "GET", "/api/v1/repositories/go-all", None)?;
    assert_eq!(group["group"]["members"], serde_json::json!(["go-proxy"]), "{group}");
    let top = admin_json(&server.public, &auth, "GET", "/api/v1/repositories/go-a-top", None)?;
    assert_eq!(top["group"]["members"], serde_json::json!(["go-all"]), "a group after the group it holds: {top}");
    let proxy = admin_json(&server.public, &auth, "GET", "/api/v1/repositories/apt-proxy", None)?;
    assert_eq!(proxy["proxy"]["remote_url"], "http://deb.debian.org/debian/", "{proxy}");
    assert_eq!(proxy["proxy"]["username"], "mirror", "{proxy}");
    assert_eq!(proxy["proxy"]["metadata_ttl_secs"], 3600, "{proxy}");
    let hosted = admin_json(&server.public, &auth, "GET", "/api/v1/repositories/apt-hosted", None)?;
    assert_eq!(hosted["write_policy"], "allow_once", "{hosted}");
    // The roles through Nexus's own view of them.
    let role = admin_json(&server.public, &auth, "GET", "/service/rest/v1/security/roles/deployers", None)?;
    let mut privileges: Vec<String> =
        role["privileges"].as_array().into_iter().flatten().filter_map(|p| p.as_str()).map(str::to_string).collect();
    privileges.sort();
    assert_eq!(
        privileges,
        ["add", "browse", "edit", "read"].map(|a| format!("nx-repository-view-*-apt-hosted-{a}")).to_vec(),
        "{role}"
    );
    let user = admin_json(&server.public, &auth, "GET", "/api/v1/users/ci-bot", None)?;
    assert_eq!(user["roles"], serde_json::json!(["deployers"]), "{user}");
    // No password works until a reset gives one.
    let (s, _) = common::process::status_of(
        ureq::get(&format!("{}/api/v1/users/ci-bot", server.public))
            .set("Authorization", &basic_as("ci-bot", ""))
            .call(),
    )?;
    assert_eq!(s, 401);
    // The packages: at the same paths, the same bytes.
    let pool = root.join("repository/apt-hosted");
    let mut checked = 0;
    for entry in walk(&pool.join("pool"))? {
        let rel = entry.strip_prefix(&pool)?.display().to_string();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (s, body) = get_bytes(&server, &format!("/repository/apt-hosted/{rel}"))?;
            if s == 200 {
                assert_eq!(sha256(&body), sha256(&std::fs::read(&entry)?), "{rel}");
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "{rel}: {s}");
            std::thread::sleep(Duration::from_millis(100));
        }
        checked += 1;
    }
    assert_eq!(checked, 6);

    let (code, out, err) = run()?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("repository go-all (go group): exists, kept as it is"), "{out}");
    assert!(out.contains("role deployers: exists, kept as it is"), "{out}");
    assert!(out.contains("user ci-bot: exists, kept as it is"), "{out}");
    assert!(out.contains("packages of apt-hosted: 6 planned, 6 already copied, 0 copied"), "{out}");
    assert!(out.lines().last().unwrap_or_default().starts_with("0 repositories, 0 roles and 0 users created"), "{out}");
    Ok(())
}

/// Every file below `dir`.
fn walk(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

fn basic_as(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

/// `import nexus` from another Packyard through its Nexus-compatible API (with credentials in
/// the environment, never shown): the APT repository, a role and a user arrive as Nexus shows them, and
/// the packages at the same paths with the same bytes.
#[test]
fn import_nexus_from_packyards_own_nexus_api() -> anyhow::Result<()> {
    anyhow::ensure!(Command::new("aptly").arg("version").output().is_ok(), "aptly is not installed");
    let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)];
    let Some((source, source_dir)) = common::process::server_on(packyard_store::db::Backend::Sqlite, &env)? else {
        return Ok(());
    };
    let Some((server, dir)) = common::process::server_on(packyard_store::db::Backend::Sqlite, &env)? else {
        return Ok(());
    };
    let auth = basic(PW);
    create(&source, "debs")?;
    let work = tempfile::tempdir()?;
    let debs = work.path().join("debs");
    packages(&debs, "own", 0..5)?;
    let public = aptly(&work.path().join("aptly"), &debs)?;
    let from = public.display().to_string();
    let (code, out, err) = import(source_dir.path(), &["--from", &from, "--into", "debs"])?;
    assert_eq!(code, 0, "{out}{err}");
    let role = serde_json::json!({"name": "readers", "description": "Reads debs",
        "privileges": [{"repositories": "debs", "actions": ["read"]}]});
    admin_json(&source.public, &auth, "POST", "/api/v1/roles", Some(role))?;
    let user = serde_json::json!({"username": "alice", "password": "alice-password-1", "roles": ["readers"],
        "email": "alice@example.org"});
    admin_json(&source.public, &auth, "POST", "/api/v1/users", Some(user))?;
    // Two Conan repositories (each asks for a token of its own).
    for (name, reference) in [("cn-a", "liba/1.0/_/_"), ("cn-b", "libb/2.0/_/_")] {
        let body = serde_json::json!({"name": name, "format": "conan", "type": "hosted"});
        admin_json(&source.public, &auth, "POST", "/api/v1/repositories", Some(body))?;
        let base = format!("{}/repository/{name}", source.public);
        crate::conan::upload_by_http(&base, &auth, reference, ("r1", "p1", "q1"), "[settings]\nos=Linux\n")?;
    }
    // Published on the source before it is read.
    let deadline = Instant::now() + Duration::from_secs(30);
    let packages_index = loop {
        let (s, body) = get_bytes(&source, "/repository/debs/dists/stable/main/binary-amd64/Packages")?;
        let text = String::from_utf8_lossy(&body).into_owned();
        if s == 200 && text.matches("Package: ").count() == 5 {
            break text;
        }
        anyhow::ensure!(Instant::now() < deadline, "the source does not list its packages");
        std::thread::sleep(Duration::from_millis(100));
    };

    // The credentials in the environment, kept out of the command line.
    let with = [("PACKYARD_IMPORT_USERNAME", "admin"), ("PACKYARD_IMPORT_PASSWORD", PW), env[0]];
    let url = format!("{}/", source.public);
    let (code, out, err) = common::process::run_to_end(dir.path(), &["import", "nexus", "--url", &url], &with)?;
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains(PW) && !err.contains(PW), "credentials are never shown:\n{out}{err}");
    for line in [
        "repository debs (apt hosted): created",
        "role readers: created",
        "user alice: created with roles readers and no usable password",
        "packages of debs: 5 planned, 0 already copied, 5 copied",
        "packages of cn-a: 2 planned, 0 already copied, 2 copied",
        "packages of cn-b: 2 planned, 0 already copied, 2 copied",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }
    // As Nexus's API shows them, the same on both sides (but the address).
    for path in ["/service/rest/v1/repositories/apt/hosted/debs", "/service/rest/v1/security/roles/readers"] {
        let mut there = admin_json(&source.public, &auth, "GET", path, None)?;
        let mut here = admin_json(&server.public, &auth, "GET", path, None)?;
        for v in [&mut there, &mut here] {
            if let Some(m) = v.as_object_mut() {
                m.remove("url");
            }
        }
        assert_eq!(here, there, "{path}");
    }
    let alice = admin_json(&server.public, &auth, "GET", "/service/rest/v1/security/users?userId=alice", None)?;
    assert_eq!(alice[0]["roles"], serde_json::json!(["readers"]), "{alice}");
    assert_eq!(alice[0]["emailAddress"], "alice@example.org", "{alice}");
    // Alice's old password is not hers here until a reset.
    let (s, _) = common::process::status_of(
        ureq::get(&format!("{}/repository/debs/dists/stable/Release", server.public))
            .set("Authorization", &basic_as("alice", "alice-password-1"))
            .call(),
    )?;
    assert_eq!(s, 401);
    for path in [
        "/repository/cn-b/v2/conans/libb/2.0/_/_/revisions/r1/files/conanfile.py",
        "/repository/cn-b/v2/conans/libb/2.0/_/_/revisions/r1/packages/p1/revisions/q1/files/conaninfo.txt",
    ] {
        let (_, want) = get_bytes(&source, path)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (s, got) = get_bytes(&server, path)?;
            if s == 200 {
                assert_eq!(got, want, "{path}");
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "{path}: {s} (not published)");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    // Every package at the path the source's index gives, byte for byte.
    for filename in packages_index.lines().filter_map(|l| l.strip_prefix("Filename: ")) {
        let (_, want) = get_bytes(&source, &format!("/repository/debs/{filename}"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (s, got) = get_bytes(&server, &format!("/repository/debs/{filename}"))?;
            if s == 200 {
                assert_eq!(sha256(&got), sha256(&want), "{filename}");
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "{filename}: {s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}
