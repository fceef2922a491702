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

use super::settings::ApkSettings;
use packyard_model::repos::FormatSettings;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::chunks::{self, Contribution, Memory, Signing};
use super::{proxy_request, Unit, INDEX_FILE, KIND};
use packyard_codecs::apk::index::{apkindex_text, index_member_text};
use packyard_codecs::apk::index::{check_record, index_signer, verify_index};
use packyard_codecs::apk::signing::{parse_public_keys, public_key_blocks};
use packyard_core::groups::{self, incremental, members_of, published_entry, Reader, Sources};
use packyard_core::policy::{BuildGate, Entry};
use packyard_core::publication::{work, BuildContext, BuildError};
use packyard_model::policy::Subject;
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::publication::SnapshotFile;
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

/// The hidden snapshot file where a gated group's snapshot says what its policy held back, by
/// `<pkgname>-<pkgver>.apk` ([`packyard_core::policy::Report`]).
pub fn policy_path(unit: &str) -> String {
    format!("{unit}/{}", packyard_core::policy::POLICY_FILE)
}

pub use packyard_core::groups::member_of;

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

/// A record's merge key (`name version`), for a record with a `C:` line (others are not
/// merged).
fn record_key(record: &str) -> Option<(String, String)> {
    let (p, v) = identity(record)?;
    record.lines().any(|l| l.starts_with("C:")).then(|| (format!("{p} {v}"), format!("{p}-{v}.apk")))
}

/// What a member offers a group's unit, found without reading it: a proxy's upstream index (its
/// SHA-256), or a hosted or group member's published one.
enum Input {
    Upstream(String),
    Published(SnapshotFile),
}

impl Input {
    fn sha256(&self) -> &str {
        match self {
            Self::Upstream(sha) => sha,
            Self::Published(f) => &f.sha256,
        }
    }
}

/// A member's APKINDEX text (a proxy's upstream index verified with its `apk.signed_by`):
/// verified and decompressed off the build's task ([`work::read`]).
async fn read(reader: &Reader, member: &Repository, input: &Input) -> Result<String, BuildError> {
    let name = member.name.to_string();
    let text = match input {
        Input::Upstream(sha) => {
            let keys = parse_public_keys(&signed_by(member)?)
                .map_err(|e| other(format!("member {name}: apk.signed_by: {e}")))?;
            let bytes = reader.bytes(sha).await?;
            work::read(move || {
                let index = verify_index(&bytes, &keys)
                    .map_err(|e| format!("member {name}: the upstream's {INDEX_FILE} is refused: {e}"))?;
                index_member_text(&index).map_err(|e| format!("member {name}: {e}"))
            })
            .await
        }
        Input::Published(f) => {
            let bytes = reader.snapshot_bytes(f).await?;
            work::read(move || apkindex_text(&bytes).map_err(|e| format!("member {name}: {e}"))).await
        }
    };
    text.map_err(other)?.map_err(other)
}

/// The records of a member's index that apk can read, as the keys the merge compares.
fn offered(text: &str) -> HashSet<u128> {
    text.split("\n\n")
        .map(|r| r.trim_matches('\n'))
        .filter(|r| check_record(r).is_ok())
        .filter_map(record_key)
        .map(|(k, _)| incremental::key_digest(&k))
        .collect()
}

/// A member's records as the merge takes them.
struct Sorted {
    /// The keys of every record apk can read.
    offered: HashSet<u128>,
    /// The records no member `ahead` lists, each ending in a blank line.
    records: Vec<String>,
    /// Each of those records' file, and the member that provides it.
    provided: Vec<(String, String)>,
    /// How many records apk cannot read were left out, and why the first was.
    skipped: (u64, Option<String>),
}

/// Whether group policy `gate` lets `record` (its file `file`) into the group's index; what it
/// holds back or audits is noted under the file's name. Aged from the record's build time (`t:`)
/// or the group's first sighting, whichever is later; its advisories looked up by its origin
/// (`o:`, the source package Alpine's advisories name); its licenses are the names in its
/// `L:` expression.
fn judged(gate: &BuildGate, record: &str, file: &str) -> bool {
    match verdict(gate, record) {
        Some((name, version, v)) => gate.note(file, (name, version), &v),
        None => false,
    }
}

