//! Repositories: their definitions (each format's settings checked by the registry), a proxy's
//! sealed upstream password, their publication units' state, rebuilds and signing keys. What the
//! rules need the database for is [`RepositoryService`]; this adds what an administrator's change
//! brings with it (the format's reaction, the workers woken, the other replicas told, the audit).

use std::collections::BTreeMap;

use packyard_model::repos::{patched, GroupSettings, ProxySettings, Replication, RepoType, Repository, RepositorySpec};
use packyard_model::time::rfc3339_ms;
use serde::Serialize;

use super::{AdminError, AdminResult};
use crate::events::Changed;
use crate::formats::{KeyChange, KeyInfo, Registry, SigningKeys};
use crate::hosted::Actor;
use crate::repositories::{RepoError, RepositoryService};
use crate::services::Services;

/// A repository as the administration shows it (never a proxy's sealed password).
#[derive(Debug, Clone, Serialize)]
pub struct RepositoryView {
    pub name: String,
    pub format: &'static str,
    #[serde(rename = "type")]
    pub repo_type: &'static str,
    pub url: String,
    pub write_policy: &'static str,
    pub anonymous_read: bool,
    /// The format's settings, under its name.
    #[serde(flatten)]
    pub formats: BTreeMap<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxySettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GroupSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<packyard_model::policy::PolicySettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<packyard_model::repos::SnapshotSchedule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replication: Option<Box<packyard_model::repos::Replication>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<packyard_model::quota::Quota>,
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
    /// What it holds, as the worker last counted ([`get`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Where it stands against its quota now, counted as the request is answered ([`get`]
    /// only, with a quota).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota_status: Option<crate::quota::Status>,
}

/// A repository's components and their assets' bytes (a group holds none of its own), counted
/// every `worker.usage_refresh_secs`; absent before the first count.
#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    pub components: i64,
    pub bytes: i64,
    /// The blobs its retained index snapshots hold, each once.
    pub index_bytes: i64,
    pub counted_at: String,
}

impl From<Repository> for RepositoryView {
    fn from(r: Repository) -> Self {
        let group = (r.repo_type == RepoType::Group).then(|| GroupSettings { members: r.members.clone() });
        Self {
            url: format!("/repository/{}/", r.name),
            name: r.name.to_string(),
            format: r.format.as_str(),
            repo_type: r.repo_type.as_str(),
            write_policy: r.write_policy.as_str(),
            anonymous_read: r.anonymous_read,
            formats: r.settings.blocks,
            // The sealed upstream password is never returned.
            proxy: r.settings.proxy.map(|p| ProxySettings { password_sealed: None, ..p }),
            group,
            policy: r.settings.policy,
            snapshots: r.settings.snapshots,
            // Nor the sealed source password.
            replication: r.settings.replication.map(|b| Box::new(Replication { password_sealed: None, ..*b })),
            quota: r.settings.quota,
            version: r.version,
            created_at: rfc3339_ms(r.created_at),
            updated_at: rfc3339_ms(r.updated_at),
            usage: None,
            quota_status: None,
        }
    }
}

/// Seals the passwords a definition carries in clear (a proxy's upstream one, a follower's
/// source one) with `security.secret` before it is stored; without a new password, an update
/// keeps the one stored in `before`.
fn seal_passwords(
    services: &Services,
    name: &str,
    spec: &mut RepositorySpec,
    before: Option<&Repository>,
) -> AdminResult<()> {
    if let Some(proxy) = spec.proxy.as_mut() {
        let kept = before.and_then(|r| r.settings.proxy.as_ref()).and_then(|p| p.password_sealed.clone());
        let given = proxy.password.take();
        let key = ProxySettings::password_key(name);
        proxy.password_sealed = seal(services, ("proxy", &key), proxy.username.as_deref(), given, kept)?;
    }
    if let Some(r) = spec.replication.as_mut() {
        // Kept only for the same source and user: a definition pointed elsewhere does not take
        // the password along to another server.
        let kept = before
            .and_then(|b| b.settings.replication.as_ref())
            .filter(|b| b.url == r.url && b.username == r.username)
            .and_then(|b| b.password_sealed.clone());
        let given = r.password.take();
        let key = packyard_model::repos::Replication::password_key(name);
        r.password_sealed = seal(services, ("replication", &key), r.username.as_deref(), given, kept)?;
    }
    Ok(())
}

