//! APT groups: one signed snapshot per distribution that merges the members' package records in
//! member order, the first member winning for the same name, version and architecture. Each
//! record's `Filename` becomes `pool/<member>/<the member's Filename>`, so the group serves the
//! file from the member whose record it lists (see the API's pool route).
//!
//! Where the records come from: a hosted member's published index (of its one distribution;
//! every group distribution gets it); a proxy member's upstream index of the same distribution
//! (if the proxy mirrors it), fetched through the proxy cache and checked against the upstream
//! `InRelease`, whose signature must verify with the proxy's `apt.signed_by` key; a nested group's published index of the same distribution. Members' indexes are
//! read as xz and merged stanza by stanza, so memory stays bounded.
//!
//! A merge is incremental (#22): each member's stanzas are stored as chunks of their own and
//! remembered with the keys the member lists; the next merge reads only the members whose
//! index changed, and a kept member again only when a change ahead of it touched a key it lists
//! (see `chunks.rs`). Stanzas are listed once each, so their order in the file is free: the
//! kept members' chunks come first, the merged ones after them.

use super::settings::AptSettings;
use packyard_model::repos::FormatSettings;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::sync::Arc;

use super::chunks::{self, Contribution, Memory};
use super::index::{Hashed, Hashers, IndexId};
use super::KIND;
use packyard_core::groups::{incremental, members_of, published_entry, Reader, Sources};
use packyard_core::policy::{BuildGate, Entry};
use packyard_core::publication::{BuildContext, BuildError};
use packyard_model::policy::Subject;
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::publication::SnapshotFile;
use packyard_store::db::Db;

/// A group's build reading its members, with the group's policy when it has one.
pub struct Upstream<'a>(pub &'a Reader, pub Option<Arc<BuildGate>>);

/// What reading a member's index hands to the merge ([`Upstream::contribute`]).
enum Reading {
    /// The text of the next chunk or piece.
    Text(String),
    /// A stanza left out: its key, and why.
    Skipped(String, String),
}

use super::index::other;
use packyard_codecs::apt::fields::check_stanza;

/// Reads `Packages` stanzas (paragraphs separated by blank lines) one at a time.
pub struct StanzaReader<R> {
    reader: R,
    line: String,
}

impl<R: BufRead> StanzaReader<R> {
    pub fn new(reader: R) -> Self {
        Self { reader, line: String::new() }
    }

    /// Puts the next stanza (lines with their `\n`, no blank line) into `out`; false at the end.
    pub fn next_stanza(&mut self, out: &mut String) -> std::io::Result<bool> {
        out.clear();
        loop {
            self.line.clear();
            if self.reader.read_line(&mut self.line)? == 0 {
                return Ok(!out.is_empty());
            }
            if self.line.trim().is_empty() {
                if out.is_empty() {
                    continue;
                }
                return Ok(true);
            }
            out.push_str(&self.line);
            if !self.line.ends_with('\n') {
                out.push('\n');
            }
        }
    }
}

/// The value of a single-line field of a stanza.
pub fn field<'a>(stanza: &'a str, name: &str) -> Option<&'a str> {
    stanza.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (!l.starts_with([' ', '\t']) && k.eq_ignore_ascii_case(name)).then(|| v.trim())
    })
}

/// A stanza's identity in a merge — `name version architecture` (`source` for a `Sources`
/// stanza) — and the field holding its path (`Filename`, or a `Sources` stanza's `Directory`);
/// `None` for a stanza without them.
pub fn stanza_key(stanza: &str) -> Option<(String, &'static str)> {
    let sources = field(stanza, "Filename").is_none();
    let (path_field, arch) =
        if sources { ("Directory", Some("source")) } else { ("Filename", field(stanza, "Architecture")) };
    let (Some(name), Some(version), Some(arch), Some(_)) =
        (field(stanza, "Package"), field(stanza, "Version"), arch, field(stanza, path_field))
    else {
        return None;
    };
    Some((format!("{name} {version} {arch}"), path_field))
}

