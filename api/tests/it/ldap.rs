//! Sign-in through LDAP against a real OpenLDAP `slapd` (scripts/ldap/start-slapd.sh: LDAPS and
//! StartTLS with a private CA, a service account, groups with `memberOf`, a disabled and a
//! locked user), on SQLite, PostgreSQL and MariaDB.

use crate::common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::test::TestRequest;
use common::app::{As, TestApp};
use common::error_of;
use packyard_model::directory::LdapDirectory;
use packyard_store::db::Backend;
use serde_json::json;

const BASE: &str = "dc=example,dc=org";

/// A throwaway slapd, stopped when dropped.
struct Slapd {
    ldap_port: u16,
    ldaps_port: u16,
    ca: PathBuf,
    pid: i32,
    _dir: tempfile::TempDir,
}

impl Slapd {
    fn start() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/ldap/start-slapd.sh");
        let out = Command::new("bash").arg(script).arg(dir.path()).output()?;
        anyhow::ensure!(
            out.status.success(),
            "scripts/ldap/start-slapd.sh failed (slapd and ldap-utils are installed by scripts/test.sh): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout)?;
        let var = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .map(str::to_string)
                .ok_or_else(|| anyhow::anyhow!("start-slapd.sh printed no {name}: {text}"))
        };
        Ok(Self {
            ldap_port: var("LDAP_PORT")?.parse()?,
            ldaps_port: var("LDAPS_PORT")?.parse()?,
            ca: var("LDAP_CA")?.into(),
            pid: var("SLAPD_PID")?.parse()?,
            _dir: dir,
        })
    }

    /// Applies an LDIF change as the directory's administrator.
    fn modify(&self, ldif: &str) -> anyhow::Result<()> {
        let mut child = Command::new("ldapmodify")
            .args(["-x", "-H", &format!("ldap://127.0.0.1:{}", self.ldap_port)])
            .args(["-D", &format!("cn=admin,{BASE}"), "-w", "adminpw"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child.stdin.take().ok_or_else(|| anyhow::anyhow!("no stdin"))?.write_all(ldif.as_bytes())?;
        let out = child.wait_with_output()?;
        anyhow::ensure!(out.status.success(), "ldapmodify failed: {}", String::from_utf8_lossy(&out.stderr));
        Ok(())
    }

    fn stop(&self) -> anyhow::Result<()> {
        let _ = Command::new("kill").arg(self.pid.to_string()).status()?;
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.ldaps_port)).is_err() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        anyhow::bail!("slapd did not stop")
    }

    /// The main directory: LDAPS, the service account, disabled users filtered out, groups
    /// mapped by name and by DN.
    fn corp(&self) -> LdapDirectory {
        LdapDirectory {
            name: "corp".into(),
            url: format!("ldaps://127.0.0.1:{}", self.ldaps_port),
            ca_file: Some(self.ca.clone()),
            bind_dn: Some(format!("cn=svc-repo,ou=services,{BASE}")),
            bind_password: Some("svcpw".into()),
            user_base: format!("ou=people,{BASE}"),
            user_filter: "(&(objectClass=inetOrgPerson)(uid={username})(!(employeeType=disabled)))".into(),
            group_roles: [
                ("repo-admins".to_string(), vec!["admin".to_string()]),
                (format!("cn=repo-devs,ou=groups,{BASE}"), vec!["deployers".to_string()]),
            ]
            .into(),
            ..LdapDirectory::default()
        }
    }

    /// A second directory: StartTLS on ldap://, direct bind (no service account), every user
    /// a reader.
    fn contractors(&self) -> LdapDirectory {
        LdapDirectory {
            name: "contractors".into(),
            url: format!("ldap://127.0.0.1:{}", self.ldap_port),
            starttls: true,
            ca_file: Some(self.ca.clone()),
            user_dn_template: Some(format!("uid={{username}},ou=disabled,{BASE}")),
            default_roles: vec!["readers".into()],
            ..LdapDirectory::default()
        }
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
    }
}

/// A closed port: a directory that is down.
fn closed_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

