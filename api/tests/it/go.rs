//! Go modules end to end: module zips published to the built binary (by module path and the
//! Nexus-style `PUT <version>.zip`), bad zips refused with nothing stored, and the real `go`
//! command (`go get`, `go mod download -json`, `go list -m -versions`, `go build`) resolving
//! them through `GOPROXY`.

use crate::common;

use common::Repo;
use packyard_model::repos::Format;

use std::path::Path;
use std::process::Command;

use common::process::{basic, nexus, nexus_component, nexus_delete, start, status_of, Server};
use packyard_codecs::go::testing::{module_zip, simple_module, ZipFile};

const PW: &str = "go-admin";

fn put(server: &Server, path: &str, bytes: &[u8]) -> anyhow::Result<(u16, String)> {
    status_of(
        ureq::put(&format!("{}/repository/gomods/{path}", server.public))
            .set("Authorization", &basic(PW))
            .send_bytes(bytes),
    )
}

fn get(server: &Server, path: &str) -> anyhow::Result<(u16, String, String)> {
    match ureq::get(&format!("{}/repository/gomods/{path}", server.public)).call() {
        Ok(r) => {
            let ct = r.content_type().to_string();
            Ok((r.status(), ct, r.into_string()?))
        }
        Err(ureq::Error::Status(code, r)) => {
            let ct = r.content_type().to_string();
            Ok((code, ct, r.into_string()?))
        }
        Err(e) => Err(e.into()),
    }
}

fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(Result::ok).map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

/// The go command, isolated: its own module cache, build cache and home; this proxy only.
pub(crate) fn go(dir: &Path, home: &Path, proxy: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = common::golang::command(dir, home, proxy, args).output()?;
    anyhow::ensure!(
        out.status.success(),
        "go {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn hosted_modules_with_the_real_go_command() -> anyhow::Result<()> {
    if Command::new("go").arg("version").output().is_err() {
        eprintln!("skipped: no go command (scripts/test.sh installs golang-go)");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_SERVER__MAX_UPLOAD_BYTES", "2097152"),
            ("PACKYARD_CACHE__DOWNLOAD_STATS_FLUSH_MS", "100"),
        ],
    )?;
    server.wait_ready()?;
    let (s, text) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic(PW))
            .send_json(Repo::hosted("gomods", Format::Go)),
    )?;
    assert_eq!(s, 201, "{text}");

    // Publish: by module path, and Nexus-style with the module taken from the zip.
    let m = "example.com/hello";
    for v in ["v1.0.0", "v1.1.0"] {
        let (s, text) = put(&server, &format!("{m}/@v/{v}.zip"), &simple_module(m, v, &format!("hello {v}"), 0)?)?;
        assert_eq!(s, 201, "{text}");
        // Read-your-writes: the list has it when the PUT returns.
        let (s, _, list) = get(&server, &format!("{m}/@v/list"))?;
        assert_eq!(s, 200);
        assert!(list.lines().any(|l| l == v), "{list}");
    }
    let (s, text) = put(&server, "v2.0.0.zip", &simple_module("example.com/hello/v2", "v2.0.0", "hello v2", 1 << 20)?)?;
    assert_eq!(s, 201, "{text}");
    assert!(text.contains("\"module\":\"example.com/hello/v2\""), "{text}");
    let (s, text) = put(
        &server,
        "example.com/!my!mod/@v/v0.1.0.zip",
        &simple_module("example.com/MyMod", "v0.1.0", "mixed case", 0)?,
    )?;
    assert_eq!(s, 201, "{text}");
    // An identical retry succeeds; other bytes for the same version are refused.
    let again = simple_module(m, "v1.0.0", "hello v1.0.0", 0)?;
    assert_eq!(put(&server, &format!("{m}/@v/v1.0.0.zip"), &again)?.0, 200);
    let (s, text) = put(&server, &format!("{m}/@v/v1.0.0.zip"), &simple_module(m, "v1.0.0", "changed", 0)?)?;
    assert_eq!(s, 409, "{text}");
    assert!(text.contains("a module version never changes"), "{text}");

    // The protocol's reads.
    assert_eq!(get(&server, &format!("{m}/@v/list"))?, (200, "text/plain".into(), "v1.0.0\nv1.1.0\n".into()));
    let (s, ct, latest) = get(&server, &format!("{m}/@latest"))?;
    assert_eq!((s, ct.as_str()), (200, "application/json"));
    let latest: serde_json::Value = serde_json::from_str(&latest)?;
    assert_eq!(latest["Version"], "v1.1.0");
    assert!(latest["Time"].as_str().is_some_and(|t| t.ends_with('Z') && t.len() == 20), "{latest}");
    let (s, _, info) = get(&server, &format!("{m}/@v/v1.0.0.info"))?;
    assert_eq!(s, 200);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&info)?["Version"], "v1.0.0");
    assert_eq!(get(&server, &format!("{m}/@v/v1.0.0.mod"))?.2, "module example.com/hello\n\ngo 1.19\n");
    for probe in [
        "example.com/@v/list",
        "example.com/hello/sub/@v/list",
        "example.com/nothere/@latest",
        "example.com/hello/@v/v9.9.9.info",
        "example.com/hello/@v/v9.9.9.zip",
        "sumdb/sum.golang.org/supported",
        "example.com/Upper/@v/list",
        "example.com/hello/@v/nonsense",
    ] {
        let (s, ct, text) = get(&server, probe)?;
        assert_eq!((s, ct.as_str()), (404, "text/plain"), "{probe}: {text}");
    }

    // Bad zips: each refused with a reason, nothing stored.
    let blobs = dir.path().join("data/blobs/sha256");
    let stored = files_under(&blobs);
    let good = |name: &str, content: &str| ZipFile::new(name, content.as_bytes());
    let cases: Vec<(String, Vec<u8>, u16, &str)> = vec![
        (
            format!("{m}/@v/v1.2.0.zip"),
            module_zip(m, "v1.2.0", &[good("go.mod", "module example.com/hello\n"), good("../escape.go", "x")])?,
            400,
            "invalid path element \"..\"",
        ),
        (
            format!("{m}/@v/v1.2.0.zip"),
            module_zip(m, "v1.2.0", &[good("a.go", "x"), good("A.go", "y")])?,
            400,
            "case-insensitive file name collision",
        ),
        (
            format!("{m}/@v/v1.2.0.zip"),
            module_zip(m, "v1.2.0", &[good("go.mod", "module example.com/other\n")])?,
            400,
            "declares module \"example.com/other\"",
        ),
        (
            format!("{m}/@v/v1.2.0.zip"),
            module_zip(m, "v1.2.0", &[good("sub/go.mod", "module example.com/hello/sub\n")])?,
            400,
            "outside the module root",
        ),
        (
            format!("{m}/@v/v1.2.0.zip"),
            module_zip("example.com/else", "v1.2.0", &[good("a.go", "x")])?,
            400,
            "does not have the prefix \"example.com/hello@v1.2.0/\"",
        ),
        (format!("{m}/@v/v1.2.zip"), module_zip(m, "v1.2", &[good("a.go", "x")])?, 400, "not canonical"),
        (
            format!("{m}/@v/v2.0.0.zip"),
            module_zip(m, "v2.0.0", &[good("a.go", "x")])?,
            400,
            "publish it as example.com/hello/v2",
        ),
        (
            format!("{m}/@v/v1.2.0.zip"),
            module_zip(m, "v1.2.0", &[ZipFile { symlink: true, ..good("link.go", "a.go") }])?,
            400,
            "is a symbolic link",
        ),
        (
            format!("{m}/@v/v1.2.0.zip"),
            simple_module(m, "v1.2.0", "big", 3 << 20)?,
            413,
            "exceeds the limit of 2097152 bytes",
        ),
        (format!("{m}/@v/v1.2.0.zip"), b"PK\x03\x04 but not really a zip".to_vec(), 400, "not a zip file"),
        ("v1.2.0.zip".into(), b"plain text".to_vec(), 400, "not a zip file"),
        (
            "v1.3.0.zip".into(),
            simple_module(m, "v1.2.0", "x", 0)?,
            400,
            "the URL names version v1.3.0 but the zip holds example.com/hello@v1.2.0",
        ),
    ];
    for (path, zip, status, needle) in cases {
        let (s, text) = put(&server, &path, &zip)?;
        assert_eq!(s, status, "{path} ({needle}): {text}");
        assert!(text.contains(needle), "{path}: {text:?} lacks {needle:?}");
    }
    assert_eq!(files_under(&blobs), stored, "a refused zip left a blob");
    assert_eq!(get(&server, &format!("{m}/@v/list"))?.2, "v1.0.0\nv1.1.0\n", "nothing refused was listed");

    // The real go command.
    let home = tempfile::tempdir()?;
    let app = home.path().join("app");
    std::fs::create_dir_all(&app)?;
    let proxy = format!("{}/repository/gomods/", server.public);
    go(&app, home.path(), &proxy, &["mod", "init", "example.com/app"])?;
    std::fs::write(
        app.join("main.go"),
        "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/MyMod\"\n\t\"example.com/hello\"\n\thellov2 \"example.com/hello/v2\"\n)\n\nfunc main() { fmt.Println(hello.Message(), \"|\", hellov2.Message(), \"|\", mymod.Message()) }\n",
    )?;
    go(
        &app,
        home.path(),
        &proxy,
        &["get", "example.com/hello@v1.0.0", "example.com/hello/v2@v2.0.0", "example.com/MyMod@v0.1.0"],
    )?;
    go(&app, home.path(), &proxy, &["get", "example.com/hello"])?;
    let gomod = std::fs::read_to_string(app.join("go.mod"))?;
    assert!(gomod.contains("example.com/hello v1.1.0"), "go get took @latest: {gomod}");
    let versions = go(&app, home.path(), &proxy, &["list", "-m", "-versions", "example.com/hello"])?;
    assert_eq!(versions.trim(), "example.com/hello v1.0.0 v1.1.0");
    let dl: serde_json::Value = serde_json::from_str(&go(
        &app,
        home.path(),
        &proxy,
        &["mod", "download", "-json", "example.com/hello/v2@v2.0.0"],
    )?)?;
    assert_eq!((dl["Path"].as_str(), dl["Version"].as_str()), (Some("example.com/hello/v2"), Some("v2.0.0")));
    assert!(dl["Sum"].as_str().is_some_and(|s| s.starts_with("h1:")), "{dl}");
    go(&app, home.path(), &proxy, &["build", "-o", "app", "."])?;
    let run = Command::new(app.join("app")).output()?;
    assert_eq!(String::from_utf8_lossy(&run.stdout), "hello v1.1.0 | hello v2 | mixed case\n");
    let sum = std::fs::read_to_string(app.join("go.sum"))?;
    for line in [
        "example.com/hello v1.1.0 h1:",
        "example.com/hello/v2 v2.0.0 h1:",
        "example.com/MyMod v0.1.0 h1:",
        "example.com/hello v1.1.0/go.mod h1:",
    ] {
        assert!(sum.contains(line), "go.sum lacks {line:?}: {sum}");
    }

    // Nexus's REST API: what the go command downloaded is counted; a version deleted through it
    // is gone for the go command.
    let (public, auth) = (server.public.as_str(), basic(PW));
    let v110 = nexus_component(public, &auth, "repository=gomods&name=hello&version=v1.1.0&group=example.com")?;
    let zip = v110["assets"].as_array().into_iter().flatten().find(|a| a["path"] == "example.com/hello/@v/v1.1.0.zip");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let id = zip.and_then(|a| a["id"].as_str()).unwrap_or_default();
        let asset = nexus(public, &auth, &format!("assets/{id}"))?;
        if asset["downloadCount"].as_i64().unwrap_or(0) >= 1 {
            assert!(asset["lastDownloaded"].is_string(), "{asset}");
            break;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "the go command's download was not counted: {asset}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let v100 = nexus_component(public, &auth, "repository=gomods&name=hello&version=v1.0.0")?;
    let id = v100["id"].as_str().unwrap_or_default();
    assert_eq!(nexus_delete(public, "", id)?, 401, "anonymous may not delete");
    assert_eq!(nexus_delete(public, &auth, id)?, 204);
    let versions = go(&app, home.path(), &proxy, &["list", "-m", "-versions", "example.com/hello"])?;
    assert_eq!(versions.trim(), "example.com/hello v1.1.0", "the deleted version is not listed");
    let fresh = tempfile::tempdir()?;
    let failed = go(&app, fresh.path(), &proxy, &["mod", "download", "example.com/hello@v1.0.0"]);
    let message = failed.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("404") || message.contains("not found"), "the deleted version downloaded: {message}");
    Ok(())
}

