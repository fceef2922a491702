//! HTTPS on the public listener (`server.tls`): rustls with ring, HTTP/1.1 and HTTP/2 by ALPN,
//! and a certificate that is read again when its files change.
//!
//! `Certificates` is the rustls certificate resolver: every handshake takes the current
//! certificate and key from it. A task started with the server stats both files every
//! `server.tls.reload_check_ms`; when either changed it reads both, checks that the key is the
//! certificate's, and swaps them in. A pair that does not load (a half-written rotation, a key
//! of another certificate) is logged and the old pair keeps serving; the next change to either
//! file is tried again. Connections already open keep the certificate they shook hands with.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// What a file looked like when it was last read: a change of either means read again.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp { modified: meta.modified().ok(), len: meta.len() })
}

/// The server's certificate and key, swapped when their files change.
#[derive(Debug)]
pub struct Certificates {
    certificate: PathBuf,
    private_key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    seen: RwLock<(Option<Stamp>, Option<Stamp>)>,
}

impl Certificates {
    /// Reads both files once; an error names the key and says what is wrong with the file.
    pub fn load(certificate: &Path, private_key: &Path) -> anyhow::Result<Arc<Self>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let seen = (stamp(certificate), stamp(private_key));
        let pair = read_pair(certificate, private_key, &provider)?;
        Ok(Arc::new(Self {
            certificate: certificate.to_path_buf(),
            private_key: private_key.to_path_buf(),
            provider,
            current: RwLock::new(Arc::new(pair)),
            seen: RwLock::new(seen),
        }))
    }

    /// The rustls configuration of a listener that serves these certificates: TLS 1.2 and 1.3,
    /// no client certificates. actix adds the ALPN protocols (`h2`, `http/1.1`).
    pub fn server_config(self: &Arc<Self>) -> anyhow::Result<rustls::ServerConfig> {
        let config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .context("server.tls: the TLS protocol versions")?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        Ok(config)
    }

    /// Reads the files again if either changed since they were last read; true when a new pair
    /// was swapped in.
    pub fn reload_if_changed(&self) -> bool {
        let now = (stamp(&self.certificate), stamp(&self.private_key));
        let changed = self.seen.read().map(|seen| *seen != now).unwrap_or(true);
        if !changed {
            return false;
        }
        if let Ok(mut seen) = self.seen.write() {
            *seen = now;
        }
        match read_pair(&self.certificate, &self.private_key, &self.provider) {
            Ok(pair) => {
                if let Ok(mut current) = self.current.write() {
                    *current = Arc::new(pair);
                }
                tracing::info!(certificate = %self.certificate.display(), "server.tls: loaded the changed certificate");
                true
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "server.tls: the changed files do not load; still serving the previous certificate");
                false
            }
        }
    }

    /// Checks the files every `every` for as long as the process runs.
    pub fn spawn_reloader(self: &Arc<Self>, every: Duration) {
        let me = self.clone();
        actix_web::rt::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let me = me.clone();
                // Reading files is blocking work: off the runtime's threads.
                let _ = actix_web::rt::task::spawn_blocking(move || me.reload_if_changed()).await;
            }
        });
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.clone())
    }
}

/// Reads and checks a certificate chain and its key.
fn read_pair(certificate: &Path, private_key: &Path, provider: &CryptoProvider) -> anyhow::Result<CertifiedKey> {
    let pem = std::fs::read(certificate)
        .with_context(|| format!("server.tls.certificate: cannot read {}", certificate.display()))?;
    let chain = CertificateDer::pem_slice_iter(&pem).collect::<Result<Vec<_>, _>>().map_err(|e| {
        anyhow::anyhow!("server.tls.certificate: {} is not a PEM certificate file ({e})", certificate.display())
    })?;
    anyhow::ensure!(
        !chain.is_empty(),
        "server.tls.certificate: {} holds no certificate (no \"BEGIN CERTIFICATE\" block)",
        certificate.display()
    );
    let pem = std::fs::read(private_key)
        .with_context(|| format!("server.tls.private_key: cannot read {}", private_key.display()))?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        anyhow::anyhow!(
            "server.tls.private_key: {} holds no private key in PEM (PKCS#8, PKCS#1 or SEC1): {e}",
            private_key.display()
        )
    })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        anyhow::anyhow!(
            "server.tls: the key in {} does not fit the certificate in {} ({e})",
            private_key.display(),
            certificate.display()
        )
    })
}

