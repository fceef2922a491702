//! Web UI sign-in through an OpenID Connect provider (`[security.oidc]`): issuer discovery, the
//! authorization code flow with PKCE (S256), and the ID token checked — signature against the
//! provider's keys, issuer, audience, expiry, nonce — before a claim names the user and another
//! maps their groups to roles.
//!
//! Replicas are stateless: what one sign-in must remember between leaving for the provider and
//! coming back (state, PKCE verifier, nonce) travels in a cookie the web UI signs.

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
    metadata: tokio::sync::Mutex<Option<(Instant, CoreProviderMetadata)>>,
}

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
            metadata: tokio::sync::Mutex::new(None),
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
        let mut cached = self.metadata.lock().await;
        let fresh = cached.as_ref().is_some_and(|(at, _)| at.elapsed() < METADATA_TTL);
        if refresh || !fresh {
            match CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http).await {
                Ok(m) => *cached = Some((Instant::now(), m)),
                Err(e) => {
                    tracing::warn!(issuer = %self.issuer.as_str(), error = %describe(&e), "OIDC discovery failed");
                    if cached.is_none() {
                        return Err(OidcError::Unavailable);
                    }
                }
            }
        }
        let Some((_, metadata)) = cached.as_ref() else { return Err(OidcError::Unavailable) };
        let redirect =
            RedirectUrl::new(redirect_uri.to_string()).map_err(|e| OidcError::Refused(format!("redirect URL: {e}")))?;
        Ok(CoreClient::from_provider_metadata(
            metadata.clone(),
            ClientId::new(self.cfg.client_id.clone()),
            Some(self.client_secret.clone()),
        )
        .set_redirect_uri(redirect))
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
