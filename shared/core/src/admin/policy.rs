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
    // Indexes the policy filters are published again with it.
    if repo.gate().is_some() {
        crate::policy::republish(services, &repo).await?;
    }
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
    let (name, version) = (name.trim(), version.trim());
    let payload = serde_json::json!({"repository": repo.name.as_str(), "name": name, "version": version,
        "by": actor.username});
    let event = ("policy.exception_removed", repo.name.as_str(), payload.to_string());
    if !services.db.delete_policy_exception(repo.id, name, version, (event.0, event.1, &event.2)).await? {
        return Err(AdminError::NotFound(format!(
            "repository {repository} has no policy exception for {name} {version}"
        )));
    }
    services.changed(Changed::Repositories);
    if repo.gate().is_some() {
        crate::policy::republish(services, &repo).await?;
    }
    services
        .security
        .audit(actor.username, actor.address, "policy.exception_remove", repo.name.as_str(), payload)
        .await;
    Ok(())
}

/// What a preview found: the catalogued versions the policy would hold back, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    /// Components looked at (the repository's own; a group's members', nested groups followed).
    pub checked: usize,
    pub held: Vec<HeldView>,
    /// More components than a preview looks at (`PREVIEW_LIMIT`): the rest were not checked.
    pub truncated: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeldView {
    pub repository: String,
    pub name: String,
    pub version: String,
    /// `rule`, `vulnerabilities` (a release age is judged on each request, not previewed).
    pub reason: &'static str,
    pub message: String,
}

/// Most components a preview looks at.
const PREVIEW_LIMIT: usize = 100_000;

/// Which of the repository's current components `policy` (or, absent, its own) would hold back
/// by its quarantine rules and enforced advisories; break-glass exceptions are not applied.
pub async fn preview(
    services: &Services,
    formats: &Registry,
    repository: &str,
    policy: Option<packyard_model::policy::PolicySettings>,
) -> AdminResult<Preview> {
    use packyard_model::policy::{Subject, VulnMode};
    let repo = RepositoryService::new(&services.db, formats).get(repository).await?;
    let policy = match policy {
        Some(p) => {
            p.validate().map_err(|e| AdminError::Invalid(e.0))?;
            formats
                .check_policy((repo.format, repo.repo_type, repo.settings.blocks.get(repo.format.as_str())), &p)
                .map_err(|e| AdminError::Invalid(e.0))?;
            p
        }
        None => repo.settings.policy.clone().unwrap_or_default(),
    };
    // The repositories whose components the repository serves.
    let mut sources = Vec::new();
    let mut pending = vec![(repo.clone(), 0usize)];
    while let Some((r, depth)) = pending.pop() {
        if r.repo_type == packyard_model::repos::RepoType::Group {
            crate::groups::check_depth(&r, depth).map_err(|e| AdminError::Invalid(e.to_string()))?;
            let members =
                crate::groups::members_of(&services.db, &r).await.map_err(|e| AdminError::Internal(e.to_string()))?;
            pending.extend(members.into_iter().map(|m| (m, depth + 1)));
        } else {
            sources.push(r);
        }
    }
    let names: std::collections::HashMap<i64, String> = sources.iter().map(|r| (r.id, r.name.to_string())).collect();
    let spec = formats.get(repo.format);
    let mut out = Preview { checked: 0, held: Vec::new(), truncated: false };
    let mut search = packyard_store::db::catalogue::Search {
        repositories: sources.iter().map(|r| r.id).collect(),
        limit: 1000,
        ..Default::default()
    };
    // Rules on licenses or architectures read what the format says of each component.
    let facts_wanted =
        packyard_model::policy::wants_licenses(&policy) || packyard_model::policy::wants_architectures(&policy);
    loop {
        let page = services.db.catalogue_search(&search).await?;
        let mut assets: std::collections::HashMap<i64, Vec<packyard_store::db::catalogue::AssetRow>> =
            std::collections::HashMap::new();
        if facts_wanted {
            let ids: Vec<i64> = page.iter().map(|c| c.id).collect();
            for a in services.db.catalogue_assets_of(&ids).await? {
                assets.entry(a.component_id).or_default().push(a);
            }
        }
        for c in &page {
            if out.checked >= PREVIEW_LIMIT {
                out.truncated = true;
                return Ok(out);
            }
            out.checked += 1;
            let name = spec.policy_name((&c.component_key, &c.namespace, &c.name));
            let subject = Subject { name: &name, version: &c.version, ..Subject::default() };
            let source = sources.iter().find(|r| r.id == c.repository_id);
            // Judged with what the format says of it when a rule reads that (an `allow` rule on
            // licenses would hold everything judged without them).
            let mut held = None;
            if !facts_wanted {
                held = policy.rule_hold(&subject).map(|h| ("rule", h.message(&name, &c.version)));
            } else if let Some(source) = source {
                let owned = assets.remove(&c.id).unwrap_or_default();
                let facts = spec.catalogue().policy_facts(services, source, c, &owned).await;
                for (label, arch) in &facts.artifacts {
                    let subject =
                        Subject { licenses: &facts.licenses, architecture: arch.as_deref(), ..subject.clone() };
                    let version = if label.is_empty() { c.version.clone() } else { format!("{} ({label})", c.version) };
                    if let Some(h) = policy.rule_hold(&subject) {
                        held = Some(("rule", h.message(&name, &version)));
                        break;
                    }
                }
            }
            if let (None, VulnMode::Enforce, Some(source)) = (&held, policy.vulnerabilities, source) {
                let found = crate::vulnerabilities::matches(
                    services,
                    formats,
                    source,
                    (&c.component_key, &c.namespace, &c.name, &c.version),
                )
                .await
                .map_err(|e| AdminError::Internal(e.to_string()))?;
                let over: Vec<String> = found
                    .iter()
                    .filter(|m| {
                        packyard_model::osv::Level::parse(&m.severity)
                            .is_none_or(|l| l >= policy.vulnerability_severity)
                    })
                    .map(|m| format!("{} ({})", m.id, m.severity))
                    .collect();
                if !over.is_empty() {
                    held = Some(("vulnerabilities", format!("{name} {} has {}", c.version, over.join(", "))));
                }
            }
            if let Some((reason, message)) = held {
                out.held.push(HeldView {
                    repository: names.get(&c.repository_id).cloned().unwrap_or_default(),
                    name,
                    version: c.version.clone(),
                    reason,
                    message,
                });
            }
        }
        match page.last() {
            Some(last) if page.len() as i64 == search.limit => search.after = Some((String::new(), last.id)),
            _ => return Ok(out),
        }
    }
}