/// What [`build_app`] saw.
struct Built {
    output: String,
    sum: String,
    /// `go list -m -versions example.com/hello`.
    versions: String,
    /// `go mod download -json example.com/hello/v2@v2.0.0`.
    download: serde_json::Value,
}

/// Creates a module in a fresh scratch home, `go get`s `requires`, downloads and lists
/// `example.com/hello`, builds the program and runs it.
fn build_app(proxy: &str, requires: &[&str], main: &str) -> anyhow::Result<Built> {
    let home = tempfile::tempdir()?;
    let app = home.path().join("app");
    std::fs::create_dir_all(&app)?;
    go(&app, home.path(), proxy, &["mod", "init", "example.com/app"])?;
    std::fs::write(app.join("main.go"), main)?;
    let mut args = vec!["get"];
    args.extend_from_slice(requires);
    go(&app, home.path(), proxy, &args)?;
    let download = serde_json::from_str(&go(
        &app,
        home.path(),
        proxy,
        &["mod", "download", "-json", "example.com/hello/v2@v2.0.0"],
    )?)?;
    let versions = go(&app, home.path(), proxy, &["list", "-m", "-versions", "example.com/hello"])?.trim().to_string();
    go(&app, home.path(), proxy, &["build", "-o", "app", "."])?;
    let run = Command::new(app.join("app")).output()?;
    let sum = std::fs::read_to_string(app.join("go.sum"))?;
    Ok(Built { output: String::from_utf8_lossy(&run.stdout).into_owned(), sum, versions, download })
}

fn sum_line<'a>(sum: &'a str, prefix: &str) -> &'a str {
    sum.lines().find(|l| l.starts_with(prefix)).unwrap_or_default()
}