/// Whether policy `gate` lets `record` through, noting nothing.
fn judged_quietly(gate: &BuildGate, record: &str) -> bool {
    verdict(gate, record).is_some_and(|(_, _, v)| v.passes())
}

/// Policy `gate`'s verdict on `record`, with its name and version.
fn verdict<'a>(gate: &BuildGate, record: &'a str) -> Option<(&'a str, &'a str, packyard_core::policy::Verdict)> {
    let value = |k: &str| record.lines().find_map(|l| l.strip_prefix(k));
    let (Some(name), Some(version)) = (value("P:"), value("V:")) else { return None };
    let licenses = packyard_model::policy::license_names(value("L:").unwrap_or_default());
    let built = value("t:").and_then(|t| t.trim().parse::<i64>().ok()).map(|secs| secs.saturating_mul(1000));
    let subject = Subject { name, version, published_ms: None, licenses: &licenses, architecture: value("A:") };
    Some((name, version, gate.judge(&Entry { subject, advisory_name: value("o:").unwrap_or(name) }, built)))
}

/// Sorts the records of member `name`'s index `text`: those apk cannot read are left out (and
/// said why), and so are those a member `ahead` lists or that came before, and those the
/// group's policy holds back.
fn sort(text: &str, name: &str, ahead: &[Arc<HashSet<u128>>], gate: Option<&BuildGate>) -> Sorted {
    let mut sorted = Sorted { offered: HashSet::new(), records: Vec::new(), provided: Vec::new(), skipped: (0, None) };
    for record in text.split("\n\n") {
        let record = record.trim_matches('\n');
        let Some((k, file)) = record_key(record) else { continue };
        if let Err(why) = check_record(record) {
            sorted.skipped.0 += 1;
            sorted.skipped.1.get_or_insert_with(|| format!("{file}: {why}"));
            continue;
        }
        let k = incremental::key_digest(&k);
        if !sorted.offered.insert(k) || ahead.iter().any(|a| a.contains(&k)) {
            continue;
        }
        if gate.is_some_and(|g| !judged(g, record, &file)) {
            continue;
        }
        sorted.records.push(format!("{record}\n\n"));
        sorted.provided.push((file, name.to_string()));
    }
    sorted
}

/// What a group merge wrote beside its index: `<pkgname>-<pkgver>.apk` → the member that
/// provided it (the `.members` file), and each proxy member's upstream index (`.sources`).
pub struct Merged {
    pub members: Vec<(String, String)>,
    pub sources: Sources,
}

