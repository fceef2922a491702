//! Conan proxies, cleanup and uploads where their peers misbehave, with the real `conan` 2
//! client: a proxy of a second Packyard picks up a recipe revision published upstream after its
//! first fetch once its `metadata_ttl_secs` passed; a cleanup removes whole recipe revisions —
//! every file of the recipe and of each package revision —, never single files of one; and
//! malformed uploads (`conaninfo.txt`, `conanmanifest.txt`, references) are refused with a 4xx
//! naming the file and what is wrong, nothing stored, while valid packages still install through
//! the repository and a group over it.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{basic, create_repository, status_of, Server};
use common::Repo;
use packyard_model::repos::Format;

const PW: &str = "peers-conan-admin";

fn conan_available() -> bool {
    common::process::available("conan", "--version")
}

/// A server process in a directory of its own (proxies may reach this machine; cleanup runs
/// are picked up quickly).
fn packyard() -> anyhow::Result<(Server, tempfile::TempDir)> {
    common::process::start_in_scratch(&[
        ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
        ("PACKYARD_PROXY__ALLOW_PRIVATE_ADDRESSES", "true"),
        ("PACKYARD_WORKER__CLEANUP_POLL_MS", "100"),
    ])
}

fn create(server: &Server, spec: Repo) -> anyhow::Result<()> {
    create_repository(&server.public, &basic(PW), spec)
}

/// GET `url`: status and body.
fn get(url: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    common::process::get_url(url)
}

fn get_json(url: &str) -> anyhow::Result<serde_json::Value> {
    let (s, body) = get(url)?;
    anyhow::ensure!(s == 200, "GET {url}: {s} {}", String::from_utf8_lossy(&body));
    Ok(serde_json::from_slice(&body)?)
}

/// `PUT url` with `body` as the admin: status and message.
fn put(url: &str, body: &[u8]) -> anyhow::Result<(u16, String)> {
    status_of(ureq::put(url).set("Authorization", &basic(PW)).send_bytes(body))
}

fn md5(bytes: &[u8]) -> String {
    hex::encode(<md5::Md5 as md5::Digest>::digest(bytes))
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))
}

fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(Result::ok).map(|e| if e.path().is_dir() { files_under(&e.path()) } else { 1 }).sum())
        .unwrap_or(0)
}

/// The test recipe: settings `os` and `arch`; its package holds `lib/info.txt` naming them and
/// `$PKG_STAMP`.
const RECIPE: &str = r#"import os
from conan import ConanFile
from conan.tools.files import save


class Pkg(ConanFile):
    settings = "os", "arch"

    def package(self):
        stamp = os.environ.get("PKG_STAMP", "")
        save(self, os.path.join(self.package_folder, "lib", "info.txt"), f"{self.settings.os} {self.settings.arch} {stamp}")
"#;

const WINDOWS: [&str; 4] = ["-s", "os=Windows", "-s", "arch=x86_64"];

/// A `conan` client with a home of its own, asking only the remotes it is given.
struct Client {
    home: tempfile::TempDir,
}

impl Client {
    fn new() -> anyhow::Result<Self> {
        let client = Self { home: tempfile::tempdir()? };
        client.ok(&["profile", "detect"])?;
        client.ok(&["remote", "remove", "conancenter"])?;
        Ok(client)
    }

