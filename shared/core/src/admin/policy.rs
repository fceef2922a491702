//! A repository's break-glass exceptions (`/api/v1/repositories/{name}/policy/exceptions`):
//! one version of one name let through its policy early, until it expires — each addition and
//! removal audited and announced (`policy.exception_added`, `policy.exception_removed`).

use packyard_model::time::{parse_rfc3339, rfc3339_ms};
use packyard_store::db::now_ms;
use packyard_store::db::policy::PolicyException;
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminResult};
use crate::events::Changed;
use crate::formats::Registry;
use crate::hosted::Actor;
use crate::repositories::RepositoryService;
use crate::services::Services;

/// The request body of an addition.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewException {
    /// The component's name as the policy's rules see it (an APT or APK package, a Go module
    /// path, a Conan recipe name).
    pub name: String,
    pub version: String,
    /// RFC 3339; at most a year ahead.
    pub expires_at: String,
    pub reason: String,
}

/// An exception as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ExceptionView {
    pub name: String,
    pub version: String,
    pub expires_at: String,
    pub expired: bool,
    pub reason: String,
    pub created_by: String,
    pub created_at: String,
}

impl ExceptionView {
    fn of(e: PolicyException, now: i64) -> Self {
        Self {
            expired: e.expires_at <= now,
            expires_at: rfc3339_ms(e.expires_at),
            created_at: rfc3339_ms(e.created_at),
            name: e.name,
            version: e.version,
            reason: e.reason,
            created_by: e.created_by,
        }
    }
}

const YEAR_MS: i64 = 366 * 86_400_000;

pub async fn list(services: &Services, formats: &Registry, repository: &str) -> AdminResult<Vec<ExceptionView>> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let now = services.policy.now_ms();
    Ok(services.db.policy_exceptions(repo.id).await?.into_iter().map(|e| ExceptionView::of(e, now)).collect())
}

/// Adds (or replaces) an exception; `Ok((view, created))`.
pub async fn add(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    repository: &str,
    new: NewException,
) -> AdminResult<(ExceptionView, bool)> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let bad = |m: String| Err(AdminError::Invalid(m));
    let (name, version, reason) = (new.name.trim(), new.version.trim(), new.reason.trim());
    if name.is_empty() || name.len() > 400 || version.is_empty() || version.len() > 200 {
        return bad("`name` (1 to 400 bytes) and `version` (1 to 200 bytes) name the one version to let through".into());
    }
    if reason.is_empty() || reason.len() > 1000 {
        return bad("`reason` (1 to 1000 bytes) says why the version may pass: it is audited".into());
    }
    let now = services.policy.now_ms();
    let Some(expires_at) = parse_rfc3339(&new.expires_at) else {
        return bad(format!("`expires_at` {:?} is not an RFC 3339 time (2026-12-31T00:00:00Z)", new.expires_at));
    };
    if expires_at <= now || expires_at > now + YEAR_MS {
        return bad(format!(
            "`expires_at` {} is not between now ({}) and a year from now: an exception is temporary",
            new.expires_at,
            rfc3339_ms(now)
        ));
    }
    let e = PolicyException {
        name: name.to_string(),
        version: version.to_string(),
        expires_at,
        reason: reason.to_string(),
        created_by: actor.username.to_string(),
        created_at: now_ms(),
    };
    let payload = serde_json::json!({"repository": repo.name.as_str(), "name": e.name, "version": e.version,
        "expires_at": rfc3339_ms(e.expires_at), "reason": e.reason, "by": e.created_by});
    let created = services
        .db
        .put_policy_exception(repo.id, &e, ("policy.exception_added", repo.name.as_str(), &payload.to_string()))
        .await?;
    services.changed(Changed::Repositories);
    services.security.audit(actor.username, actor.address, "policy.exception_add", repo.name.as_str(), payload).await;
    Ok((ExceptionView::of(e, now), created))
}

/// Removes an exception; `NotFound` when there is none.
pub async fn remove(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    repository: &str,
    (name, version): (&str, &str),
) -> AdminResult<()> {
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let payload = serde_json::json!({"repository": repo.name.as_str(), "name": name, "version": version,
        "by": actor.username});
    let event = ("policy.exception_removed", repo.name.as_str(), payload.to_string());
    if !services.db.delete_policy_exception(repo.id, name, version, (event.0, event.1, &event.2)).await? {
        return Err(AdminError::NotFound(format!(
            "repository {repository} has no policy exception for {name} {version}"
        )));
    }
    services.changed(Changed::Repositories);
    services
        .security
        .audit(actor.username, actor.address, "policy.exception_remove", repo.name.as_str(), payload)
        .await;
    Ok(())
}
