//! APT over the engine: hosted uploads, the signed snapshot per distribution, group merges,
//! signing keys in the key store, and the proxy rule.

pub mod catalogue;
pub mod chunks;
pub mod group;
pub mod hosted;
pub mod import;
mod index;
pub mod keys;
pub mod nexus;
pub mod promote;
pub mod publish;
pub mod rows;
pub mod settings;
pub mod spec;
pub mod ui;

use packyard_core::proxy::{FetchRequest, Freshness, ListedIn, ProxyError};
use packyard_model::repos::FormatSettings;
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::db::{Db, DbResult};
use settings::AptSettings;

/// The unit kind of APT snapshots (one unit per distribution of a repository).
pub const KIND: &str = "apt";

/// The distributions a repository publishes snapshots for: a hosted repository's and a
/// group's `distributions` (or its one `distribution`), a proxy's with a policy (it signs what
/// the policy lets through); a proxy without one none (it serves the upstream's).
pub fn published_suites(repo: &Repository) -> Vec<String> {
    let settings = AptSettings::of(repo);
    let publishes = repo.repo_type == RepoType::Hosted || repo.publishes_merge();
    if repo.format == Format::Apt && publishes {
        settings.suites().into_iter().map(str::to_string).collect()
    } else {
        Vec::new()
    }
}

/// After a hosted repository's definition changed: when its only distribution was renamed, its
/// packages go with it (as they did when a repository had one distribution and no lists).
/// A distribution taken out of `apt.distributions` keeps its packages, unpublished, until it is
/// listed again.
pub async fn settings_changed(db: &Db, old: &Repository, new: &Repository) -> DbResult<()> {
    if new.format != Format::Apt || new.repo_type != RepoType::Hosted {
        return Ok(());
    }
    let (before, after) = (published_suites(old), published_suites(new));
    if let ([from], [to]) = (before.as_slice(), after.as_slice()) {
        if from != to {
            rows::rename_distribution(db, new.id, from, to).await?;
        }
    }
    Ok(())
}

/// Requests a snapshot of every distribution `repo` publishes (after it was created or its
/// settings changed), so that even an empty repository has signed indexes; for a proxy, of the
/// groups that contain it. Returns how many.
pub async fn request_publication(db: &Db, repo: &Repository) -> DbResult<usize> {
    let suites = published_suites(repo);
    let mut n = 0;
    // A proxy's groups merge it: they publish again (a gated proxy publishes itself too).
    if repo.format == Format::Apt && repo.repo_type == RepoType::Proxy {
        for name in db.groups_containing(repo.id).await? {
            if let Some(group) = db.repository_by_name(&name).await? {
                n += Box::pin(request_publication(db, &group)).await?;
            }
        }
    }
    if suites.is_empty() {
        return Ok(n);
    }
    let units: Vec<(String, String)> = suites.into_iter().map(|s| (KIND.to_string(), s)).collect();
    db.request_changes(repo.id, &units).await?;
    Ok(n + units.len())
}

/// How a proxy fetches an APT path: `by-hash` files are immutable (and a `SHA256` one must hash
/// to its name), the rest of `dists/` is metadata — a changed `InRelease`/`Release` revalidates
/// its distribution's other files — and everything else (`pool/`) is immutable. The one rule for
/// the proxy's routes and for groups reading a proxy member.
pub fn proxy_request(repo: &Repository, path: &str) -> Result<FetchRequest, ProxyError> {
    let Some(rest) = path.strip_prefix("dists/") else {
        let mut req = FetchRequest::new(repo, path, Freshness::Immutable)?;
        req.catalogue = packyard_core::catalogue::Catalogue::cached(&catalogue::AptCatalogue, path);
        return Ok(req);
    };
    if path.contains("/by-hash/") {
        let mut req = FetchRequest::new(repo, path, Freshness::Immutable)?;
        req.expect_sha256 = path.split_once("/by-hash/SHA256/").map(|(_, hex)| hex.to_string());
        return Ok(req);
    }
    let mut req = FetchRequest::new(repo, path, Freshness::Metadata)?;
    match rest.split_once('/') {
        Some((dist, "InRelease" | "Release")) => {
            req.on_change_expire = Some(format!("dists/{dist}/"));
            req.expires = Some(valid_until);
        }
        Some((_, "Release.gpg")) => {}
        // An index the distribution's `InRelease` lists: served as the bytes that `InRelease`
        // names (a client never gets a pair that disagrees: no hash-sum mismatch).
        Some((dist, _)) => {
            req.listed_in = Some(ListedIn { root: format!("dists/{dist}/InRelease"), expected: listed_in_release });
        }
        None => {}
    }
    Ok(req)
}

/// `Valid-Until` of a `Release` or `InRelease`, in ms since the epoch.
pub fn valid_until(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let value = text.lines().find_map(|l| l.strip_prefix("Valid-Until:"))?;
    packyard_model::time::parse_rfc1123(value)
}

/// What an `InRelease` lists for `path` (`dists/<dist>/<rel>`): its SHA-256, and its `by-hash`
/// path when the release says `Acquire-By-Hash: yes`.
fn listed_in_release(bytes: &[u8], path: &str) -> Option<(String, Option<String>)> {
    let text = String::from_utf8_lossy(bytes);
    let rest = path.strip_prefix("dists/")?;
    let (dist, rel) = rest.split_once('/')?;
    let mut inside = false;
    let mut by_hash = false;
    let mut found = None;
    for line in text.lines() {
        if line.starts_with("-----BEGIN PGP SIGNATURE") {
            break;
        }
        if !line.starts_with(' ') {
            inside = line.trim_end() == "SHA256:";
            if let Some(v) = line.strip_prefix("Acquire-By-Hash:") {
                by_hash = v.trim().eq_ignore_ascii_case("yes");
            }
            continue;
        }
        if inside {
            let mut parts = line.split_whitespace();
            if let (Some(hash), Some(_), Some(p)) = (parts.next(), parts.next(), parts.next()) {
                if p == rel {
                    found = Some(hash.to_ascii_lowercase());
                }
            }
        }
    }
    let hash = found?;
    let dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
    let by_hash_path = by_hash.then(|| {
        if dir.is_empty() {
            format!("dists/{dist}/by-hash/SHA256/{hash}")
        } else {
            format!("dists/{dist}/{dir}/by-hash/SHA256/{hash}")
        }
    });
    Some((hash, by_hash_path))
}