/// Merges the members of group `repo` for `unit` and adds its index (`path`), signed: the
/// members' records in member order, the first member winning for the same name and version.
/// Only the members whose index changed since the group's published merge are read (and those
/// a change ahead of them shadows or unshadows, [`incremental`]); the others keep their chunks.
pub(crate) async fn merge(
    ctx: &mut BuildContext<'_>,
    (reader, memory, gate): (&Reader, &Memory, Option<Arc<BuildGate>>),
    (repo, unit, current): (&Repository, &Unit, Option<&str>),
    signing: &Signing<'_>,
) -> Result<Merged, BuildError> {
    let key = unit.key();
    let mut sources = Sources::new();
    let mut inputs = Vec::new();
    for member in members_of(ctx.db, repo).await? {
        let input = match member.repo_type {
            // A gated proxy publishes what its policy lets through: that is what it offers.
            // (When it has not published the unit yet, it is requested and this build retried: a
            // group never merges such a member's upstream unfiltered nor leaves it out.)
            RepoType::Proxy if member.id != repo.id && member.gate().is_some() => {
                let path = format!("{key}/{INDEX_FILE}");
                if !ApkSettings::of(&member).architectures.contains(&unit.arch) {
                    None
                } else if let Some(f) = published_entry(ctx.db, &member, KIND, &key, &path).await? {
                    Some(Input::Published(f))
                } else {
                    return Err(groups::gated_member_unpublished(ctx.db, &member, KIND, &key).await);
                }
            }
            RepoType::Proxy => match upstream_sha(reader, &member, unit).await? {
                Some(sha) => {
                    sources.insert(member.name.to_string(), sha.clone());
                    Some(Input::Upstream(sha))
                }
                // A gated proxy's own upstream: nothing to publish is not an empty index.
                None if member.id == repo.id => {
                    return Err(other(format!(
                        "the upstream of {} has no {key}/{INDEX_FILE}: the last snapshot is kept",
                        repo.name
                    )));
                }
                None => None,
            },
            RepoType::Hosted | RepoType::Group => {
                published_entry(ctx.db, &member, KIND, &key, &format!("{key}/{INDEX_FILE}"))
                    .await?
                    .map(Input::Published)
            }
        };
        if let Some(input) = input {
            // A proxy's records were verified with its `apk.signed_by`: another key, another
            // source (they are verified again).
            let key = match &input {
                Input::Upstream(_) => {
                    let pem = ApkSettings::of(&member).signed_by.unwrap_or_default();
                    format!(" {}", incremental::key_digest(&pem))
                }
                Input::Published(_) => String::new(),
            };
            // What a policy filtered is another merge than the whole.
            let gated = if gate.is_some() { " gated" } else { "" };
            let source = format!("{} {}{key}{gated}", member.name, input.sha256());
            inputs.push((member, input, source));
        }
    }
    // By id and name: a member deleted and made again under its name is another member.
    let names: Vec<String> = inputs.iter().map(|(m, ..)| format!("{} {}", m.id, m.name)).collect();
    // A policy's verdicts change with the time: a gated merge reads every member.
    let previous = if gate.is_some() { Vec::new() } else { memory.recall_merge(repo.id, &key, current, &names) };
    let reusable = memory.reusable(repo.id, &key, current);
    let by_source: Vec<(i64, String)> = inputs.iter().map(|(m, _, s)| (m.id, s.clone())).collect();
    let (mut texts, mut now) = (HashMap::new(), HashMap::new());
    // (Nothing remembered: every member is merged, nothing to compare.)
    let changed = if previous.is_empty() { Vec::new() } else { incremental::changed(&by_source, &previous) };
    for id in changed {
        let Some((member, input, _)) = inputs.iter().find(|(m, ..)| m.id == id) else { continue };
        let text = read(reader, member, input).await?;
        let (text, offered) = work::read(move || {
            let keys = offered(&text);
            (text, keys)
        })
        .await
        .map_err(other)?;
        now.insert(id, offered);
        texts.insert(id, text);
    }
    let kept = incremental::kept(&by_source, &previous, &now);
    let mut emitted: Vec<Contribution> = previous.into_iter().filter(|c| kept.contains(&c.member)).collect();
    let mut ahead: Vec<Arc<HashSet<u128>>> = Vec::with_capacity(inputs.len());
    let mut merged = Vec::new();
    for (member, input, source) in &inputs {
        if let Some(c) = emitted.iter().find(|c| c.member == member.id) {
            ahead.push(c.offered.clone());
            continue;
        }
        let text = match texts.remove(&member.id) {
            Some(t) => t,
            None => read(reader, member, input).await?,
        };
        // Sorted off the build's task, like the reading.
        let (name, shadowing, gate) = (member.name.to_string(), ahead.clone(), gate.clone());
        let sorted = work::read(move || sort(&text, &name, &shadowing, gate.as_deref())).await.map_err(other)?;
        // A record from upstream that apk cannot read is left out, counted and logged.
        let (count, first) = sorted.skipped;
        for _ in 0..count {
            ctx.skip(member.name.as_str(), || first.clone().unwrap_or_default());
        }
        let refs: Vec<&str> = sorted.records.iter().map(String::as_str).collect();
        let kept = chunks::contribution_chunks(ctx, &refs, sorted.provided, &reusable).await?;
        let offered = Arc::new(sorted.offered);
        ahead.push(offered.clone());
        merged.push(Contribution { member: member.id, source: source.clone(), offered, kept });
    }
    if let Some(gate) = &gate {
        if let Some(c) = carry(ctx, reader, (repo, &key, &inputs), gate, &ahead, &reusable).await? {
            merged.push(c);
        }
    }
    emitted.extend(merged);
    let members = emitted.iter().flat_map(|c| c.kept.provided.iter().cloned()).collect();
    let path = format!("{key}/{INDEX_FILE}");
    chunks::publish_merge(ctx, memory, (repo.id, &key, &path), (names, emitted), signing).await?;
    Ok(Merged { members, sources })
}