/// A proxy whose upstream is a second Packyard and a group of a hosted repository and that
/// proxy: the real go command resolves through both, with the same `h1:` hashes as from the
/// upstream itself.
#[test]
fn proxy_and_group_with_the_real_go_command() -> anyhow::Result<()> {
    if Command::new("go").arg("version").output().is_err() {
        eprintln!("skipped: no go command (scripts/test.sh installs golang-go)");
        return Ok(());
    }
    fn create(server: &Server, spec: impl Into<serde_json::Value>) -> anyhow::Result<()> {
        common::process::create_repository(&server.public, &basic(PW), spec)
    }
    let publish = |server: &Server, repo: &str, module: &str, version: &str, message: &str| -> anyhow::Result<()> {
        let (s, text) = status_of(
            ureq::put(&format!(
                "{}/repository/{repo}/{}/@v/{version}.zip",
                server.public,
                packyard_codecs::go::escape(module)
            ))
            .set("Authorization", &basic(PW))
            .send_bytes(&simple_module(module, version, message, 0)?),
        )?;
        anyhow::ensure!(s == 201, "{module}@{version}: {s} {text}");
        Ok(())
    };
    let up_dir = tempfile::tempdir()?;
    let upstream = start(up_dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    upstream.wait_ready()?;
    create(&upstream, Repo::hosted("gomods", Format::Go))?;
    publish(&upstream, "gomods", "example.com/hello", "v1.0.0", "hello v1.0.0")?;
    publish(&upstream, "gomods", "example.com/hello", "v1.1.0", "hello v1.1.0")?;
    publish(&upstream, "gomods", "example.com/hello/v2", "v2.0.0", "hello v2")?;
    publish(&upstream, "gomods", "example.com/MyMod", "v0.1.0", "mixed case")?;
    create(&upstream, Repo::hosted("private", Format::Go).with(serde_json::json!({"anonymous_read": false})))?;

    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true"),
            ("PACKYARD_CACHE__DOWNLOAD_STATS_FLUSH_MS", "100"),
        ],
    )?;
    server.wait_ready()?;
    create(
        &server,
        Repo::proxy("goproxy", Format::Go, &format!("{}/repository/gomods/", upstream.public))
            .with(serde_json::json!({"proxy": {"metadata_ttl_secs": 1}})),
    )?;
    create(&server, Repo::hosted("golocal", Format::Go))?;
    publish(&server, "golocal", "example.com/local", "v0.1.0", "local")?;
    publish(&server, "golocal", "example.com/hello", "v1.2.0-rc.1", "hello rc")?;
    create(&server, Repo::group("goall", Format::Go, &["golocal", "goproxy"]))?;
    // A proxy whose upstream refuses it (401), first in a group: the group fails rather than
    // answering from the next member.
    create(&server, Repo::proxy("gorefused", Format::Go, &format!("{}/repository/private/", upstream.public)))?;
    create(&server, Repo::group("gobroken", Format::Go, &["gorefused", "golocal"]))?;
    let read = |repo: &str, path: &str| -> anyhow::Result<(u16, String)> {
        match ureq::get(&format!("{}/repository/{repo}/{path}", server.public)).call() {
            Ok(r) => Ok((r.status(), r.into_string()?)),
            Err(ureq::Error::Status(code, r)) => Ok((code, r.into_string()?)),
            Err(e) => Err(e.into()),
        }
    };
    // The group merges the lists and picks @latest over the merge (a release over an rc).
    assert_eq!(read("goall", "example.com/hello/@v/list")?, (200, "v1.0.0\nv1.1.0\nv1.2.0-rc.1\n".into()));
    let (s, latest) = read("goall", "example.com/hello/@latest")?;
    assert_eq!(s, 200);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&latest)?["Version"], "v1.1.0");
    assert_eq!(read("goall", "example.com/nothere/@v/list")?.0, 404);
    assert_eq!(read("goproxy", "example.com/nothere/@v/list")?.0, 404);

    let (s, text) = read("gobroken", "example.com/local/@v/list")?;
    assert_eq!(s, 502, "{text}");
    assert!(text.contains("401"), "{text}");
    // A refusal never falls through, for a version's files either.
    let (s, text) = read("gobroken", "example.com/local/@v/v0.1.0.info")?;
    assert_eq!(s, 502, "{text}");
    assert!(text.contains("401"), "{text}");

    // A member whose upstream is down, first in a group: a version's files (immutable) come from
    // the next member that has them, the failure named in a header and counted; with no other
    // member, 502 naming it.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    create(&server, Repo::proxy("godown", Format::Go, &format!("http://127.0.0.1:{dead}/")))?;
    create(&server, Repo::group("gotolerant", Format::Go, &["godown", "golocal"]))?;
    create(&server, Repo::group("goonlydown", Format::Go, &["godown"]))?;
    for ext in ["info", "mod", "zip"] {
        let r =
            ureq::get(&format!("{}/repository/gotolerant/example.com/local/@v/v0.1.0.{ext}", server.public)).call()?;
        assert_eq!(r.status(), 200, "{ext}");
        assert_eq!(r.header("x-packyard-member-failed"), Some("godown: 502"), "{ext}");
    }
    let (s, text) = read("goonlydown", "example.com/local/@v/v0.1.0.info")?;
    assert_eq!(s, 502, "{text}");
    assert!(text.contains("no member answered (godown failed)"), "{text}");
    // Lists and @latest merge the members that answered, the failure named; none answering: 502.
    for (path, body) in [("example.com/local/@v/list", "v0.1.0\n"), ("example.com/local/@latest", "\"v0.1.0\"")] {
        let r = ureq::get(&format!("{}/repository/gotolerant/{path}", server.public)).call()?;
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(r.header("x-packyard-member-failed"), Some("godown: 502"), "{path}");
        let text = r.into_string()?;
        assert!(text.contains(body), "{path}: {text}");
    }
    let (s, text) = read("goonlydown", "example.com/local/@v/list")?;
    assert_eq!(s, 502, "{text}");
    assert!(text.contains("godown"), "{text}");
    // A group whose members all answer says nothing of failures.
    let r = ureq::get(&format!("{}/repository/goall/example.com/hello/@v/list", server.public)).call()?;
    assert_eq!(r.header("x-packyard-member-failed"), None);
    let metrics = ureq::get(&format!("{}/metrics", server.management)).call()?.into_string()?;
    let failures = metrics
        .lines()
        .find(|l| l.starts_with("packyard_group_member_failures_total{group=\"gotolerant\",member=\"godown\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(failures >= 3.0, "counted: {failures}");
    // The real go command downloads through it.
    let home = tempfile::tempdir()?;
    let out = go(
        home.path(),
        home.path(),
        &format!("{}/repository/gotolerant/", server.public),
        &["mod", "download", "-json", "example.com/local@v0.1.0"],
    )?;
    let downloaded: serde_json::Value = serde_json::from_str(&out)?;
    assert!(downloaded["Sum"].as_str().is_some_and(|s| s.starts_with("h1:")), "{downloaded}");
    let app = tempfile::tempdir()?;
    std::fs::write(app.path().join("go.mod"), "module example.com/app\n\ngo 1.19\n")?;
    let versions = go(
        app.path(),
        home.path(),
        &format!("{}/repository/gotolerant/", server.public),
        &["list", "-m", "-versions", "example.com/local"],
    )?;
    assert_eq!(versions.trim(), "example.com/local v0.1.0", "the go command lists through the group");

    let main = "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/MyMod\"\n\t\"example.com/hello\"\n\tv2 \"example.com/hello/v2\"\n)\n\nfunc main() { fmt.Println(hello.Message(), v2.Message(), mymod.Message()) }\n";
    let requires = ["example.com/hello@v1.1.0", "example.com/hello/v2@v2.0.0", "example.com/MyMod@v0.1.0"];
    let direct = build_app(&format!("{}/repository/gomods/", upstream.public), &requires, main)?;
    let proxied = build_app(&format!("{}/repository/goproxy/", server.public), &requires, main)?;
    let grouped_main = "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/hello\"\n\tv2 \"example.com/hello/v2\"\n\t\"example.com/local\"\n)\n\nfunc main() { fmt.Println(hello.Message(), v2.Message(), local.Message()) }\n";
    let grouped = build_app(
        &format!("{}/repository/goall/", server.public),
        &["example.com/hello", "example.com/hello/v2@v2.0.0", "example.com/local@v0.1.0"],
        grouped_main,
    )?;
    assert_eq!(direct.output, "hello v1.1.0 hello v2 mixed case\n");
    assert_eq!(proxied.output, "hello v1.1.0 hello v2 mixed case\n");
    assert_eq!(grouped.output, "hello v1.1.0 hello v2 local\n", "the group's @latest is the upstream's v1.1.0");
    assert_eq!(direct.versions, "example.com/hello v1.0.0 v1.1.0");
    assert_eq!(proxied.versions, "example.com/hello v1.0.0 v1.1.0");
    assert_eq!(grouped.versions, "example.com/hello v1.0.0 v1.1.0 v1.2.0-rc.1");
    for b in [&direct, &proxied, &grouped] {
        assert_eq!(b.download["Sum"], direct.download["Sum"], "{}", b.download);
        assert_eq!(b.download["GoModSum"], direct.download["GoModSum"]);
    }
    assert!(direct.download["Sum"].as_str().is_some_and(|s| s.starts_with("h1:")), "{}", direct.download);
    for prefix in
        ["example.com/hello v1.1.0 h1:", "example.com/hello v1.1.0/go.mod h1:", "example.com/hello/v2 v2.0.0 h1:"]
    {
        let want = sum_line(&direct.sum, prefix);
        assert!(!want.is_empty(), "{prefix} missing: {}", direct.sum);
        assert_eq!(sum_line(&proxied.sum, prefix), want, "via the proxy");
        assert_eq!(sum_line(&grouped.sum, prefix), want, "via the group");
    }
    let mymod = sum_line(&direct.sum, "example.com/MyMod v0.1.0 h1:");
    assert!(!mymod.is_empty());
    assert_eq!(sum_line(&proxied.sum, "example.com/MyMod v0.1.0 h1:"), mymod, "a case-encoded path through the proxy");
    // The rc is served from the hosted member through the group.
    let (s, info) = read("goall", "example.com/hello/@v/v1.2.0-rc.1.info")?;
    assert_eq!(s, 200, "{info}");

    // The proxy's catalogue is what it cached, counted as the go commands downloaded it (two
    // through the proxy, one through the group); the group shows its members' components.
    let auth = basic(PW);
    let cached =
        nexus_component(&server.public, &auth, "repository=goproxy&name=hello&version=v1.1.0&group=example.com")?;
    let zip = cached["assets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["path"] == "example.com/hello/@v/v1.1.0.zip")
        .cloned()
        .unwrap_or_default();
    assert_eq!(zip["uploader"], serde_json::Value::Null, "{cached}");
    let id = zip["id"].as_str().unwrap_or_default().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while nexus(&server.public, &auth, &format!("assets/{id}"))?["downloadCount"].as_i64().unwrap_or(0) < 2 {
        anyhow::ensure!(std::time::Instant::now() < deadline, "the proxy's downloads were not counted");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let listed = nexus(&server.public, &auth, "search?repository=goall&name=hello")?;
    let mut seen: Vec<(String, String)> = listed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (c["repository"].as_str().unwrap_or("").to_string(), c["version"].as_str().unwrap_or("").to_string()))
        .collect();
    seen.sort();
    assert!(seen.contains(&("goall".into(), "v1.2.0-rc.1".into())), "{listed}");
    assert!(seen.contains(&("goall".into(), "v1.1.0".into())), "{listed}");
    // Deleting the cached copy: fetched again when asked for, with the same bytes.
    assert_eq!(nexus_delete(&server.public, &auth, cached["id"].as_str().unwrap_or_default())?, 204);
    let again = nexus(&server.public, &auth, "search?repository=goproxy&name=hello&version=v1.1.0")?;
    assert_eq!(again["items"], serde_json::json!([]), "{again}");
    let zip_url = format!("{}/repository/goproxy/example.com/hello/@v/v1.1.0.zip", server.public);
    let r = ureq::get(&zip_url).call()?;
    assert_eq!(r.header("x-packyard-cache"), Some("miss"), "fetched again");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut r.into_reader(), &mut bytes)?;
    assert_eq!(
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
        zip["checksum"]["sha256"].as_str().unwrap_or_default()
    );
    nexus_component(&server.public, &auth, "repository=goproxy&name=hello&version=v1.1.0")?;

    // What capacity tuning reads: upstream latency per proxy, blob errors, the process's cost.
    let metrics = ureq::get(&format!("{}/metrics", server.management)).call()?.into_string()?;
    let sample = |name: &str| -> f64 {
        metrics.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok())).unwrap_or(-1.0)
    };
    assert!(sample("packyard_proxy_upstream_duration_seconds_count{repository=\"goproxy\"}") >= 1.0, "{metrics}");
    assert_eq!(sample("packyard_blob_errors_total{op=\"write\"}"), 0.0, "{metrics}");
    assert!(sample("process_resident_memory_bytes") > 1_000_000.0, "{metrics}");
    assert!(sample("process_cpu_seconds_total") > 0.0, "{metrics}");
    assert!(sample("process_open_fds") > 3.0, "{metrics}");

    // The upstream goes away: after the metadata TTL the proxy serves its copy, marked stale.
    drop(upstream);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let r = ureq::get(&format!("{}/repository/goproxy/example.com/hello/@v/list", server.public)).call()?;
    assert_eq!(r.header("x-packyard-cache"), Some("stale"));
    assert!(r.header("warning").is_some_and(|w| w.starts_with("110")));
    assert_eq!(r.into_string()?, "v1.0.0\nv1.1.0\n");
    Ok(())
}

/// `gomods` (hosted) with a worker, and `example.com/a/b@v0.3.0` published to it (the PUT waits
/// for the projection); its zip.
async fn gomods_with_a_module(app: &mut common::app::TestApp) -> anyhow::Result<Vec<u8>> {
    app.start_worker();
    app.create(common::app::Repo::hosted("gomods", packyard_model::repos::Format::Go)).await?;
    let zip = simple_module("example.com/a/b", "v0.3.0", "ab", 0)?;
    let r = app.put("/repository/gomods/example.com/a/b/@v/v0.3.0.zip", zip.clone()).await?;
    anyhow::ensure!(r.status == 201, "{}", r.text);
    Ok(zip)
}

/// A published version never changes: other bytes are a 409.
async fn a_version_is_published_once(mut app: common::app::TestApp) -> anyhow::Result<()> {
    gomods_with_a_module(&mut app).await?;
    let other = simple_module("example.com/a/b", "v0.3.0", "other", 0)?;
    let r = app.put("/repository/gomods/example.com/a/b/@v/v0.3.0.zip", other).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    Ok(())
}
app_test!(a_version_is_published_once);

