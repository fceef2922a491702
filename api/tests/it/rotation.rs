//! Signing-key rotation with an overlap (#43), APT: the real `apt-get` with a keyring holding
//! only the old key and one holding only the new key both update while both keys sign
//! (`InRelease` with two signatures, `Release.gpg` with both, `gpg.key` exporting both); after
//! the old key is retired only the new one does. A key that expires within 30 days is warned
//! about in the gauge and the web UI. (APK's rotation: `apk.rs`
//! `a_rotation_overlaps_then_retires_the_old_key`.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use actix_web::http::{header, StatusCode};
use actix_web::test::TestRequest;
use packyard_codecs::apt::testing::deb;
use packyard_model::repos::Format;
use serde_json::{json, Value};

use crate::common::app::{As, Repo, TestApp};
use crate::common::process::{admin_json, basic, get_bytes, server_on, status_of};

/// `apt-get` in `root` (a scratch root from `common::apt::scratch`): whether it succeeded
/// without a warning or an error, and what it said.
fn apt_get(root: &Path, args: &[&str]) -> anyhow::Result<(bool, String)> {
    let out = crate::common::apt::tool("apt-get", root, args)?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success() && !text.contains("W: ") && !text.contains("E: "), text))
}

/// `gpgv` of `Release.gpg` over `Release` with the armored `key` alone, judged as apt's gpgv
/// method judges it: a good signature by a key of the keyring and no bad one (a signature by a
/// key the keyring lacks is passed over, as apt does for Debian's several archive keys).
fn gpgv_detached(dir: &Path, key: &[u8], release: &[u8], signature: &[u8]) -> anyhow::Result<bool> {
    std::fs::write(dir.join("key.asc"), key)?;
    let dearmor = Command::new("gpg")
        .args(["--batch", "--yes", "--dearmor", "-o"])
        .arg(dir.join("key.gpg"))
        .arg(dir.join("key.asc"))
        .output()?;
    anyhow::ensure!(dearmor.status.success(), "gpg --dearmor: {}", String::from_utf8_lossy(&dearmor.stderr));
    std::fs::write(dir.join("Release"), release)?;
    std::fs::write(dir.join("Release.gpg"), signature)?;
    let out = Command::new("gpgv")
        .args(["--status-fd", "1", "--keyring"])
        .arg(dir.join("key.gpg"))
        .arg(dir.join("Release.gpg"))
        .arg(dir.join("Release"))
        .output()?;
    let status = String::from_utf8_lossy(&out.stdout);
    Ok(status.contains("[GNUPG:] VALIDSIG ") && !status.contains("[GNUPG:] BADSIG "))
}