/// Appends a member's stanza with its `path_field` prefixed by `prefix` (`pool/<member>/`; a
/// gated proxy's own stanzas keep their paths: no prefix).
fn write_stanza(out: &mut String, prefix: &str, stanza: &str, path_field: &str) {
    for line in stanza.lines() {
        match line.split_once(':') {
            Some((k, v)) if !line.starts_with([' ', '\t']) && k.eq_ignore_ascii_case(path_field) => {
                out.push_str(path_field);
                out.push_str(": ");
                out.push_str(prefix);
                out.push_str(v.trim());
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out.push('\n');
}

/// Adds a member's stanza to `out` unless an earlier member listed the same package: its
/// `Filename` (a `Sources` stanza: its `Directory`) is prefixed with `pool/<member>/`. Stanzas
/// without the identifying fields — name, version and, in `Packages`, architecture — or the
/// path are skipped.
pub fn merge_stanza(out: &mut String, seen: &mut HashSet<String>, member: &str, stanza: &str) -> bool {
    let Some((key, path_field)) = stanza_key(stanza) else { return false };
    if !seen.insert(key) {
        return false;
    }
    write_stanza(out, &format!("pool/{member}/"), stanza, path_field);
    true
}

/// A member's stanzas in a merged index are cut into chunks (each compressed on its own) where
/// the stanzas' keys say (`incremental::Cuts`), of at least [`MIN_CHUNK`] and at most
/// [`MAX_CHUNK`] bytes: the next merge finds most of a changed member's chunks already stored
/// ([`chunks::Reuse`]). A chunk of a MiB or more compresses within 8 % of the whole text as one
/// xz stream.
const MIN_CHUNK: usize = 1024 * 1024;
const MAX_CHUNK: usize = 3 * 1024 * 1024;
/// The least and most size of a piece of a member's last, open chunk (`incremental::Cuts`): an
/// append into a large member stores a piece of ~150 KiB again rather than a chunk of a MiB.
const TAIL_PIECE: (usize, usize) = (128 * 1024, 512 * 1024);

/// What a member offers one index of a group, found without reading it.
enum Input {
    /// A proxy member's upstream index: the verified upstream release (its `InRelease`'s
    /// SHA-256 and text), the index's SHA-256 as the release lists it, and its form.
    Upstream { release: (String, String), expected: String, compression: Compression },
    /// A hosted or group member's published index (its `.xz` form).
    Published(SnapshotFile),
    /// Stanzas a gated merge carries forward from its own last index ([`Upstream::carry`]).
    Carried(bytes::Bytes),
}

impl Input {
    fn sha256(&self) -> &str {
        match self {
            Self::Upstream { expected, .. } => expected,
            Self::Published(f) => &f.sha256,
            Self::Carried(_) => "carried",
        }
    }
}

/// One architecture's index (or a component's `Sources`) of group `repo`, merged from its
/// members: a member whose index is the one the group's published merge read keeps its chunks,
/// unless a member before it changed a package it also lists; the others are read and merged
/// again, their chunks listed after the kept ones ([`chunks::Contribution`]).
pub(super) async fn merge_index(
    ctx: &mut BuildContext<'_>,
    (upstream, memory): (&Upstream<'_>, &Memory),
    repo: &Repository,
    id: &IndexId<'_>,
    (sources, current): (&mut Sources, &HashMap<String, String>),
) -> Result<[Hashed; 3], BuildError> {
    upstream.merge_index(ctx, memory, repo, id, (sources, current)).await
}

impl Upstream<'_> {
    async fn merge_index(
        &self,
        ctx: &mut BuildContext<'_>,
        memory: &Memory,
        repo: &Repository,
        id: &IndexId<'_>,
        (sources, current): (&mut Sources, &HashMap<String, String>),
    ) -> Result<[Hashed; 3], BuildError> {
        let IndexId { dist, base, stem, .. } = *id;
        // What each member offers, in the members' order.
        let mut inputs = Vec::new();
        for member in members_of(ctx.db, repo).await? {
            let input = match member.repo_type {
                // A gated proxy publishes what its policy lets through: that is what it offers.
                RepoType::Proxy if member.id != repo.id && member.gate().is_some() => {
                    // (Not published yet: requested, and this build retried.)
                    let release = format!("dists/{dist}/Release");
                    if published_entry(ctx.db, &member, KIND, dist, &release).await?.is_none() {
                        return Err(packyard_core::groups::gated_member_unpublished(ctx.db, &member, KIND, dist).await);
                    }
                    published_index(ctx.db, &member, dist, id).await?
                }
                RepoType::Proxy => {
                    let Some(release) = self.upstream_release(&member, dist).await? else {
                        // A gated proxy's own upstream: nothing to publish is not an empty index.
                        if member.id == repo.id {
                            return Err(other(format!(
                                "the upstream of {} has no {dist}/InRelease (or it does not mirror {dist}): the last snapshot is kept",
                                repo.name
                            )));
                        }
                        continue;
                    };
                    // Re-signing an expired release would hide its expiry (the protection against
                    // a frozen mirror): the build fails, and the group keeps what it merged before.
                    if let Some(until) =
                        super::valid_until(release.1.as_bytes()).filter(|u| *u <= packyard_store::db::now_ms())
                    {
                        return Err(other(format!(
                            "member {}: the upstream's {dist}/InRelease expired at {} (Valid-Until); a group does not re-sign expired metadata",
                            member.name,
                            packyard_model::time::rfc1123_utc(until)
                        )));
                    }
                    sources.insert(member.name.to_string(), release.0.clone());
                    upstream_input(release, id)
                }
                // A hosted member's distribution of the same name (its only one, whatever its
                // name); a nested group's of the same name.
                RepoType::Hosted => {
                    let Some(own) = member_distribution(&member, dist) else { continue };
                    published_index(ctx.db, &member, &own, id).await?
                }
                RepoType::Group => published_index(ctx.db, &member, dist, id).await?,
            };
            if let Some(input) = input {
                // What a policy filtered is another merge than the whole (a policy taken off
                // merges the member again).
                let gated = if self.1.is_some() { " gated" } else { "" };
                let source = format!("{} {}{gated}", member.name, input.sha256());
                inputs.push((member, input, source));
            }
        }
        // By id and name: a member deleted and made again under its name is another member.
        let names: Vec<String> = inputs.iter().map(|(m, ..)| format!("{} {}", m.id, m.name)).collect();
        let path = format!("dists/{dist}/{base}/{stem}");
        let recalled = memory.recall_merge(repo.id, &path, current);
        // Chunks are taken again by their text even when the members are others now.
        let reuse = chunks::Reuse::new(recalled.as_ref().map(|p| p.emitted.as_slice()).unwrap_or_default());
        // A policy's verdicts change with the time: a gated merge reads every member (the
        // chunks whose text is the same are still taken again).
        let previous =
            recalled.filter(|p| p.members == names && self.1.is_none()).map(|p| p.emitted).unwrap_or_default();

        // Which members keep their chunks (`groups::incremental`): those whose index changed
        // are read for the keys they offer now.
        let sources: Vec<(i64, String)> = inputs.iter().map(|(m, _, source)| (m.id, source.clone())).collect();
        let mut now = HashMap::new();
        // (Nothing remembered: every member is merged, nothing to compare.)
        let changed = if previous.is_empty() { Vec::new() } else { incremental::changed(&sources, &previous) };
        for member in changed {
            if let Some((m, input, _)) = inputs.iter().find(|(m, ..)| m.id == member) {
                now.insert(member, self.offered(m, input, id).await?);
            }
        }
        let kept = incremental::kept(&sources, &previous, &now);

        // The kept contributions first, in the order the published index lists them: while
        // nothing before them changed, their hash states carry on as they were.
        let mut hashers: [Hashers; 3] = chunks::start();
        let mut emitted: Vec<Contribution> = Vec::with_capacity(inputs.len());
        let mut intact = true;
        for was in &previous {
            if !kept.contains(&was.member) {
                // Only bytes that went change what follows them.
                intact &= was.kept.is_empty();
                continue;
            }
            let mut c = was.clone();
            if intact {
                if let Some(last) = c.kept.last() {
                    hashers = last.after.clone();
                }
            } else {
                hashers = chunks::carry(ctx, &mut c.kept, hashers).await?;
            }
            emitted.push(c);
        }
        // The others read and merged again, in the members' order, each without the keys of
        // the members before it.
        let mut ahead: Vec<Arc<HashSet<u128>>> = Vec::with_capacity(inputs.len());
        let mut merged: Vec<Contribution> = Vec::new();
        for (member, input, source) in &inputs {
            if let Some(c) = emitted.iter().find(|c| c.member == member.id) {
                ahead.push(c.offered.clone());
                continue;
            }
            // A gated proxy's own index keeps its paths (its pool is its upstream's).
            let prefix = if member.id == repo.id { String::new() } else { format!("pool/{}/", member.name) };
            let c = self.contribute(ctx, (member, &prefix), input, id, (&ahead, &mut hashers, &reuse)).await?;
            let c = Contribution { source: source.clone(), ..c };
            ahead.push(c.offered.clone());
            merged.push(c);
        }
        if let Some(gate) = &self.1 {
            if let Some(c) = self.carry(ctx, (repo, &inputs), id, gate, (&ahead, &mut hashers, &reuse)).await? {
                merged.push(c);
            }
        }
        emitted.extend(merged);
        chunks::finish_merge(ctx, memory, (repo.id, id), names, emitted, hashers).await
    }

    /// Carries forward what the repository's last published `Packages` index listed of the
    /// packages the policy now holds a version of back ([`BuildGate::unsettled`]): a Debian or
    /// Ubuntu index lists one version of each package, so when the upstream replaces it by one
    /// the policy holds back (too young, say), the previous one would vanish with it. An entry is
    /// carried when the policy lets it through now, no member offers the same version, and its
    /// file is still there: fetched into the proxy's cache now (where it stays when the
    /// upstream's pool drops it) and checked against the entry's `SHA256`. Only entries of a
    /// proxy member (or of the gated proxy itself) are: a hosted or group member's index lists
    /// every version it still has.
    async fn carry(
        &self,
        ctx: &mut BuildContext<'_>,
        (repo, inputs): (&Repository, &[(Repository, Input, String)]),
        id: &IndexId<'_>,
        gate: &BuildGate,
        (ahead, hashers, reuse): (&[Arc<HashSet<u128>>], &mut [Hashers; 3], &chunks::Reuse),
    ) -> Result<Option<Contribution>, BuildError> {
        let unsettled = gate.unsettled();
        // (Only this index's architecture's packages, and `all`'s.)
        let this = [format!(" {}", id.arch), " all".to_string()];
        if id.stem != "Packages" || !unsettled.iter().any(|s| this.iter().any(|a| s.ends_with(a.as_str()))) {
            return Ok(None);
        }
        let path = format!("dists/{}/{}/{}.xz", id.dist, id.base, id.stem);
        let Some(last) = published_entry(ctx.db, repo, KIND, id.dist, &path).await? else { return Ok(None) };
        // What cannot be read of the last index is not carried (the build goes on without).
        let bytes = match self.0.snapshot_bytes(&last).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(repository = %repo.name, path, error = %e, "cannot read the last index: nothing carried forward");
                return Ok(None);
            }
        };
        let offered = ahead.to_vec();
        // The last index's entries of those packages that no member offers now.
        let read = packyard_core::publication::work::read(move || {
            let (mut reader, mut stanza, mut out) = (stanzas(bytes, Compression::Xz), String::new(), Vec::new());
            while reader.next_stanza(&mut stanza)? {
                let Some(name) = field(&stanza, "Package") else { continue };
                if !unsettled.contains(&BuildGate::slot(name, field(&stanza, "Architecture"))) {
                    continue;
                }
                let Some((key, _)) = stanza_key(&stanza) else { continue };
                let key = incremental::key_digest(&key);
                if !offered.iter().any(|a| a.contains(&key)) {
                    out.push(stanza.clone());
                }
            }
            Ok::<_, std::io::Error>(out)
        })
        .await
        .map_err(other)?;
        let candidates = match read {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(repository = %repo.name, path, error = %e, "cannot read the last index: nothing carried forward");
                return Ok(None);
            }
        };
        let mut text = String::new();
        for stanza in candidates {
            if !verdict(gate, &stanza, "Filename").is_some_and(|v| v.passes()) {
                continue;
            }
            let Some(at) = field(&stanza, "Filename") else { continue };
            // Where the file comes from: the gated proxy's upstream, or a group's proxy member's.
            let from = match repo.repo_type {
                RepoType::Proxy => Some((repo, at)),
                _ => at.strip_prefix("pool/").and_then(|rest| rest.split_once('/')).and_then(|(name, rest)| {
                    let (m, ..) = inputs.iter().find(|(m, ..)| m.name.as_str() == name)?;
                    (m.repo_type == RepoType::Proxy && m.gate().is_none()).then_some((m, rest))
                }),
            };
            let Some((member, upstream_path)) = from else { continue };
            let got = self.0.still_there(member, super::proxy_request(member, upstream_path)).await?;
            if got.is_none() || got.as_ref().map(|(sha, _)| sha.as_str()) != field(&stanza, "SHA256") {
                let why = packyard_core::groups::Reader::not_carried_because(member);
                tracing::info!(repository = %repo.name, file = at, member = %member.name, "{why}");
                continue;
            }
            text.push_str(&stanza);
            text.push('\n');
        }
        if text.is_empty() {
            return Ok(None);
        }
        // Listed with the paths it had (`contribute` judges and notes each again).
        let input = Input::Carried(bytes::Bytes::from(text));
        let c = self.contribute(ctx, (repo, ""), &input, id, (ahead, hashers, reuse)).await?;
        Ok(Some(Contribution { source: format!("{} carried", repo.name), ..c }))
    }

    /// A member's index for one of the group's, decompressed as a stream of stanzas.
    async fn open(
        &self,
        member: &Repository,
        input: &Input,
        id: &IndexId<'_>,
    ) -> Result<StanzaReader<BufReader<Box<dyn Read + Send>>>, BuildError> {
        let (bytes, compression) = match input {
            Input::Upstream { release, expected, compression } => {
                (self.upstream_index(member, release, id, expected).await?, *compression)
            }
            Input::Published(f) => (self.0.snapshot_bytes(f).await?, Compression::Xz),
            Input::Carried(text) => (text.clone(), Compression::None),
        };
        Ok(stanzas(bytes, compression))
    }

    /// The keys of every stanza a member's index lists: read as [`Upstream::contribute`] reads
    /// (on a producer's thread), with nothing handed over but the keys at the end.
    async fn offered(&self, member: &Repository, input: &Input, id: &IndexId<'_>) -> Result<HashSet<u128>, BuildError> {
        let mut stanzas = self.open(member, input, id).await?;
        let reading = packyard_core::publication::work::read(move || {
            let mut stanza = String::new();
            let mut keys = HashSet::new();
            while stanzas.next_stanza(&mut stanza)? {
                // A stanza apt cannot read is never merged (`contribute`), so it shadows nothing.
                if let Some((key, _)) = stanza_key(&stanza).filter(|_| check_stanza(&stanza).is_ok()) {
                    keys.insert(incremental::key_digest(&key));
                }
            }
            Ok::<_, std::io::Error>(keys)
        });
        reading.await.map_err(other)?.map_err(|e| unreadable(member, id, e))
    }

    /// Merges a member's index: its stanzas but those a member `ahead` lists (or it listed
    /// already), as chunks cut where their keys say (those the last merge stored taken again
    /// from `reuse`), the whole files' hashes carried on.
    async fn contribute(
        &self,
        ctx: &mut BuildContext<'_>,
        (member, prefix): (&Repository, &str),
        input: &Input,
        id: &IndexId<'_>,
        (ahead, hashers, reuse): (&[Arc<HashSet<u128>>], &mut [Hashers; 3], &chunks::Reuse),
    ) -> Result<Contribution, BuildError> {
        let mut stanzas = self.open(member, input, id).await?;
        // Reading (decompressing, parsing, checking) runs on a blocking thread — a heavy
        // build's at the lower priority (`publication::work`) — and hands over the text chunk
        // by chunk; this task stores and compresses what it is handed.
        let (ahead, prefix, gate) = (ahead.to_vec(), prefix.to_string(), self.1.clone());
        let (mut read, reading) = packyard_core::publication::work::produce(2, move |feed| {
            let (mut stanza, mut text) = (String::new(), String::new());
            let mut offered = HashSet::new();
            let mut cuts = incremental::Cuts::new((MIN_CHUNK, MAX_CHUNK), TAIL_PIECE);
            while stanzas.next_stanza(&mut stanza)? {
                if feed.abandoned() {
                    return Ok(offered);
                }
                let Some((key, path_field)) = stanza_key(&stanza) else { continue };
                // A stanza from upstream that apt cannot read would fail `apt-get update` for
                // every client of the group: it is left out, counted and logged.
                if let Err(why) = check_stanza(&stanza) {
                    if !feed.send(Reading::Skipped(key, why.to_string())) {
                        return Ok(offered);
                    }
                    continue;
                }
                let key = incremental::key_digest(&key);
                if !offered.insert(key) || ahead.iter().any(|a| a.contains(&key)) {
                    continue;
                }
                if gate.as_ref().is_some_and(|g| !judged(g, &prefix, &stanza, path_field)) {
                    continue;
                }
                let before = text.len();
                write_stanza(&mut text, &prefix, &stanza, path_field);
                if cuts.after(text.len() - before, || key) && !feed.send(Reading::Text(std::mem::take(&mut text))) {
                    return Ok(offered);
                }
            }
            let mut from = 0;
            for end in cuts.pieces() {
                debug_assert!(from < end && end <= text.len(), "a piece {from}..{end} of {}", text.len());
                if !feed.send(Reading::Text(text.get(from..end).unwrap_or_default().to_string())) {
                    break;
                }
                from = end;
            }
            Ok::<_, std::io::Error>(offered)
        });
        let mut out = Vec::new();
        let mut work = chunks::Compressing::default();
        while let Some(item) = read.recv().await {
            match item {
                Reading::Text(text) => reuse.push(ctx, &mut work, (hashers, &mut out), text).await?,
                Reading::Skipped(key, why) => ctx.skip(member.name.as_str(), || format!("{key} in {}: {why}", id.base)),
            }
        }
        let offered = reading.await.map_err(other)?.map_err(|e| unreadable(member, id, e))?;
        work.finish(ctx, (hashers, &mut out)).await?;
        Ok(Contribution { member: member.id, source: String::new(), offered: Arc::new(offered), kept: out })
    }

    /// A proxy member's upstream `InRelease` for `dist` (its SHA-256, and the release text its
    /// signature covers), through the proxy cache, verified with the proxy's `apt.signed_by`
    /// keys: the group re-signs what it merges, so it merges only what the upstream signed.
    /// `None` when the proxy does not mirror `dist` or the upstream has no `InRelease`.
    pub(super) async fn upstream_release(
        &self,
        member: &Repository,
        dist: &str,
    ) -> Result<Option<(String, String)>, BuildError> {
        let settings = AptSettings::of(member);
        if !settings.suites().contains(&dist) {
            return Ok(None);
        }
        let Some(armored) = settings.signed_by.as_deref() else {
            return Err(other(format!(
                "member {} is a proxy without apt.signed_by: set it to the upstream archive's public key, so that the group can verify what it merges and re-signs",
                member.name
            )));
        };
        let keys = packyard_codecs::apt::signing::parse_public_keys(armored)
            .map_err(|e| other(format!("member {}: apt.signed_by: {e}", member.name)))?;
        let Some(sha) = self.fetch(member, &format!("dists/{dist}/InRelease")).await? else {
            return Ok(None);
        };
        let signed = self.0.text(&sha).await?;
        let text = packyard_codecs::apt::signing::verify_clearsigned(&signed, &keys)
            .map_err(|e| other(format!("member {}: the upstream's {dist}/InRelease is refused: {e}", member.name)))?;
        Ok(Some((sha, text)))
    }

    /// One file of a proxy member through the proxy cache (under APT's proxy rules): its
    /// SHA-256, or `None` for an upstream 404.
    async fn fetch(&self, member: &Repository, path: &str) -> Result<Option<String>, BuildError> {
        Ok(self.0.fetch(member, super::proxy_request(member, path)).await?.map(|(sha, _)| sha))
    }

    /// A proxy member's upstream index `expected` (the SHA-256 its verified `release` lists
    /// for it) through the proxy cache, fetched by hash when the upstream offers it and the
    /// plain name moved on.
    async fn upstream_index(
        &self,
        member: &Repository,
        release: &(String, String),
        id: &IndexId<'_>,
        expected: &str,
    ) -> Result<bytes::Bytes, BuildError> {
        let IndexId { dist, base, .. } = *id;
        let by_hash = field(&release.1, "Acquire-By-Hash").is_some_and(|v| v.eq_ignore_ascii_case("yes"));
        let rel = sha256_section(&release.1)
            .into_iter()
            .find(|(h, p)| *h == expected && p.starts_with(base))
            .map(|(_, p)| p.to_string())
            .ok_or_else(|| other(format!("member {}: {expected} is not in its {dist} Release", member.name)))?;
        let mut got = self.fetch(member, &format!("dists/{dist}/{rel}")).await?;
        if got.as_deref() != Some(expected) && by_hash {
            let path = format!("dists/{dist}/{base}/by-hash/SHA256/{expected}");
            got = self.fetch(member, &path).await?;
        }
        if got.as_deref() != Some(expected) {
            return Err(other(format!(
                "member {}: the upstream's {dist}/{rel} does not match its Release (the upstream may be mid-update); retrying",
                member.name
            )));
        }
        self.0.bytes(expected).await
    }
}