/// One block's sealed password: the one given, sealed under `key`, or the one `kept`.
fn seal(
    services: &Services,
    (block, key): (&str, &str),
    username: Option<&str>,
    given: Option<String>,
    kept: Option<(String, String)>,
) -> AdminResult<Option<(String, String)>> {
    match (username, given) {
        (None, Some(_)) => Err(AdminError::Invalid(format!("{block}.password needs {block}.username"))),
        (Some(_), Some(password)) => Ok(Some(
            services
                .security
                .keystore
                .seal(key, password.as_bytes())
                .map_err(|e| AdminError::Internal(e.to_string()))?,
        )),
        (Some(_), None) => Ok(kept),
        (None, None) => Ok(None),
    }
}

pub async fn list(services: &Services, formats: &Registry) -> AdminResult<Vec<RepositoryView>> {
    let repos = RepositoryService::new(&services.db, formats).list().await?;
    Ok(repos.into_iter().map(RepositoryView::from).collect())
}

/// The repository, with its usage.
pub async fn get(services: &Services, formats: &Registry, name: &str) -> AdminResult<RepositoryView> {
    let repo = RepositoryService::new(&services.db, formats).get(name).await?;
    let usage = services.db.usage(repo.id).await?;
    let quota_status = crate::quota::repository_status(services, &repo).await?;
    let mut view = RepositoryView::from(repo);
    view.quota_status = quota_status;
    view.usage = usage.map(|u| Usage {
        components: u.components,
        bytes: u.bytes,
        index_bytes: u.index_bytes,
        counted_at: rfc3339_ms(u.refreshed_at),
    });
    Ok(view)
}

pub async fn create(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    mut spec: RepositorySpec,
) -> AdminResult<RepositoryView> {
    let name = spec.name.clone().unwrap_or_default();
    seal_passwords(services, &name, &mut spec, None)?;
    let repo = RepositoryService::new(&services.db, formats)
        .with_test_formats(services.config.debug.test_format)
        .create(spec)
        .await?;
    tracing::info!(repository = %repo.name, format = %repo.format, kind = %repo.repo_type, "repository created");
    if repo.settings.proxy.as_ref().is_some_and(|p| p.offline) {
        tracing::warn!(repository = %repo.name,
            "proxy is offline (proxy.offline): no upstream traffic; cached files are served, the rest is a 404");
    }
    services.changed(Changed::Repositories);
    // Formats that publish snapshots publish one now (an empty repository gets signed indexes too).
    if formats.get(repo.format).settings_changed(services, None, &repo).await? > 0 {
        services.wake();
    }
    let detail = serde_json::json!({"format": repo.format.as_str(), "type": repo.repo_type.as_str()});
    services.security.audit(actor.username, actor.address, "repository.create", repo.name.as_str(), detail).await;
    Ok(repo.into())
}

/// Replaces the whole definition (format settings the repository has may not be left out).
pub async fn update(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    name: &str,
    mut spec: RepositorySpec,
) -> AdminResult<RepositoryView> {
    let service = RepositoryService::new(&services.db, formats);
    let before = service.get(name).await?;
    seal_passwords(services, name, &mut spec, Some(&before))?;
    let repo = service.update(name, spec).await?;
    updated(services, formats, actor, &before, repo).await
}

/// Applies a JSON merge patch to the definition as [`get`] shows it: what the patch does not
/// name stays as it is.
pub async fn patch(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    name: &str,
    patch: &serde_json::Value,
) -> AdminResult<RepositoryView> {
    let service = RepositoryService::new(&services.db, formats);
    let current = service.get(name).await?;
    let view =
        serde_json::to_value(RepositoryView::from(current.clone())).map_err(|e| AdminError::Internal(e.to_string()))?;
    let mut spec = patched(view, patch).map_err(RepoError::from)?;
    seal_passwords(services, name, &mut spec, Some(&current))?;
    let repo = service.apply(name, spec).await?;
    updated(services, formats, actor, &current, repo).await
}

async fn updated(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    before: &Repository,
    repo: Repository,
) -> AdminResult<RepositoryView> {
    tracing::info!(repository = %repo.name, version = repo.version, "repository updated");
    let offline = |r: &Repository| r.settings.proxy.as_ref().is_some_and(|p| p.offline);
    match (offline(before), offline(&repo)) {
        (false, true) => tracing::warn!(repository = %repo.name,
            "proxy is offline (proxy.offline): no upstream traffic; cached files are served, the rest is a 404"),
        (true, false) => tracing::info!(repository = %repo.name, "proxy is online again"),
        _ => {}
    }
    services.changed(Changed::Repositories);
    // Formats that publish snapshots publish one now (a renamed distribution's packages follow).
    if formats.get(repo.format).settings_changed(services, Some(before), &repo).await? > 0 {
        services.wake();
    }
    // What a changed policy leaves out of the published indexes is published now.
    if before.settings.policy != repo.settings.policy {
        crate::policy::republish(services, &repo).await?;
    }
    let detail = serde_json::json!({"version": repo.version});
    services.security.audit(actor.username, actor.address, "repository.update", repo.name.as_str(), detail).await;
    Ok(repo.into())
}

