//! The security service: turns credentials into a [`Principal`] (cached), looks up repository
//! records (cached), keeps the caches in step with the watermarks, and manages users, roles and
//! tokens with audit entries.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use super::cache::SecurityCache;
use super::external::{usable_username, ExternalIdentity};
use super::keystore::KeyStore;
use super::ldap::{Directories, DirectoryError, Recheck};
use super::model::{Action, Principal, Privilege, TokenScope};
use super::oidc::Oidc;
use super::throttle::LoginThrottle;
use super::tokens;
use crate::auth::{hash_password, verify_password};
use packyard_model::config::SecurityConfig;
use packyard_model::repos::Repository;
use packyard_store::db::users::{ExternalUser, Synced};
use packyard_store::db::{now_ms, Db, DbError};
use packyard_store::metrics::Metrics;

pub use packyard_model::security::ADMIN_ROLE;
pub const ANONYMOUS_ROLE: &str = "anonymous";

/// Credentials as presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    Basic {
        username: String,
        password: String,
    },
    Bearer(String),
    /// A web UI session cookie: accepted by the UI only.
    Session(String),
}

#[derive(Debug, thiserror::Error)]
pub enum AuthFailure {
    /// Bad, expired or revoked: a 401, never anonymous.
    #[error("{0}")]
    Invalid(&'static str),
    #[error("too many failed logins; retry in {} s", .0.as_millis().div_ceil(1000).max(1))]
    Throttled(Duration),
    /// No directory could answer for a user who is not local: a 503.
    #[error("{0}")]
    Unavailable(&'static str),
    #[error(transparent)]
    Db(#[from] DbError),
}

const GONE_MESSAGE: &str = "the token's user is disabled or removed in the directory";
const GONE: AuthFailure = AuthFailure::Invalid(GONE_MESSAGE);

/// Why a password was not changed.
#[derive(Debug, thiserror::Error)]
pub enum PasswordChangeError {
    #[error("the current password is wrong")]
    WrongCurrent,
    #[error("too many wrong passwords; retry in {} s", .0.as_millis().div_ceil(1000).max(1))]
    Throttled(Duration),
    #[error(transparent)]
    Hash(#[from] crate::auth::AuthError),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// How a token was presented.
#[derive(Clone, Copy)]
enum Presented<'a> {
    Bearer,
    Basic(&'a str),
    Session,
}

type LoginTurn = Arc<tokio::sync::Mutex<()>>;

pub struct Security {
    db: Db,
    /// One password check at a time per (user, address): concurrent guesses queue behind the
    /// throttle instead of all passing it, and concurrent logins of the same user wait for the
    /// first one's cached decision instead of each running argon2.
    login_locks: std::sync::Mutex<std::collections::HashMap<(String, IpAddr), LoginTurn>>,
    pub cache: SecurityCache,
    throttle: LoginThrottle,
    pub keystore: Arc<KeyStore>,
    /// LDAP directories asked for names that are not local users.
    pub directories: Directories,
    /// The OpenID Connect provider of the web UI's single sign-on, when configured.
    pub oidc: Option<Oidc>,
    pub anonymous_read: bool,
    pub watermark_ttl: Duration,
}

fn all_actions() -> Vec<Action> {
    Action::ALL.to_vec()
}

impl Security {
    pub fn new(
        db: Db,
        cfg: &SecurityConfig,
        secret: &str,
        metrics: Arc<Metrics>,
        redis: Option<Arc<crate::events::Redis>>,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            throttle: LoginThrottle::new(
                cfg.login_max_failures,
                Duration::from_secs(cfg.login_window_secs),
                db.clone(),
                redis,
            ),
            db,
            login_locks: std::sync::Mutex::new(std::collections::HashMap::new()),
            cache: SecurityCache::new(secret, Duration::from_secs(cfg.auth_cache_ttl_secs), metrics),
            keystore: Arc::new(KeyStore::new(secret)),
            directories: Directories::new(&cfg.ldap)?,
            oidc: Oidc::new(&cfg.oidc)?,
            anonymous_read: cfg.anonymous_read,
            watermark_ttl: Duration::from_millis(cfg.watermark_ttl_ms),
        })
    }

    /// Creates the built-in roles when missing: `admin` (everything on `*`) and `anonymous`
    /// (`read` on `*`, further limited by `security.anonymous_read` and each repository's flag).
    pub async fn ensure_builtin_roles(&self) -> Result<(), DbError> {
        let builtins = [
            (ADMIN_ROLE, "Every action on every repository, and the admin API", all_actions()),
            (ANONYMOUS_ROLE, "What callers without credentials may do (read only)", vec![Action::Read]),
        ];
        for (name, description, actions) in builtins {
            if self.db.role_by_name(name).await?.is_none() {
                let privileges = vec![Privilege { repositories: "*".into(), actions, ..Default::default() }];
                match self.db.insert_role(name, description, true, &privileges).await {
                    Ok(()) | Err(DbError::Conflict(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// The caller's principal: anonymous without credentials, otherwise the proven user.
    pub async fn principal(&self, creds: Option<&Credentials>, addr: IpAddr) -> Result<Arc<Principal>, AuthFailure> {
        match creds {
            None => Ok(self.anonymous().await?),
            Some(Credentials::Bearer(token)) => self.token_principal(token, Presented::Bearer).await,
            Some(Credentials::Session(token)) => self.token_principal(token, Presented::Session).await,
            Some(Credentials::Basic { username, password }) if tokens::parse(password).is_some() => {
                self.token_principal(password, Presented::Basic(username)).await
            }
            Some(Credentials::Basic { username, password }) => self.password_principal(username, password, addr).await,
        }
    }

    /// The principal of a request without credentials (cached per epoch).
    pub async fn anonymous(&self) -> Result<Arc<Principal>, DbError> {
        if let Some(p) = self.cache.anonymous() {
            return Ok(p);
        }
        let epoch = self.cache.security_epoch();
        let mut privileges = self.db.role_by_name(ANONYMOUS_ROLE).await?.map(|r| r.privileges).unwrap_or_default();
        self.db.resolve_selectors(&mut privileges).await?;
        let p = Arc::new(Principal::Anonymous { privileges });
        self.cache.store_anonymous(p.clone(), epoch);
        Ok(p)
    }

    async fn password_principal(
        &self,
        username: &str,
        password: &str,
        addr: IpAddr,
    ) -> Result<Arc<Principal>, AuthFailure> {
        let mut material = Vec::with_capacity(username.len() + password.len() + 8);
        material.extend_from_slice(b"basic\0");
        material.extend_from_slice(username.as_bytes());
        material.push(0);
        material.extend_from_slice(password.as_bytes());
        let key = self.cache.credential_key(&material);
        // A cached decision is a password already proven: no argon2, and no throttle read —
        // unless this process is holding the name at this address to a delay, when a proven
        // password is refused like any other (else a guesser would learn which guess is right).
        if let Some(p) = self.cache.decision(&key) {
            if let Some(wait) = self.throttle.delayed_here(username, addr) {
                return Err(AuthFailure::Throttled(wait));
            }
            return Ok(p);
        }
        // Throttled and queued by the name without regard to case: a directory matches `Alice`
        // and `alice` alike, so the spellings must not each get their own failures.
        let folded = username.to_lowercase();
        let lock = {
            let mut locks = self.login_locks.lock().map_err(|_| AuthFailure::Invalid("login state unavailable"))?;
            if locks.len() > 10_000 {
                locks.retain(|_, l| Arc::strong_count(l) > 1);
            }
            locks.entry((folded.clone(), addr)).or_default().clone()
        };
        let _turn = lock.lock().await;
        if let Some(p) = self.cache.decision(&key) {
            if let Some(wait) = self.throttle.delayed_here(username, addr) {
                return Err(AuthFailure::Throttled(wait));
            }
            return Ok(p);
        }
        let attempt = self.throttle.check(&folded, addr).await.map_err(AuthFailure::Throttled)?;
        let epoch = self.cache.security_epoch();
        let user = match self.db.user_by_name(username).await? {
            // A local user signs in with the password stored here, directories or not.
            Some(u) if u.is_local() => {
                let (pw, hash) = (password.to_string(), u.password_hash.clone());
                let ok = tokio::task::spawn_blocking(move || verify_password(&pw, &hash)).await.unwrap_or(false);
                ok.then_some((u.id, u.username))
            }
            // A directory's user is asked of that directory only; a new name, of each in order.
            // Boxed: a directory's connection is a large, rare state that would otherwise grow
            // every request's future (api's `the_request_future_stays_small`).
            known if !self.directories.is_empty() && known.as_ref().is_none_or(|u| u.source.starts_with("ldap:")) => {
                let owner = known.map(|u| u.source);
                Box::pin(self.directory_sign_in(username, password, owner)).await?
            }
            _ => {
                let pw = password.to_string();
                let _ = tokio::task::spawn_blocking(move || verify_password(&pw, crate::auth::DUMMY_HASH)).await;
                None
            }
        };
        let Some((id, username)) = user else {
            self.throttle.record_failure(&attempt).await;
            return Err(AuthFailure::Invalid("invalid username or password"));
        };
        self.throttle.record_success(&attempt).await;
        let privileges = self.db.privileges_of(id).await?;
        let p = Arc::new(Principal::User { id, username, privileges, token: None });
        self.cache.store_decision(key, p.clone(), epoch);
        Ok(p)
    }

    /// A password checked by the directories, and the user recorded: their id and name here.
    /// `owner`: the source of the row of exactly this name, if there is one.
    async fn directory_sign_in(
        &self,
        username: &str,
        password: &str,
        owner: Option<String>,
    ) -> Result<Option<(i64, String)>, AuthFailure> {
        // The name as recorded may be spelled otherwise (`JDoe` typed, `jdoe` stored).
        let owner = match owner {
            Some(o) => Some(o),
            None => {
                let sources = self.db.directory_sources_of(username).await?;
                if sources.len() == 1 {
                    sources.into_iter().next()
                } else {
                    None
                }
            }
        };
        match self.directories.authenticate(username, password, owner.as_deref()).await {
            Ok(Some(found)) => Ok(self.remember(&found).await?.map(|id| (id, found.username))),
            Ok(None) | Err(DirectoryError::Refused) => Ok(None),
            Err(DirectoryError::Unavailable) => {
                Err(AuthFailure::Unavailable("the user directory cannot be reached; try again shortly"))
            }
        }
    }

    /// Records what a directory or the identity provider said of a user (their row,
    /// attributes and mapped roles). `None`: the name is taken here by a user from elsewhere,
    /// who is someone else, or cannot be a user name here.
    async fn remember(&self, found: &ExternalIdentity) -> Result<Option<i64>, DbError> {
        if !usable_username(&found.username) {
            tracing::warn!(user = %found.username, source = %found.source, "sign-in refused: the name cannot be a Packyard user name ([A-Za-z0-9._@-], 1 to 64)");
            return Ok(None);
        }
        let user = ExternalUser {
            username: &found.username,
            source: &found.source,
            external_id: found.external_id.as_deref(),
            email: found.email.as_deref(),
            display_name: found.display_name.as_deref(),
            roles: &found.roles,
        };
        match self.db.sync_external_user(&user).await? {
            Synced::User { id, unknown_roles } => {
                if !unknown_roles.is_empty() {
                    tracing::warn!(user = %found.username, source = %found.source, roles = ?unknown_roles, "the groups map to roles that do not exist here");
                }
                Ok(Some(id))
            }
            Synced::NameTaken(why) => {
                tracing::warn!(user = %found.username, source = %found.source, "sign-in refused: {why}");
                Ok(None)
            }
        }
    }

    /// Signs a user in to the web UI: the password checked as a Basic login is (the same
    /// throttle), then a session token of its own kind, valid for `ttl`. Returns the cookie's
    /// value and the user's principal.
    pub async fn start_session(
        &self,
        username: &str,
        password: &str,
        addr: IpAddr,
        ttl: Duration,
    ) -> Result<(String, Arc<Principal>), AuthFailure> {
        if tokens::parse(password).is_some() {
            return Err(AuthFailure::Invalid("sign in with your password, not a token"));
        }
        let principal = self.password_principal(username, password, addr).await?;
        let Principal::User { id, .. } = principal.as_ref() else {
            return Err(AuthFailure::Invalid("invalid username or password"));
        };
        let new = tokens::generate();
        let expires_at = now_ms() + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
        self.db.insert_session(&new.id, *id, &new.secret_hash, expires_at).await?;
        Ok((new.token, principal))
    }

    /// Starts a web UI session for a user the OIDC provider vouched for: their row and roles
    /// recorded as for a directory user, then a session token like a password sign-in's.
    pub async fn start_external_session(
        &self,
        identity: &ExternalIdentity,
        ttl: Duration,
    ) -> Result<String, AuthFailure> {
        let Some(id) = self.remember(identity).await? else {
            return Err(AuthFailure::Invalid("that name belongs to another user here; ask an administrator"));
        };
        let new = tokens::generate();
        let expires_at = now_ms() + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
        self.db.insert_session(&new.id, id, &new.secret_hash, expires_at).await?;
        Ok(new.token)
    }

    /// Ends the session whose cookie is `token` (signing out); every replica forgets it. A cookie
    /// whose secret is not the session's ends nothing. Whether a session ended.
    pub async fn end_session(&self, token: &str) -> Result<bool, DbError> {
        let Some((id, secret)) = tokens::parse(token) else { return Ok(false) };
        let ended = self.db.delete_session(id, &tokens::hash_secret(secret)).await?;
        if ended {
            self.changed_locally();
        }
        Ok(ended)
    }

    /// A local user's password changed. `current`, when given, is checked first — through the
    /// login throttle, as a sign-in is, keyed on the user and `addr` — so a stolen token or an
    /// open session cannot guess it at argon2 speed. The user's web UI sessions end with the old
    /// password, all but `keep` (the session the change is made from). Returns how many ended.
    pub async fn change_password(
        &self,
        user: &packyard_store::db::users::UserRecord,
        current: Option<&str>,
        new: &str,
        keep: Option<&str>,
        addr: IpAddr,
    ) -> Result<u64, PasswordChangeError> {
        if let Some(current) = current {
            let folded = user.username.to_lowercase();
            let attempt = self.throttle.check(&folded, addr).await.map_err(PasswordChangeError::Throttled)?;
            if !self.verify(current, &user.password_hash).await {
                self.throttle.record_failure(&attempt).await;
                return Err(PasswordChangeError::WrongCurrent);
            }
            self.throttle.record_success(&attempt).await;
        }
        let hash = self.hash(new).await?;
        let ended = self.db.replace_password(user.id, &hash, keep).await?;
        self.changed_locally();
        Ok(ended)
    }

    async fn token_principal(&self, token: &str, presented: Presented<'_>) -> Result<Arc<Principal>, AuthFailure> {
        const BAD: AuthFailure = AuthFailure::Invalid("invalid, expired or revoked token");
        let Some((id, secret)) = tokens::parse(token) else { return Err(BAD) };
        let basic_user = match presented {
            Presented::Basic(u) => Some(u),
            _ => None,
        };
        let session = matches!(presented, Presented::Session);
        let mut material = Vec::with_capacity(token.len() + 64);
        material.extend_from_slice(if session { b"session\0" } else { b"token\0" });
        material.extend_from_slice(basic_user.unwrap_or("").as_bytes());
        material.push(0);
        material.extend_from_slice(token.as_bytes());
        let key = self.cache.credential_key(&material);
        let now = now_ms();
        let principal = match self.cache.decision(&key) {
            Some(p) => p,
            None => {
                let epoch = self.cache.security_epoch();
                let Some(rec) = self.db.token_by_id(id).await? else { return Err(BAD) };
                if rec.revoked_at.is_some() || !tokens::digest_eq(&tokens::hash_secret(secret), &rec.secret_hash) {
                    return Err(BAD);
                }
                if rec.session != session {
                    // A session cookie is no API token, and an API token no session.
                    return Err(BAD);
                }
                if basic_user.is_some_and(|u| !u.eq_ignore_ascii_case(&rec.username)) {
                    return Err(AuthFailure::Invalid("the token belongs to another user"));
                }
                if rec.user_source.starts_with("ldap:") {
                    if self.cache.refused(&key) {
                        return Err(GONE);
                    }
                    if let Err(e) = Box::pin(self.recheck_directory_user(&rec.user_source, &rec.username)).await {
                        if matches!(e, AuthFailure::Invalid(m) if m == GONE_MESSAGE) {
                            self.cache.store_refusal(key, epoch);
                        }
                        return Err(e);
                    }
                }
                let privileges = self.db.privileges_of(rec.user_id).await?;
                let p = Arc::new(Principal::User {
                    id: rec.user_id,
                    username: rec.username,
                    privileges,
                    token: Some(TokenScope {
                        token_id: rec.id,
                        repositories: rec.repositories,
                        actions: rec.actions,
                        expires_at: rec.expires_at,
                        session: rec.session,
                    }),
                });
                self.cache.store_decision(key, p.clone(), epoch);
                p
            }
        };
        if let Principal::User { token: Some(t), .. } = principal.as_ref() {
            if t.expires_at.is_some_and(|e| e <= now) {
                self.cache.forget_decision(&key);
                return Err(BAD);
            }
        }
        Ok(principal)
    }

    /// A directory user's token or session, on a cache miss: the directory is asked whether the
    /// user is still there (and in which groups), so a user disabled there loses access once
    /// the cached decision expires. When the directory cannot be reached the user's last known
    /// roles stand (tokens keep builds running through a directory outage), which is logged.
    async fn recheck_directory_user(&self, source: &str, username: &str) -> Result<(), AuthFailure> {
        match self.directories.recheck(source, username).await {
            Ok(Recheck::Present(found)) => {
                if self.remember(&found).await?.is_none() {
                    return Err(AuthFailure::Invalid("the token's user is no longer known to its directory"));
                }
                Ok(())
            }
            Ok(Recheck::Gone) => {
                tracing::info!(user = %username, source, "token refused: the directory no longer lists the user");
                Err(GONE)
            }
            Ok(Recheck::Unknowable) => Ok(()),
            Err(DirectoryError::Unavailable | DirectoryError::Refused) => {
                tracing::warn!(user = %username, source, "directory unreachable; the token is accepted with the user's last known roles");
                Ok(())
            }
        }
    }

    /// A repository record, from the cache when warm.
    pub async fn repository(&self, name: &str) -> Result<Option<Arc<Repository>>, DbError> {
        if let Some(r) = self.cache.repository(name) {
            return Ok(Some(r));
        }
        let epoch = self.cache.repositories_epoch();
        let Some(repo) = self.db.repository_by_name(name).await? else { return Ok(None) };
        let repo = Arc::new(repo);
        self.cache.store_repository(repo.clone(), epoch);
        Ok(Some(repo))
    }

    /// Records who did what; a failure is logged, never fails the action it describes.
    pub async fn audit(
        &self,
        actor: &str,
        addr: Option<IpAddr>,
        action: &str,
        target: &str,
        detail: serde_json::Value,
    ) {
        let address = addr.map(|a| a.to_string()).unwrap_or_default();
        if let Err(e) = self.db.insert_audit(actor, &address, action, target, &detail.to_string()).await {
            tracing::error!(error = %e, actor, action, target, "cannot write the audit log");
        }
    }

    /// `packyard-api admin reset-password`: a new generated password for a local user, whose web
    /// UI sessions end with the old one (API tokens stay valid); audited. `Ok(None)`: no such user.
    pub async fn reset_password(&self, username: &str, actor: &str) -> Result<Option<String>, crate::auth::AuthError> {
        // A directory's user has no password here to reset.
        let Some(user) = self.db.user_by_name(username).await?.filter(|u| u.is_local()) else { return Ok(None) };
        let password = crate::auth::generate_password();
        let hash = self.hash(&password).await?;
        let sessions = self.db.replace_password(user.id, &hash, None).await?;
        self.changed_locally();
        self.audit(actor, None, "user.password_reset", username, serde_json::json!({"sessions_ended": sessions})).await;
        Ok(Some(password))
    }

    /// Hashes off the async threads.
    pub async fn hash(&self, password: &str) -> Result<String, crate::auth::AuthError> {
        let p = password.to_string();
        tokio::task::spawn_blocking(move || hash_password(&p))
            .await
            .map_err(|e| crate::auth::AuthError::Hash(e.to_string()))?
    }

    pub async fn verify(&self, password: &str, hash: &str) -> bool {
        let (p, h) = (password.to_string(), hash.to_string());
        tokio::task::spawn_blocking(move || verify_password(&p, &h)).await.unwrap_or(false)
    }

    /// A local change: drop cached decisions now rather than at the next poll.
    pub fn changed_locally(&self) {
        self.cache.clear_security();
    }

    pub fn repositories_changed_locally(&self) {
        self.cache.clear_repositories();
    }
}