async fn make_roles(app: &TestApp) -> anyhow::Result<()> {
    for (name, actions) in [("deployers", json!(["read", "write"])), ("readers", json!(["read"]))] {
        let r = app
            .call(TestRequest::post().uri("/api/v1/roles").set_json(json!({
                "name": name, "privileges": [{"repositories": "*", "actions": actions}]
            })))
            .await?;
        anyhow::ensure!(r.status == StatusCode::CREATED, "{}", r.text);
    }
    Ok(())
}

async fn user(app: &TestApp, name: &str) -> anyhow::Result<serde_json::Value> {
    let r = app.call(TestRequest::get().uri(&format!("/api/v1/users/{name}"))).await?;
    anyhow::ensure!(r.status == StatusCode::OK, "{name}: {}", r.text);
    Ok(r.json)
}

/// The admin API answers admins only: 200 for an admin, 403 for another signed-in user.
async fn admin_api(app: &TestApp, who: As) -> anyhow::Result<common::Reply> {
    app.send(TestRequest::get().uri("/api/v1/repositories"), who).await
}

async fn new_token(app: &TestApp, who: As) -> anyhow::Result<String> {
    let r = app.send(TestRequest::post().uri("/api/v1/tokens").set_json(json!({"name": "ci"})), who).await?;
    anyhow::ensure!(r.status == StatusCode::CREATED, "{}", r.text);
    Ok(r.json["token"].as_str().unwrap_or_default().to_string())
}