/// Whether policy `gate` lets a member's `stanza` into the merged index; what it holds back or
/// audits is noted under each file the stanza lists, as the merge serves it (`prefix`: a
/// group's `pool/<member>/`). A binary package is judged by its name, version and
/// architecture, its advisories by its source package's name (Debian's advisories name source
/// packages).
fn judged(gate: &BuildGate, prefix: &str, stanza: &str, path_field: &str) -> bool {
    let (Some(name), Some(version), Some(v)) =
        (field(stanza, "Package"), field(stanza, "Version"), verdict(gate, stanza, path_field))
    else {
        return false;
    };
    let sources = path_field == "Directory";
    let Some(at) = field(stanza, path_field) else { return false };
    if sources {
        // Each file the source package lists, in its directory.
        let mut passes = true;
        for file in listed_files(stanza) {
            passes = gate.note(&format!("{prefix}{at}/{file}"), (name, version), &v);
        }
        passes && v.passes()
    } else {
        gate.note(&format!("{prefix}{at}"), (name, version), &v)
    }
}

/// Policy `gate`'s verdict on a member's `stanza`, noting nothing.
fn verdict(gate: &BuildGate, stanza: &str, path_field: &str) -> Option<packyard_core::policy::Verdict> {
    let (Some(name), Some(version)) = (field(stanza, "Package"), field(stanza, "Version")) else { return None };
    let sources = path_field == "Directory";
    let source = match field(stanza, "Source") {
        // `Source: name (version)` when the source's version differs.
        Some(s) if !sources => s.split_whitespace().next().unwrap_or(name),
        _ => name,
    };
    let subject = Subject {
        name,
        version,
        published_ms: None,
        licenses: &[],
        architecture: if sources { Some("source") } else { field(stanza, "Architecture") },
    };
    Some(gate.judge(&Entry { subject, advisory_name: source }, None))
}

