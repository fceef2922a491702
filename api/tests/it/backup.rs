//! `packyard-api backup --to DIR` and `restore --from DIR` as an operator runs them, beside a
//! running server: back up (while uploads go on), wipe, restore, and every file the apt, apk, go
//! and conan clients read is served with the same bytes; nothing the restored database lists is
//! missing. On SQLite (the embedded default), PostgreSQL and MariaDB.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::process::{basic, run_to_end, start, status_of, Server};
use common::Repo;
use packyard_model::repos::Format;
use packyard_store::db::Backend;

const PW: &str = "backup-admin";

fn get(server: &Server, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    common::process::get_bytes(server, path)
}

fn put(server: &Server, path: &str, body: &[u8]) -> anyhow::Result<()> {
    let (s, text) =
        status_of(ureq::put(&format!("{}{path}", server.public)).set("Authorization", &basic(PW)).send_bytes(body))?;
    if s != 201 && s != 200 {
        // The server's own account of a failure (a 500 names its cause only in the log).
        let log = server.stderr.lock().map(|l| l.clone()).unwrap_or_default();
        let tail: Vec<&str> = log.lines().filter(|l| !l.contains(" INFO ")).rev().take(20).collect();
        anyhow::bail!("PUT {path}: {s} {text}\nserver log (newest first):\n{}", tail.join("\n"));
    }
    Ok(())
}

/// Repositories of all four formats with content, uploaded over HTTP as the clients do.
fn populate(server: &Server) -> anyhow::Result<()> {
    for (name, format) in
        [("debs", Format::Apt), ("apks", Format::Apk), ("mods", Format::Go), ("conans", Format::Conan)]
    {
        common::process::create_repository(&server.public, &basic(PW), Repo::hosted(name, format).0)?;
    }
    let deb = packyard_codecs::apt::testing::installable_deb(
        "Package: backed-up\nVersion: 1.0\nArchitecture: amd64\nMaintainer: Ops <ops@example.org>\nDescription: kept\n",
        &[("usr/share/doc/backed-up/README", b"kept across a restore\n")],
    );
    let (s, text) = status_of(
        ureq::post(&format!("{}/repository/debs/?wait=true", server.public))
            .set("Authorization", &basic(PW))
            .send_bytes(&deb),
    )?;
    anyhow::ensure!(s == 201, "deb upload: {s} {text}");
    let apk = packyard_codecs::apk::testing::sized_apk("kept", "1.0-r0", "x86_64", 64 << 10, 3)?;
    put(server, "/repository/apks/v3.20/main/x86_64/kept-1.0-r0.apk?wait=true", &apk.bytes)?;
    for v in ["v1.0.0", "v1.1.0"] {
        let zip = packyard_codecs::go::testing::simple_module("example.com/kept", v, v, 1000)?;
        put(server, &format!("/repository/mods/example.com/kept/@v/{v}.zip"), &zip)?;
    }
    let md5 = |b: &[u8]| hex::encode(<md5::Md5 as md5::Digest>::digest(b));
    let conanfile = "from conan import ConanFile\n# kept/1.0\n";
    let recipe = "/repository/conans/v2/conans/kept/1.0/_/_/revisions/r1";
    let conaninfo = "[settings]\nos=Linux\n";
    let package = format!("{recipe}/packages/p1/revisions/p1r");
    put(server, &format!("{recipe}/files/conanfile.py"), conanfile.as_bytes())?;
    put(
        server,
        &format!("{recipe}/files/conanmanifest.txt"),
        format!("1\nconanfile.py: {}\n", md5(conanfile.as_bytes())).as_bytes(),
    )?;
    put(server, &format!("{package}/files/conaninfo.txt"), conaninfo.as_bytes())?;
    put(
        server,
        &format!("{package}/files/conanmanifest.txt"),
        format!("1\nconaninfo.txt: {}\n", md5(conaninfo.as_bytes())).as_bytes(),
    )?;
    Ok(())
}

/// Every file the clients read, with its bytes (waiting until the publications are there).
fn what_clients_see(server: &Server) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let mut paths = vec![
        "/repository/debs/dists/stable/InRelease".to_string(),
        "/repository/debs/dists/stable/main/binary-amd64/Packages".into(),
        "/repository/debs/dists/stable/main/binary-amd64/Packages.gz".into(),
        "/repository/debs/pool/main/b/backed-up/backed-up_1.0_amd64.deb".into(),
        "/repository/debs/gpg.key".into(),
        "/repository/apks/v3.20/main/x86_64/APKINDEX.tar.gz".into(),
        "/repository/apks/v3.20/main/x86_64/kept-1.0-r0.apk".into(),
        "/repository/mods/example.com/kept/@v/list".into(),
        "/repository/mods/example.com/kept/@latest".into(),
        "/repository/conans/v2/conans/kept/1.0/_/_/revisions".into(),
        "/repository/conans/v2/conans/kept/1.0/_/_/revisions/r1/files/conanfile.py".into(),
        "/repository/conans/v2/conans/kept/1.0/_/_/revisions/r1/packages/p1/revisions".into(),
        "/repository/conans/v2/conans/kept/1.0/_/_/revisions/r1/packages/p1/revisions/p1r/files/conaninfo.txt".into(),
    ];
    for v in ["v1.0.0", "v1.1.0"] {
        for ext in ["info", "mod", "zip"] {
            paths.push(format!("/repository/mods/example.com/kept/@v/{v}.{ext}"));
        }
    }
    let mut seen = BTreeMap::new();
    for path in paths {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let body = loop {
            let (s, body) = get(server, &path)?;
            if s == 200 {
                break body;
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "{path}: {s} {}", String::from_utf8_lossy(&body));
            std::thread::sleep(Duration::from_millis(100));
        };
        seen.insert(path, body);
    }
    Ok(seen)
}

