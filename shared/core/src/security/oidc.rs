//! Web UI sign-in through an OpenID Connect provider (`[security.oidc]`): issuer discovery, the
//! authorization code flow with PKCE (S256), and the ID token checked — signature against the
//! provider's keys, issuer, audience, expiry, nonce — before a claim names the user and another
//! maps their groups to roles.
//!
//! Replicas are stateless: what one sign-in must remember between leaving for the provider and
//! coming back (state, PKCE verifier, nonce) travels in a cookie the web UI signs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, TokenResponse,
};
use packyard_model::directory::{OidcConfig, OIDC_SOURCE};

use super::external::{mapped_roles, ExternalIdentity};

/// How long the provider's discovery document and keys are used before they are read again
/// (sooner when an ID token names a key they lack).
const METADATA_TTL: Duration = Duration::from_secs(3600);

type Client =
    CoreClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointMaybeSet, EndpointMaybeSet>;

#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The provider could not be asked (down, refusing, a bad discovery document): a 503.
    #[error("the identity provider cannot be reached; try again shortly")]
    Unavailable,
    /// The provider's answer does not sign anyone in: a 401 with the reason.
    #[error("{0}")]
    Refused(String),
}

/// A sign-in on its way: where to send the browser, and what to remember until it comes back.
pub struct Started {
    pub url: String,
    pub state: String,
    pub pkce_verifier: String,
    pub nonce: String,
}

pub struct Oidc {
    cfg: OidcConfig,
    issuer: IssuerUrl,
    client_secret: ClientSecret,
    http: reqwest::Client,
    /// The discovery document and keys, and when they were fetched: read without waiting.
    metadata: std::sync::RwLock<Option<(Instant, Arc<CoreProviderMetadata>)>>,
    /// Held by the one discovery in flight. A slow provider delays only the sign-in that found
    /// the document stale; the others are served the cached one meanwhile.
    discovering: tokio::sync::Mutex<()>,
    /// [`METADATA_TTL`] (shorter in tests).
    ttl: Duration,
    /// When the last discovery failed: a stale document is used for [`RETRY_AFTER`] more
    /// rather than asked for again at every sign-in, and sign-ins that waited for a discovery
    /// that failed do not each repeat it.
    failed_at: std::sync::Mutex<Option<Instant>>,
}

/// How long after a failed discovery a stale document is used without asking again.
const RETRY_AFTER: Duration = Duration::from_secs(30);

impl Oidc {
    /// `None` when `security.oidc.issuer` is unset.
    pub fn new(cfg: &OidcConfig) -> anyhow::Result<Option<Self>> {
        let Some(issuer) = &cfg.issuer else { return Ok(None) };
        let issuer = IssuerUrl::new(issuer.clone())
            .map_err(|e| anyhow::anyhow!("bad value for key `security.oidc.issuer`: {e}"))?;
        let secret = match (&cfg.client_secret, &cfg.client_secret_file) {
            (Some(s), _) => s.clone(),
            (None, Some(file)) => std::fs::read_to_string(file)
                .map_err(|e| {
                    anyhow::anyhow!("bad value for key `security.oidc.client_secret_file`: {}: {e}", file.display())
                })?
                .trim_end_matches(['\r', '\n'])
                .to_string(),
            (None, None) => anyhow::bail!("missing value for key `security.oidc.client_secret`"),
        };
        if secret.is_empty() {
            anyhow::bail!("bad value for key `security.oidc.client_secret_file`: the file is empty");
        }
        let mut http = reqwest::Client::builder()
            // The provider's endpoints answer directly; a redirect is not followed (the
            // OpenID Connect client guidance), so a token request cannot be sent elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_millis(cfg.timeout_ms))
            .connect_timeout(Duration::from_millis(cfg.timeout_ms));
        if let Some(ca) = &cfg.ca_file {
            for cert in crate::certs::pem_certificates(ca)
                .map_err(|e| anyhow::anyhow!("bad value for key `security.oidc.ca_file`: {e}"))?
            {
                http = http.add_root_certificate(cert);
            }
        }
        Ok(Some(Self {
            cfg: cfg.clone(),
            issuer,
            client_secret: ClientSecret::new(secret),
            http: http.build()?,
            metadata: std::sync::RwLock::new(None),
            discovering: tokio::sync::Mutex::new(()),
            ttl: METADATA_TTL,
            failed_at: std::sync::Mutex::new(None),
        }))
    }