/// The names a `Sources` stanza's `Files` field lists (`<md5> <size> <name>` per line).
fn listed_files(stanza: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in stanza.lines() {
        if !line.starts_with([' ', '\t']) {
            inside = line.split_once(':').is_some_and(|(k, _)| k.eq_ignore_ascii_case("Files"));
            continue;
        }
        if inside {
            if let Some(name) = line.split_whitespace().nth(2) {
                out.push(name);
            }
        }
    }
    out
}

/// Which of a proxy member's upstream indexes a group's index merges: the form the verified
/// `release` lists first among xz, gz and plain; `None` when it lists none.
fn upstream_input(release: (String, String), id: &IndexId<'_>) -> Option<Input> {
    let IndexId { base, stem, .. } = *id;
    for (suffix, compression) in FORMS {
        let rel = format!("{base}/{stem}{suffix}");
        let listed = sha256_section(&release.1).into_iter().find(|(_, p)| *p == rel).map(|(h, _)| h.to_string());
        if let Some(expected) = listed {
            return Some(Input::Upstream { release, expected, compression });
        }
    }
    None
}

fn unreadable(member: &Repository, id: &IndexId<'_>, e: std::io::Error) -> BuildError {
    other(format!("member {}: cannot read its {} {} index: {e}", member.name, id.dist, id.base))
}

