//! HTTPS (`server.tls`): the public listener with a certificate from a test CA, checked with
//! curl (HTTP/1.1 and HTTP/2 by ALPN), the real `go` command fetching a private module with
//! credentials from `.netrc`, the real `apt-get` and the real `conan` client (with `verify_ssl`
//! and the CA file); the redirect listener; and a certificate replaced on disk taking effect
//! without a restart.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::process::start;
use common::Repo;
use packyard_model::repos::Format;
use sha2::Digest as _;

const PW: &str = "tls-admin";

/// A test CA and a server certificate for `127.0.0.1` and `localhost` that it signed.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> anyhow::Result<Self> {
        let pki = Self { dir: tempfile::tempdir()? };
        std::fs::write(
            pki.path("ca.ext"),
            "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n",
        )?;
        std::fs::write(
            pki.path("server.ext"),
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n",
        )?;
        pki.openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key"])?;
        pki.openssl(&["req", "-new", "-key", "ca.key", "-subj", "/CN=Packyard test CA", "-out", "ca.csr"])?;
        pki.openssl(&[
            "x509", "-req", "-in", "ca.csr", "-signkey", "ca.key", "-days", "2", "-extfile", "ca.ext", "-out", "ca.pem",
        ])?;
        Ok(pki)
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    fn openssl(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("openssl").args(args).current_dir(self.dir.path()).output()?;
        anyhow::ensure!(
            out.status.success(),
            "openssl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Issues a server certificate with `serial` (hex) into `<name>.pem` / `<name>.key`.
    fn issue(&self, name: &str, serial: &str) -> anyhow::Result<()> {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        self.openssl(&["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", &key])?;
        // PKCS#8, as most tools write keys today (SEC1 is checked by the second certificate).
        if name == "first" {
            self.openssl(&["pkcs8", "-topk8", "-nocrypt", "-in", &key, "-out", "pkcs8.key"])?;
            std::fs::rename(self.path("pkcs8.key"), self.path(&key))?;
        }
        self.openssl(&["req", "-new", "-key", &key, "-subj", "/CN=localhost", "-out", &csr])?;
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            &format!("0x{serial}"),
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            &format!("{name}.pem"),
        ])?;
        Ok(())
    }

    /// The serial number (hex, upper case) of the certificate `addr` presents now.
    fn served_serial(&self, addr: &str) -> anyhow::Result<String> {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "openssl s_client -connect {addr} -servername localhost </dev/null 2>/dev/null | openssl x509 -noout -serial"
            ))
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text.trim().trim_start_matches("serial=").to_string())
    }
}