/// A lowered go.mod limit (go.max_go_mod_bytes = 64) refuses a larger one with a 413.
async fn the_go_mod_limit_is_kept(mut app: common::app::TestApp) -> anyhow::Result<()> {
    gomods_with_a_module(&mut app).await?;
    let long_go_mod = format!("module example.com/a/c\n\n// {}\n", "x".repeat(80));
    let big_mod = module_zip("example.com/a/c", "v1.0.0", &[ZipFile::new("go.mod", long_go_mod.as_bytes())])?;
    let r = app.put("/repository/gomods/example.com/a/c/@v/v1.0.0.zip", big_mod).await?;
    assert_eq!(r.status, 413, "{}", r.text);
    assert!(r.text.contains("go.mod is too large") && r.text.contains("the limit is 64"), "{}", r.text);
    Ok(())
}
app_test!(the_go_mod_limit_is_kept, |c: &mut packyard_model::config::Config| c.go.max_go_mod_bytes = 64);

/// Read-your-writes, then warmed `list`/`@latest`/`.info` and `.mod`/`.zip` reads without a
/// database query.
async fn warmed_go_reads_make_no_query(mut app: common::app::TestApp) -> anyhow::Result<()> {
    let zip = gomods_with_a_module(&mut app).await?;
    app.stop_worker().await?;
    let paths = [
        "/repository/gomods/example.com/a/b/@v/list",
        "/repository/gomods/example.com/a/b/@latest",
        "/repository/gomods/example.com/a/b/@v/v0.3.0.info",
        "/repository/gomods/example.com/a/b/@v/v0.3.0.mod",
        "/repository/gomods/example.com/a/b/@v/v0.3.0.zip",
    ];
    for p in paths {
        let r = app.get(p).await?;
        assert_eq!(r.status, 200, "{p}: {}", r.text);
    }
    assert_eq!(&app.get(paths[4]).await?.bytes[..], &zip[..]);
    let before = app.t.metrics.db_queries();
    for _ in 0..3 {
        for p in paths {
            let r = app.get(p).await?;
            assert_eq!(r.status, 200, "{p}");
        }
    }
    assert_eq!(app.t.metrics.db_queries() - before, 0, "warmed Go reads ran database queries");
    let r = app.get(paths[0]).await?;
    assert_eq!(r.text, "v0.3.0\n");
    Ok(())
}
app_test!(warmed_go_reads_make_no_query);