/// The snapshot file (never served: a hidden path) recording which upstream `InRelease` of each
/// proxy member a group snapshot merged: `<member> <sha256>` per line.
pub(super) fn sources_path(dist: &str) -> String {
    format!("dists/{dist}/.sources")
}

/// The snapshot file (hidden) where a gated group's snapshot says what its policy held back
/// ([`packyard_core::policy::Report`]), by the files' paths as the group serves them.
pub fn policy_path(dist: &str) -> String {
    format!("dists/{dist}/{}", packyard_core::policy::POLICY_FILE)
}

/// The forms of an index a `Release` may list, in the order they are read: xz, gzip, plain.
pub(super) const FORMS: [(&str, Compression); 3] =
    [(".xz", Compression::Xz), (".gz", Compression::Gz), ("", Compression::None)];

/// An index's stanzas, decompressed as they are read. An index may be several xz streams or
/// gzip members one after another (Packyard's gzip files are: each chunk compressed on its
/// own).
pub(super) fn stanzas<B>(bytes: B, compression: Compression) -> StanzaReader<BufReader<Box<dyn Read + Send>>>
where
    B: AsRef<[u8]> + Send + 'static,
{
    let reader: Box<dyn Read + Send> = match compression {
        Compression::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(std::io::Cursor::new(bytes))),
        Compression::Gz => Box::new(flate2::read::MultiGzDecoder::new(std::io::Cursor::new(bytes))),
        Compression::None => Box::new(std::io::Cursor::new(bytes)),
    };
    StanzaReader::new(BufReader::with_capacity(64 * 1024, reader))
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Compression {
    Xz,
    Gz,
    None,
}