/// curl trusting only the test CA: status, body and the HTTP version it spoke.
fn curl(ca: &Path, args: &[&str]) -> anyhow::Result<(u16, String, String)> {
    let out = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(ca)
        .args(["-w", "\n%{http_code} %{http_version}"])
        .args(args)
        .output()?;
    anyhow::ensure!(out.status.success(), "curl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, tail) = text.rsplit_once('\n').unwrap_or(("", &text));
    let (code, version) = tail.split_once(' ').unwrap_or((tail, ""));
    Ok((code.parse()?, body.to_string(), version.to_string()))
}

#[test]
fn https_serves_the_real_clients_redirects_and_reloads_its_certificate() -> anyhow::Result<()> {
    let pki = Pki::new()?;
    pki.issue("first", "1A01")?;
    std::fs::copy(pki.path("first.pem"), pki.path("server.pem"))?;
    std::fs::copy(pki.path("first.key"), pki.path("server.key"))?;
    let ca = pki.path("ca.pem");
    let cert = pki.path("server.pem").display().to_string();
    let key = pki.path("server.key").display().to_string();
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_SERVER__TLS__CERTIFICATE", &cert),
            ("PACKYARD_SERVER__TLS__PRIVATE_KEY", &key),
            ("PACKYARD_SERVER__TLS__REDIRECT_BIND", "127.0.0.1:0"),
            ("PACKYARD_SERVER__TLS__RELOAD_CHECK_MS", "200"),
        ],
    )?;
    // The management listener stays plain.
    assert!(server.management.starts_with("http://"), "{}", server.management);
    server.wait_ready()?;
    assert!(server.public.starts_with("https://127.0.0.1:"), "{}", server.public);
    let addr = server.public.trim_start_matches("https://").to_string();
    let public = format!("https://localhost:{}", addr.rsplit(':').next().unwrap_or_default());

    // HTTP/2 by ALPN, HTTP/1.1 for a client that offers only that; plain HTTP is not served.
    let status = format!("{public}/service/rest/v1/status");
    assert_eq!(curl(&ca, &["--http2", &status])?, (200, String::new(), "2".into()));
    assert_eq!(curl(&ca, &["--http1.1", &status])?, (200, String::new(), "1.1".into()));
    let plain =
        Command::new("curl").args(["-sS", "-m", "5", &format!("http://{addr}/service/rest/v1/status")]).output()?;
    assert!(!plain.status.success(), "plain HTTP on the HTTPS port: {}", String::from_utf8_lossy(&plain.stdout));

    // The redirect listener: 308 to the same path over HTTPS (an upload keeps its method).
    assert!(server.redirect.starts_with("http://127.0.0.1:"), "{}", server.redirect);
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}"])
        .arg(format!("{}/repository/gopriv/example.com/private/@v/list?x=1", server.redirect))
        .output()?;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "308 https://127.0.0.1:{}/repository/gopriv/example.com/private/@v/list?x=1",
            addr.rsplit(':').next().unwrap_or_default()
        )
    );

    let auth = format!("admin:{PW}");
    let create = |spec: serde_json::Value| -> anyhow::Result<()> {
        let (s, body, _) = curl(
            &ca,
            &[
                "-u",
                &auth,
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                &spec.to_string(),
                &format!("{public}/api/v1/repositories"),
            ],
        )?;
        anyhow::ensure!(s == 201, "create: {s} {body}");
        Ok(())
    };

    // Go: a private module (no anonymous reads), fetched with credentials from `.netrc`.
    create(Repo::hosted("gopriv", Format::Go).with(serde_json::json!({"anonymous_read": false})).0)?;
    let zip = packyard_codecs::go::testing::simple_module("example.com/private", "v1.0.0", "private", 0)?;
    let work = tempfile::tempdir()?;
    std::fs::write(work.path().join("private.zip"), &zip)?;
    let upload = format!("@{}", work.path().join("private.zip").display());
    let (s, body, _) = curl(
        &ca,
        &[
            "-u",
            &auth,
            "-X",
            "PUT",
            "--data-binary",
            &upload,
            &format!("{public}/repository/gopriv/example.com/private/@v/v1.0.0.zip"),
        ],
    )?;
    assert_eq!(s, 201, "{body}");
    if common::process::available("go", "version") {
        let home = tempfile::tempdir()?;
        let go = |netrc: bool| -> anyhow::Result<std::process::Output> {
            if netrc {
                std::fs::write(home.path().join(".netrc"), format!("machine localhost login admin password {PW}\n"))?;
            }
            let fresh = tempfile::tempdir()?;
            let out = common::golang::isolated(
                fresh.path(),
                home.path(),
                &["mod", "download", "-json", "example.com/private@v1.0.0"],
            )
            .env("GOPROXY", format!("{public}/repository/gopriv"))
            .env("GONOSUMDB", "example.com")
            .env("GOSUMDB", "off")
            .env("SSL_CERT_FILE", &ca)
            .output()?;
            Ok(out)
        };
        let refused = go(false)?;
        assert!(!refused.status.success(), "without credentials the private module must not download");
        let said = String::from_utf8_lossy(&refused.stdout).into_owned() + &String::from_utf8_lossy(&refused.stderr);
        assert!(said.contains("401"), "{said}");
        let out = go(true)?;
        assert!(
            out.status.success(),
            "go mod download over https: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let got = std::fs::read(info["Zip"].as_str().unwrap_or_default())?;
        assert_eq!(
            hex::encode(sha2::Sha256::digest(&got)),
            hex::encode(sha2::Sha256::digest(&zip)),
            "the module zip as uploaded"
        );
    } else {
        eprintln!("go part skipped: no go command (scripts/test.sh installs golang-go)");
    }

    // APT: apt-get over https (its https method is built in), trusting the test CA.
    create(Repo::hosted("debs", Format::Apt).0)?;
    let deb = packyard_codecs::apt::testing::deb(
        "Package: overtls\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: over TLS\n",
        ".gz",
    );
    std::fs::write(work.path().join("overtls.deb"), &deb)?;
    let upload = format!("@{}", work.path().join("overtls.deb").display());
    let (s, body, _) = curl(
        &ca,
        &[
            "-u",
            &auth,
            "-H",
            "Content-Type: application/vnd.debian.binary-package",
            "--data-binary",
            &upload,
            &format!("{public}/repository/debs/?wait=true"),
        ],
    )?;
    assert_eq!(s, 201, "{body}");
    let (s, key, _) = curl(&ca, &[&format!("{public}/repository/debs/gpg.key")])?;
    assert_eq!(s, 200);
    let root = common::apt::scratch(key.as_bytes(), |k| {
        format!("deb [signed-by={} arch=amd64] {public}/repository/debs stable main", k.display())
    })?;
    let ca_info = format!("Acquire::https::CaInfo={}", ca.display());
    let out = common::apt::tool("apt-get", root.path(), &["-o", &ca_info, "update"])?;
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && !log.contains("Err:"), "apt-get update over https:\n{log}");
    let out = common::apt::tool("apt-get", root.path(), &["-o", &ca_info, "download", "overtls"])?;
    assert!(out.status.success(), "apt-get download: {}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(root.path().join("downloads/overtls_1.0_amd64.deb"))? == deb, "the .deb as uploaded");

    // Over HTTP/2 a client names the host in `:authority`, not in `Host`: the URLs Packyard
    // makes (Nexus's downloadUrl here) still name it.
    let (s, found, version) = curl(
        &ca,
        &["--http2", "-u", &auth, &format!("{public}/service/rest/v1/search/assets?repository=debs&name=overtls")],
    )?;
    assert_eq!((s, version.as_str()), (200, "2"), "{found}");
    let found: serde_json::Value = serde_json::from_str(&found)?;
    let url = found["items"][0]["downloadUrl"].as_str().unwrap_or_default().to_string();
    assert!(url.starts_with(&format!("{public}/repository/debs/pool/")), "{found}");
    assert_eq!(curl(&ca, &["--http2", "-o", "/dev/null", &url])?.0, 200);

    // Conan: a remote with verify_ssl (the default) and the CA in `core.net.http:cacert_path`.
    if common::process::available("conan", "--version") {
        create(Repo::hosted("conan-local", Format::Conan).0)?;
        let home = tempfile::tempdir()?;
        let h = home.path();
        let conan = |args: &[&str], cwd: &Path| -> anyhow::Result<(bool, String)> {
            let out = Command::new("conan").args(args).current_dir(cwd).env("CONAN_HOME", h).output()?;
            Ok((
                out.status.success(),
                format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
            ))
        };
        let ok = |args: &[&str], cwd: &Path| -> anyhow::Result<String> {
            let (success, text) = conan(args, cwd)?;
            anyhow::ensure!(success, "conan {args:?}: {text}");
            Ok(text)
        };
        ok(&["profile", "detect"], h)?;
        ok(&["remote", "remove", "conancenter"], h)?;
        ok(&["remote", "add", "secure", &format!("{public}/repository/conan-local")], h)?;
        let listed = ok(&["remote", "list", "--format=json"], h)?;
        assert!(listed.contains("\"verify_ssl\": true"), "{listed}");
        // Without the CA the client refuses the server's certificate.
        let (success, text) = conan(&["remote", "login", "secure", "admin", "-p", PW], h)?;
        assert!(!success && text.to_ascii_lowercase().contains("certificate"), "{text}");
        std::fs::write(h.join("global.conf"), format!("core.net.http:cacert_path={}\n", ca.display()))?;
        ok(&["remote", "login", "secure", "admin", "-p", PW], h)?;
        let proj = h.join("hello");
        std::fs::create_dir_all(&proj)?;
        ok(&["new", "header_lib", "-d", "name=hello", "-d", "version=1.0"], &proj)?;
        ok(&["create", ".", "-tf="], &proj)?;
        ok(&["upload", "hello/1.0", "-r", "secure", "-c"], h)?;
        ok(&["remove", "hello/1.0", "-c"], h)?;
        ok(&["install", "--requires=hello/1.0", "-r", "secure"], h)?;
    } else {
        eprintln!("conan part skipped: no conan in PATH (scripts/test.sh installs it)");
    }

    // A new certificate written over the files is served without a restart; a broken one is
    // logged and the last good one goes on.
    assert_eq!(pki.served_serial(&addr)?, "1A01");
    pki.issue("second", "2B02")?;
    std::fs::copy(pki.path("second.key"), pki.path("server.key"))?;
    std::fs::copy(pki.path("second.pem"), pki.path("server.pem"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while pki.served_serial(&addr)? != "2B02" {
        anyhow::ensure!(Instant::now() < deadline, "the new certificate was not served within 10 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::fs::write(pki.path("server.key"), "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = server.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        if log.contains("do not load; still serving the previous certificate") {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "no warning about the broken key:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(pki.served_serial(&addr)?, "2B02");
    assert_eq!(curl(&ca, &[&status])?.0, 200);
    Ok(())
}

/// `server.tls.management`: the management listener over HTTPS too. Through the redirect
/// listener, an upload keeps its method and body (308), and a `Host` that is not a host name
/// gets 400.
#[test]
fn the_management_port_over_https_and_the_redirect_listeners_edges() -> anyhow::Result<()> {
    let pki = Pki::new()?;
    pki.issue("first", "3C03")?;
    let ca = pki.path("ca.pem");
    let (cert, key) = (pki.path("first.pem").display().to_string(), pki.path("first.key").display().to_string());
    let dir = tempfile::tempdir()?;
    let server = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_SERVER__TLS__CERTIFICATE", &cert),
            ("PACKYARD_SERVER__TLS__PRIVATE_KEY", &key),
            ("PACKYARD_SERVER__TLS__REDIRECT_BIND", "127.0.0.1:0"),
            ("PACKYARD_SERVER__TLS__MANAGEMENT", "true"),
        ],
    )?;
    assert!(server.management.starts_with("https://127.0.0.1:"), "{}", server.management);
    let port = |url: &str| url.rsplit(':').next().unwrap_or_default().to_string();
    let management = format!("https://localhost:{}", port(&server.management));
    let deadline = Instant::now() + Duration::from_secs(30);
    while curl(&ca, &[&format!("{management}/readyz")]).map(|r| r.0).unwrap_or(0) != 200 {
        anyhow::ensure!(Instant::now() < deadline, "the management listener did not get ready over https");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (s, metrics, _) = curl(&ca, &[&format!("{management}/metrics")])?;
    assert!(s == 200 && metrics.contains("packyard_"), "{s}");
    // An upload sent to the plain-HTTP address follows the 308 with its method and body (curl
    // sends the credentials on to the other port only when told to trust the redirect).
    let redirect = server.redirect.replace("127.0.0.1", "localhost");
    let spec = Repo::hosted("moved", Format::Go).0.to_string();
    let (s, body, _) = curl(
        &ca,
        &[
            "-L",
            "--location-trusted",
            "-u",
            &format!("admin:{PW}"),
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            &spec,
            &format!("{redirect}/api/v1/repositories"),
        ],
    )?;
    assert_eq!(s, 201, "{body}");
    let public = format!("https://localhost:{}", port(&server.public));
    assert_eq!(curl(&ca, &["-u", &format!("admin:{PW}"), &format!("{public}/api/v1/repositories/moved")])?.0, 200);
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: evil.example/x"])
        .arg(format!("{}/anything", server.redirect))
        .output()?;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "400");
    Ok(())
}

/// A follower of a source that anonymous users may not read (`replication.username` and
/// `password`), over HTTPS (a password is refused over plain http): the password is sealed and
/// never shown, the follower converges, and a definition pointed at another source drops it.
#[test]
fn a_follower_signs_in_to_its_source_over_https() -> anyhow::Result<()> {
    let pki = Pki::new()?;
    pki.issue("source", "2B02")?;
    let (cert, key) = (pki.path("source.pem").display().to_string(), pki.path("source.key").display().to_string());
    let ca = pki.path("ca.pem");
    let dir = tempfile::tempdir()?;
    let source = start(
        dir.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_SERVER__TLS__CERTIFICATE", &cert),
            ("PACKYARD_SERVER__TLS__PRIVATE_KEY", &key),
        ],
    )?;
    source.wait_ready()?;
    let port = source.public.rsplit(':').next().unwrap_or_default().to_string();
    let https = format!("https://localhost:{port}");
    let user = format!("admin:{PW}");
    let (s, body, _) = curl(
        &ca,
        &[
            "-u",
            &user,
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"name":"mods","format":"go","type":"hosted","anonymous_read":false}"#,
            &format!("{https}/api/v1/repositories"),
        ],
    )?;
    assert_eq!(s, 201, "{body}");
    let zip = packyard_codecs::go::testing::simple_module("example.com/private", "v1.0.0", "v1.0.0", 100)?;
    let zip_file = dir.path().join("v1.0.0.zip");
    std::fs::write(&zip_file, &zip)?;
    let put = format!("{https}/repository/mods/example.com/private/@v/v1.0.0.zip");
    let (s, body, _) = curl(&ca, &["-u", &user, "-T", &zip_file.display().to_string(), &put])?;
    assert!((200..300).contains(&s), "{s} {body}");
    let (s, _, _) = curl(&ca, &[&format!("{https}/repository/mods/-/export/manifest")])?;
    assert_eq!(s, 401, "not for anonymous users");

    let far = tempfile::tempdir()?;
    let cas = format!("[\"{}\"]", ca.display());
    let follower = start(
        far.path(),
        &[
            ("PACKYARD_SECURITY__ADMIN_PASSWORD", PW),
            ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#),
            ("PACKYARD_PROXY__CA_CERTIFICATES", &cas),
        ],
    )?;
    follower.wait_ready()?;
    let auth = common::process::basic(PW);
    let follow = serde_json::json!({"replication": {"url": https, "repository": "mods", "every_secs": 1,
        "username": "admin", "password": PW}});
    common::process::create_repository(&follower.public, &auth, Repo::hosted("mods", Format::Go).with(follow).0)?;
    let shown = common::process::admin_json(&follower.public, &auth, "GET", "/api/v1/repositories/mods", None)?;
    assert_eq!(shown["replication"]["username"], "admin", "{shown}");
    assert!(shown["replication"].get("password").is_none(), "{shown}");
    assert!(shown["replication"].get("password_sealed").is_none(), "{shown}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held = common::process::catalogue(&follower.public, &auth, "mods")?;
        if held.contains("private v1.0.0") {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the follower holds {held:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let got = ureq::get(&format!("{}/repository/mods/example.com/private/@v/v1.0.0.zip", follower.public))
        .set("Authorization", &auth)
        .call()?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut got.into_reader(), &mut bytes)?;
    assert_eq!(bytes, zip, "the module's bytes");
    // Pointed at another source without a new password, then back: the stored password was
    // not taken along, so the source now refuses the follower (401, logged).
    let patch = |url: &str| -> anyhow::Result<()> {
        let r = ureq::request("PATCH", &format!("{}/api/v1/repositories/mods", follower.public))
            .set("Authorization", &auth)
            .set("content-type", "application/merge-patch+json")
            .send_string(&serde_json::json!({"replication": {"url": url}}).to_string());
        let (s, text) = common::process::status_of(r)?;
        anyhow::ensure!(s == 200, "PATCH {url}: {s} {text}");
        Ok(())
    };
    patch("https://elsewhere.example.org/")?;
    patch(&https)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = follower.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        if log.contains("answered 401") {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "no refusal logged:\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}