/// Where the redirect listener sends a request: `server.public_url` when set, otherwise the
/// host the client asked for at the HTTPS listener's port.
#[derive(Clone, Debug)]
pub struct RedirectTo {
    public_url: Option<String>,
    port: u16,
}

impl RedirectTo {
    pub fn new(public_url: Option<&str>, port: u16) -> Self {
        let public_url = public_url
            .and_then(|u| packyard_model::config::ServerConfig::parse_public_url(u).ok())
            .map(|(origin, prefix)| format!("{origin}{prefix}"));
        Self { public_url, port }
    }

    /// The `Location` for a request to `host` (its `Host` header) and `path_and_query`; `None`
    /// when the host is not one (a redirect must not point anywhere a header says).
    pub fn location(&self, host: Option<&str>, path_and_query: &str) -> Option<String> {
        if let Some(base) = &self.public_url {
            return Some(format!("{base}{path_and_query}"));
        }
        let host = host?.trim();
        // The name without the port: `[::1]:80` → `[::1]`, `repo.example.com:80` → `repo.example.com`.
        let name = if host.starts_with('[') { &host[..=host.find(']')?] } else { host.split(':').next()? };
        if !crate::frontage::plausible_host(name) {
            return None;
        }
        Some(match self.port {
            443 => format!("https://{name}{path_and_query}"),
            port => format!("https://{name}:{port}{path_and_query}"),
        })
    }
}

/// The redirect listener's app: every method and path answers 308 (which keeps the method and
/// body, so an upload is sent again over HTTPS), or 400 without a usable `Host`.
pub fn redirect_app(
    to: RedirectTo,
) -> actix_web::App<
    impl actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Response = actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    use actix_web::{http::header, web, HttpRequest, HttpResponse};
    actix_web::App::new().app_data(web::Data::new(to)).default_service(web::to(
        |req: HttpRequest, to: web::Data<RedirectTo>| async move {
            let host = req.headers().get(header::HOST).and_then(|h| h.to_str().ok());
            let path = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
            match to.location(host, path) {
                Some(location) => HttpResponse::PermanentRedirect()
                    .insert_header((header::LOCATION, location.clone()))
                    .content_type("text/plain; charset=utf-8")
                    .body(format!("this server speaks HTTPS: {location}\n")),
                None => HttpResponse::BadRequest()
                    .content_type("text/plain; charset=utf-8")
                    .body("this server speaks HTTPS; the request has no usable Host header to redirect to\n"),
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::RedirectTo;

    #[test]
    fn a_redirect_keeps_the_host_and_path_and_takes_the_https_port() {
        let to = RedirectTo::new(None, 8443);
        assert_eq!(
            to.location(Some("repo.example.com:8080"), "/repository/go/@v/list?x=1").as_deref(),
            Some("https://repo.example.com:8443/repository/go/@v/list?x=1")
        );
        assert_eq!(to.location(Some("[::1]:8080"), "/").as_deref(), Some("https://[::1]:8443/"));
        assert_eq!(RedirectTo::new(None, 443).location(Some("repo"), "/a").as_deref(), Some("https://repo/a"));
        assert_eq!(to.location(Some("evil.example/x"), "/"), None);
        assert_eq!(to.location(None, "/"), None);
        let behind = RedirectTo::new(Some("https://repo.example.com/packyard"), 8443);
        assert_eq!(
            behind.location(Some("other:80"), "/repository/a").as_deref(),
            Some("https://repo.example.com/packyard/repository/a")
        );
    }
}