    fn run(&self, cwd: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<(bool, String, String)> {
        let out = Command::new("conan")
            .args(args)
            .current_dir(cwd.unwrap_or(self.home.path()))
            .env("CONAN_HOME", self.home.path())
            .envs(env.iter().copied())
            .output()?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let (success, out, err) = self.run(None, args, &[])?;
        anyhow::ensure!(success, "conan {args:?}: {out}{err}");
        Ok(format!("{out}{err}"))
    }

    /// `conan args --format=json`: stdout as JSON.
    fn json(&self, args: &[&str]) -> anyhow::Result<serde_json::Value> {
        let mut all = args.to_vec();
        all.push("--format=json");
        let (success, out, err) = self.run(None, &all, &[])?;
        anyhow::ensure!(success, "conan {all:?}: {out}{err}");
        Ok(serde_json::from_str(&out)?)
    }

    /// Adds `remotes` (name, URL, whether to log in as the admin).
    fn remotes(&self, remotes: &[(&str, String, bool)]) -> anyhow::Result<()> {
        for (name, url, login) in remotes {
            self.ok(&["remote", "add", name, url])?;
            if *login {
                self.ok(&["remote", "login", name, "admin", "-p", PW])?;
            }
        }
        Ok(())
    }

    /// `conan create` of [`RECIPE`] plus `extra` as `name/version`, with `PKG_STAMP=stamp` and
    /// `settings`: the recipe revision, package id and package revision it made.
    fn create(
        &self,
        reference: (&str, &str),
        extra: &str,
        stamp: &str,
        settings: &[&str],
    ) -> anyhow::Result<(String, String, String)> {
        let proj = self.home.path().join(format!("src-{}", md5(format!("{reference:?}{extra}").as_bytes())));
        std::fs::create_dir_all(&proj)?;
        std::fs::write(proj.join("conanfile.py"), format!("{RECIPE}{extra}"))?;
        let (name, version) = (format!("--name={}", reference.0), format!("--version={}", reference.1));
        let mut args = vec!["create", ".", name.as_str(), version.as_str(), "--format=json"];
        args.extend_from_slice(settings);
        let (success, out, err) = self.run(Some(&proj), &args, &[("PKG_STAMP", stamp)])?;
        anyhow::ensure!(success, "conan {args:?}: {out}{err}");
        let graph: serde_json::Value = serde_json::from_str(&out)?;
        let node = graph["graph"]["nodes"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, n)| n)
            .find(|n| n["ref"].as_str().is_some_and(|r| r.starts_with(&format!("{}/{}#", reference.0, reference.1))))
            .ok_or_else(|| anyhow::anyhow!("no node for {reference:?}: {graph}"))?;
        let rrev = node["ref"].as_str().and_then(|r| r.split_once('#')).map(|(_, r)| r.to_string()).unwrap_or_default();
        let text = |k: &str| node[k].as_str().unwrap_or_default().to_string();
        Ok((rrev, text("package_id"), text("prev")))
    }

    /// What the client installed for `pref` (`ref#rrev:pkgid`): its `lib/info.txt`.
    fn installed(&self, pref: &str) -> anyhow::Result<String> {
        let (ok, folder, err) = self.run(None, &["cache", "path", pref], &[])?;
        anyhow::ensure!(ok, "conan cache path {pref}: {err}");
        Ok(std::fs::read_to_string(PathBuf::from(folder.trim()).join("lib/info.txt"))?)
    }
}

/// The recipe revisions `conan list … --format=json` shows for `remote`'s `reference`.
fn listed_revisions(v: &serde_json::Value, remote: &str, reference: &str) -> BTreeSet<String> {
    v[remote][reference]["revisions"].as_object().into_iter().flatten().map(|(r, _)| r.clone()).collect()
}

/// The `revision`s of a `{"revisions": [...]}` answer, in its order.
fn revisions_of(v: &serde_json::Value) -> Vec<String> {
    v["revisions"].as_array().into_iter().flatten().filter_map(|r| r["revision"].as_str().map(str::to_string)).collect()
}

