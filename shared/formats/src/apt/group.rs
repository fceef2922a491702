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

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};

use super::index::{Hashed, IndexId, IndexWriter};
use super::KIND;
use packyard_core::groups::{members_of, published_entry, Reader, Sources};
use packyard_core::publication::{BuildContext, BuildError};
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::Db;

/// A group's build reading its members.
pub struct Upstream<'a>(pub &'a Reader);

/// Text is handed to the index writer in pieces of about this size.
const CHUNK: usize = 256 * 1024;

use super::index::other;

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

/// Adds a member's stanza to `out` unless an earlier member listed the same package: its
/// `Filename` (a `Sources` stanza: its `Directory`) is prefixed with `pool/<member>/`. Stanzas
/// without the identifying fields — name, version and, in `Packages`, architecture — or the
/// path are skipped.
pub fn merge_stanza(out: &mut String, seen: &mut HashSet<String>, member: &str, stanza: &str) -> bool {
    let sources = field(stanza, "Filename").is_none();
    let (path_field, arch) =
        if sources { ("Directory", Some("source")) } else { ("Filename", field(stanza, "Architecture")) };
    let (Some(name), Some(version), Some(arch), Some(_)) =
        (field(stanza, "Package"), field(stanza, "Version"), arch, field(stanza, path_field))
    else {
        return false;
    };
    if !seen.insert(format!("{name} {version} {arch}")) {
        return false;
    }
    for line in stanza.lines() {
        match line.split_once(':') {
            Some((k, v)) if !line.starts_with([' ', '\t']) && k.eq_ignore_ascii_case(path_field) => {
                out.push_str(path_field);
                out.push_str(": pool/");
                out.push_str(member);
                out.push('/');
                out.push_str(v.trim());
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out.push('\n');
    true
}

/// One architecture's index of group `repo`, merged from its members in order.
pub(super) async fn merge_index(
    ctx: &mut BuildContext<'_>,
    upstream: &Upstream<'_>,
    repo: &Repository,
    id: &IndexId<'_>,
    sources: &mut Sources,
) -> Result<[Hashed; 3], BuildError> {
    upstream.merge_index(ctx, repo, id, sources).await
}

impl Upstream<'_> {
    async fn merge_index(
        &self,
        ctx: &mut BuildContext<'_>,
        repo: &Repository,
        id: &IndexId<'_>,
        sources: &mut Sources,
    ) -> Result<[Hashed; 3], BuildError> {
        let IndexId { dist, base, .. } = *id;
        let mut out = IndexWriter::open(ctx, id).await?;
        let mut seen = HashSet::new();
        let mut text = String::new();
        for member in members_of(ctx.db, repo).await? {
            let bytes = match member.repo_type {
                RepoType::Proxy => {
                    let Some(release) = self.upstream_release(&member, dist).await? else { continue };
                    sources.insert(member.name.to_string(), release.0.clone());
                    self.upstream_index(&member, &release, id).await?
                }
                // A hosted member's distribution of the same name (its only one, whatever its
                // name); a nested group's of the same name.
                RepoType::Hosted => {
                    let Some(own) = member_distribution(&member, dist) else { continue };
                    published_index(ctx.db, self.0, &member, &own, id).await?
                }
                RepoType::Group => published_index(ctx.db, self.0, &member, dist, id).await?,
            };
            let Some((bytes, compression)) = bytes else { continue };
            let reader: Box<dyn Read + Send> = match compression {
                // An index may be several xz streams or gzip members one after another (Packyard
                // publishes its own so: each chunk compressed on its own).
                Compression::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(std::io::Cursor::new(bytes))),
                Compression::Gz => Box::new(flate2::read::MultiGzDecoder::new(std::io::Cursor::new(bytes))),
                Compression::None => Box::new(std::io::Cursor::new(bytes)),
            };
            let mut stanzas = StanzaReader::new(BufReader::with_capacity(64 * 1024, reader));
            let mut stanza = String::new();
            while stanzas
                .next_stanza(&mut stanza)
                .map_err(|e| other(format!("member {}: cannot read its {dist} {base} index: {e}", member.name)))?
            {
                merge_stanza(&mut text, &mut seen, member.name.as_str(), &stanza);
                if text.len() >= CHUNK {
                    out.push(&text).await?;
                    text.clear();
                }
            }
            out.push(&text).await?;
            text.clear();
        }
        out.finish(ctx).await
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
        let settings = member.settings.apt.clone().unwrap_or_default();
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

    /// A proxy member's upstream index (a component and architecture's `Packages`, or a
    /// component's `Sources`): the form `release` lists first among xz, gz and plain, checked
    /// against the SHA-256 there (fetched by hash when the upstream offers it and the plain name
    /// moved on).
    async fn upstream_index(
        &self,
        member: &Repository,
        release: &(String, String),
        id: &IndexId<'_>,
    ) -> Result<Option<(bytes::Bytes, Compression)>, BuildError> {
        let IndexId { dist, base, stem, .. } = *id;
        let release = release.1.as_str();
        let by_hash = field(release, "Acquire-By-Hash").is_some_and(|v| v.eq_ignore_ascii_case("yes"));
        let listed = sha256_section(release);
        for (suffix, compression) in [(".xz", Compression::Xz), (".gz", Compression::Gz), ("", Compression::None)] {
            let rel = format!("{base}/{stem}{suffix}");
            let Some(expected) = listed.iter().find(|(_, p)| *p == rel).map(|(h, _)| h.to_string()) else {
                continue;
            };
            let mut got = self.fetch(member, &format!("dists/{dist}/{rel}")).await?;
            if got.as_deref() != Some(expected.as_str()) && by_hash {
                let path = format!("dists/{dist}/{base}/by-hash/SHA256/{expected}");
                got = self.fetch(member, &path).await?;
            }
            if got.as_deref() != Some(expected.as_str()) {
                return Err(other(format!(
                    "member {}: the upstream's {dist}/{rel} does not match its Release (the upstream may be mid-update); retrying",
                    member.name
                )));
            }
            return Ok(Some((self.0.bytes(&expected).await?, compression)));
        }
        Ok(None)
    }
}

/// The snapshot file (never served: a hidden path) recording which upstream `InRelease` of each
/// proxy member a group snapshot merged: `<member> <sha256>` per line.
pub(super) fn sources_path(dist: &str) -> String {
    format!("dists/{dist}/.sources")
}

#[derive(Debug, Clone, Copy)]
enum Compression {
    Xz,
    Gz,
    None,
}

/// `(sha256, path)` of every line of a Release file's `SHA256:` section.
fn sha256_section(release: &str) -> Vec<(&str, &str)> {
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
    let settings = member.settings.apt.clone().unwrap_or_default();
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
    reader: &Reader,
    member: &Repository,
    dist: &str,
    id: &IndexId<'_>,
) -> Result<Option<(bytes::Bytes, Compression)>, BuildError> {
    let IndexId { component, arch, stem, .. } = *id;
    let candidates = if stem == "Sources" {
        vec![format!("{component}/source")]
    } else {
        vec![format!("{component}/binary-{arch}"), format!("{component}/binary-all")]
    };
    for base in candidates {
        let path = format!("dists/{dist}/{base}/{stem}.xz");
        if let Some(f) = published_entry(db, member, KIND, dist, &path).await? {
            return Ok(Some((reader.snapshot_bytes(&f).await?, Compression::Xz)));
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