    pub fn button_label(&self) -> &str {
        &self.cfg.button_label
    }

    /// The issuer, the client and the claims it reads, as the administration shows them.
    pub fn described(&self) -> Vec<(&'static str, String)> {
        let c = &self.cfg;
        vec![
            ("Issuer", self.issuer.as_str().to_string()),
            ("Client id", c.client_id.clone()),
            ("Button", c.button_label.clone()),
            ("User name from", format!("the {} claim", c.username_claim)),
        ]
    }

    /// Whether the provider answers now: its discovery document fetched again (without the
    /// sign-ins' lock; the cached one stays) and how long that took, or why it failed.
    pub async fn health(&self) -> Result<Duration, String> {
        let started = Instant::now();
        match CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http).await {
            Ok(_) => Ok(started.elapsed()),
            Err(e) => Err(describe(&e)),
        }
    }

    /// The provider's metadata and keys, discovered at first use and again after
    /// [`METADATA_TTL`] or when `refresh` asks for it.
    async fn client(&self, redirect_uri: &str, refresh: bool) -> Result<Client, OidcError> {
        let metadata = self.metadata(refresh).await?;
        let redirect =
            RedirectUrl::new(redirect_uri.to_string()).map_err(|e| OidcError::Refused(format!("redirect URL: {e}")))?;
        Ok(CoreClient::from_provider_metadata(
            (*metadata).clone(),
            ClientId::new(self.cfg.client_id.clone()),
            Some(self.client_secret.clone()),
        )
        .set_redirect_uri(redirect))
    }

    fn cached(&self) -> Option<(Instant, Arc<CoreProviderMetadata>)> {
        self.metadata.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The discovery document: the cached one while fresh. A stale one is fetched again by one
    /// sign-in, outside any lock the others read under; they are served the cached document
    /// meanwhile. Without a document (the first sign-in), or when `refresh` needs a new one (an
    /// ID token names a key the cached keys lack), the caller waits for the discovery in flight
    /// and uses what it fetched.
    async fn metadata(&self, refresh: bool) -> Result<Arc<CoreProviderMetadata>, OidcError> {
        let cached = self.cached();
        let failed_at = || *self.failed_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, m)) = &cached {
            let resting = failed_at().is_some_and(|f| f.elapsed() < RETRY_AFTER);
            if !refresh && (at.elapsed() < self.ttl || resting) {
                return Ok(m.clone());
            }
        }
        let asked = Instant::now();
        let _discovering = match (&cached, refresh) {
            (Some((_, m)), false) => match self.discovering.try_lock() {
                Ok(held) => held,
                Err(_) => return Ok(m.clone()),
            },
            _ => self.discovering.lock().await,
        };
        // A discovery that ended while this one waited for its turn: what it fetched, or (it
        // failed) the document there is.
        if let Some((at, m)) = self.cached() {
            if at >= asked {
                return Ok(m);
            }
        }
        if failed_at().is_some_and(|f| f >= asked) {
            return self.cached().map(|(_, m)| m).ok_or(OidcError::Unavailable);
        }
        match CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http).await {
            Ok(m) => {
                let m = Arc::new(m);
                *self.metadata.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((Instant::now(), m.clone()));
                *self.failed_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                Ok(m)
            }
            Err(e) => {
                tracing::warn!(issuer = %self.issuer.as_str(), error = %describe(&e), "OIDC discovery failed");
                *self.failed_at.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
                // The stale document is still the best there is (asked again at the next sign-in).
                self.cached().map(|(_, m)| m).ok_or(OidcError::Unavailable)
            }
        }
    }

    /// The provider's authorization URL for a new sign-in coming back to `redirect_uri`.
    pub async fn start(&self, redirect_uri: &str) -> Result<Started, OidcError> {
        let client = self.client(redirect_uri, false).await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random)
            .set_pkce_challenge(challenge);
        for scope in self.cfg.scopes.iter().filter(|s| s.as_str() != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.url();
        Ok(Started {
            url: url.to_string(),
            state: state.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
            nonce: nonce.secret().clone(),
        })
    }

    /// Exchanges the code the provider sent back for tokens (with the PKCE verifier), checks
    /// the ID token, and says who signed in.
    pub async fn finish(
        &self,
        redirect_uri: &str,
        code: &str,
        pkce_verifier: &str,
        nonce: &str,
    ) -> Result<ExternalIdentity, OidcError> {
        let client = self.client(redirect_uri, false).await?;
        let request = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| OidcError::Refused(format!("the provider has no token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_string()));
        let response = request.request_async(&self.http).await.map_err(|e| {
            use openidconnect::RequestTokenError;
            match e {
                RequestTokenError::ServerResponse(r) => {
                    OidcError::Refused(format!("the identity provider refused the sign-in: {r}"))
                }
                other => {
                    tracing::warn!(issuer = %self.issuer.as_str(), error = %describe(&other), "OIDC token request failed");
                    OidcError::Unavailable
                }
            }
        })?;
        let id_token =
            response.id_token().ok_or_else(|| OidcError::Refused("the provider sent no ID token".into()))?.clone();
        let nonce = Nonce::new(nonce.to_string());
        match id_token.claims(&client.id_token_verifier(), &nonce) {
            Ok(_) => {}
            // A key the cached set lacks: the provider rotated its keys; read them again once.
            Err(ClaimsVerificationError::SignatureVerification(_)) => {
                let client = self.client(redirect_uri, true).await?;
                id_token
                    .claims(&client.id_token_verifier(), &nonce)
                    .map_err(|e| OidcError::Refused(format!("the ID token is not valid: {e}")))?;
            }
            Err(e) => return Err(OidcError::Refused(format!("the ID token is not valid: {e}"))),
        }
        self.identity(&id_token)
    }

    /// The user a checked ID token names: its claims read from the token's payload (whose
    /// signature was just verified), so any claim can name the user or list the groups.
    fn identity(&self, id_token: &CoreIdToken) -> Result<ExternalIdentity, OidcError> {
        let jwt = id_token.to_string();
        let payload = jwt.split('.').nth(1).ok_or_else(|| OidcError::Refused("the ID token is malformed".into()))?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload.trim_end_matches('='))
            .map_err(|_| OidcError::Refused("the ID token is malformed".into()))?;
        let claims: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|_| OidcError::Refused("the ID token is malformed".into()))?;
        let text = |name: &str| claims.get(name).and_then(|v| v.as_str()).map(str::to_string).filter(|s| !s.is_empty());
        let username = text(&self.cfg.username_claim).ok_or_else(|| {
            OidcError::Refused(format!(
                "the ID token has no {:?} claim to name the user (security.oidc.username_claim)",
                self.cfg.username_claim
            ))
        })?;
        let groups: Vec<String> = match claims.get(&self.cfg.groups_claim) {
            Some(serde_json::Value::Array(values)) => {
                values.iter().filter_map(|v| v.as_str()).map(str::to_string).collect()
            }
            Some(serde_json::Value::String(one)) => vec![one.clone()],
            _ => Vec::new(),
        };
        if self.cfg.username_claim == "email" && claims.get("email_verified") != Some(&serde_json::Value::Bool(true)) {
            return Err(OidcError::Refused(
                "the provider has not verified the email address that names the user".into(),
            ));
        }
        // The account, not just its name: a name given to another account later is refused.
        let subject = text("sub").ok_or_else(|| OidcError::Refused("the ID token has no sub claim".into()))?;
        let issuer = text("iss").unwrap_or_default();
        let roles = mapped_roles(&self.cfg.group_roles, &self.cfg.default_roles, &groups);
        Ok(ExternalIdentity {
            username,
            source: OIDC_SOURCE.to_string(),
            external_id: Some(format!("{issuer} {subject}")),
            email: text("email"),
            display_name: text("name"),
            groups,
            roles,
        })
    }
}