/// 5. A Conan proxy (`metadata_ttl_secs` 1) of a second Packyard's hosted repository, and a group
///    over it: `conan install` gets revision A; revision B of the same reference is uploaded
///    upstream; once the TTL passed, the proxy lists both (newest first, as upstream), its
///    `latest` is B, `conan list <ref>#*` shows both and `conan install --update` moves the client
///    to B — through the group too —, while A's files are still served unchanged.
#[test]
fn a_proxy_picks_up_a_revision_published_upstream() -> anyhow::Result<()> {
    if !conan_available() {
        eprintln!("skipped: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    let (upstream, _up_dir) = packyard()?;
    create(&upstream, Repo::hosted("conan-up", Format::Conan))?;
    let up = format!("{}/repository/conan-up", upstream.public);
    let (server, _dir) = packyard()?;
    create(
        &server,
        Repo::proxy("conan-proxy", Format::Conan, &format!("{up}/"))
            .with(serde_json::json!({"proxy": {"metadata_ttl_secs": 1}})),
    )?;
    create(&server, Repo::hosted("conan-local", Format::Conan))?;
    create(&server, Repo::group("conan-all", Format::Conan, &["conan-local", "conan-proxy"]))?;
    let url = |repo: &str| format!("{}/repository/{repo}", server.public);

    let producer = Client::new()?;
    producer.remotes(&[("up", up.clone(), true)])?;
    let (rev_a, pkgid, prev_a) = producer.create(("peer", "1.0"), "", "A", &[])?;
    producer.ok(&["upload", "peer/1.0", "-r", "up", "-c"])?;

    let consumer = Client::new()?;
    consumer.remotes(&[("proxy", url("conan-proxy"), false), ("all", url("conan-all"), false)])?;
    for remote in ["proxy", "all"] {
        let out = consumer.ok(&["install", "--requires=peer/1.0", "-r", remote])?;
        assert!(out.contains(&format!("peer/1.0#{rev_a}")), "{remote}: {out}");
    }
    assert_eq!(consumer.installed(&format!("peer/1.0#{rev_a}:{pkgid}"))?, "Linux x86_64 A");
    let reference = "v2/conans/peer/1.0/_/_";
    let latest = get_json(&format!("{}/{reference}/latest", url("conan-proxy")))?;
    assert_eq!(latest["revision"].as_str(), Some(rev_a.as_str()), "{latest}");
    let a_file = format!("{reference}/revisions/{rev_a}/packages/{pkgid}/revisions/{prev_a}/files/conan_package.tgz");
    let (s, a_bytes) = get(&format!("{}/{a_file}", url("conan-proxy")))?;
    assert_eq!(s, 200);

    // Revision B upstream (another recipe, so another revision).
    let (rev_b, pkgid_b, prev_b) = producer.create(("peer", "1.0"), "# revision B\n", "B", &[])?;
    assert_ne!(rev_a, rev_b);
    assert_eq!(pkgid, pkgid_b, "the same settings, the same package id");
    producer.ok(&["upload", "peer/1.0", "-r", "up", "-c"])?;
    let upstream_revisions = get_json(&format!("{up}/{reference}/revisions"))?;
    assert_eq!(revisions_of(&upstream_revisions), [rev_b.clone(), rev_a.clone()], "{upstream_revisions}");
    std::thread::sleep(Duration::from_millis(1300));

    // The proxy moved on: B is the latest, both are listed, in the upstream's order.
    for repo in ["conan-proxy", "conan-all"] {
        let latest = get_json(&format!("{}/{reference}/latest", url(repo)))?;
        assert_eq!(latest["revision"].as_str(), Some(rev_b.as_str()), "{repo}: {latest}");
        let revisions = get_json(&format!("{}/{reference}/revisions", url(repo)))?;
        assert_eq!(revisions_of(&revisions), [rev_b.clone(), rev_a.clone()], "{repo}: {revisions}");
    }
    for remote in ["proxy", "all"] {
        let all = consumer.json(&["list", "peer/1.0#*", "-r", remote])?;
        assert_eq!(
            listed_revisions(&all, remote, "peer/1.0"),
            BTreeSet::from([rev_a.clone(), rev_b.clone()]),
            "{remote}"
        );
        let newest = consumer.json(&["list", "peer/1.0#latest", "-r", remote])?;
        assert_eq!(listed_revisions(&newest, remote, "peer/1.0"), BTreeSet::from([rev_b.clone()]), "{remote}");
    }
    // install --update: the client moves on to B (through the proxy, then the group for a
    // client that never had it).
    let out = consumer.ok(&["install", "--requires=peer/1.0", "--update", "-r", "proxy"])?;
    assert!(out.contains(&format!("peer/1.0#{rev_b}")), "{out}");
    assert_eq!(consumer.installed(&format!("peer/1.0#{rev_b}:{pkgid}#{prev_b}"))?, "Linux x86_64 B");
    let other = Client::new()?;
    other.remotes(&[("all", url("conan-all"), false)])?;
    let out = other.ok(&["install", "--requires=peer/1.0", "--update", "-r", "all"])?;
    assert!(out.contains(&format!("peer/1.0#{rev_b}")), "{out}");
    assert_eq!(other.installed(&format!("peer/1.0#{rev_b}:{pkgid}"))?, "Linux x86_64 B");
    // A's files never change.
    for repo in ["conan-proxy", "conan-all"] {
        let (s, bytes) = get(&format!("{}/{a_file}", url(repo)))?;
        assert_eq!((s, sha256(&bytes)), (200, sha256(&a_bytes)), "{repo}");
    }
    Ok(())
}

/// Every file of recipe revision `rrev` of `reference` (URL form) in `base` — the recipe's and
/// those of every package revision of every package —, by path below `base`, with its bytes.
fn revision_files(base: &str, reference: &str, rrev: &str) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let recipe = format!("v2/conans/{reference}/revisions/{rrev}");
    let mut paths = Vec::new();
    for name in get_json(&format!("{base}/{recipe}/files"))?["files"].as_object().into_iter().flatten().map(|(k, _)| k)
    {
        paths.push(format!("{recipe}/files/{name}"));
    }
    let search = get_json(&format!("{base}/{recipe}/search"))?;
    for pkgid in search.as_object().into_iter().flatten().map(|(k, _)| k) {
        let package = format!("{recipe}/packages/{pkgid}");
        for prev in revisions_of(&get_json(&format!("{base}/{package}/revisions"))?) {
            let files = get_json(&format!("{base}/{package}/revisions/{prev}/files"))?;
            for name in files["files"].as_object().into_iter().flatten().map(|(k, _)| k) {
                paths.push(format!("{package}/revisions/{prev}/files/{name}"));
            }
        }
    }
    let mut out = BTreeMap::new();
    for path in paths {
        let (s, bytes) = get(&format!("{base}/{path}"))?;
        anyhow::ensure!(s == 200, "{path}: {s}");
        out.insert(path, bytes);
    }
    Ok(out)
}

/// 6. A cleanup (`keep_latest_revisions: 1`) removes whole recipe revisions: revision A of
///    `peer/1.0` — with two packages, one of them in two package revisions, the second uploaded
///    after revision B — goes entirely: every file of its recipe and of each package revision is a
///    404 in the repository and in a group over it, and so are its file lists, its package search
///    and its packages' `latest`; every file of B (and of `other/1.0`, which has one revision) is
///    still there, byte for byte; the catalogue's component holds exactly B's files; `conan
///    install` installs B through both and cannot install A.
#[test]
fn a_cleanup_removes_whole_conan_revisions() -> anyhow::Result<()> {
    use common::process::cleanup_now;
    if !conan_available() {
        eprintln!("skipped: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    let (server, _dir) = packyard()?;
    create(&server, Repo::hosted("conan-local", Format::Conan))?;
    create(&server, Repo::group("conan-all", Format::Conan, &["conan-local"]))?;
    let url = |repo: &str| format!("{}/repository/{repo}", server.public);
    let producer = Client::new()?;
    producer.remotes(&[("local", url("conan-local"), true)])?;

    // A with a Linux and a Windows package; B with the same two; then a second package revision
    // of A's Linux package, uploaded last; other/1.0 once.
    let (rev_a, linux, prev_a1) = producer.create(("peer", "1.0"), "", "A1", &[])?;
    let (_, windows, _) = producer.create(("peer", "1.0"), "", "A", &WINDOWS)?;
    producer.ok(&["upload", &format!("peer/1.0#{rev_a}:*"), "-r", "local", "-c"])?;
    std::thread::sleep(Duration::from_millis(1100));
    let (rev_b, _, _) = producer.create(("peer", "1.0"), "# revision B\n", "B", &[])?;
    producer.create(("peer", "1.0"), "# revision B\n", "B", &WINDOWS)?;
    producer.ok(&["upload", &format!("peer/1.0#{rev_b}:*"), "-r", "local", "-c"])?;
    std::thread::sleep(Duration::from_millis(1100));
    let (rev_a_again, _, prev_a2) = producer.create(("peer", "1.0"), "", "A2", &[])?;
    assert_eq!(rev_a_again, rev_a);
    assert_ne!(prev_a1, prev_a2);
    producer.ok(&["upload", &format!("peer/1.0#{rev_a}:{linux}#{prev_a2}"), "-r", "local", "-c"])?;
    let (rev_other, _, _) = producer.create(("other", "1.0"), "", "O", &[])?;
    producer.ok(&["upload", "other/1.0", "-r", "local", "-c"])?;
    let latest = get_json(&format!("{}/v2/conans/peer/1.0/_/_/latest", url("conan-local")))?;
    assert_eq!(latest["revision"].as_str(), Some(rev_b.as_str()), "B is the latest: {latest}");

    let files_a = revision_files(&url("conan-local"), "peer/1.0/_/_", &rev_a)?;
    let files_b = revision_files(&url("conan-local"), "peer/1.0/_/_", &rev_b)?;
    let files_other = revision_files(&url("conan-local"), "other/1.0/_/_", &rev_other)?;
    let packages_a: BTreeSet<&str> =
        files_a.keys().filter_map(|p| p.split("/packages/").nth(1)?.split('/').next()).collect();
    assert_eq!(packages_a, BTreeSet::from([linux.as_str(), windows.as_str()]), "{:?}", files_a.keys());
    for prev in [&prev_a1, &prev_a2] {
        let info =
            format!("v2/conans/peer/1.0/_/_/revisions/{rev_a}/packages/{linux}/revisions/{prev}/files/conaninfo.txt");
        assert!(files_a.contains_key(&info), "{info}: {:?}", files_a.keys());
    }
    assert!(files_a.keys().any(|p| p.ends_with(&format!("revisions/{rev_a}/files/conanfile.py"))));
    assert!(files_b.len() >= 8, "{:?}", files_b.keys());
    // The group serves the same files before the cleanup.
    for (path, bytes) in files_a.iter().chain(&files_b) {
        let (s, got) = get(&format!("{}/{path}", url("conan-all")))?;
        assert_eq!((s, sha256(&got)), (200, sha256(bytes)), "conan-all/{path}");
    }

    let auth = basic(PW);
    let policy = serde_json::json!({"name": "newest-revision", "format": "conan",
        "criteria": {"keep_latest_revisions": 1}, "repositories": ["conan-local"]});
    let (preview, run) = cleanup_now(&server.public, &auth, policy, "conan-local")?;
    assert_eq!(preview, BTreeSet::from(["peer 1.0".to_string()]), "one revision of peer/1.0");
    assert_eq!(run["components"], 1, "{run}");
    // Once republished (a run does not wait for it).
    let deadline = Instant::now() + Duration::from_secs(20);
    for repo in ["conan-local", "conan-all"] {
        loop {
            let revisions = get_json(&format!("{}/v2/conans/peer/1.0/_/_/revisions", url(repo)))?;
            if revisions_of(&revisions) == [rev_b.clone()] {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "{repo}: peer/1.0 was not republished: {revisions}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    // Every file of A is gone, and what lists it; every file of B and of other/1.0 stays.
    let recipe_a = format!("v2/conans/peer/1.0/_/_/revisions/{rev_a}");
    for repo in ["conan-local", "conan-all"] {
        for path in files_a.keys() {
            let (s, body) = get(&format!("{}/{path}", url(repo)))?;
            assert_eq!(s, 404, "{repo}/{path}: {}", String::from_utf8_lossy(&body));
        }
        for path in [
            format!("{recipe_a}/files"),
            format!("{recipe_a}/search"),
            format!("{recipe_a}/packages/{linux}/latest"),
            format!("{recipe_a}/packages/{linux}/revisions"),
            format!("{recipe_a}/packages/{windows}/latest"),
            format!("{recipe_a}/packages/{linux}/revisions/{prev_a2}/files"),
        ] {
            let (s, body) = get(&format!("{}/{path}", url(repo)))?;
            assert_eq!(s, 404, "{repo}/{path}: {}", String::from_utf8_lossy(&body));
        }
        for (path, bytes) in files_b.iter().chain(&files_other) {
            let (s, got) = get(&format!("{}/{path}", url(repo)))?;
            assert_eq!((s, sha256(&got)), (200, sha256(bytes)), "{repo}/{path}");
        }
    }
    assert_eq!(revision_files(&url("conan-local"), "peer/1.0/_/_", &rev_b)?, files_b, "B's lists are unchanged");
    // The catalogue: peer/1.0's one component holds exactly B's files.
    let component = common::process::nexus_component(&server.public, &auth, "repository=conan-local&name=peer")?;
    let assets: BTreeSet<String> = component["assets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["path"].as_str().map(str::to_string))
        .collect();
    assert_eq!(assets, files_b.keys().cloned().collect::<BTreeSet<_>>(), "{component}");

    // The client installs B, through the repository and the group, and A no more.
    for remote in [("local", url("conan-local")), ("all", url("conan-all"))] {
        let consumer = Client::new()?;
        consumer.remotes(&[(remote.0, remote.1.clone(), false)])?;
        let out = consumer.ok(&["install", "--requires=peer/1.0", "-r", remote.0])?;
        assert!(out.contains(&format!("peer/1.0#{rev_b}")), "{}: {out}", remote.0);
        assert_eq!(consumer.installed(&format!("peer/1.0#{rev_b}:{linux}"))?, "Linux x86_64 B");
        let out = consumer.ok(&["install", "--requires=peer/1.0", "-r", remote.0, "-s", "os=Windows"])?;
        assert!(out.contains(&format!("peer/1.0#{rev_b}")), "{}: {out}", remote.0);
        let pinned = format!("--requires=peer/1.0#{rev_a}");
        let (ok, out, err) = consumer.run(None, &["install", &pinned, "-r", remote.0], &[])?;
        assert!(!ok, "{}: A installed: {out}{err}", remote.0);
    }
    Ok(())
}

/// 7. Acceptance: malformed Conan uploads, by plain HTTP to the REST v2 routes, are refused
///    with a 400 naming the file (or the reference) and what is wrong, and nothing is stored: a
///    `conaninfo.txt` with a line before any section, a section twice, a bad section header; a
///    `conanmanifest.txt` whose first line is no timestamp, or with a line that is not
///    `path: md5` (of a recipe and of a package revision); a reference with a bad character or of
///    more than 200 characters. The refused revisions are not listed, their files are 404, no blob
///    is added. A group refuses uploads (405). A valid package is then uploaded by the client and
///    installs through the repository and the group.
#[test]
fn malformed_conan_uploads_are_refused() -> anyhow::Result<()> {
    if !conan_available() {
        eprintln!("skipped: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    let (server, dir) = packyard()?;
    create(&server, Repo::hosted("conan-local", Format::Conan))?;
    create(&server, Repo::group("conan-all", Format::Conan, &["conan-local"]))?;
    let url = |repo: &str| format!("{}/repository/{repo}", server.public);
    let base = format!("{}/v2/conans/bad/1.0/_/_", url("conan-local"));

    // A complete recipe revision r1 (for its packages); r2 with its conanfile.py only.
    let conanfile = b"from conan import ConanFile\n\nclass Bad(ConanFile):\n    pass\n";
    let manifest = format!("1700000000\nconanfile.py: {}\n", md5(conanfile));
    for (path, body) in [
        ("revisions/r1/files/conanfile.py", &conanfile[..]),
        ("revisions/r1/files/conanmanifest.txt", manifest.as_bytes()),
        ("revisions/r2/files/conanfile.py", &conanfile[..]),
    ] {
        let (s, text) = put(&format!("{base}/{path}"), body)?;
        assert_eq!(s, 201, "{path}: {text}");
    }
    let package = format!("{base}/revisions/r1/packages/p1/revisions/q1/files");
    let blobs = dir.path().join("data/blobs/sha256");
    let stored = files_under(&blobs);
    assert!(stored > 0, "the blob store is at {}", blobs.display());

    let no_colon = format!("conanmanifest.txt: \"conanfile.py {}\" is not `path: md5`", md5(conanfile));
    let cases: Vec<(String, String, &str)> = vec![
        (
            format!("{package}/conaninfo.txt"),
            "arch=x86_64\n[settings]\nos=Linux\n".into(),
            "conaninfo.txt line 1: \"arch=x86_64\" comes before any [section]",
        ),
        (
            format!("{package}/conaninfo.txt"),
            "[settings]\narch=x86_64\n\n[options]\nshared=False\n[settings]\nos=Linux\n".into(),
            "conaninfo.txt: the section [settings] appears twice",
        ),
        (
            format!("{package}/conaninfo.txt"),
            "[Settings]\narch=x86_64\n".into(),
            "conaninfo.txt line 1: \"[Settings]\" is not a [section] header (2 to 50 lowercase letters or '_')",
        ),
        (
            format!("{package}/conaninfo.txt"),
            "[settings]\narch=x86_64\n[options\nshared=True\n".into(),
            "conaninfo.txt line 3: \"[options\" is not a [section] header",
        ),
        (
            format!("{base}/revisions/r2/files/conanmanifest.txt"),
            format!("yesterday\nconanfile.py: {}\n", md5(conanfile)),
            "conanmanifest.txt must start with a timestamp line (seconds since 1970, digits only)",
        ),
        (
            format!("{base}/revisions/r2/files/conanmanifest.txt"),
            format!("conanfile.py: {}\n", md5(conanfile)),
            "conanmanifest.txt must start with a timestamp line",
        ),
        (
            format!("{base}/revisions/r2/files/conanmanifest.txt"),
            format!("1700000000\nconanfile.py {}\n", md5(conanfile)),
            &no_colon,
        ),
        (
            format!("{base}/revisions/r2/files/conanmanifest.txt"),
            "1700000000\nconanfile.py: not-an-md5\n".into(),
            "conanmanifest.txt: \"conanfile.py\" has no MD5",
        ),
        (
            format!("{package}/conanmanifest.txt"),
            "1700000000\nconaninfo.txt\n".into(),
            "conanmanifest.txt: \"conaninfo.txt\" is not `path: md5`",
        ),
        (
            format!("{}/v2/conans/ba$d/1.0/_/_/revisions/r1/files/conanfile.py", url("conan-local")),
            String::from_utf8_lossy(conanfile).into_owned(),
            "invalid name \"ba$d\" in the reference",
        ),
        (
            format!("{}/v2/conans/bad/1.0~x/_/_/revisions/r1/files/conanfile.py", url("conan-local")),
            String::from_utf8_lossy(conanfile).into_owned(),
            "invalid version \"1.0~x\" in the reference",
        ),
        (
            format!("{}/v2/conans/bad/1.0/us=er/stable/revisions/r1/files/conanfile.py", url("conan-local")),
            String::from_utf8_lossy(conanfile).into_owned(),
            "invalid user \"us=er\" in the reference",
        ),
        (
            format!(
                "{}/v2/conans/{}/{}/_/_/revisions/r1/files/conanfile.py",
                url("conan-local"),
                "n".repeat(100),
                "1".repeat(100)
            ),
            String::from_utf8_lossy(conanfile).into_owned(),
            "the reference is 201 characters long; Conan allows at most 200",
        ),
        (
            format!(
                "{}/v2/conans/{}/{}/{}/{}/revisions/r1/files/conanfile.py",
                url("conan-local"),
                "n".repeat(50),
                "1".repeat(50),
                "u".repeat(50),
                "c".repeat(50)
            ),
            String::from_utf8_lossy(conanfile).into_owned(),
            "the reference is 203 characters long; Conan allows at most 200",
        ),
    ];
    for (target, body, why) in &cases {
        let (s, message) = put(target, body.as_bytes())?;
        assert_eq!(s, 400, "PUT {target}: {message}");
        assert!(message.contains(why), "PUT {target}: {message:?} lacks {why:?}");
    }
    // Nothing stored: no blob, no file, no revision, no package.
    assert_eq!(files_under(&blobs), stored, "a refused upload left a blob");
    for path in [
        "revisions/r1/packages/p1/revisions/q1/files/conaninfo.txt",
        "revisions/r1/packages/p1/revisions/q1/files/conanmanifest.txt",
        "revisions/r1/packages/p1/latest",
        "revisions/r2/files/conanmanifest.txt",
        "revisions/r2/files/conanfile.py",
        "revisions/r2/files",
    ] {
        for repo in ["conan-local", "conan-all"] {
            let (s, body) = get(&format!("{}/v2/conans/bad/1.0/_/_/{path}", url(repo)))?;
            assert_eq!(s, 404, "{repo}/{path}: {}", String::from_utf8_lossy(&body));
        }
    }
    for repo in ["conan-local", "conan-all"] {
        let b = format!("{}/v2/conans/bad/1.0/_/_", url(repo));
        assert_eq!(revisions_of(&get_json(&format!("{b}/revisions"))?), ["r1"], "{repo}");
        assert_eq!(get_json(&format!("{b}/revisions/r1/search"))?, serde_json::json!({}), "{repo}");
        let search = get_json(&format!("{}/v2/conans/search?q=*", url(repo)))?;
        assert_eq!(search["results"], serde_json::json!(["bad/1.0"]), "{repo}");
    }
    // A group takes no uploads, good or bad.
    let (s, message) =
        put(&format!("{}/v2/conans/bad/1.0/_/_/revisions/r3/files/conanfile.py", url("conan-all")), conanfile)?;
    assert_eq!(s, 405, "{message}");
    assert!(message.contains("repository conan-all is a group repository"), "{message}");

    // The package made right goes through.
    let info = "[settings]\narch=x86_64\nos=Linux\n";
    let (s, text) = put(&format!("{package}/conaninfo.txt"), info.as_bytes())?;
    assert_eq!(s, 201, "{text}");
    let (s, text) = put(
        &format!("{package}/conanmanifest.txt"),
        format!("1700000000\nconaninfo.txt: {}\n", md5(info.as_bytes())).as_bytes(),
    )?;
    assert_eq!(s, 201, "{text}");
    for repo in ["conan-local", "conan-all"] {
        let search = get_json(&format!("{}/v2/conans/bad/1.0/_/_/revisions/r1/search", url(repo)))?;
        assert_eq!(search["p1"]["content"], info, "{repo}: {search}");
    }

    // The real client: a valid package uploads and installs through the repository and the group.
    let producer = Client::new()?;
    producer.remotes(&[("local", url("conan-local"), true)])?;
    let (rrev, pkgid, _) = producer.create(("good", "1.0"), "", "G", &[])?;
    producer.ok(&["upload", "good/1.0", "-r", "local", "-c"])?;
    for remote in ["local", "all"] {
        let consumer = Client::new()?;
        let repo = if remote == "local" { "conan-local" } else { "conan-all" };
        consumer.remotes(&[(remote, url(repo), false)])?;
        let out = consumer.ok(&["install", "--requires=good/1.0", "-r", remote])?;
        assert!(out.contains(&format!("good/1.0#{rrev}")), "{remote}: {out}");
        assert_eq!(consumer.installed(&format!("good/1.0#{rrev}:{pkgid}"))?, "Linux x86_64 G", "{remote}");
        let listed = consumer.json(&["list", "*", "-r", remote])?;
        let names: BTreeSet<&str> = listed[remote].as_object().into_iter().flatten().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, BTreeSet::from(["bad/1.0", "good/1.0"]), "{remote}: {listed}");
    }
    Ok(())
}