fn a_rotation_keeps_clients_of_either_key_verifying(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    const PW: &str = "rotation-admin-pw";
    let Some((server, _dir)) = server_on(backend, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])? else {
        return Ok(());
    };
    let public = server.public.clone();
    let auth = basic(PW);
    admin_json(&public, &auth, "POST", "/api/v1/repositories", Some(Repo::hosted("debs", Format::Apt).0))?;
    let package = deb("Package: rotated\nVersion: 1.0\nArchitecture: amd64\nDescription: rotated\n", ".gz");
    let (s, text) = status_of(
        ureq::post(&format!("{public}/repository/debs/?wait=true")).set("Authorization", &auth).send_bytes(&package),
    )?;
    assert_eq!(s, 201, "{text}");
    let line = |k: &PathBuf| format!("deb [signed-by={} arch=amd64] {public}/repository/debs stable main", k.display());
    let (_, old_key) = get_bytes(&server, "/repository/debs/gpg.key")?;
    let old_client = crate::common::apt::scratch(&old_key, line)?;
    let (ok, text) = apt_get(old_client.path(), &["update"])?;
    assert!(ok, "before the rotation: {text}");
    let inrelease =
        |server| -> anyhow::Result<Vec<u8>> { Ok(get_bytes(server, "/repository/debs/dists/stable/InRelease")?.1) };
    let wait_for_change = |before: &[u8]| -> anyhow::Result<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let now = inrelease(&server)?;
            if now != before {
                return Ok(now);
            }
            anyhow::ensure!(Instant::now() < deadline, "InRelease was not signed again");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let before = inrelease(&server)?;

    // Added beside the current key: both sign.
    let keys =
        admin_json(&public, &auth, "POST", "/api/v1/repositories/debs/signing-keys", Some(json!({"generate": true})))?;
    let keys = keys.as_array().cloned().unwrap_or_default();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!((keys[0]["slot"].as_str(), keys[1]["slot"].as_str()), (Some("current"), Some("overlap")));
    assert!(keys.iter().all(|k| k["signs"] == true), "{keys:?}");
    let (new_fp, old_fp) =
        (keys[0]["fingerprint"].as_str().unwrap_or_default(), keys[1]["fingerprint"].as_str().unwrap_or_default());
    let new_key = keys[0]["public_key"].as_str().unwrap_or_default().as_bytes().to_vec();
    let overlapping = wait_for_change(&before)?;
    let text = String::from_utf8_lossy(&overlapping);
    // Both signatures: each key alone verifies it.
    use packyard_codecs::apt::signing::{parse_public_keys, verify_clearsigned};
    for key in [&old_key, &new_key] {
        verify_clearsigned(&text, &parse_public_keys(&String::from_utf8_lossy(key))?)?;
    }
    let (_, offered) = get_bytes(&server, "/repository/debs/gpg.key")?;
    let offered = packyard_codecs::apt::signing::parse_public_keys(&String::from_utf8_lossy(&offered))?;
    assert_eq!(offered.len(), 2, "gpg.key exports both keys");
    let new_client = crate::common::apt::scratch(&new_key, line)?;
    for (who, root) in [("old", &old_client), ("new", &new_client)] {
        let (ok, text) = apt_get(root.path(), &["update"])?;
        assert!(ok, "a client trusting only the {who} key, during the overlap: {text}");
        let (ok, text) = apt_get(root.path(), &["download", "rotated"])?;
        assert!(ok, "{who}: {text}");
        assert_eq!(std::fs::read(root.path().join("downloads/rotated_1.0_amd64.deb"))?, package);
    }
    let (_, release) = get_bytes(&server, "/repository/debs/dists/stable/Release")?;
    let (_, detached) = get_bytes(&server, "/repository/debs/dists/stable/Release.gpg")?;
    let gpg_dir = tempfile::tempdir()?;
    assert!(gpgv_detached(gpg_dir.path(), &old_key, &release, &detached)?, "Release.gpg verifies with the old key");
    assert!(gpgv_detached(gpg_dir.path(), &new_key, &release, &detached)?, "Release.gpg verifies with the new key");

    // The old key retired: only the new one signs and is offered.
    let keys = admin_json(&public, &auth, "DELETE", &format!("/api/v1/repositories/debs/signing-keys/{old_fp}"), None)?;
    assert_eq!(keys.as_array().map(Vec::len), Some(1), "{keys}");
    assert_eq!(keys[0]["fingerprint"].as_str(), Some(new_fp));
    wait_for_change(&overlapping)?;
    let (_, offered) = get_bytes(&server, "/repository/debs/gpg.key")?;
    assert_eq!(packyard_codecs::apt::signing::parse_public_keys(&String::from_utf8_lossy(&offered))?.len(), 1);
    let (ok, text) = apt_get(new_client.path(), &["update"])?;
    assert!(ok, "the new key's client after the retirement: {text}");
    let (ok, text) = apt_get(old_client.path(), &["update"])?;
    assert!(!ok && text.contains("NO_PUBKEY"), "the old key's client no longer verifies: {text}");
    let (_, detached) = get_bytes(&server, "/repository/debs/dists/stable/Release.gpg")?;
    let (_, release) = get_bytes(&server, "/repository/debs/dists/stable/Release")?;
    assert!(!gpgv_detached(gpg_dir.path(), &old_key, &release, &detached)?);
    assert!(gpgv_detached(gpg_dir.path(), &new_key, &release, &detached)?);

    let audit = admin_json(&public, &auth, "GET", "/api/v1/audit?limit=10", None)?;
    let actions: Vec<&str> =
        audit["entries"].as_array().into_iter().flatten().filter_map(|e| e["action"].as_str()).collect();
    for action in ["repository.signing_key.add", "repository.signing_key.retire"] {
        assert!(actions.contains(&action), "{action}: {actions:?}");
    }
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn a_rotation_keeps_clients_of_either_key_verifying_on_sqlite() -> anyhow::Result<()> {
    a_rotation_keeps_clients_of_either_key_verifying(packyard_store::db::Backend::Sqlite)
}