pub async fn delete(services: &Services, formats: &Registry, actor: Actor<'_>, name: &str) -> AdminResult<()> {
    RepositoryService::new(&services.db, formats).delete(name).await?;
    tracing::info!(repository = %name, "repository deleted");
    services.changed(Changed::Repositories);
    services.security.audit(actor.username, actor.address, "repository.delete", name, serde_json::json!({})).await;
    Ok(())
}

/// A rebuild asked for: how many publication units the workers will build again.
#[derive(Debug, Clone, Serialize)]
pub struct Rebuild {
    pub repository: String,
    pub units: usize,
}

/// Asks the workers to rebuild every publication unit of the repository.
pub async fn rebuild(services: &Services, formats: &Registry, actor: Actor<'_>, name: &str) -> AdminResult<Rebuild> {
    let repo = RepositoryService::new(&services.db, formats).get(name).await?;
    let units = services.db.request_rebuild(repo.id, true).await?;
    services.wake();
    let detail = serde_json::json!({"units": units});
    services.security.audit(actor.username, actor.address, "repository.rebuild", repo.name.as_str(), detail).await;
    Ok(Rebuild { repository: repo.name.to_string(), units })
}

/// A publication unit: desired and published revision, last error, last publication.
#[derive(Debug, Clone, Serialize)]
pub struct UnitStatus {
    pub kind: String,
    pub unit: String,
    pub desired_revision: i64,
    pub published_revision: i64,
    pub pending: bool,
    pub last_error: Option<String>,
    pub attempts: i64,
    pub next_attempt_at: Option<String>,
    pub last_published_at: Option<String>,
    pub leased_by: Option<String>,
    /// How long its builds take (ms, smoothed over the last ones); its quiet wait follows it.
    pub build_ms: Option<i64>,
}

/// The repository's publication units.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub repository: String,
    pub units: Vec<UnitStatus>,
}

pub async fn status(services: &Services, formats: &Registry, name: &str) -> AdminResult<Status> {
    let repo = RepositoryService::new(&services.db, formats).get(name).await?;
    let now = packyard_store::db::now_ms();
    let units = services
        .db
        .units_of(repo.id)
        .await?
        .into_iter()
        .map(|u| UnitStatus {
            pending: u.desired_revision > u.published_revision,
            kind: u.kind,
            unit: u.unit_key,
            desired_revision: u.desired_revision,
            published_revision: u.published_revision,
            last_error: u.last_error,
            attempts: u.attempts,
            next_attempt_at: (u.next_attempt_at > now).then(|| rfc3339_ms(u.next_attempt_at)),
            last_published_at: u.last_published_at.map(rfc3339_ms),
            leased_by: u.lease_expires_at.filter(|e| *e > now).and(u.lease_owner),
            build_ms: u.build_ms,
        })
        .collect();
    Ok(Status { repository: repo.name.to_string(), units })
}

/// The repository and its format's keys, or why it has none.
async fn signed(
    services: &Services,
    formats: &Registry,
    name: &str,
) -> AdminResult<(Repository, &'static dyn SigningKeys)> {
    let repo = RepositoryService::new(&services.db, formats).get(name).await?;
    let Some(keys) = formats.get(repo.format).signing_keys() else {
        let mut labels: Vec<&str> = formats.offered().filter_map(|s| s.signing_keys()).map(|k| k.label()).collect();
        let last = labels.pop().unwrap_or_default();
        let holders = if labels.is_empty() { last.to_string() } else { format!("{} and {last}", labels.join(", ")) };
        return Err(AdminError::Invalid(format!(
            "repository {} is a {} repository; signing keys belong to {holders} repositories",
            repo.name, repo.format
        )));
    };
    if let Some(why) = keys.refuse(&repo) {
        return Err(AdminError::Invalid(why));
    }
    Ok((repo, keys))
}

/// Where clients reach the repository: `site` is this server's URL as they see it.
fn repository_url(site: &str, repo: &Repository) -> String {
    format!("{site}/repository/{}", repo.name)
}

/// The public part of the repository's signing key, as its format describes it.
pub async fn signing_key(
    services: &Services,
    formats: &Registry,
    site: &str,
    name: &str,
) -> AdminResult<serde_json::Value> {
    let (repo, keys) = signed(services, formats, name).await?;
    Ok(keys.describe(services, &repo, &repository_url(site, &repo)).await?)
}

