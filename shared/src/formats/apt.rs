//! APT: `.deb` parsing, control-field rules, pool paths and `Packages` stanzas.

pub mod control;
pub mod deb;
pub mod group;
pub mod hosted;
pub mod packages;
pub mod publish;
pub mod signing;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use crate::db::{Db, DbResult};
use crate::repos::{Format, RepoType, Repository};

/// The distributions a repository publishes snapshots for: a hosted repository its one, a
/// group each of its `distributions`; a proxy none (it serves the upstream's).
pub fn published_suites(repo: &Repository) -> Vec<String> {
    let settings = repo.settings.apt.clone().unwrap_or_default();
    match (repo.format, repo.repo_type) {
        (Format::Apt, RepoType::Hosted) => vec![settings.distribution],
        (Format::Apt, RepoType::Group) => settings.suites().into_iter().map(str::to_string).collect(),
        _ => Vec::new(),
    }
}

/// Requests a snapshot of every distribution `repo` publishes (after it was created or its
/// settings changed), so that even an empty repository has signed indexes; for a proxy, of the
/// groups that contain it. Returns how many.
pub async fn request_publication(db: &Db, repo: &Repository) -> DbResult<usize> {
    let suites = published_suites(repo);
    if suites.is_empty() {
        // A proxy publishes nothing itself, but the groups that merge it do.
        let mut n = 0;
        if repo.format == Format::Apt && repo.repo_type == RepoType::Proxy {
            for name in db.groups_containing(repo.id).await? {
                if let Some(group) = db.repository_by_name(&name).await? {
                    n += Box::pin(request_publication(db, &group)).await?;
                }
            }
        }
        return Ok(n);
    }
    crate::db::retry_conflicts(|| async {
        let mut tx = db.pool().begin().await?;
        for s in &suites {
            db.record_change(&mut tx, repo.id, hosted::KIND, s).await?;
        }
        tx.commit().await.map_err(crate::db::DbError::from)
    })
    .await?;
    Ok(suites.len())
}
