//! Certificate authorities an operator adds for the servers Packyard calls — upstreams behind a
//! private CA (`proxy.ca_certificates`), an LDAP directory's `ca_file`, the OIDC provider's —
//! read from PEM files the one way, beside the public roots.

use std::path::Path;
use std::sync::Arc;

/// The certificates of a PEM file, for a reqwest client; a file without one is an error.
pub fn pem_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match reqwest::Certificate::from_pem_bundle(&pem) {
        Ok(certs) if !certs.is_empty() => Ok(certs),
        _ => Err(format!("{} holds no PEM certificate", path.display())),
    }
}

/// A rustls client configuration trusting the public roots and `ca_file`'s certificates,
/// verified with ring (never a second crypto provider).
pub fn rustls_client_config(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        use rustls::pki_types::pem::PemObject;
        let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut added = 0;
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
            roots.add(cert).map_err(|e| format!("{}: {e}", path.display()))?;
            added += 1;
        }
        if added == 0 {
            return Err(format!("{} holds no PEM certificate", path.display()));
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