/// Cleanup seen through the real go command: pre-release and pseudo-versions removed, then all
/// but the newest two versions (semantic-version order); each run removes exactly what its
/// preview listed, `go list -m -versions` lists the rest and `go mod download` of a removed
/// version fails.
#[test]
fn cleanup_with_the_real_go_command() -> anyhow::Result<()> {
    use common::process::{catalogue, cleanup_now};
    let dir = tempfile::tempdir()?;
    let server =
        start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_WORKER__CLEANUP_POLL_MS", "100")])?;
    server.wait_ready()?;
    common::process::create_repository(&server.public, &basic(PW), Repo::hosted("gomods", Format::Go))?;
    let m = "example.com/hello";
    let versions = ["v1.0.0", "v1.1.0-rc.1", "v1.1.0", "v0.0.0-20240101000000-abcdefabcdef", "v1.2.0", "v1.10.0"];
    for v in versions {
        let (s, text) = put(&server, &format!("{m}/@v/{v}.zip"), &simple_module(m, v, v, 0)?)?;
        assert_eq!(s, 201, "{v}: {text}");
    }
    let home = tempfile::tempdir()?;
    let app = home.path().join("app");
    std::fs::create_dir_all(&app)?;
    let proxy = format!("{}/repository/gomods/", server.public);
    go(&app, home.path(), &proxy, &["mod", "init", "example.com/app"])?;
    let listed = |home: &Path| go(&app, home, &proxy, &["list", "-m", "-versions", m]);
    assert_eq!(listed(home.path())?.trim(), format!("{m} v1.0.0 v1.1.0-rc.1 v1.1.0 v1.2.0 v1.10.0"));
    let auth = basic(PW);
    let mut left: std::collections::BTreeSet<String> = versions.iter().map(|v| format!("hello {v}")).collect();
    for (policy, removed, listed_after) in [
        (
            serde_json::json!({"name": "pre", "format": "go", "criteria": {"prereleases_only": true}, "repositories": ["gomods"]}),
            vec!["v0.0.0-20240101000000-abcdefabcdef", "v1.1.0-rc.1"],
            "v1.0.0 v1.1.0 v1.2.0 v1.10.0",
        ),
        (
            serde_json::json!({"name": "keep-2", "format": "go", "criteria": {"keep_latest": 2}, "repositories": ["gomods"]}),
            vec!["v1.0.0", "v1.1.0"],
            "v1.2.0 v1.10.0",
        ),
    ] {
        let (preview, run) = cleanup_now(&server.public, &auth, policy.clone(), "gomods")?;
        let want: std::collections::BTreeSet<String> = removed.iter().map(|v| format!("hello {v}")).collect();
        assert_eq!(preview, want, "{policy}");
        assert_eq!(run["components"].as_u64(), Some(removed.len() as u64), "{run}");
        left.retain(|c| !want.contains(c));
        assert_eq!(
            catalogue(&server.public, &auth, "gomods")?,
            left,
            "{policy}: the run removed what the preview listed"
        );
        // Once republished (a run does not wait for it), a fresh module cache sees the rest.
        let want_list: String =
            listed_after.split(' ').filter(|v| !v.contains('-')).map(|v| format!("{v}\n")).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while get(&server, &format!("{m}/@v/list"))?.2 != want_list {
            anyhow::ensure!(std::time::Instant::now() < deadline, "{policy}: @v/list was not republished");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let fresh = tempfile::tempdir()?;
        assert_eq!(listed(fresh.path())?.trim(), format!("{m} {listed_after}"), "{policy}");
        for v in removed {
            let failed = go(&app, fresh.path(), &proxy, &["mod", "download", &format!("{m}@{v}")]);
            let message = failed.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                message.contains("404") || message.contains("410") || message.contains("not found"),
                "{v} downloaded: {message}"
            );
        }
    }
    // Ages and patterns: v1.2.0 published 40 days ago goes; v1.10.0, as old but downloaded
    // just now by the go command, stays under a last-downloaded rule.
    let db = format!("sqlite://{}/data/packyard.db", dir.path().display());
    let days_40 = 40 * 86_400_000i64;
    common::process::sql(&db, &format!("UPDATE components SET created_at = created_at - {days_40}"))?;
    let fresh = tempfile::tempdir()?;
    let dl: serde_json::Value =
        serde_json::from_str(&go(&app, fresh.path(), &proxy, &["mod", "download", "-json", &format!("{m}@v1.10.0")])?)?;
    assert_eq!(dl["Version"], "v1.10.0", "{dl}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while nexus(&server.public, &auth, "search/assets?repository=gomods&version=v1.10.0")?["items"]
        .as_array()
        .is_none_or(|a| a.iter().all(|x| x["lastDownloaded"].is_null()))
    {
        anyhow::ensure!(std::time::Instant::now() < deadline, "the download was not counted");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let unused = serde_json::json!({"name": "unused", "format": "go", "criteria": {"last_downloaded_before_days": 10, "version_regex": "^v1\\.10\\."}, "repositories": ["gomods"]});
    let (preview, _) = cleanup_now(&server.public, &auth, unused, "gomods")?;
    assert_eq!(preview, std::collections::BTreeSet::new(), "downloaded just now");
    let old = serde_json::json!({"name": "old", "format": "go", "criteria": {"published_before_days": 30, "name_regex": "^hello$", "version_regex": "^v1\\.2\\."}, "repositories": ["gomods"]});
    let (preview, _) = cleanup_now(&server.public, &auth, old, "gomods")?;
    assert_eq!(preview, ["hello v1.2.0".to_string()].into());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while get(&server, &format!("{m}/@v/list"))?.2 != "v1.10.0\n" {
        anyhow::ensure!(std::time::Instant::now() < deadline, "@v/list was not republished");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let fresh = tempfile::tempdir()?;
    assert_eq!(listed(fresh.path())?.trim(), format!("{m} v1.10.0"));
    assert!(server.terminate()?.success());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Checksum databases (GOSUMDB): a hosted or group repository's own log, in-process on every
// backend; then the real go command verifying through Packyard.

mod sumdb_support {
    use packyard_codecs::go::sumdb::{self, tlog, Tree, Verifier};

    /// The `h1:` of a module zip, as the go command hashes it (every entry's content).
    pub fn h1_of_zip(zip: &[u8]) -> anyhow::Result<String> {
        use packyard_codecs::go::zip::{check_entries, locate, parse_central, tail_len, verify_data, Limits};
        let tail = &zip[zip.len() - tail_len(zip.len() as u64) as usize..];
        let (offset, size, count) = locate(tail, zip.len() as u64)?;
        let entries = parse_central(&zip[offset as usize..(offset + size) as usize], count, offset)?;
        let (m, v) = check_entries(&entries, None, &Limits::default())?;
        Ok(verify_data(zip, &entries, &format!("{m}@{v}/go.mod"))?.h1)
    }

    /// A version's record: its go.sum lines.
    pub fn record(module: &str, version: &str, zip: &[u8], go_mod: &str) -> anyhow::Result<String> {
        Ok(sumdb::record_text(module, version, &h1_of_zip(zip)?, &sumdb::h1_go_mod(go_mod.as_bytes())))
    }

    /// The signed tree head, checked against the database's key.
    pub fn open(verifier: &Verifier, signed: &str) -> anyhow::Result<Tree> {
        Ok(sumdb::open_tree(verifier, signed)?)
    }

    /// The records a data tile holds, in order, with their ids.
    pub fn data_records(tile: &str) -> anyhow::Result<Vec<(u64, String)>> {
        let mut out = Vec::new();
        let mut rest = tile;
        while !rest.is_empty() {
            let (id, text, after) = tlog::parse_record(rest)?;
            out.push((id, text.to_string()));
            rest = after;
        }
        Ok(out)
    }

    /// RFC 6962's tree hash over these records, straight from the definition.
    pub fn tree_of(records: &[String]) -> tlog::Hash {
        fn merkle(leaves: &[tlog::Hash]) -> tlog::Hash {
            match leaves.len() {
                0 => tlog::Hash::default(),
                1 => leaves[0],
                n => {
                    let mut k = 1;
                    while k * 2 < n {
                        k *= 2;
                    }
                    tlog::node_hash(&merkle(&leaves[..k]), &merkle(&leaves[k..]))
                }
            }
        }
        merkle(&records.iter().map(|r| tlog::record_hash(r.as_bytes())).collect::<Vec<_>>())
    }
}

/// The verifier key of a Go repository's checksum database, from the admin API.
async fn sumdb_key(
    app: &common::app::TestApp,
    repo: &str,
) -> anyhow::Result<(String, packyard_codecs::go::sumdb::Verifier)> {
    let r =
        app.call(actix_web::test::TestRequest::get().uri(&format!("/api/v1/repositories/{repo}/signing-key"))).await?;
    anyhow::ensure!(r.status == 200, "signing key of {repo}: {} {}", r.status, r.text);
    let verifier = packyard_codecs::go::sumdb::Verifier::parse(r.json["verifier_key"].as_str().unwrap_or_default())?;
    Ok((r.json["name"].as_str().unwrap_or_default().to_string(), verifier))
}

/// A hosted repository's own checksum database: every version logged in its upload's
/// transaction (concurrent uploads too), the signed head's hash the tree of the stored records,
/// each lookup its version's real go.sum lines, tiles beyond the signed tree 404, warmed reads
/// without a query, and the same signed head from a fresh replica.
async fn a_hosted_checksum_database(mut app: common::app::TestApp) -> anyhow::Result<()> {
    use sumdb_support::*;
    app.start_worker();
    app.create(Repo::hosted("gomods", Format::Go)).await?;
    let (name, verifier) = sumdb_key(&app, "gomods").await?;
    assert_eq!(name, "gomods", "named after the repository without server.public_url");
    let key = app.call(actix_web::test::TestRequest::get().uri("/api/v1/repositories/gomods/signing-key")).await?;
    let gosumdb = key.json["gosumdb"].as_str().unwrap_or_default();
    assert!(
        gosumdb.starts_with(&format!("{verifier} http")) && gosumdb.ends_with("/repository/gomods/sumdb/gomods"),
        "{gosumdb}"
    );
    assert_eq!((key.json["algorithm"].as_str(), key.json["size"].as_i64()), (Some("ed25519"), Some(0)));
    let base = "/repository/gomods/sumdb/gomods";
    let r = app.get(&format!("{base}/supported")).await?;
    assert_eq!((r.status.as_u16(), r.text.as_str()), (200, ""));
    let empty = open(&verifier, &app.get(&format!("{base}/latest")).await?.text)?;
    assert_eq!((empty.size, empty.hash), (0, Default::default()));

    // Six versions of three modules, uploaded at once.
    let coordinates: Vec<(String, String)> =
        (0..6).map(|i| (format!("example.com/m{}", i % 3), format!("v1.{}.0", i / 3))).collect();
    let zips: Vec<Vec<u8>> =
        coordinates.iter().map(|(m, v)| simple_module(m, v, &format!("{m} {v}"), 0)).collect::<Result<_, _>>()?;
    let paths: Vec<String> = coordinates.iter().map(|(m, v)| format!("/repository/gomods/{m}/@v/{v}.zip")).collect();
    let puts = paths.iter().zip(&zips).map(|(path, zip)| app.put(path, zip.clone()));
    for r in futures_util::future::join_all(puts).await {
        let r = r?;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let head = open(&verifier, &app.get(&format!("{base}/latest")).await?.text)?;
    assert_eq!(head.size, 6);
    // The signed hash is the tree of the records, as the data tile and the table hold them.
    let data = app.get(&format!("{base}/tile/8/data/000.p/6")).await?;
    assert_eq!(data.status, 200, "{}", data.text);
    let records = data_records(&data.text)?;
    assert_eq!(records.iter().map(|(id, _)| *id).collect::<Vec<_>>(), (0..6).collect::<Vec<u64>>());
    let texts: Vec<String> = records.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(tree_of(&texts), head.hash, "the signed tree is the tree of the records");
    let repo = app.services.db.repository_by_name("gomods").await?.ok_or_else(|| anyhow::anyhow!("gomods"))?;
    let stored = packyard_formats::go::sumdb::records(&app.services.db, repo.id, 0..6).await?;
    assert_eq!(stored, texts);
    // The level-0 hash tile: the records' leaf hashes.
    let tile = app.get(&format!("{base}/tile/8/0/000.p/6")).await?;
    let leaves: Vec<u8> =
        texts.iter().flat_map(|t| packyard_codecs::go::sumdb::tlog::record_hash(t.as_bytes()).0).collect();
    assert_eq!((tile.status.as_u16(), tile.bytes), (200, leaves));
    assert_eq!(tile.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/octet-stream"));
    // Each lookup: the version's real go.sum lines, under a signed head that holds them.
    let mut ids = std::collections::BTreeSet::new();
    for ((m, v), zip) in coordinates.iter().zip(&zips) {
        let r = app.get(&format!("{base}/lookup/{m}@{v}")).await?;
        assert_eq!(r.status, 200, "{m}@{v}: {}", r.text);
        let (id, text, signed) = packyard_codecs::go::sumdb::parse_lookup_body(&r.text)?;
        assert_eq!(text, record(m, v, zip, &format!("module {m}\n\ngo 1.19\n"))?);
        assert_eq!(texts[id as usize], text);
        assert_eq!(open(&verifier, signed)?, head);
        ids.insert(id);
    }
    assert_eq!(ids.len(), 6, "one record per version");
    // Beyond the signed tree, another height, a version nobody published: 404.
    for path in [
        "tile/8/0/000.p/7",
        "tile/8/0/000",
        "tile/8/data/000.p/7",
        "tile/8/1/000.p/1",
        "tile/4/0/000.p/1",
        "lookup/example.com/m0@v9.0.0",
        "lookup/example.com/nothere@v1.0.0",
        "lookup/example.com/m0",
        "nonsense",
    ] {
        let r = app.get(&format!("{base}/{path}")).await?;
        assert_eq!(r.status, 404, "{path}: {}", r.text);
    }
    let r = app.get(&format!("{base}/tile/8/0/000.p/7")).await?;
    assert_eq!(r.text.trim_end(), "not found: tile/8/0/000.p/7 is beyond the tree of 6 records that gomods signed");
    let r = app.get("/repository/gomods/sumdb/sum.golang.org/supported").await?;
    assert_eq!(r.status, 404);
    assert!(r.text.contains("does not serve checksum database sum.golang.org"), "{}", r.text);

    // One more version: one more record.
    let zip = simple_module("example.com/m0", "v1.9.0", "nine", 0)?;
    assert_eq!(app.put("/repository/gomods/example.com/m0/@v/v1.9.0.zip", zip).await?.status, 201);
    let grown = app.get(&format!("{base}/latest")).await?.text;
    assert_eq!(open(&verifier, &grown)?.size, 7);

    // Warmed reads of the database make no query.
    app.stop_worker().await?;
    let paths = [
        format!("{base}/latest"),
        format!("{base}/supported"),
        format!("{base}/lookup/example.com/m1@v1.1.0"),
        format!("{base}/tile/8/0/000.p/7"),
        format!("{base}/tile/8/data/000.p/7"),
    ];
    for p in &paths {
        assert_eq!(app.get(p).await?.status, 200, "{p}");
    }
    let before = app.t.metrics.db_queries();
    for _ in 0..3 {
        for p in &paths {
            assert_eq!(app.get(p).await?.status, 200, "{p}");
        }
    }
    assert_eq!(app.t.metrics.db_queries() - before, 0, "warmed checksum database reads ran queries");
    // Another replica (no cache) serves the same signed head, byte for byte.
    let replica = app.replica().await?;
    assert_eq!(replica.get(&format!("{base}/latest")).await?.text, grown);
    Ok(())
}
app_test!(a_hosted_checksum_database);

/// A logged version's hashes never change: under `allow` other bytes with the same content
/// (another compression) replace the zip, other content is a 409 that says why, also after a
/// delete (whose record stays); the logged content may come back.
async fn a_logged_version_never_changes(mut app: common::app::TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("gomods", Format::Go).with(serde_json::json!({"write_policy": "allow"}))).await?;
    let (_, verifier) = sumdb_key(&app, "gomods").await?;
    let m = "example.com/m";
    let files = |text: &str, deflate: bool| {
        [
            ZipFile { deflate, ..ZipFile::new("go.mod", b"module example.com/m\n") },
            ZipFile { deflate, ..ZipFile::new("m.go", format!("package m\n\nconst Text = {text:?}\n").as_bytes()) },
        ]
    };
    let first = module_zip(m, "v1.0.0", &files("one", true))?;
    let stored = module_zip(m, "v1.0.0", &files("one", false))?;
    let other = module_zip(m, "v1.0.0", &files("two", true))?;
    assert_ne!(first, stored);
    let path = format!("/repository/gomods/{m}/@v/v1.0.0.zip");
    assert_eq!(app.put(&path, first.clone()).await?.status, 201);
    let lookup = app.get(&format!("/repository/gomods/sumdb/gomods/lookup/{m}@v1.0.0")).await?.text;
    let logged = packyard_codecs::go::sumdb::parse_lookup_body(&lookup)?.1.to_string();
    // The same content in other bytes: replaced in place, nothing appended.
    let r = app.put(&path, stored.clone()).await?;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(app.get(&path).await?.bytes, stored);
    let size = || async {
        let head = app.get("/repository/gomods/sumdb/gomods/latest").await?.text;
        anyhow::Ok(sumdb_support::open(&verifier, &head)?.size)
    };
    assert_eq!(size().await?, 1);
    // Other content: refused, saying why.
    let refusal = format!(
        "example.com/m@v1.0.0 is record 0 of the checksum database of repository gomods with the zip hash {}, and this zip hashes to {}: a logged version's hashes never change",
        sumdb_support::h1_of_zip(&first)?,
        sumdb_support::h1_of_zip(&other)?
    );
    let r = app.put(&path, other.clone()).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.starts_with(&refusal), "{}", r.text);
    assert_eq!(app.get(&path).await?.bytes, stored, "the served zip is unchanged");
    // Deleted: the record stays; other content is refused the same way; the logged one returns.
    assert_eq!(app.delete(&path).await?.status, 204);
    assert_eq!(app.get(&path).await?.status, 404);
    let again = app.get(&format!("/repository/gomods/sumdb/gomods/lookup/{m}@v1.0.0")).await?;
    assert_eq!(again.status, 200);
    assert_eq!(packyard_codecs::go::sumdb::parse_lookup_body(&again.text)?.1, logged);
    let r = app.put(&path, other.clone()).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.starts_with(&refusal), "{}", r.text);
    app.patch_repository("gomods", serde_json::json!({"write_policy": "allow_once"})).await?;
    let r = app.put(&path, other).await?;
    assert_eq!(r.status, 409, "under allow_once too: {}", r.text);
    assert!(r.text.starts_with(&refusal), "{}", r.text);
    assert_eq!(app.put(&path, first).await?.status, 201, "the logged content may be published again");
    assert_eq!(size().await?, 1);
    Ok(())
}
app_test!(a_logged_version_never_changes);

/// A group's own database logs what it serves on the first lookup (a hosted member's record),
/// once; it also answers for a member's database by name, and 404s a name nobody serves. A
/// database's key may be chosen while it is empty, never after.
async fn a_group_checksum_database(mut app: common::app::TestApp) -> anyhow::Result<()> {
    app.start_worker();
    app.create(Repo::hosted("a", Format::Go)).await?;
    app.create(Repo::hosted("b", Format::Go)).await?;
    app.create(Repo::group("g", Format::Go, &["a", "b"])).await?;
    let key = |repo: &str, body: serde_json::Value| {
        app.call(
            actix_web::test::TestRequest::put().uri(&format!("/api/v1/repositories/{repo}/signing-key")).set_json(body),
        )
    };
    // The group's database gets a name of our choosing while it is empty.
    let r = key("g", serde_json::json!({"generate": true, "name": "sum.g.example"})).await?;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json["name"], "sum.g.example");
    let (name, verifier) = sumdb_key(&app, "g").await?;
    assert_eq!(name, "sum.g.example");
    let r = key("g", serde_json::json!({"generate": true, "name": "bad name"})).await?;
    assert_eq!(r.status, 400, "{}", r.text);
    let zip_a = simple_module("example.com/a", "v1.0.0", "a", 0)?;
    let zip_b = simple_module("example.com/b", "v1.0.0", "b", 0)?;
    assert_eq!(app.put("/repository/a/example.com/a/@v/v1.0.0.zip", zip_a.clone()).await?.status, 201);
    assert_eq!(app.put("/repository/b/example.com/b/@v/v1.0.0.zip", zip_b.clone()).await?.status, 201);
    let base = "/repository/g/sumdb/sum.g.example";
    assert_eq!(sumdb_support::open(&verifier, &app.get(&format!("{base}/latest")).await?.text)?.size, 0);
    for (i, (m, zip, member)) in
        [("example.com/b", &zip_b, "b"), ("example.com/a", &zip_a, "a")].into_iter().enumerate()
    {
        for _ in 0..2 {
            let r = app.get(&format!("{base}/lookup/{m}@v1.0.0")).await?;
            assert_eq!(r.status, 200, "{}", r.text);
            let (id, text, signed) = packyard_codecs::go::sumdb::parse_lookup_body(&r.text)?;
            assert_eq!(
                (id, text),
                (i as u64, sumdb_support::record(m, "v1.0.0", zip, &format!("module {m}\n\ngo 1.19\n"))?.as_str())
            );
            assert_eq!(sumdb_support::open(&verifier, signed)?.size, i as u64 + 1);
            // The member's own record says the same.
            let own = app.get(&format!("/repository/{member}/sumdb/{member}/lookup/{m}@v1.0.0")).await?;
            assert_eq!(packyard_codecs::go::sumdb::parse_lookup_body(&own.text)?.1, text);
        }
    }
    assert_eq!(app.get(&format!("{base}/lookup/example.com/c@v1.0.0")).await?.status, 404);
    // A member's database through the group: the member's answer.
    let through = app.get("/repository/g/sumdb/a/lookup/example.com/a@v1.0.0").await?;
    let direct = app.get("/repository/a/sumdb/a/lookup/example.com/a@v1.0.0").await?;
    assert_eq!((through.status.as_u16(), &through.text), (200, &direct.text));
    for (path, status) in [("sum.g.example/supported", 200), ("b/supported", 200), ("sum.golang.org/supported", 404)] {
        assert_eq!(app.get(&format!("/repository/g/sumdb/{path}")).await?.status, status, "{path}");
    }
    // Not empty any more: its key never changes.
    let r = key("g", serde_json::json!({"generate": true})).await?;
    assert_eq!(r.status, 409, "{}", r.text);
    assert!(r.text.contains("holds 2 record(s): its key never changes"), "{}", r.text);
    let (private, _) = packyard_codecs::go::sumdb::note::generate_key("sum.g.example")?;
    assert_eq!(key("g", serde_json::json!({"private_key": private})).await?.status, 409);
    // An empty one takes an imported key.
    let (private, public) = packyard_codecs::go::sumdb::note::generate_key("sum.c.example")?;
    app.create(Repo::hosted("c", Format::Go)).await?;
    let r = key("c", serde_json::json!({"private_key": private})).await?;
    assert_eq!((r.status.as_u16(), r.json["verifier_key"].as_str()), (200, Some(public.as_str())), "{}", r.text);
    assert_eq!(app.get("/repository/c/sumdb/sum.c.example/supported").await?.status, 200);
    assert_eq!(app.get("/repository/c/sumdb/c/supported").await?.status, 404);
    Ok(())
}
app_test!(a_group_checksum_database);

/// A Go proxy's checksum databases: sum.golang.org through its upstream unless told otherwise,
/// shown by GET, changed by PATCH, checked; `[]` serves none; hosted repositories take none.
async fn proxy_checksum_database_settings(app: common::app::TestApp) -> anyhow::Result<()> {
    let created = app.create(Repo::proxy("goproxy", Format::Go, "https://proxy.golang.org/")).await?;
    assert_eq!(created["go"], serde_json::json!({"checksum_databases": [{"name": "sum.golang.org"}]}));
    let direct =
        serde_json::json!({"checksum_databases": [{"name": "sum.golang.org", "url": "https://sum.golang.org"}]});
    let patched = app.patch_repository("goproxy", serde_json::json!({"go": direct})).await?;
    assert_eq!(patched["go"], direct);
    let got = app.call(actix_web::test::TestRequest::get().uri("/api/v1/repositories/goproxy")).await?;
    assert_eq!(got.json["go"], direct);
    // `supported` of a database the proxy reaches at its own URL: answered without asking.
    let r = app.get("/repository/goproxy/sumdb/sum.golang.org/supported").await?;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(app.get("/repository/goproxy/sumdb/sum.other.example/supported").await?.status, 404);
    for (go, message) in [
        (serde_json::json!({"checksum_databases": [{"name": "a b"}]}), "invalid go.checksum_databases name"),
        (serde_json::json!({"checksum_databases": [{"name": "s", "url": "file:///etc"}]}), "must use http or https"),
        (serde_json::json!({"checksum_databases": [{"name": "s"}, {"name": "s"}]}), "lists \"s\" twice"),
    ] {
        let r = app
            .call(
                actix_web::test::TestRequest::patch()
                    .uri("/api/v1/repositories/goproxy")
                    .insert_header(("content-type", "application/merge-patch+json"))
                    .set_payload(serde_json::json!({"go": go}).to_string()),
            )
            .await?;
        assert_eq!(r.status, 400, "{}", r.text);
        assert!(common::error_of(&r.json).1.contains(message), "{}", r.text);
    }
    // The proxy's address guard holds for a database's URL too.
    let local = serde_json::json!({"checksum_databases": [{"name": "sum.golang.org", "url": "http://127.0.0.1:9/"}]});
    app.patch_repository("goproxy", serde_json::json!({"go": local})).await?;
    let r = app.get("/repository/goproxy/sumdb/sum.golang.org/latest").await?;
    assert_eq!(r.status, 502, "{}", r.text);
    assert!(
        r.text.contains("loopback, private or link-local") && r.text.contains("proxy.allowed_networks"),
        "{}",
        r.text
    );
    let none = app.patch_repository("goproxy", serde_json::json!({"go": {"checksum_databases": []}})).await?;
    assert_eq!(none["go"], serde_json::json!({"checksum_databases": []}));
    assert_eq!(app.get("/repository/goproxy/sumdb/sum.golang.org/supported").await?.status, 404);
    // PUT keeps the rule of every format's settings: what the repository has may not be left out.
    let put = app
        .call(actix_web::test::TestRequest::put().uri("/api/v1/repositories/goproxy").set_json(serde_json::json!({
            "format": "go", "type": "proxy", "proxy": {"remote_url": "https://proxy.golang.org/"}
        })))
        .await?;
    assert_eq!(put.status, 400, "{}", put.text);
    assert!(put.text.contains("the body has no `go` settings"), "{}", put.text);
    let r = app
        .call(actix_web::test::TestRequest::post().uri("/api/v1/repositories").set_json(serde_json::json!({
            "name": "h", "format": "go", "type": "hosted", "go": {"checksum_databases": []}
        })))
        .await?;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("go.checksum_databases applies to proxy repositories"), "{}", r.text);
    let r = app.call(actix_web::test::TestRequest::get().uri("/api/v1/repositories/goproxy/signing-key")).await?;
    assert_eq!(r.status, 400, "{}", r.text);
    Ok(())
}
app_test!(proxy_checksum_database_settings);

/// The go command with this environment (beside a fresh, isolated home): whether it succeeded,
/// its stdout and its stderr.
fn go_with(dir: &Path, home: &Path, env: &[(&str, &str)], args: &[&str]) -> anyhow::Result<(bool, String, String)> {
    let mut cmd = common::golang::isolated(dir, home, args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// x/mod's checksum database server (`tests/fixtures/sumdb`), built offline from Debian's
/// golang-golang-x-mod-dev; `None` (the test skipped) without go or those sources.
fn sumdb_server_binary(scratch: &Path) -> anyhow::Result<Option<std::path::PathBuf>> {
    let sources = Path::new("/usr/share/gocode/src/golang.org/x/mod/sumdb");
    if Command::new("go").arg("version").output().is_err() || !sources.is_dir() {
        eprintln!(
            "skipped: no go command or no {} (scripts/test.sh installs golang-go and golang-golang-x-mod-dev)",
            sources.display()
        );
        return Ok(None);
    }
    let main = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sumdb/main.go");
    let bin = scratch.join("sumdb-server");
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(&main)
        .current_dir(scratch)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", scratch)
        .env("GOCACHE", scratch.join("gocache"))
        .env("GOPATH", format!("{}:/usr/share/gocode", scratch.join("gopath").display()))
        .env("GO111MODULE", "off")
        .env("GOTOOLCHAIN", "local")
        .output()?;
    anyhow::ensure!(out.status.success(), "building the sumdb server: {}", String::from_utf8_lossy(&out.stderr));
    Ok(Some(bin))
}

/// A running x/mod checksum database over a GOPROXY directory; killed on drop.
struct SumdbServer {
    child: std::process::Child,
    url: String,
    log: std::path::PathBuf,
}

impl SumdbServer {
    fn start(bin: &Path, private_key: &str, proxy_dir: &Path, log: std::path::PathBuf) -> anyhow::Result<Self> {
        use std::io::BufRead as _;
        let mut child =
            Command::new(bin).arg(private_key).arg(proxy_dir).arg(&log).stdout(std::process::Stdio::piped()).spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut line = String::new();
        std::io::BufReader::new(stdout).read_line(&mut line)?;
        let url = line.trim().strip_prefix("listening on ").unwrap_or_default().to_string();
        anyhow::ensure!(url.starts_with("http://"), "the sumdb server said {line:?}");
        Ok(Self { child, url, log })
    }

    /// The paths it was asked for, in order.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().map(str::to_string).collect()
    }
}

impl Drop for SumdbServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a module version into a GOPROXY directory.
fn write_goproxy(root: &Path, module: &str, version: &str, zip: &[u8], go_mod: &str) -> anyhow::Result<()> {
    let dir = root.join(packyard_codecs::go::escape(module)).join("@v");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(format!("{version}.zip")), zip)?;
    std::fs::write(dir.join(format!("{version}.mod")), go_mod)?;
    Ok(())
}

fn put_module(server: &Server, repo: &str, module: &str, version: &str, zip: &[u8]) -> anyhow::Result<(u16, String)> {
    status_of(
        ureq::put(&format!(
            "{}/repository/{repo}/{}/@v/{version}.zip",
            server.public,
            packyard_codecs::go::escape(module)
        ))
        .set("Authorization", &basic(PW))
        .send_bytes(zip),
    )
}

/// Item 5: a proxy serves the public checksum database it is configured with
/// (`go.checksum_databases`), through the proxy cache: the real go command, given only the
/// database's name and key (`GOSUMDB` without a URL), asks Packyard's `sumdb/<name>/supported`,
/// then verifies through it — x/mod's own server computing the records with x/mod's dirhash;
/// a second run is served from the cache; a group answers for its member; a version the database
/// says other hashes for, a tampered go.sum line and a wrong key are each refused.
#[test]
fn a_proxied_checksum_database_with_the_real_go_command() -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let Some(bin) = sumdb_server_binary(scratch.path())? else { return Ok(()) };
    let go_mod = |m: &str| format!("module {m}\n\ngo 1.19\n");
    let hello = [
        ("v1.0.0", simple_module("example.com/hello", "v1.0.0", "hello one", 0)?),
        ("v1.1.0", simple_module("example.com/hello", "v1.1.0", "hello two", 0)?),
    ];
    let served = simple_module("example.com/tampered", "v1.0.0", "what the proxy serves", 0)?;
    let logged = simple_module("example.com/tampered", "v1.0.0", "what the database logged", 0)?;
    // The database's view of the world: the same hello, another tampered.
    let upstream_dir = scratch.path().join("goproxy");
    for (v, zip) in &hello {
        write_goproxy(&upstream_dir, "example.com/hello", v, zip, &go_mod("example.com/hello"))?;
    }
    write_goproxy(&upstream_dir, "example.com/tampered", "v1.0.0", &logged, &go_mod("example.com/tampered"))?;
    let (private, public) = packyard_codecs::go::sumdb::note::generate_key("sum.test.example")?;
    let sumdb = SumdbServer::start(&bin, &private, &upstream_dir, scratch.path().join("sumdb.log"))?;

    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")],
    )?;
    server.wait_ready()?;
    let create = |spec: serde_json::Value| common::process::create_repository(&server.public, &basic(PW), spec);
    create(Repo::hosted("origin", Format::Go).into())?;
    for (v, zip) in &hello {
        assert_eq!(put_module(&server, "origin", "example.com/hello", v, zip)?.0, 201);
    }
    assert_eq!(put_module(&server, "origin", "example.com/tampered", "v1.0.0", &served)?.0, 201);
    create(
        Repo::proxy("goproxy", Format::Go, &format!("{}/repository/origin/", server.public))
            .with(serde_json::json!({"go": {"checksum_databases": [{"name": "sum.test.example", "url": sumdb.url}]}}))
            .into(),
    )?;
    create(Repo::group("gogroup", Format::Go, &["goproxy"]).into())?;

    let proxy = format!("{}/repository/goproxy/", server.public);
    let env = |proxy: &str, gosumdb: &str| -> Vec<(String, String)> {
        vec![("GOPROXY".into(), proxy.into()), ("GOSUMDB".into(), gosumdb.into())]
    };
    let run = |env: &[(String, String)], dir: Option<&Path>, args: &[&str]| -> anyhow::Result<(bool, String, String)> {
        let home = tempfile::tempdir()?;
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let out = go_with(dir.unwrap_or(home.path()), home.path(), &env, args);
        if let Ok((true, _, _)) = &out {
            let latest = std::fs::read_to_string(home.path().join("gopath/pkg/sumdb/sum.test.example/latest"))?;
            anyhow::ensure!(latest.starts_with("go.sum database tree\n"), "the go command kept no tree: {latest}");
        }
        out
    };
    let download = ["mod", "download", "-json", "example.com/hello@v1.1.0"];
    let (ok, out, err) = run(&env(&proxy, &public), None, &download)?;
    assert!(ok, "{out}\n{err}");
    let json: serde_json::Value = serde_json::from_str(&out)?;
    assert_eq!(json["Sum"].as_str(), Some(sumdb_support::h1_of_zip(&hello[1].1)?.as_str()), "{json}");
    let asked = sumdb.requests();
    assert!(asked.contains(&"/lookup/example.com/hello@v1.1.0".to_string()), "{asked:?}");
    assert!(asked.iter().any(|p| p.starts_with("/tile/8/0/")), "{asked:?}");
    // What the database says, asked directly, is what the go command verified.
    let direct = ureq::get(&format!("{}/lookup/example.com/hello@v1.1.0", sumdb.url)).call()?.into_string()?;
    assert!(
        direct.contains(&format!("example.com/hello v1.1.0 {}\n", json["Sum"].as_str().unwrap_or("?"))),
        "{direct}"
    );
    let through = ureq::get(&format!("{proxy}sumdb/sum.test.example/lookup/example.com/hello@v1.1.0")).call()?;
    assert_eq!(through.header("x-packyard-cache"), Some("hit"));
    let asked = sumdb.requests().len();

    // Again from a fresh home, and through the group: all from Packyard's cache.
    let (ok, out, err) = run(&env(&proxy, &public), None, &download)?;
    assert!(ok, "{out}\n{err}");
    let group = format!("{}/repository/gogroup/", server.public);
    let (ok, out, err) = run(&env(&group, &public), None, &download)?;
    assert!(ok, "through the group: {out}\n{err}");
    assert_eq!(sumdb.requests().len(), asked, "asked the database again: {:?}", sumdb.requests());

    // The database logged other hashes than the proxy serves: refused.
    let (ok, out, err) =
        run(&env(&proxy, &public), None, &["mod", "download", "-json", "example.com/tampered@v1.0.0"])?;
    assert!(!ok, "{out}");
    assert!(out.contains("checksum mismatch") && out.contains("SECURITY ERROR"), "{out}\n{err}");
    assert!(out.contains(&sumdb_support::h1_of_zip(&logged)?), "{out}");

    // A go.sum line changed: refused.
    let app = tempfile::tempdir()?;
    std::fs::write(
        app.path().join("go.mod"),
        "module example.com/app\n\ngo 1.19\n\nrequire example.com/hello v1.1.0\n",
    )?;
    let real = sumdb_support::h1_of_zip(&hello[1].1)?;
    let forged = sumdb_support::h1_of_zip(&hello[0].1)?;
    let sum = format!(
        "example.com/hello v1.1.0 {forged}\nexample.com/hello v1.1.0/go.mod {}\n",
        packyard_codecs::go::sumdb::h1_go_mod(go_mod("example.com/hello").as_bytes())
    );
    std::fs::write(app.path().join("go.sum"), sum)?;
    let (ok, out, err) = run(&env(&proxy, &public), Some(app.path()), &["mod", "download", "example.com/hello"])?;
    assert!(!ok, "{out}");
    assert!(err.contains("checksum mismatch") && err.contains("SECURITY ERROR"), "{err}");
    assert!(err.contains(&real) && err.contains(&forged), "{err}");

    // Another key of the same name: refused.
    let (_, impostor) = packyard_codecs::go::sumdb::note::generate_key("sum.test.example")?;
    let (ok, out, err) = run(&env(&proxy, &impostor), None, &download)?;
    assert!(!ok, "{out}");
    assert!(out.contains("verifying") && out.contains("no verifiable signatures"), "{out}\n{err}");
    Ok(())
}