/// Carries forward what the repository's last published index of the unit listed of the
/// packages the policy now holds a version of back ([`BuildGate::unsettled`]): an Alpine
/// index lists one version of each package, so when the upstream replaces it by one the policy
/// holds back (built today, say), the previous one would vanish with it. A record is carried
/// when the policy lets it through now, no member offers the same version, and its file is still
/// there: fetched into the proxy's cache now (where it stays when the upstream drops it) and
/// checked against the record's size. Only records of a proxy member (or of the gated proxy
/// itself) are: a hosted or group member's index lists every version it still has.
async fn carry(
    ctx: &mut BuildContext<'_>,
    reader: &Reader,
    (repo, key, inputs): (&Repository, &str, &[(Repository, Input, String)]),
    gate: &BuildGate,
    ahead: &[Arc<HashSet<u128>>],
    reusable: &chunks::Reusable,
) -> Result<Option<Contribution>, BuildError> {
    let unsettled = gate.unsettled();
    if unsettled.is_empty() {
        return Ok(None);
    }
    let Some(last) = published_entry(ctx.db, repo, KIND, key, &format!("{key}/{INDEX_FILE}")).await? else {
        return Ok(None);
    };
    // What cannot be read of the last index is not carried (the build goes on without).
    let text = match read(reader, repo, &Input::Published(last)).await {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(repository = %repo.name, unit = key, error = %e, "cannot read the last index: nothing carried forward");
            return Ok(None);
        }
    };
    let map = match published_entry(ctx.db, repo, KIND, key, &members_path(key)).await? {
        Some(f) => match reader.snapshot_bytes(&f).await {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(_) => return Ok(None),
        },
        None => String::new(),
    };
    let (mut records, mut provided, mut offered) = (Vec::new(), Vec::new(), HashSet::new());
    for record in text.split("\n\n").map(|r| r.trim_matches('\n')) {
        let value = |k: &str| record.lines().find_map(|l| l.strip_prefix(k));
        let Some(name) = value("P:").filter(|n| unsettled.contains(&BuildGate::slot(n, value("A:")))) else {
            continue;
        };
        let Some((k, file)) = record_key(record) else { continue };
        let k = incremental::key_digest(&k);
        if ahead.iter().any(|a| a.contains(&k)) || !offered.insert(k) {
            continue;
        }
        // The member that provided it: a proxy without a policy of its own, or the gated proxy.
        let Some(member) = member_of(&map, &file).and_then(|m| {
            let (member, ..) = inputs.iter().find(|(x, ..)| x.name.as_str() == m)?;
            let plain = member.repo_type == RepoType::Proxy && (member.id == repo.id || member.gate().is_none());
            plain.then_some(member)
        }) else {
            continue;
        };
        if !judged_quietly(gate, record) {
            continue;
        }
        let size = value("S:").and_then(|v| v.trim().parse::<i64>().ok());
        let got = reader.still_there(member, proxy_request(member, &format!("{key}/{file}"))).await?;
        if got.is_none_or(|(_, s)| Some(s) != size) {
            let why = packyard_core::groups::Reader::not_carried_because(member);
            tracing::info!(repository = %repo.name, file = %file, name, member = %member.name, "{why}");
            continue;
        }
        judged(gate, record, &file);
        records.push(format!("{record}\n\n"));
        provided.push((file, member.name.to_string()));
    }
    if records.is_empty() {
        return Ok(None);
    }
    let refs: Vec<&str> = records.iter().map(String::as_str).collect();
    let kept = chunks::contribution_chunks(ctx, &refs, provided, reusable).await?;
    Ok(Some(Contribution {
        member: repo.id,
        source: format!("{} carried", repo.name),
        offered: Arc::new(offered),
        kept,
    }))
}