#[test]
fn a_rotation_keeps_clients_of_either_key_verifying_on_postgres() -> anyhow::Result<()> {
    a_rotation_keeps_clients_of_either_key_verifying(packyard_store::db::Backend::Postgres)
}

#[test]
fn a_rotation_keeps_clients_of_either_key_verifying_on_mariadb() -> anyhow::Result<()> {
    a_rotation_keeps_clients_of_either_key_verifying(packyard_store::db::Backend::MySql)
}

/// An armored secret key that gpg made to expire in `days`.
pub(crate) fn expiring_key(days: u32) -> anyhow::Result<String> {
    let home = tempfile::tempdir()?;
    let gpg = |args: &[&str]| -> anyhow::Result<std::process::Output> {
        let out = Command::new("gpg")
            .arg("--homedir")
            .arg(home.path())
            .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args)
            .output()?;
        anyhow::ensure!(out.status.success(), "gpg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(out)
    };
    gpg(&["--quick-gen-key", "Expiring <expiring@example.org>", "ed25519", "sign", &format!("{days}d")])?;
    Ok(String::from_utf8(gpg(&["--armor", "--export-secret-keys"])?.stdout)?)
}

/// A key that expires within 30 days: its expiry in the keys' list, the gauge, and a warning on
/// the repository's administration page.
async fn a_key_expiring_soon_is_warned_about(app: TestApp) -> anyhow::Result<()> {
    // This process counts usage (as the worker's does): its gauges are the instance's.
    app.services.count_usage();
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    let secret = expiring_key(10)?;
    let r = app
        .call(
            TestRequest::post().uri("/api/v1/repositories/debs/signing-keys").set_json(json!({"private_key": secret})),
        )
        .await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let new: &Value = &r.json[0];
    let fingerprint = new["fingerprint"].as_str().unwrap_or_default().to_string();
    let expires = new["expires_at"].as_str().unwrap_or_default().to_string();
    let in_ten_days = packyard_model::time::rfc3339_ms(packyard_store::db::now_ms() + 10 * 86_400_000);
    assert_eq!(expires.get(..10), in_ten_days.get(..10), "{}", r.text);
    assert!(r.json[1].get("expires_at").is_none(), "the generated key does not expire: {}", r.text);
    let gauge =
        app.services.metrics.signing_key_expiry_timestamp_seconds.with_label_values(&["debs", &fingerprint]).get();
    let want = (packyard_store::db::now_ms() / 1000) + 10 * 86_400;
    assert!((gauge - want).abs() < 120, "gauge {gauge}, about {want}");
    let session = crate::selectors::sign_in(&app, "admin", crate::common::ADMIN_PW).await?;
    let page = TestRequest::get()
        .uri("/admin/repositories/debs")
        .insert_header((header::COOKIE, format!("packyard_session={session}")));
    let r = app.send(page, As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.text.contains(&format!(
            "<p class=\"warning key-expiry\" role=\"alert\">Key <code>{fingerprint}</code> expires on {expires}"
        )),
        "{}",
        r.text
    );
    Ok(())
}
app_test!(a_key_expiring_soon_is_warned_about);