/// Sign-in, attributes and group → role mapping, both TLS modes and both bind modes, tokens
/// of directory users, a user disabled in the directory losing access once the cached
/// decision expires, and the directory going down.
async fn directory_users_sign_in(backend: Backend) -> anyhow::Result<()> {
    let slapd = Slapd::start()?;
    let ttl = Duration::from_secs(1);
    let watermark = Duration::from_millis(200);
    let Some(app) = TestApp::with_config(backend, |c| {
        c.security.auth_cache_ttl_secs = ttl.as_secs();
        c.security.watermark_ttl_ms = watermark.as_millis() as u64;
        c.security.ldap = vec![slapd.corp(), slapd.contractors()];
    })
    .await?
    else {
        return Ok(());
    };
    make_roles(&app).await?;

    // alice: repo-admins → admin (by name), repo-devs → deployers (by DN).
    let r = admin_api(&app, As::basic("alice", "alicepw")).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let alice = user(&app, "alice").await?;
    assert_eq!(alice["source"], "ldap:corp");
    assert_eq!(alice["email"], "alice@example.org");
    assert_eq!(alice["display_name"], "Alice Admin");
    assert_eq!(alice["roles"], json!(["admin", "deployers"]));
    // The directory's spelling of the name: one user however it is typed.
    let r = admin_api(&app, As::basic("ALICE", "alicepw")).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let users = app.call(TestRequest::get().uri("/api/v1/users")).await?;
    let names: Vec<&str> =
        users.json.as_array().map(|a| a.iter().filter_map(|u| u["username"].as_str()).collect()).unwrap_or_default();
    assert_eq!(names, vec!["admin", "alice"]);

    // bob: a deployer, not an admin.
    let r = admin_api(&app, As::basic("bob", "bobpw")).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert_eq!(user(&app, "bob").await?["roles"], json!(["deployers"]));
    // dave: not under ou=people, found by the second directory's direct bind over StartTLS.
    let r = admin_api(&app, As::basic("dave", "davepw")).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    let dave = user(&app, "dave").await?;
    assert_eq!((dave["source"].as_str(), dave["roles"].clone()), (Some("ldap:contractors"), json!(["readers"])));

    // Refusals: a wrong password, the disabled and locked carol, a name no directory knows,
    // an empty password (which LDAP would take as an anonymous bind).
    for (name, pw) in [("bob", "wrong"), ("carol", "carolpw"), ("nobody", "x"), ("bob", ""), ("dave", "wrong")] {
        let r = admin_api(&app, As::basic(name, pw)).await?;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{name}/{pw}: {}", r.text);
        assert_eq!(error_of(&r.json).1, "invalid username or password");
    }
    assert!(app.t.db.user_by_name("carol").await?.is_none(), "a refused user leaves no row");

    // Roles and passwords of directory users are the directory's.
    let r = app.call(TestRequest::put().uri("/api/v1/users/bob").set_json(json!({"roles": ["admin"]}))).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert_eq!(error_of(&r.json).1, "bob signs in through ldap:corp: roles come from there, not from Packyard");
    let r = app
        .call(TestRequest::put().uri("/api/v1/users/bob/password").set_json(json!({"new_password": "12345678910"})))
        .await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);

    // API tokens for directory users.
    let bob_token = new_token(&app, As::basic("bob", "bobpw")).await?;
    let alice_token = new_token(&app, As::basic("alice", "alicepw")).await?;
    assert_eq!(admin_api(&app, As::Bearer(alice_token.clone())).await?.status, StatusCode::OK);
    assert_eq!(admin_api(&app, As::Bearer(bob_token.clone())).await?.status, StatusCode::FORBIDDEN);

    // bob is disabled in the directory: once the cached decisions expire (the TTL, then at
    // most the watermark poll), his password and his token are refused.
    slapd.modify(&format!(
        "dn: uid=bob,ou=people,{BASE}\nchangetype: modify\nadd: employeeType\nemployeeType: disabled\n"
    ))?;
    tokio::time::sleep(ttl + watermark).await;
    let r = admin_api(&app, As::basic("bob", "bobpw")).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    let r = admin_api(&app, As::Bearer(bob_token.clone())).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    assert_eq!(error_of(&r.json).1, "the token's user is disabled or removed in the directory");

    // alice leaves repo-admins (carol replaces her: a group needs a member): her token keeps
    // working, as a deployer only.
    slapd.modify(&format!(
        "dn: cn=repo-admins,ou=groups,{BASE}\nchangetype: modify\nreplace: member\nmember: uid=carol,ou=people,{BASE}\n"
    ))?;
    tokio::time::sleep(ttl + watermark).await;
    let r = admin_api(&app, As::Bearer(alice_token.clone())).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert_eq!(user(&app, "alice").await?["roles"], json!(["deployers"]));

    // The directory goes down: local users keep working; a directory user whose decision
    // expired gets a 503 that says why; tokens keep their last known roles.
    slapd.stop()?;
    tokio::time::sleep(ttl + watermark).await;
    let r = admin_api(&app, As::Admin).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = admin_api(&app, As::basic("alice", "alicepw")).await?;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert_eq!(error_of(&r.json).1, "the user directory cannot be reached; try again shortly");
    assert_eq!(r.headers.get("retry-after").and_then(|v| v.to_str().ok()), Some("5"));
    let r = app.send(TestRequest::get().uri("/api/v1/tokens"), As::Bearer(alice_token)).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    Ok(())
}
on_every_backend!(directory_users_sign_in);

