//! Conan 2, first part: `v1/ping` (the capabilities header, to anonymous callers too),
//! `v2/users/authenticate` (a short-lived, repository-scoped bearer token) and
//! `v2/users/check_credentials` (401 once the token is missing, wrong or expired), checked with
//! plain HTTP and with the real `conan` client (`conan remote add`, `conan remote login`).

mod common;

use std::process::Command;

use common::process::{basic, start, status_of};

const PW: &str = "conan-admin";

fn conan_available() -> bool {
    Command::new("conan").arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn ping_login_and_token_expiry() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let server =
        start(dir.path(), &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW), ("PACKYARD_CONAN__TOKEN_TTL_SECS", "2")])?;
    server.wait_ready()?;
    let (s, text) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public)).set("Authorization", &basic(PW)).send_json(
            serde_json::json!({"name": "conan-local", "format": "conan", "type": "hosted", "anonymous_read": false}),
        ),
    )?;
    assert_eq!(s, 201, "{text}");
    let url = format!("{}/repository/conan-local", server.public);

    // Ping: to anyone, even where anonymous callers may not read.
    let r = ureq::get(&format!("{url}/v1/ping")).call()?;
    assert_eq!(r.header("x-conan-server-capabilities"), Some("revisions"));
    let (s, _) = status_of(ureq::get(&format!("{}/repository/nothere/v1/ping", server.public)).call())?;
    assert_eq!(s, 404);

    // Authenticate: Basic only; a wrong password is a 401.
    let wrong = format!("Basic {}", base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "admin:wrong"));
    let (s, _) = status_of(ureq::get(&format!("{url}/v2/users/authenticate")).set("Authorization", &wrong).call())?;
    assert_eq!(s, 401);
    let (s, _) = status_of(ureq::get(&format!("{url}/v2/users/authenticate")).call())?;
    assert_eq!(s, 401);
    let token =
        ureq::get(&format!("{url}/v2/users/authenticate")).set("Authorization", &basic(PW)).call()?.into_string()?;
    assert!(token.starts_with("pky_"), "{token}");
    let bearer = format!("Bearer {token}");
    // A token cannot mint tokens.
    let (s, _) = status_of(ureq::get(&format!("{url}/v2/users/authenticate")).set("Authorization", &bearer).call())?;
    assert_eq!(s, 401);

    // check_credentials: 200 with the token, 401 without, and 401 once it expired.
    let (s, text) =
        status_of(ureq::get(&format!("{url}/v2/users/check_credentials")).set("Authorization", &bearer).call())?;
    assert_eq!((s, text.as_str()), (200, "admin"));
    let (s, _) = status_of(ureq::get(&format!("{url}/v2/users/check_credentials")).call())?;
    assert_eq!(s, 401);
    // The token is scoped to this repository: it reads no other, though its user may.
    let (s, text) = status_of(
        ureq::post(&format!("{}/api/v1/repositories", server.public))
            .set("Authorization", &basic(PW))
            .send_json(serde_json::json!({"name": "debs", "format": "apt", "type": "hosted", "anonymous_read": false})),
    )?;
    assert_eq!(s, 201, "{text}");
    let other = format!("{}/repository/debs/dists/stable/Release", server.public);
    let (s, _) = status_of(ureq::get(&other).set("Authorization", &basic(PW)).call())?;
    assert_ne!(s, 403, "the admin reads it with a password");
    let (s, text) = status_of(ureq::get(&other).set("Authorization", &bearer).call())?;
    assert_eq!(s, 403, "{text}");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let (s, text) =
        status_of(ureq::get(&format!("{url}/v2/users/check_credentials")).set("Authorization", &bearer).call())?;
    assert_eq!(s, 401, "an expired token is a 401 (the client logs in again), not a 403: {text}");

    // The real client logs in.
    if !conan_available() {
        eprintln!("skipped the conan client part: no conan in PATH (scripts/test.sh installs it)");
        return Ok(());
    }
    let home = tempfile::tempdir()?;
    let conan = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new("conan").args(args).env("CONAN_HOME", home.path()).output()?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "conan {args:?}: {text}");
        Ok(text)
    };
    conan(&["remote", "add", "packyard", &url])?;
    let out = conan(&["remote", "login", "packyard", "admin", "-p", PW])?;
    assert!(out.contains("to 'admin' (authenticated)"), "{out}");
    let out = conan(&["remote", "list-users"])?;
    assert!(out.contains("Username: admin") && out.contains("authenticated: True"), "{out}");
    let out = Command::new("conan")
        .args(["remote", "login", "packyard", "admin", "-p", "wrong"])
        .env("CONAN_HOME", home.path())
        .output()?;
    assert!(!out.status.success());
    Ok(())
}