/// Item 6: a hosted repository's and a group's own checksum databases verify private modules
/// with the real go command (`GOSUMDB="<name>+<key> <url>"`, `GONOSUMDB` unset): through the
/// hosted repository and through a group over it and a proxy (whose version the group logs from
/// the bytes it serves); a tampered go.sum line and a wrong key are refused; the log survives a
/// restart, signing the same head; a record changed in the database behind Packyard's back is
/// caught by the go command.
#[test]
fn own_checksum_databases_with_the_real_go_command() -> anyhow::Result<()> {
    if Command::new("go").arg("version").output().is_err() {
        eprintln!("skipped: no go command (scripts/test.sh installs golang-go)");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let env = [("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true")];
    let server = start(dir.path(), &env)?;
    server.wait_ready()?;
    let create =
        |server: &Server, spec: serde_json::Value| common::process::create_repository(&server.public, &basic(PW), spec);
    create(&server, Repo::hosted("gomods", Format::Go).into())?;
    create(&server, Repo::hosted("public", Format::Go).into())?;
    create(&server, Repo::proxy("pubproxy", Format::Go, &format!("{}/repository/public/", server.public)).into())?;
    create(&server, Repo::group("goall", Format::Go, &["gomods", "pubproxy"]).into())?;
    let m = "example.com/private";
    let zips = [
        ("v1.0.0", simple_module(m, "v1.0.0", "private one", 0)?),
        ("v1.1.0", simple_module(m, "v1.1.0", "private two", 0)?),
    ];
    let key = |repo: &str| -> anyhow::Result<serde_json::Value> {
        let r = ureq::get(&format!("{}/api/v1/repositories/{repo}/signing-key", server.public))
            .set("Authorization", &basic(PW))
            .call()?;
        Ok(r.into_json()?)
    };
    let latest = |repo: &str, name: &str| -> anyhow::Result<String> {
        Ok(ureq::get(&format!("{}/repository/{repo}/sumdb/{name}/latest", server.public)).call()?.into_string()?)
    };
    let size = |note: &str| note.lines().nth(1).unwrap_or_default().to_string();
    assert_eq!(size(&latest("gomods", "gomods")?), "0");
    for (i, (v, zip)) in zips.iter().enumerate() {
        assert_eq!(put_module(&server, "gomods", m, v, zip)?.0, 201);
        assert_eq!(size(&latest("gomods", "gomods")?), (i + 1).to_string(), "one record per version");
    }
    let public_zip = simple_module("example.com/pub", "v1.0.0", "public", 0)?;
    assert_eq!(put_module(&server, "public", "example.com/pub", "v1.0.0", &public_zip)?.0, 201);
    let hosted = key("gomods")?;
    let gosumdb = hosted["gosumdb"].as_str().unwrap_or_default().to_string();
    assert_eq!(
        gosumdb,
        format!("{} {}/repository/gomods/sumdb/gomods", hosted["verifier_key"].as_str().unwrap_or("?"), server.public)
    );
    let grouped = key("goall")?["gosumdb"].as_str().unwrap_or_default().to_string();

    let hosted_proxy = format!("{}/repository/gomods/", server.public);
    let group_proxy = format!("{}/repository/goall/", server.public);
    let run =
        |proxy: &str, gosumdb: &str, dir: Option<&Path>, args: &[&str]| -> anyhow::Result<(bool, String, String)> {
            let home = tempfile::tempdir()?;
            go_with(dir.unwrap_or(home.path()), home.path(), &[("GOPROXY", proxy), ("GOSUMDB", gosumdb)], args)
        };
    let download = ["mod", "download", "-json", "example.com/private@v1.1.0"];
    let (ok, out, err) = run(&hosted_proxy, &gosumdb, None, &download)?;
    assert!(ok, "{out}\n{err}");
    let json: serde_json::Value = serde_json::from_str(&out)?;
    assert_eq!(json["Sum"].as_str(), Some(sumdb_support::h1_of_zip(&zips[1].1)?.as_str()), "{json}");

    // Through the group: `go get` both modules, build and run; the group logs each on its first
    // lookup (the proxied one from the bytes the proxy serves).
    let app = tempfile::tempdir()?;
    std::fs::write(app.path().join("go.mod"), "module example.com/app\n\ngo 1.19\n")?;
    std::fs::write(
        app.path().join("main.go"),
        "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/private\"\n\t\"example.com/pub\"\n)\n\nfunc main() { fmt.Println(private.Message(), pub.Message()) }\n",
    )?;
    let home = tempfile::tempdir()?;
    let group_env = [("GOPROXY", group_proxy.as_str()), ("GOSUMDB", grouped.as_str())];
    let (ok, out, err) =
        go_with(app.path(), home.path(), &group_env, &["get", "example.com/private@v1.0.0", "example.com/pub@v1.0.0"])?;
    assert!(ok, "{out}\n{err}");
    let (ok, out, err) = go_with(app.path(), home.path(), &group_env, &["run", "."])?;
    assert!(ok, "{out}\n{err}");
    assert_eq!(out, "private one public\n");
    let sum = std::fs::read_to_string(app.path().join("go.sum"))?;
    assert_eq!(
        sum_line(&sum, "example.com/pub v1.0.0 h1:"),
        format!("example.com/pub v1.0.0 {}", sumdb_support::h1_of_zip(&public_zip)?)
    );
    let group_name = key("goall")?["name"].as_str().unwrap_or_default().to_string();
    // What the go command looked up (also the latest private version's go.mod, for its
    // retractions), each logged once.
    assert_eq!(size(&latest("goall", &group_name)?), "3");
    let data = ureq::get(&format!("{}/repository/goall/sumdb/{group_name}/tile/8/data/000.p/3", server.public))
        .call()?
        .into_string()?;
    let mut logged: Vec<String> = sumdb_support::data_records(&data)?.into_iter().map(|(_, text)| text).collect();
    logged.sort();
    let mut expected = vec![
        sumdb_support::record(m, "v1.0.0", &zips[0].1, &format!("module {m}\n\ngo 1.19\n"))?,
        sumdb_support::record(m, "v1.1.0", &zips[1].1, &format!("module {m}\n\ngo 1.19\n"))?,
        sumdb_support::record("example.com/pub", "v1.0.0", &public_zip, "module example.com/pub\n\ngo 1.19\n")?,
    ];
    expected.sort();
    assert_eq!(logged, expected);
    // The hosted database through the group, by its name and no URL: the group answers for it.
    let bare = gosumdb.split(' ').next().unwrap_or_default();
    let (ok, out, err) = run(&group_proxy, bare, None, &download)?;
    assert!(ok, "{out}\n{err}");

    // A go.sum line changed: refused.
    std::fs::write(
        app.path().join("go.sum"),
        sum.replace(&sumdb_support::h1_of_zip(&zips[0].1)?, &sumdb_support::h1_of_zip(&zips[1].1)?),
    )?;
    let (ok, out, err) =
        go_with(app.path(), tempfile::tempdir()?.path(), &group_env, &["mod", "download", "example.com/private"])?;
    assert!(!ok, "{out}");
    assert!(err.contains("checksum mismatch") && err.contains("SECURITY ERROR"), "{err}");
    // Another key of the same name: refused.
    let (_, impostor) = packyard_codecs::go::sumdb::note::generate_key("gomods")?;
    let url = gosumdb.split(' ').nth(1).unwrap_or_default();
    let (ok, out, _) = run(&hosted_proxy, &format!("{impostor} {url}"), None, &download)?;
    assert!(!ok && out.contains("no verifiable signatures"), "{out}");

    // A restart: the same log, the same signed head, verified again.
    let before = latest("gomods", "gomods")?;
    assert!(server.terminate()?.success());
    let server = start(dir.path(), &env)?;
    server.wait_ready()?;
    assert_eq!(
        ureq::get(&format!("{}/repository/gomods/sumdb/gomods/latest", server.public)).call()?.into_string()?,
        before
    );
    let hosted_proxy = format!("{}/repository/gomods/", server.public);
    let gosumdb = format!("{bare} {}/repository/gomods/sumdb/gomods", server.public);
    let (ok, out, err) = run(&hosted_proxy, &gosumdb, None, &download)?;
    assert!(ok, "after a restart: {out}\n{err}");

    // A record changed behind Packyard's back (its stored hashes left alone): the go command
    // cannot authenticate it.
    assert!(server.terminate()?.success());
    let forged = sumdb_support::record(m, "v1.1.0", &zips[0].1, &format!("module {m}\n\ngo 1.19\n"))?;
    common::process::sql(
        &format!("sqlite://{}/data/packyard.db", dir.path().display()),
        &format!("UPDATE go_sumdb_records SET record = '{forged}' WHERE module = '{m}' AND version = 'v1.1.0'"),
    )?;
    let server = start(dir.path(), &env)?;
    server.wait_ready()?;
    let hosted_proxy = format!("{}/repository/gomods/", server.public);
    let gosumdb = format!("{bare} {}/repository/gomods/sumdb/gomods", server.public);
    let (ok, out, err) = run(&hosted_proxy, &gosumdb, None, &download)?;
    assert!(!ok, "a forged record verified: {out}");
    assert!(out.contains("cannot authenticate record data"), "{out}\n{err}");
    Ok(())
}