/// Several directories in order: the first that knows a new name decides; one that is down
/// stops the search for a new name (a later one must not claim it) but not for a name already
/// recorded as another directory's; a name whose entry changed is another person; a directory
/// whose certificate is not trusted is not used.
async fn directories_in_order(backend: Backend) -> anyhow::Result<()> {
    use packyard_store::db::users::{ExternalUser, Synced};
    let slapd = Slapd::start()?;
    let down =
        LdapDirectory { name: "down".into(), url: format!("ldaps://127.0.0.1:{}", closed_port()?), ..slapd.corp() };
    // The whole tree: alice and dave are here, mapped to nothing but readers.
    let wide = LdapDirectory {
        name: "wide".into(),
        user_base: BASE.into(),
        group_roles: Default::default(),
        default_roles: vec!["readers".into()],
        ..slapd.corp()
    };
    let Some(app) = TestApp::with_config(backend, |c| c.security.ldap = vec![slapd.corp(), down, wide]).await? else {
        return Ok(());
    };
    make_roles(&app).await?;
    let r = admin_api(&app, As::basic("alice", "alicepw")).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let alice = user(&app, "alice").await?;
    assert_eq!(alice["source"], "ldap:corp", "the first directory that knows alice decides: {alice}");
    // dave is only in the third directory, after one that is down: it may be the down one's.
    let started = Instant::now();
    let r = admin_api(&app, As::basic("dave", "davepw")).await?;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert!(started.elapsed() < Duration::from_secs(5), "a refused connection answers at once");
    assert!(app.t.db.user_by_name("dave").await?.is_none(), "no directory after the down one claims dave");
    let r = admin_api(&app, As::basic("nobody", "x")).await?;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);

    // dave, recorded as wide's when the other one was up, is asked of wide alone.
    let recorded = |username, source, dn| ExternalUser {
        username,
        source,
        external_id: Some(dn),
        email: None,
        display_name: None,
        roles: &[],
    };
    let dave = recorded("dave", "ldap:wide", "uid=dave,ou=disabled,dc=example,dc=org");
    assert!(matches!(app.t.db.sync_external_user(&dave).await?, Synced::User { .. }));
    let r = admin_api(&app, As::basic("dave", "davepw")).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "signed in as a reader: {}", r.text);
    assert_eq!(user(&app, "dave").await?["roles"], json!(["readers"]));
    // Spelled otherwise, still recorded as wide's: the directory that is down is not asked.
    let r = admin_api(&app, As::basic("DAVE", "davepw")).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);

    // bob recorded with another entry's DN: the name now belongs to someone else there.
    let other_bob = recorded("bob", "ldap:corp", "uid=bob,ou=former,dc=example,dc=org");
    assert!(matches!(app.t.db.sync_external_user(&other_bob).await?, Synced::User { .. }));
    let r = admin_api(&app, As::basic("bob", "bobpw")).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    let again = ExternalUser { external_id: Some("uid=bob,ou=people,dc=example,dc=org"), ..other_bob };
    assert!(
        matches!(app.t.db.sync_external_user(&again).await?, Synced::NameTaken(m) if m.contains("another account"))
    );

    // The same directory without its CA: the TLS handshake fails and nothing is trusted.
    let untrusted = LdapDirectory { ca_file: None, ..slapd.corp() };
    let Some(app) = TestApp::with_config(backend, |c| c.security.ldap = vec![untrusted]).await? else {
        return Ok(());
    };
    let r = admin_api(&app, As::basic("alice", "alicepw")).await?;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert!(app.t.db.user_by_name("alice").await?.is_none());
    Ok(())
}
on_every_backend!(directories_in_order);

/// A local user and a directory user of the same name are different people: the local one
/// signs in with the local password, and the directory cannot take the name over.
async fn local_users_come_first(backend: Backend) -> anyhow::Result<()> {
    let slapd = Slapd::start()?;
    let Some(app) = TestApp::with_config(backend, |c| c.security.ldap = vec![slapd.corp()]).await? else {
        return Ok(());
    };
    let r = app
        .call(TestRequest::post().uri("/api/v1/users").set_json(json!({"username": "bob", "password": "local-bob-pw"})))
        .await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["source"], "local");
    assert_eq!(admin_api(&app, As::basic("bob", "local-bob-pw")).await?.status, StatusCode::FORBIDDEN);
    let r = admin_api(&app, As::basic("bob", "bobpw")).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "the directory's password is not the local bob's: {}", r.text);
    Ok(())
}
on_every_backend!(local_users_come_first);

/// The real apt-get as a directory user: `packyard.toml` with a `[[security.ldap]]` table (the
/// service account's password in a file), the real server binary, a repository only signed-in
/// users may read. bob (repo-devs) uploads with his directory password; apt-get reads with his
/// password and with his token (apt's auth.conf); carol (disabled there) is refused.
const PW: &str = "ldap-admin-pw";