/// A proxy member's `apk.signed_by` (PEM): the group re-signs what it merges, so it merges only
/// what the upstream signed.
fn signed_by(member: &Repository) -> Result<String, BuildError> {
    let settings = ApkSettings::of(member);
    settings.signed_by.ok_or_else(|| {
        other(format!(
            "member {} is a proxy without apk.signed_by: set it to the upstream's index public key, so that the group can verify what it merges and re-signs",
            member.name
        ))
    })
}

/// A proxy member's upstream index of `unit` through the proxy cache, by SHA-256 (not yet
/// verified). `None` when the proxy does not serve the architecture or the upstream has no
/// such index.
async fn upstream_sha(reader: &Reader, member: &Repository, unit: &Unit) -> Result<Option<String>, BuildError> {
    let settings = ApkSettings::of(member);
    if !settings.architectures.contains(&unit.arch) {
        return Ok(None);
    }
    signed_by(member)?;
    let request = proxy_request(member, &format!("{}/{INDEX_FILE}", unit.key()));
    Ok(reader.fetch(member, request).await?.map(|(sha, _)| sha))
}

/// A proxy member's upstream index of `unit` through the proxy cache: its SHA-256, verified with
/// the member's `apk.signed_by` (what a refresh compares with the group's `.sources`).
pub async fn upstream_verified(
    reader: &Reader,
    member: &Repository,
    unit: &Unit,
) -> Result<Option<String>, BuildError> {
    let Some(sha) = upstream_sha(reader, member, unit).await? else { return Ok(None) };
    read(reader, member, &Input::Upstream(sha.clone())).await?;
    Ok(Some(sha))
}

/// The keys a proxy's clients trust: of the proxy's `apk.signed_by` keys, those that sign the
/// upstream's indexes its cache holds (one per architecture it serves), each with the key file
/// name the index's signature gives it — the name apk looks it up under in `/etc/apk/keys/`
/// (Alpine signs each architecture with a key of its own). Read from the cache, never fetched:
/// empty until a client has asked the proxy for an index.
pub async fn upstream_keys(db: &Db, reader: &Reader, proxy: &Repository) -> Result<Vec<(String, String)>, BuildError> {
    let pem = signed_by(proxy)?;
    let keys = parse_public_keys(&pem).map_err(|e| other(format!("{}: apk.signed_by: {e}", proxy.name)))?;
    let blocks: Vec<String> = public_key_blocks(&pem).into_iter().map(|b| format!("{b}\n")).collect();
    let architectures = ApkSettings::of(proxy).architectures;
    let mut seen = HashSet::new();
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in db.cached_files_named(proxy.id, INDEX_FILE, 1_000).await? {
        let arch = match entry.path.split('/').collect::<Vec<_>>().as_slice() {
            [_, _, arch, _] => arch.to_string(),
            _ => continue,
        };
        let Some(sha) = entry.sha256.filter(|_| architectures.contains(&arch) && seen.insert(arch.clone())) else {
            continue;
        };
        let bytes = reader.bytes(&sha).await?;
        let keys = keys.clone();
        match work::read(move || index_signer(&bytes, &keys)).await.map_err(other)? {
            Ok((name, key)) => {
                if !out.iter().any(|(n, _)| *n == name) {
                    out.push((name, blocks.get(key).cloned().unwrap_or_default()));
                }
            }
            Err(e) => {
                tracing::warn!(repository = %proxy.name, path = %entry.path, error = %e, "the upstream's index does not verify with apk.signed_by")
            }
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
            if !ApkSettings::of(&member).architectures.contains(&unit.arch) {
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
    fn a_record_merges_by_name_and_version_when_it_has_a_checksum() {
        assert_eq!(
            record_key("C:Q1aaa=\nP:hello\nV:1-r0\nA:x86_64\nS:10"),
            Some(("hello 1-r0".to_string(), "hello-1-r0.apk".to_string()))
        );
        assert_eq!(record_key("P:broken\nV:1"), None, "a record without C: is not merged");
        assert_eq!(record_key("C:Q1aaa=\nV:1"), None);
    }
}
