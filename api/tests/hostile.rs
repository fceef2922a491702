//! Hostile input against a running server: the proxy SSRF guard and its allowlist.

mod common;

use common::process::{basic, start, status_of, text_upstream};

fn create(public: &str, body: serde_json::Value) -> anyhow::Result<()> {
    let (s, text) = status_of(
        ureq::post(&format!("{public}/api/v1/repositories")).set("Authorization", &basic("pw")).send_json(body),
    )?;
    anyhow::ensure!(s == 201, "{s} {text}");
    Ok(())
}

#[test]
fn proxy_upstreams_on_private_addresses_need_the_allowlist() -> anyhow::Result<()> {
    let (upstream, _stop) = text_upstream("v1.0.0\n")?;
    let port = upstream.rsplit(':').next().unwrap_or_default().to_string();
    let dir = tempfile::tempdir()?;
    // Loopback's one address is allowed; the rest of 127.0.0.0/8 and every other private
    // network stay closed.
    let server = start(
        dir.path(),
        &[("PACKYARD_SECURITY__ADMIN_PASSWORD", "pw"), ("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["127.0.0.1/32"]"#)],
    )?;
    server.wait_ready()?;
    for (name, host) in [
        ("allowed-ip", "127.0.0.1"),
        ("other-loopback", "127.0.0.2"),
        ("metadata", "169.254.169.254"),
        ("lan", "10.0.0.1"),
    ] {
        create(
            &server.public,
            serde_json::json!({"name": name, "format": "go", "type": "proxy",
                               "proxy": {"remote_url": format!("http://{host}:{port}/")}}),
        )?;
    }
    let list =
        |name: &str| status_of(ureq::get(&format!("{}/repository/{name}/example.com/m/@v/list", server.public)).call());
    assert_eq!(list("allowed-ip")?, (200, "v1.0.0\n".to_string()));
    for refused in ["other-loopback", "metadata", "lan"] {
        let (s, text) = list(refused)?;
        assert_eq!(s, 502, "{refused}: {text}");
        assert!(text.contains("loopback, private or link-local"), "{refused}: {text}");
        assert!(text.contains("proxy.allowed_networks"), "{refused}: {text}");
    }
    // A malformed allowlist is a startup error that names the key.
    let bad = common::process::run_to_end(
        dir.path(),
        &["config", "show"],
        &[("PACKYARD_PROXY__ALLOWED_NETWORKS", r#"["10.0.0.0/33"]"#)],
    )?;
    assert_ne!(bad.0, 0);
    assert!(bad.2.contains("proxy.allowed_networks") && bad.2.contains("10.0.0.0/33"), "{}", bad.2);
    Ok(())
}