/// The server binary configured from a `packyard.toml` as an operator writes it: anonymous
/// reads off, the directory over LDAPS with the service account's password in a file, and
/// repo-devs mapped to `role`.
fn binary_with_directory(slapd: &Slapd, dir: &std::path::Path, role: &str) -> anyhow::Result<common::process::Server> {
    let password_file = dir.join("ldap-password");
    std::fs::write(&password_file, "svcpw\n")?;
    std::fs::write(
        dir.join("packyard.toml"),
        format!(
            r#"[security]
anonymous_read = false

[[security.ldap]]
name = "corp"
url = "ldaps://127.0.0.1:{port}"
ca_file = "{ca}"
bind_dn = "cn=svc-repo,ou=services,{BASE}"
bind_password_file = "{pw}"
user_base = "ou=people,{BASE}"
user_filter = "(&(objectClass=inetOrgPerson)(uid={{username}})(!(employeeType=disabled)))"
group_roles = {{ "repo-devs" = ["{role}"] }}
"#,
            port = slapd.ldaps_port,
            ca = slapd.ca.display(),
            pw = password_file.display(),
        ),
    )?;
    let server = common::process::start(dir, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    server.wait_ready()?;
    Ok(server)
}

#[test]
fn apt_get_as_a_directory_user() -> anyhow::Result<()> {
    use common::process::{basic, status_of};
    let debs = std::env::var("TEST_DEBS_DIR")
        .map_err(|_| anyhow::anyhow!("TEST_DEBS_DIR is not set (scripts/test.sh sets it)"))?;
    let hello_path = std::fs::read_dir(&debs)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with("hello_")))
        .ok_or_else(|| anyhow::anyhow!("no hello package in {debs}"))?;
    let hello = std::fs::read(&hello_path)?;
    let slapd = Slapd::start()?;
    let dir = tempfile::tempdir()?;
    let server = binary_with_directory(&slapd, dir.path(), "apt-devs")?;
    let admin = |req: ureq::Request| req.set("Authorization", &basic(PW));
    let (s, text) = status_of(admin(ureq::post(&format!("{}/api/v1/roles", server.public))).send_json(json!({
        "name": "apt-devs", "privileges": [{"repositories": "debs", "actions": ["read", "write"]}]
    })))?;
    assert_eq!(s, 201, "{text}");
    let (s, text) = status_of(admin(ureq::post(&format!("{}/api/v1/repositories", server.public))).send_json(json!({
        "name": "debs", "format": "apt", "type": "hosted", "anonymous_read": false,
        "apt": {"distribution": "bookworm", "components": ["main"], "architectures": ["amd64"]}
    })))?;
    assert_eq!(s, 201, "{text}");

    let user = |name: &str, pw: &str| {
        use base64::Engine;
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{name}:{pw}")))
    };
    let (s, text) = status_of(
        ureq::put(&format!("{}/repository/debs/pool/hello.deb?wait=true", server.public))
            .set("Authorization", &user("bob", "bobpw"))
            .send_bytes(&hello),
    )?;
    assert_eq!(s, 201, "bob uploads with his directory password: {text}");
    let (s, text) = status_of(
        ureq::post(&format!("{}/api/v1/tokens", server.public))
            .set("Authorization", &user("bob", "bobpw"))
            .send_json(json!({"name": "apt"})),
    )?;
    assert_eq!(s, 201, "{text}");
    let token: serde_json::Value = serde_json::from_str(&text)?;
    let token = token["token"].as_str().unwrap_or_default().to_string();
    let mut key = Vec::new();
    std::io::Read::read_to_end(
        &mut admin(ureq::get(&format!("{}/repository/debs/gpg.key", server.public))).call()?.into_reader(),
        &mut key,
    )?;

    // apt-get update and download, with credentials from an auth.conf (apt sends them over
    // http:// only to a machine written with its scheme).
    let apt = |who: &str, secret: &str| -> anyhow::Result<(bool, String, Option<Vec<u8>>)> {
        let root = common::apt::scratch(&key, |k| {
            format!("deb [signed-by={} arch=amd64] {}/repository/debs bookworm main", k.display(), server.public)
        })?;
        let auth = root.path().join("auth.conf");
        std::fs::write(&auth, format!("machine {}/repository/debs login {who} password {secret}\n", server.public))?;
        let netrc = format!("Dir::Etc::netrc={}", auth.display());
        let update = common::apt::tool("apt-get", root.path(), &["-o", &netrc, "update"])?;
        let mut text =
            format!("{}{}", String::from_utf8_lossy(&update.stdout), String::from_utf8_lossy(&update.stderr));
        let download = common::apt::tool("apt-get", root.path(), &["-o", &netrc, "download", "hello"])?;
        text.push_str(&String::from_utf8_lossy(&download.stderr));
        let ok = update.status.success() && !text.contains("W: ") && !text.contains("E: ") && download.status.success();
        let got = std::fs::read_dir(root.path().join("downloads"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .map(std::fs::read)
            .transpose()?;
        Ok((ok, text, got))
    };
    let (ok, text, got) = apt("bob", "bobpw")?;
    assert!(ok, "{text}");
    assert_eq!(got.as_deref(), Some(hello.as_slice()), "apt-get got the bytes bob uploaded");
    let (ok, text, got) = apt("bob", &token)?;
    assert!(ok, "{text}");
    assert_eq!(got.as_deref(), Some(hello.as_slice()));
    let (ok, text, got) = apt("carol", "carolpw")?;
    assert!(!ok && got.is_none(), "carol is disabled in the directory: {text}");
    assert!(text.contains("401"), "{text}");
    assert!(server.terminate()?.success());
    Ok(())
}

/// The web UI's sign-in form in Chromium with a directory user's password; the directory down
/// shows why on the form, while the local admin still signs in.
#[test]
fn web_ui_sign_in_as_a_directory_user_in_chromium() -> anyhow::Result<()> {
    use common::webdriver::{driver, Browser};
    let Some(driver) = driver() else { return Ok(()) };
    let slapd = Slapd::start()?;
    let dir = tempfile::tempdir()?;
    let server = binary_with_directory(&slapd, dir.path(), "admin")?;
    let public = server.public.clone();
    let sign_in = |b: &Browser, user: &str, password: &str| -> anyhow::Result<String> {
        b.goto(&format!("{public}/signin"))?;
        b.fill("#username", user)?;
        b.fill("#password", password)?;
        let button = b.find_by_text("form.stack button", "Sign in")?;
        b.click_to_load(&button)?;
        b.text_of_page()
    };
    let b = Browser::start(&driver)?;
    let text = sign_in(&b, "bob", "wrong")?;
    assert!(text.contains("Invalid username or password."), "{text}");
    sign_in(&b, "bob", "bobpw")?;
    assert_eq!(b.text(&b.wait_for(".who .user", Duration::from_secs(10))?)?, "Signed in as bob");
    // repo-devs → admin here: the Users page lists bob as the directory's.
    b.goto(&format!("{public}/admin/users"))?;
    let text = b.text_of_page()?;
    assert!(text.contains("ldap:corp"), "{text}");
    // The sign-in sources page: the directory as configured, and that it answers now.
    b.goto(&format!("{public}/admin/directories"))?;
    let panel = b.text(&b.find("section.panel")?)?;
    let url = format!("ldaps://127.0.0.1:{}", slapd.ldaps_port);
    assert!(panel.contains("corp") && panel.contains("answers in") && panel.contains(&url), "{panel}");
    drop(b);

    slapd.stop()?;
    let b = Browser::start(&driver)?;
    let text = sign_in(&b, "alice", "alicepw")?;
    assert!(text.contains("The user directory cannot be reached; try again shortly."), "{text}");
    sign_in(&b, "admin", PW)?;
    assert_eq!(b.text(&b.wait_for(".who .user", Duration::from_secs(10))?)?, "Signed in as admin");
    // And that it does not, saying why.
    b.goto(&format!("{public}/admin/directories"))?;
    let panel = b.text(&b.find("section.panel")?)?;
    assert!(panel.contains("does not answer") && panel.contains("connection"), "{panel}");
    drop(b);
    assert!(server.terminate()?.success());
    Ok(())
}