/// An error with its causes, for the log.
fn describe(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex};

    /// A provider on loopback whose discovery document can be held back until released.
    struct Provider {
        url: String,
        hold: Arc<AtomicBool>,
        released: Arc<(Mutex<bool>, Condvar)>,
        discoveries: Arc<AtomicUsize>,
    }

    impl Provider {
        fn start() -> std::io::Result<Self> {
            let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
            let url = format!("http://{}", listener.local_addr()?);
            let p = Self {
                url: url.clone(),
                hold: Arc::new(AtomicBool::new(false)),
                released: Arc::new((Mutex::new(false), Condvar::new())),
                discoveries: Arc::new(AtomicUsize::new(0)),
            };
            let (hold, released, discoveries) = (p.hold.clone(), p.released.clone(), p.discoveries.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming().flatten() {
                    let (url, hold, released, discoveries) =
                        (url.clone(), hold.clone(), released.clone(), discoveries.clone());
                    std::thread::spawn(move || -> std::io::Result<()> {
                        let mut reader = BufReader::new(conn.try_clone()?);
                        let mut line = String::new();
                        reader.read_line(&mut line)?;
                        let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                        loop {
                            let mut header = String::new();
                            if reader.read_line(&mut header)? == 0 || header == "\r\n" {
                                break;
                            }
                        }
                        let body = if path == "/.well-known/openid-configuration" {
                            discoveries.fetch_add(1, Ordering::SeqCst);
                            if hold.load(Ordering::SeqCst) {
                                let (lock, cv) = &*released;
                                let mut done = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                                while !*done {
                                    done = cv.wait(done).unwrap_or_else(std::sync::PoisonError::into_inner);
                                }
                            }
                            serde_json::json!({
                                "issuer": url,
                                "authorization_endpoint": format!("{url}/authorize"),
                                "jwks_uri": format!("{url}/jwks"),
                                "response_types_supported": ["code"],
                                "subject_types_supported": ["public"],
                                "id_token_signing_alg_values_supported": ["RS256"],
                            })
                            .to_string()
                        } else {
                            r#"{"keys":[]}"#.to_string()
                        };
                        let mut out = conn;
                        write!(
                            out,
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        )
                    });
                }
            });
            Ok(p)
        }

        fn release(&self) {
            let (lock, cv) = &*self.released;
            *lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
            cv.notify_all();
        }
    }

    const REDIRECT: &str = "http://127.0.0.1:1/ui/oidc/callback";

    /// A stale discovery document is fetched again by one sign-in while the others are served
    /// the cached one: a provider that hangs delays no one else (it held a lock over the fetch
    /// before #44).
    #[tokio::test]
    async fn a_slow_discovery_delays_no_other_sign_in() -> anyhow::Result<()> {
        let p = Provider::start()?;
        let cfg = OidcConfig {
            issuer: Some(p.url.clone()),
            client_id: "packyard".into(),
            client_secret: Some("client-secret".into()),
            ..OidcConfig::default()
        };
        let Some(mut oidc) = Oidc::new(&cfg)? else { anyhow::bail!("no provider configured") };
        let first = oidc.start(REDIRECT).await.map_err(|e| anyhow::anyhow!("first sign-in: {e}"))?;
        assert!(first.url.starts_with(&format!("{}/authorize?", p.url)), "{}", first.url);
        assert_eq!(p.discoveries.load(Ordering::SeqCst), 1);
        // The document is stale from now on, and the provider hangs on the next discovery.
        oidc.ttl = Duration::ZERO;
        p.hold.store(true, Ordering::SeqCst);
        let oidc = Arc::new(oidc);
        let refreshing = tokio::spawn({
            let oidc = oidc.clone();
            async move { oidc.start(REDIRECT).await.map(|s| s.url) }
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while p.discoveries.load(Ordering::SeqCst) < 2 {
            assert!(Instant::now() < deadline, "the stale document was not fetched again");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // While that discovery hangs, other sign-ins go on with the cached document.
        for n in 0..3 {
            let other = tokio::time::timeout(Duration::from_secs(5), oidc.start(REDIRECT)).await;
            assert!(
                matches!(&other, Ok(Ok(s)) if s.url.starts_with(&p.url)),
                "sign-in {n} waited behind the discovery"
            );
        }
        assert_eq!(p.discoveries.load(Ordering::SeqCst), 2, "one discovery at a time");
        p.release();
        let url = refreshing.await?.map_err(|e| anyhow::anyhow!("the refreshing sign-in: {e}"))?;
        assert!(url.starts_with(&p.url), "{url}");
        Ok(())
    }
}
