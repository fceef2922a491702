//! APK groups: per unit (`<branch>/<channel>/<arch>`), one index signed with the group's own key
//! that merges the members' records in member order, the first member winning for the same name
//! and version. Records are copied unchanged (same `C:`), and the snapshot's hidden `.members`
//! file says which member provided each package, so the group serves every file from the member
//! whose record it lists.
//!
//! Where the records come from: a hosted or nested group member's published index of the same
//! unit; a proxy member's upstream index, fetched through the proxy cache and merged only when
//! its signature verifies with the proxy's `apk.signed_by` key (the group re-signs what it
//! merges). The hidden `.sources` file records which upstream index each proxy member had, so a
//! refresh after the metadata TTL rebuilds only when one moved on.

use std::collections::HashSet;

use super::{proxy_request, Unit, INDEX_FILE, KIND};
use packyard_codecs::apk::index::verify_index;
use packyard_codecs::apk::index::{apkindex_text, index_member_text};
use packyard_codecs::apk::signing::parse_public_keys;
use packyard_core::groups::{self, members_of, published_entry, Reader, Sources};
use packyard_core::publication::BuildError;
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::Db;

fn other(e: impl std::fmt::Display) -> BuildError {
    BuildError::other(e)
}

/// The hidden snapshot file mapping `<pkgname>-<pkgver>.apk` to the member that provided it.
pub fn members_path(unit: &str) -> String {
    format!("{unit}/.members")
}

/// The hidden snapshot file recording each proxy member's upstream index: `<member> <sha256>`.
pub fn sources_path(unit: &str) -> String {
    format!("{unit}/.sources")
}

pub use packyard_core::groups::member_of;

/// What a group build merged.
#[derive(Default)]
pub struct Merged {
    /// APKINDEX records, each followed by a blank line.
    pub records: String,
    /// `<pkgname>-<pkgver>.apk` → the member that provided it (the `.members` file).
    pub members: Vec<(String, String)>,
    /// Proxy member → SHA-256 of the upstream index merged.
    pub sources: Sources,
}

/// The (P, V) of a record.
fn identity(record: &str) -> Option<(&str, &str)> {
    let mut p = None;
    let mut v = None;
    for line in record.lines() {
        if let Some(x) = line.strip_prefix("P:") {
            p = Some(x);
        } else if let Some(x) = line.strip_prefix("V:") {
            v = Some(x);
        }
    }
    Some((p?, v?))
}

/// Adds a member's records unless an earlier member listed the same name and version.
pub fn merge_records(out: &mut Merged, seen: &mut HashSet<String>, member: &str, apkindex: &str) {
    for record in apkindex.split("\n\n") {
        let record = record.trim_matches('\n');
        let Some((p, v)) = identity(record) else { continue };
        if !record.lines().any(|l| l.starts_with("C:")) || !seen.insert(format!("{p} {v}")) {
            continue;
        }
        out.records.push_str(record);
        out.records.push_str("\n\n");
        out.members.push((format!("{p}-{v}.apk"), member.to_string()));
    }
}

/// A hosted or group member's published index of `unit`, as APKINDEX text.
pub async fn published_text(
    db: &Db,
    reader: &Reader,
    member: &Repository,
    unit: &str,
) -> Result<Option<String>, BuildError> {
    let Some(f) = published_entry(db, member, KIND, unit, &format!("{unit}/{INDEX_FILE}")).await? else {
        return Ok(None);
    };
    let bytes = reader.snapshot_bytes(&f).await?;
    Ok(Some(apkindex_text(&bytes).map_err(|e| other(format!("member {}: {e}", member.name)))?))
}