/// `(sha256, path)` of every line of a Release file's `SHA256:` section.
pub(super) fn sha256_section(release: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in release.lines() {
        if !line.starts_with(' ') {
            inside = line.trim_end() == "SHA256:";
            continue;
        }
        if inside {
            let mut parts = line.split_whitespace();
            if let (Some(h), Some(_size), Some(p)) = (parts.next(), parts.next(), parts.next()) {
                out.push((h, p));
            }
        }
    }
    out
}

/// The distribution of hosted `member` that a group's `dist` merges: the one of that name, or
/// the member's only distribution whatever its name; none when the member publishes several
/// and not this one.
fn member_distribution(member: &Repository, dist: &str) -> Option<String> {
    let settings = AptSettings::of(member);
    let suites = settings.suites();
    match suites.as_slice() {
        [only] => Some(only.to_string()),
        all if all.contains(&dist) => Some(dist.to_string()),
        _ => None,
    }
}

/// A hosted or group member's published `Packages.xz` for the index's component and
/// architecture in `dist` (its `binary-all` index when it publishes only `all`), or its
/// component's `Sources.xz`. Reading what the member published, not its rows, keeps the group
/// in step with the member's snapshots: the group is rebuilt after each of them
/// (`after_publish`).
async fn published_index(
    db: &Db,
    member: &Repository,
    dist: &str,
    id: &IndexId<'_>,
) -> Result<Option<Input>, BuildError> {
    let IndexId { component, arch, stem, .. } = *id;
    let candidates = if stem == "Sources" {
        vec![format!("{component}/source")]
    } else {
        vec![format!("{component}/binary-{arch}"), format!("{component}/binary-all")]
    };
    for base in candidates {
        let path = format!("dists/{dist}/{base}/{stem}.xz");
        if let Some(f) = published_entry(db, member, KIND, dist, &path).await? {
            return Ok(Some(Input::Published(f)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stanzas_merge_first_member_wins() -> std::io::Result<()> {
        let index = "Package: a\nVersion: 1\nArchitecture: amd64\nFilename: pool/main/a/a_1_amd64.deb\nDescription: x\n more\n\n\nPackage: b\nVersion: 2\nArchitecture: all\nFilename: pool/main/b/b_2_all.deb";
        let mut reader = StanzaReader::new(index.as_bytes());
        let mut stanza = String::new();
        let mut all = Vec::new();
        while reader.next_stanza(&mut stanza)? {
            all.push(stanza.clone());
        }
        assert_eq!(all.len(), 2);
        assert_eq!(field(&all[0], "Version"), Some("1"));
        assert_eq!(field(&all[0], "more"), None, "continuation lines are not fields");
        let (mut out, mut seen) = (String::new(), HashSet::new());
        assert!(merge_stanza(&mut out, &mut seen, "first", &all[0]));
        assert!(!merge_stanza(&mut out, &mut seen, "second", &all[0]), "same name/version/arch: first wins");
        assert!(merge_stanza(&mut out, &mut seen, "second", &all[1]));
        assert!(!merge_stanza(&mut out, &mut seen, "x", "Package: c\nVersion: 1\n"), "incomplete stanzas are skipped");
        assert_eq!(
            out,
            "Package: a\nVersion: 1\nArchitecture: amd64\nFilename: pool/first/pool/main/a/a_1_amd64.deb\nDescription: x\n more\n\n\
             Package: b\nVersion: 2\nArchitecture: all\nFilename: pool/second/pool/main/b/b_2_all.deb\n\n"
        );
        Ok(())
    }

    #[test]
    fn release_sha256_section() {
        let r = "Origin: x\nMD5Sum:\n aa 1 main/binary-amd64/Packages\nSHA256:\n bb 1 main/binary-amd64/Packages\n cc 2 main/binary-amd64/Packages.xz\nSHA512:\n dd 1 main/binary-amd64/Packages\n";
        assert_eq!(
            sha256_section(r),
            vec![("bb", "main/binary-amd64/Packages"), ("cc", "main/binary-amd64/Packages.xz")]
        );
    }
}
