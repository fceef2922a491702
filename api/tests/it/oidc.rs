//! Web UI sign-in through OpenID Connect: the real server binary, a real OpenID provider (npm's
//! oidc-provider, OpenID Certified, run by `api/tests/fixtures/oidc/server.mjs`: PKCE required,
//! a `groups` claim) and Debian's Chromium over WebDriver, on SQLite and PostgreSQL.

use crate::common;
use crate::common::process::free_port;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::process::{admin_json, basic, status_of, Server};
use common::webdriver::{driver, Browser};
use packyard_store::db::Backend;
use serde_json::{json, Value};

const PW: &str = "oidc-admin-pw";

/// The OpenID provider, stopped when dropped.
struct Provider {
    child: Child,
    issuer: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Provider {
    /// Runs the fixture from the directory npm installed oidc-provider into (`TEST_OIDC_DIR`,
    /// set by scripts/test.sh), answering at `port` and sending browsers back to `redirect`.
    fn start(port: u16, redirect: &str) -> anyhow::Result<Self> {
        let dir = std::env::var("TEST_OIDC_DIR")
            .map_err(|_| anyhow::anyhow!("TEST_OIDC_DIR is not set (scripts/test.sh installs the provider)"))?;
        let script = std::path::Path::new(&dir).join("server.mjs");
        std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oidc/server.mjs"), &script)?;
        let child = Command::new("node")
            .arg(&script)
            .env("PORT", port.to_string())
            .env("REDIRECT_URI", redirect)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let issuer = format!("http://127.0.0.1:{port}");
        let provider = Self { child, issuer };
        let deadline = Instant::now() + Duration::from_secs(30);
        let discovery = format!("{}/.well-known/openid-configuration", provider.issuer);
        while ureq::get(&discovery).call().is_err() {
            anyhow::ensure!(Instant::now() < deadline, "the OpenID provider did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(provider)
    }
}

/// The server binary on `backend` with `[security.oidc]` naming the issuer at `idp_port`.
fn server(backend: Backend, idp_port: u16) -> anyhow::Result<Option<(Server, tempfile::TempDir)>> {
    let Some((url, dir)) = common::process::database_for(backend)? else { return Ok(None) };
    let secret_file = dir.path().join("oidc-secret");
    std::fs::write(&secret_file, "repo-web-secret\n")?;
    std::fs::write(
        dir.path().join("packyard.toml"),
        format!(
            r#"[security.oidc]
issuer = "http://127.0.0.1:{idp_port}"
client_id = "repo-web"
client_secret_file = "{}"
scopes = ["profile", "email", "groups"]
button_label = "Sign in with Example SSO"
group_roles = {{ "repo-admins" = ["admin"], "repo-devs" = ["deployers"] }}
"#,
            secret_file.display()
        ),
    )?;
    let server = common::process::start_on(dir.path(), url.as_deref(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])?;
    Ok(Some((server, dir)))
}

/// An answer without following redirects: status, `Location`, `Set-Cookie`s and the body.
fn no_follow(url: &str, cookie: Option<&str>) -> anyhow::Result<(u16, Option<String>, Vec<String>, String)> {
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    let mut req = agent.get(url);
    if let Some(c) = cookie {
        req = req.set("Cookie", c);
    }
    let res = match req.call() {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => return Err(e.into()),
    };
    let status = res.status();
    let location = res.header("location").map(str::to_string);
    let cookies = res.all("set-cookie").into_iter().map(str::to_string).collect();
    Ok((status, location, cookies, res.into_string()?))
}

/// `name=value` of a `Set-Cookie` among `cookies`.
fn cookie_pair(cookies: &[String], name: &str) -> Option<String> {
    cookies.iter().find(|c| c.starts_with(&format!("{name}="))).and_then(|c| c.split(';').next()).map(str::to_string)
}

/// In Chromium: the sign-in page (with `next`), its single sign-on button, and the provider's
/// own form filled in and sent; the browser is then back at Packyard, signed in or not.
fn through_the_provider(b: &Browser, public: &str, next: &str, user: &str, password: &str) -> anyhow::Result<()> {
    b.goto(&format!("{public}/signin?next={next}"))?;
    let button = b.find("#sso")?;
    assert_eq!(b.text(&button)?, "Sign in with Example SSO");
    b.click_to_load(&button)?;
    b.wait_for("#username", Duration::from_secs(10))?;
    b.fill("#username", user)?;
    b.fill("#password", password)?;
    let submit = b.find("#submit")?;
    b.click_to_load(&submit)
}

fn single_sign_on(backend: Backend) -> anyhow::Result<()> {
    let Some(driver) = driver() else { return Ok(()) };
    let idp_port = free_port()?;
    let Some((server, _dir)) = server(backend, idp_port)? else { return Ok(()) };
    let public = server.public.clone();
    let admin = |method: &str, path: &str, body: Option<Value>| admin_json(&public, &basic(PW), method, path, body);
    admin(
        "POST",
        "/api/v1/roles",
        Some(json!({"name": "deployers", "privileges": [{"repositories": "*", "actions": ["read", "write"]}]})),
    )?;

    // The provider is not up yet: a sign-in says so (503) instead of sending the browser away.
    let (s, location, _, body) = no_follow(&format!("{public}/signin/oidc"), None)?;
    assert_eq!((s, location), (503, None), "{body}");
    assert!(body.contains("The identity provider cannot be reached; try again shortly."), "{body}");

    let callback = format!("{public}/signin/oidc/callback");
    let provider = Provider::start(idp_port, &callback)?;

    // Leaving for the provider: the authorization code flow with PKCE (S256), a state and a
    // nonce, and the sign-in's state in an HttpOnly cookie.
    let (s, location, cookies, _) = no_follow(&format!("{public}/signin/oidc?next=/search"), None)?;
    assert_eq!(s, 303);
    let location = url::Url::parse(&location.unwrap_or_default())?;
    assert!(location.as_str().starts_with(&provider.issuer), "{location}");
    let q: std::collections::HashMap<String, String> = location.query_pairs().into_owned().collect();
    assert_eq!(q.get("response_type").map(String::as_str), Some("code"));
    assert_eq!(q.get("client_id").map(String::as_str), Some("repo-web"));
    assert_eq!(q.get("redirect_uri"), Some(&callback));
    assert_eq!(q.get("code_challenge_method").map(String::as_str), Some("S256"));
    assert_eq!(q.get("code_challenge").map(String::len), Some(43));
    let scopes: Vec<&str> = q.get("scope").map(|s| s.split(' ').collect()).unwrap_or_default();
    assert_eq!(scopes, ["openid", "profile", "email", "groups"]);
    assert!(q.get("state").is_some_and(|s| s.len() >= 16) && q.get("nonce").is_some_and(|n| n.len() >= 16));
    let pending =
        cookie_pair(&cookies, "packyard_oidc").ok_or_else(|| anyhow::anyhow!("no state cookie: {cookies:?}"))?;
    assert!(cookies.iter().any(|c| c.starts_with("packyard_oidc=") && c.contains("HttpOnly")), "{cookies:?}");
    let state = q.get("state").cloned().unwrap_or_default();

    // Answers that sign nobody in: no state cookie, a state of another sign-in, the provider's
    // refusal, a code the provider never issued.
    let (s, _, _, body) = no_follow(&format!("{callback}?code=x&state={state}"), None)?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("The sign-in did not start here or took longer than 10 minutes"), "{body}");
    let (s, _, _, body) = no_follow(&format!("{callback}?code=x&state=other"), Some(&pending))?;
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("does not belong to this sign-in"), "{body}");
    let forged = format!("{}x", pending);
    let (s, _, _, _) = no_follow(&format!("{callback}?code=x&state={state}"), Some(&forged))?;
    assert_eq!(s, 400, "a changed cookie is not this server's");
    let (s, _, _, body) = no_follow(
        &format!("{callback}?error=access_denied&error_description=the+user+said+no&state={state}"),
        Some(&pending),
    )?;
    assert_eq!(s, 401, "{body}");
    assert!(body.contains("The identity provider did not sign you in: access_denied (the user said no)."), "{body}");
    let (s, _, cookies, body) = no_follow(&format!("{callback}?code=never-issued&state={state}"), Some(&pending))?;
    assert_eq!(s, 401, "{body}");
    assert!(body.contains("The identity provider refused the sign-in: invalid_grant"), "{body}");
    assert!(cookie_pair(&cookies, "packyard_session").is_none(), "no session: {cookies:?}");

    // alice (repo-admins) in Chromium: the provider's own form, then back, signed in, an admin.
    let b = Browser::start(&driver)?;
    through_the_provider(&b, &public, "/", "alice", "alicepw")?;
    b.wait_for(".who .user", Duration::from_secs(15))?;
    assert_eq!(b.text(&b.find(".who .user")?)?, "Signed in as alice");
    b.goto(&format!("{public}/admin/users"))?;
    let text = b.text_of_page()?;
    assert!(text.contains("alice") && text.contains("oidc"), "{text}");
    let cookies = b.cookies()?;
    assert!(
        cookies.iter().any(|c| c["name"] == "packyard_session" && c["httpOnly"] == true),
        "a session cookie: {cookies:?}"
    );
    assert!(!cookies.iter().any(|c| c["name"] == "packyard_oidc"), "the state cookie is gone: {cookies:?}");
    drop(b);

    // bob (repo-devs): signed in as a deployer, not an admin; `next` is kept.
    let b = Browser::start(&driver)?;
    through_the_provider(&b, &public, "/search", "bob", "bobpw")?;
    b.wait_for(".who .user", Duration::from_secs(15))?;
    assert!(b.current_url()?.ends_with("/search"), "{}", b.current_url()?);
    b.goto(&format!("{public}/admin"))?;
    assert!(b.text_of_page()?.contains("bob may not use the administration pages."));
    drop(b);

    // The provider's "admin" is not Packyard's local admin: refused, and nothing changes.
    let b = Browser::start(&driver)?;
    through_the_provider(&b, &public, "/", "admin", "adminpw")?;
    b.wait_for("p.error", Duration::from_secs(15))?;
    let text = b.text_of_page()?;
    assert!(text.contains("That name belongs to another user here; ask an administrator."), "{text}");
    assert!(b.find_all(".who .user")?.is_empty(), "not signed in: {text}");
    drop(b);

    let users = admin("GET", "/api/v1/users", None)?;
    let of = |name: &str| users.as_array().and_then(|a| a.iter().find(|u| u["username"] == name).cloned());
    let alice = of("alice").ok_or_else(|| anyhow::anyhow!("no alice: {users}"))?;
    assert_eq!(
        (&alice["source"], &alice["email"], &alice["display_name"], &alice["roles"]),
        (&json!("oidc"), &json!("alice@example.org"), &json!("Alice Admin"), &json!(["admin", "deployers"]))
    );
    let bob = of("bob").ok_or_else(|| anyhow::anyhow!("no bob: {users}"))?;
    assert_eq!((&bob["source"], &bob["roles"]), (&json!("oidc"), &json!(["deployers"])));
    let admin_user = of("admin").ok_or_else(|| anyhow::anyhow!("no admin: {users}"))?;
    assert_eq!((&admin_user["source"], &admin_user["roles"]), (&json!("local"), &json!(["admin"])));

    // The local sign-in form still works beside the button.
    let b = Browser::start(&driver)?;
    b.goto(&format!("{public}/signin"))?;
    b.fill("#username", "admin")?;
    b.fill("#password", PW)?;
    let button = b.find_by_text("form.stack button", "Sign in")?;
    b.click_to_load(&button)?;
    b.wait_for(".who .user", Duration::from_secs(10))?;
    assert_eq!(b.text(&b.find(".who .user")?)?, "Signed in as admin");
    // The sign-in sources page: the provider as configured, and that it answers now.
    b.goto(&format!("{public}/admin/directories"))?;
    let panel = b.text(&b.find("section.panel")?)?;
    assert!(
        panel.contains("answers in") && panel.contains("Example SSO") && panel.contains("/signin/oidc/callback"),
        "{panel}"
    );
    drop(b);
    let (s, text) = status_of(ureq::get(&format!("{public}/signin")).call())?;
    assert_eq!(s, 200);
    assert!(text.contains("Sign in with Example SSO"), "{text}");
    drop(provider);
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn single_sign_on_on_sqlite() -> anyhow::Result<()> {
    single_sign_on(Backend::Sqlite)
}

#[test]
fn single_sign_on_on_postgres() -> anyhow::Result<()> {
    single_sign_on(Backend::Postgres)
}