/// A proxy member's upstream index of `unit` through the proxy cache: its SHA-256 and APKINDEX
/// text, verified with the member's `apk.signed_by`. `None` when the proxy does not serve the
/// architecture or the upstream has no such index.
pub async fn upstream_text(
    reader: &Reader,
    member: &Repository,
    unit: &Unit,
) -> Result<Option<(String, String)>, BuildError> {
    let settings = member.settings.apk.clone().unwrap_or_default();
    if !settings.architectures.contains(&unit.arch) {
        return Ok(None);
    }
    let Some(pem) = settings.signed_by.as_deref() else {
        return Err(other(format!(
            "member {} is a proxy without apk.signed_by: set it to the upstream's index public key, so that the group can verify what it merges and re-signs",
            member.name
        )));
    };
    let keys = parse_public_keys(pem).map_err(|e| other(format!("member {}: apk.signed_by: {e}", member.name)))?;
    let request = proxy_request(member, &format!("{}/{INDEX_FILE}", unit.key()));
    let Some((sha, _)) = reader.fetch(member, request).await? else { return Ok(None) };
    let bytes = reader.bytes(&sha).await?;
    let index = verify_index(&bytes, &keys).map_err(|e| {
        other(format!("member {}: the upstream's {}/{INDEX_FILE} is refused: {e}", member.name, unit.key()))
    })?;
    let text = index_member_text(&index).map_err(|e| other(format!("member {}: {e}", member.name)))?;
    Ok(Some((sha, text)))
}

/// Merges the members of group `repo` for `unit`.
pub async fn merge(db: &Db, reader: &Reader, repo: &Repository, unit: &Unit) -> Result<Merged, BuildError> {
    let mut out = Merged::default();
    let mut seen = HashSet::new();
    for member in members_of(db, repo).await? {
        let text = match member.repo_type {
            RepoType::Proxy => match upstream_text(reader, &member, unit).await? {
                Some((sha, text)) => {
                    out.sources.insert(member.name.to_string(), sha);
                    Some(text)
                }
                None => None,
            },
            RepoType::Hosted | RepoType::Group => published_text(db, reader, &member, &unit.key()).await?,
        };
        if let Some(text) = text {
            merge_records(&mut out, &mut seen, member.name.as_str(), &text);
        }
    }
    Ok(out)
}

/// Whether any member of group `repo` has an index for `unit` (a group publishes a unit on
/// first request only when one does). A proxy member's upstream that cannot be asked counts as
/// not having it.
pub async fn any_member_has(db: &Db, reader: &Reader, repo: &Repository, unit: &Unit) -> Result<bool, BuildError> {
    let key = unit.key();
    groups::any_member_has(db, repo, KIND, &key, |member| {
        let key = &key;
        async move {
            if !member.settings.apk.clone().unwrap_or_default().architectures.contains(&unit.arch) {
                return Ok(false);
            }
            let request = proxy_request(&member, &format!("{key}/{INDEX_FILE}"));
            Ok(matches!(reader.fetch(&member, request).await, Ok(Some(_))))
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_member_wins_and_members_are_recorded() {
        let a = "C:Q1aaa=\nP:hello\nV:1-r0\nA:x86_64\nS:10\n\nC:Q1bbb=\nP:tool\nV:2-r0\nA:x86_64\nS:20\n\n";
        let b = "C:Q1ccc=\nP:hello\nV:1-r0\nA:x86_64\nS:11\n\nC:Q1ddd=\nP:hello\nV:2-r0\nA:x86_64\nS:12\n\nP:broken\nV:1\n\n";
        let (mut out, mut seen) = (Merged::default(), HashSet::new());
        merge_records(&mut out, &mut seen, "first", a);
        merge_records(&mut out, &mut seen, "second", b);
        assert_eq!(
            out.records,
            "C:Q1aaa=\nP:hello\nV:1-r0\nA:x86_64\nS:10\n\nC:Q1bbb=\nP:tool\nV:2-r0\nA:x86_64\nS:20\n\nC:Q1ddd=\nP:hello\nV:2-r0\nA:x86_64\nS:12\n\n"
        );
        let members = packyard_core::groups::members_map(&out.members);
        assert_eq!(members, "hello-1-r0.apk first\ntool-2-r0.apk first\nhello-2-r0.apk second\n");
        assert_eq!(member_of(&members, "hello-2-r0.apk"), Some("second"));
        assert_eq!(member_of(&members, "broken-1.apk"), None, "a record without C: is not merged");
    }
}