/// Generates or imports the repository's signing key, as its format's keys allow; returns the
/// new key's public part. The private key is never returned.
pub async fn change_signing_key(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    site: &str,
    name: &str,
    change: &KeyChange,
) -> AdminResult<serde_json::Value> {
    let (repo, keys) = signed(services, formats, name).await?;
    let url = repository_url(site, &repo);
    let changed = keys.change(services, &repo, &url, change).await?;
    services
        .security
        .audit(actor.username, actor.address, "repository.signing_key", repo.name.as_str(), changed.audit)
        .await;
    match changed.key {
        Some(key) => Ok(key),
        None => Ok(keys.describe(services, &repo, &url).await?),
    }
}

/// Every signing key of the repository (`GET …/signing-keys`), the signing ones first; the
/// expiry gauge of each set.
pub async fn signing_keys(services: &Services, formats: &Registry, name: &str) -> AdminResult<Vec<KeyInfo>> {
    let (repo, keys) = signed(services, formats, name).await?;
    let listed = keys.keys(services, &repo).await?;
    expiry_gauges(services, &repo, &listed);
    Ok(listed)
}

/// `packyard_signing_key_expiry_timestamp_seconds{repository,fingerprint}` of a repository's
/// keys that expire (the others' removed).
pub fn expiry_gauges(services: &Services, repo: &Repository, keys: &[KeyInfo]) {
    // Only the process that counts usage exposes them (as the quota gauges).
    if !services.counts_usage() {
        return;
    }
    let m = &services.metrics;
    for k in keys {
        let labels = [repo.name.as_str(), k.fingerprint.as_str()];
        match k.expires_secs {
            Some(at) => m.signing_key_expiry_timestamp_seconds.with_label_values(&labels).set(at),
            None => {
                let _ = m.signing_key_expiry_timestamp_seconds.remove_label_values(&labels);
            }
        }
    }
}

/// Adds a generated or imported key beside the current one (`POST …/signing-keys`): both sign
/// every index until one is retired; audited. Returns the repository's keys.
pub async fn add_signing_key(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    name: &str,
    change: &KeyChange,
) -> AdminResult<Vec<KeyInfo>> {
    let (repo, keys) = signed(services, formats, name).await?;
    let changed = keys.add(services, &repo, change).await?;
    services
        .security
        .audit(actor.username, actor.address, "repository.signing_key.add", repo.name.as_str(), changed.audit)
        .await;
    let listed = keys.keys(services, &repo).await?;
    expiry_gauges(services, &repo, &listed);
    Ok(listed)
}

/// Retires the key of `fingerprint` (`DELETE …/signing-keys/{fingerprint}`): it no longer signs
/// nor is offered to clients; audited. Returns the repository's keys.
pub async fn retire_signing_key(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    name: &str,
    fingerprint: &str,
) -> AdminResult<Vec<KeyInfo>> {
    let (repo, keys) = signed(services, formats, name).await?;
    let changed = keys.retire(services, &repo, fingerprint).await?;
    if let Some(retired) = changed.audit["fingerprint"].as_str() {
        let m = &services.metrics;
        let _ = m.signing_key_expiry_timestamp_seconds.remove_label_values(&[repo.name.as_str(), retired]);
    }
    services
        .security
        .audit(actor.username, actor.address, "repository.signing_key.retire", repo.name.as_str(), changed.audit)
        .await;
    let listed = keys.keys(services, &repo).await?;
    expiry_gauges(services, &repo, &listed);
    Ok(listed)
}

/// Sets the expiry gauge of every repository's signing keys (the worker, now and then).
/// Returns how many repositories' keys it read.
pub async fn key_census(services: &Services, formats: &Registry) -> AdminResult<usize> {
    // Keys retired and repositories deleted since leave no series behind.
    services.metrics.signing_key_expiry_timestamp_seconds.reset();
    let mut counted = 0;
    for repo in services.db.list_repositories().await? {
        let Some(keys) = formats.get(repo.format).signing_keys() else { continue };
        if keys.refuse(&repo).is_some() {
            continue;
        }
        match keys.keys(services, &repo).await {
            Ok(listed) => {
                expiry_gauges(services, &repo, &listed);
                counted += 1;
            }
            // Keys that do not rotate (a Go checksum database's) list nothing here.
            Err(crate::formats::KeyError::Invalid(_)) => {}
            Err(e) => tracing::warn!(repository = %repo.name, error = %e, "cannot read the repository's signing keys"),
        }
    }
    Ok(counted)
}