/// A server's environment, and the scratch directory its database lives for.
type Environment = (Vec<(String, String)>, Option<tempfile::TempDir>);

/// The server's environment for `backend` (a fresh database of its own; blobs in files under
/// the working directory); `None` when that backend is not configured.
fn environment(backend: Backend) -> anyhow::Result<Option<Environment>> {
    let mut env = vec![("PACKYARD_SECURITY__ADMIN_PASSWORD".to_string(), PW.to_string())];
    if backend == Backend::Sqlite {
        return Ok(Some((env, None)));
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let Some((url, keep)) = rt.block_on(packyard_store::testing::create_database(backend))? else {
        eprintln!("skipped: no {} server configured", backend.as_str());
        return Ok(None);
    };
    env.push(("PACKYARD_DATABASE__URL".into(), url));
    env.push(("PACKYARD_SECURITY__SECRET".into(), "a-secret-shared-by-backup-and-restore".into()));
    Ok(Some((env, Some(keep))))
}

fn pairs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn backup_wipe_restore(backend: Backend) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let Some((env, _db)) = environment(backend)? else { return Ok(()) };
    let server = start(dir.path(), &pairs(&env))?;
    server.wait_ready()?;
    populate(&server)?;
    let before = what_clients_see(&server)?;

    // Back up while uploads go on.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let uploader = {
        let (public, stop, done) = (server.public.clone(), stop.clone(), done.clone());
        std::thread::spawn(move || -> anyhow::Result<u32> {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                let v = format!("v1.5.{n}");
                let zip = packyard_codecs::go::testing::simple_module("example.com/busy", &v, &v, 20_000)?;
                let (s, text) = status_of(
                    ureq::put(&format!("{public}/repository/mods/example.com/busy/@v/{v}.zip"))
                        .set("Authorization", &basic(PW))
                        .send_bytes(&zip),
                )?;
                anyhow::ensure!(s == 201 || s == 200, "busy upload {v}: {s} {text}");
                n += 1;
                done.store(n, Ordering::SeqCst);
            }
            Ok(n)
        })
    };
    while done.load(Ordering::SeqCst) < 2 {
        anyhow::ensure!(!uploader.is_finished(), "the uploads stopped before the backup");
        std::thread::sleep(Duration::from_millis(20));
    }
    let backup_dir = tempfile::tempdir()?;
    let target = backup_dir.path().join("nightly");
    let target_arg = target.display().to_string();
    let (code, out, err) = run_to_end(dir.path(), &["backup", "--to", &target_arg], &pairs(&env))?;
    stop.store(true, Ordering::SeqCst);
    let uploaded = uploader.join().map_err(|_| anyhow::anyhow!("uploader panicked"))??;
    assert_eq!(code, 0, "backup: {out}\n{err}");
    assert!(out.contains(&format!("backed up the {} database and", backend.as_str())), "{out}");
    assert!(uploaded > 2, "no upload ran during the backup");
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(target.join("packyard-backup.json"))?)?;
    assert_eq!(manifest["backend"], backend.as_str());
    let listed = std::fs::read_to_string(target.join("blobs.txt"))?;
    assert_eq!(manifest["blobs"].as_u64(), Some(listed.lines().count() as u64), "every listed blob was copied");
    // The backup released its hold on blob collection.
    let hold_ok = !out.contains("cannot release");
    assert!(hold_ok, "{out}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&target)?.permissions().mode() & 0o777, 0o700, "the backup is private");
    }
    // Run where there is no installation, it creates nothing and says so.
    if backend == Backend::Sqlite {
        let elsewhere = tempfile::tempdir()?;
        let other = elsewhere.path().join("b").display().to_string();
        let (code, _, err) = run_to_end(elsewhere.path(), &["backup", "--to", &other], &[])?;
        assert_ne!(code, 0);
        assert!(err.contains("no database at"), "{err}");
        assert!(!elsewhere.path().join("data").exists(), "nothing was created");
    }
    // A second backup into the same directory is refused: it never mixes two.
    let (code, _, err) = run_to_end(dir.path(), &["backup", "--to", &target_arg], &pairs(&env))?;
    assert_ne!(code, 0);
    assert!(err.contains("is not an empty directory"), "{err}");
    assert!(server.terminate()?.success());

    // Wipe: a new directory (no data/, no blobs) and, for a server database, a new empty one.
    let fresh = tempfile::tempdir()?;
    let Some((fresh_env, _fresh_db)) = environment(backend)? else { return Ok(()) };
    let mut fresh_env = fresh_env;
    if backend != Backend::Sqlite {
        // The same secret as the backed-up one (configured, so the manifest says so).
        assert_eq!(manifest["secret"], "configuration");
    } else {
        assert_eq!(manifest["secret"], "file");
        fresh_env.retain(|(k, _)| k != "PACKYARD_SECURITY__ADMIN_PASSWORD");
    }
    let (code, out, err) = run_to_end(fresh.path(), &["restore", "--from", &target_arg], &pairs(&fresh_env))?;
    assert_eq!(code, 0, "restore: {out}\n{err}");
    assert!(out.contains("restored the"), "{out}");
    // Restoring over a database that has data is refused.
    let (code, _, err) = run_to_end(fresh.path(), &["restore", "--from", &target_arg], &pairs(&fresh_env))?;
    assert_ne!(code, 0);
    assert!(err.contains("never merges") || err.contains("restore into an empty database"), "{err}");

    let restored = start(fresh.path(), &pairs(&fresh_env))?;
    restored.wait_ready()?;
    let after = what_clients_see(&restored)?;
    assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>());
    for (path, bytes) in &before {
        assert!(after[path] == *bytes, "{path} differs after the restore");
    }
    // The real apt-get, trusting the key the backup's server published, reads the restored
    // repository and downloads the package: the same bytes.
    let key = &before["/repository/debs/gpg.key"];
    let url = format!("{}/repository/debs", restored.public);
    let apt = common::apt::scratch(key, |k| format!("deb [signed-by={} arch=amd64] {url} stable main", k.display()))?;
    let out = common::apt::tool("apt-get", apt.path(), &["update"])?;
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && !log.contains("Err:") && !log.contains("W: "), "apt-get update:\n{log}");
    let out = common::apt::tool("apt-get", apt.path(), &["download", "backed-up"])?;
    assert!(out.status.success(), "apt-get download: {}", String::from_utf8_lossy(&out.stderr));
    let downloaded = std::fs::read(apt.path().join("downloads/backed-up_1.0_amd64.deb"))?;
    assert!(downloaded == before["/repository/debs/pool/main/b/backed-up/backed-up_1.0_amd64.deb"]);
    // The real go command downloads a module version from the restored repository: the zip it
    // keeps is the one uploaded before the backup.
    if std::process::Command::new("go").arg("version").output().is_ok() {
        let home = tempfile::tempdir()?;
        let out = std::process::Command::new("go")
            .args(["mod", "download", "-json", "example.com/kept@v1.1.0"])
            .current_dir(home.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("GOPATH", home.path().join("gopath"))
            .env("GOMODCACHE", home.path().join("modcache"))
            .env("GOCACHE", home.path().join("gocache"))
            .env("GOPROXY", format!("{}/repository/mods", restored.public))
            .env("GOTOOLCHAIN", "local")
            .env("GOSUMDB", "off")
            .env("GOFLAGS", "-modcacherw")
            .output()?;
        assert!(out.status.success(), "go mod download: {}", String::from_utf8_lossy(&out.stderr));
        let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let zip = std::fs::read(info["Zip"].as_str().unwrap_or_default())?;
        assert!(zip == before["/repository/mods/example.com/kept/@v/v1.1.0.zip"], "the go command got other bytes");
    } else {
        anyhow::ensure!(
            std::env::var_os("TEST_TOOLS_VENV").is_none(),
            "the go command is required under scripts/test.sh"
        );
        eprintln!("go part skipped: no go command (scripts/test.sh installs golang-go)");
    }
    // The admin of the backup signs in (its password hash came back with the database).
    let (s, _) = status_of(
        ureq::get(&format!("{}/api/v1/repositories", restored.public)).set("Authorization", &basic(PW)).call(),
    )?;
    assert_eq!(s, 200);
    // What was uploaded during the backup: every version the restored list names is whole.
    let (s, list) = get(&restored, "/repository/mods/example.com/busy/@v/list")?;
    let list = String::from_utf8(list)?;
    assert_eq!(s, 200, "{list}");
    assert!(list.lines().count() >= 2, "the versions uploaded before the backup: {list:?}");
    for v in list.lines().filter(|l| !l.is_empty()) {
        let (s, zip) = get(&restored, &format!("/repository/mods/example.com/busy/@v/{v}.zip"))?;
        assert_eq!(s, 200, "{v}");
        let want = packyard_codecs::go::testing::simple_module("example.com/busy", v, v, 20_000)?;
        assert!(zip == want, "{v}: other bytes after the restore");
    }
    assert!(restored.terminate()?.success());
    Ok(())
}

#[test]
fn backup_and_restore_on_sqlite() -> anyhow::Result<()> {
    backup_wipe_restore(Backend::Sqlite)
}

#[test]
fn backup_and_restore_on_postgres() -> anyhow::Result<()> {
    backup_wipe_restore(Backend::Postgres)
}

#[test]
fn backup_and_restore_on_mysql() -> anyhow::Result<()> {
    backup_wipe_restore(Backend::MySql)
}
