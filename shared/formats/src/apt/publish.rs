//! The APT snapshot of one distribution: per component and architecture `Packages`,
//! `Packages.gz` and `Packages.xz` (with `Architecture: all` packages in every architecture's index), per
//! component `Sources`, `Sources.gz` and `Sources.xz` (its source packages), their
//! `by-hash` names, and `Release` with MD5Sum/SHA1/SHA256/SHA512 sections. Rows stream in keyset
//! pages; only one page and the compressor's buffer are in memory at a time.

use super::settings::AptSettings;
use packyard_model::repos::FormatSettings;
use std::fmt::Write as _;

use async_trait::async_trait;

use super::group::{self, Upstream};
use std::collections::HashMap;

use super::chunks::{self, IndexRows};
use super::index::{blocking, other, Hashed, IndexId, TEXT};
use super::KIND;
use crate::apt::rows;
use packyard_codecs::apt::dsc::{render_sources_stanza, SourceFile};
use packyard_codecs::apt::packages::{render_stanza, PoolFile};
use packyard_core::groups::Reader;
use packyard_core::policy::BuildGate;
use packyard_core::publication::{BuildContext, BuildError, Builder, Rebuilds};
use packyard_model::repos::{Format, Repository};
use packyard_store::db::publication::UnitRecord;
use packyard_store::db::Db;

pub struct AptBuilder {
    pub page_size: i64,
    /// Where each repository's signing key is sealed.
    pub keystore: std::sync::Arc<packyard_core::security::keystore::KeyStore>,
    /// Reads group members (and, through its blob store, packages for their MD5).
    pub reader: Reader,
    /// What the last builds left of each hosted index and group merge (reused while still
    /// published).
    pub memory: chunks::Memory,
    /// The worker's services: a group's policy is applied with them (`None`: a group with a
    /// policy is not built).
    pub services: Option<packyard_core::services::Services>,
}

#[async_trait]
impl Builder for AptBuilder {
    async fn build(&self, ctx: &mut BuildContext<'_>, repo: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        self.suite(ctx, repo, unit).await
    }

    /// A group's suite: each index merged from the members' (the `Release` signed with the
    /// group's own key).
    async fn merge(&self, ctx: &mut BuildContext<'_>, group: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        self.suite(ctx, group, unit).await
    }

    /// The distribution's files as a snapshot kept them, with a `Release` dated anew and signed
    /// with the repository's current key.
    async fn republish(
        &self,
        ctx: &mut BuildContext<'_>,
        repo: &Repository,
        unit: &UnitRecord,
        files: Vec<packyard_store::db::publication::SnapshotFile>,
    ) -> Result<(), BuildError> {
        let dist = unit.unit_key.as_str();
        let (release, inrelease, detached) =
            (format!("dists/{dist}/Release"), format!("dists/{dist}/InRelease"), format!("dists/{dist}/Release.gpg"));
        let mut old = None;
        for f in files {
            if f.path == release {
                old = Some(packyard_core::publication::read_file(ctx.blobs(), &f).await?);
            } else if f.path != inrelease && f.path != detached {
                ctx.keep(f);
            }
        }
        let old = old.ok_or_else(|| BuildError::Other(format!("the snapshot has no {release}")))?;
        let old = std::str::from_utf8(&old).map_err(|_| BuildError::Other(format!("{release} is not UTF-8")))?;
        // A second later than any index the unit published before (each is dated no later
        // than its publication), the snapshot's among them: apt keeps the index it has when
        // the new one is dated earlier. Never in the future, so that the next build, dated
        // now, is not dated earlier than this one: within the second, it waits.
        let next = unit.last_published_at.map_or(0, |ms| (ms.div_euclid(1000) + 1) * 1000);
        let wait = next - packyard_store::db::now_ms();
        if wait > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(wait.unsigned_abs())).await;
        }
        let date = packyard_model::time::rfc1123_utc(packyard_store::db::now_ms().max(next));
        let mut text = String::with_capacity(old.len() + 40);
        for line in old.lines() {
            if line.starts_with("Date:") {
                let _ = writeln!(text, "Date: {date}");
            } else {
                text.push_str(line);
                text.push('\n');
            }
        }
        let (clear, sig) = self.sign(ctx, repo, &text).await?;
        ctx.put(&release, TEXT, text.as_bytes()).await?;
        ctx.put(&inrelease, TEXT, clear.as_bytes()).await?;
        ctx.put(&detached, "application/pgp-signature", sig.as_bytes()).await?;
        Ok(())
    }

    /// A member published: every group that lists it rebuilds each distribution it publishes.
    async fn after_publish(&self, db: &packyard_store::db::Db, unit: &UnitRecord) -> Result<Rebuilds, BuildError> {
        packyard_core::groups::after_member_publish(db, unit, Format::Apt, |g| {
            super::published_suites(g).into_iter().map(|s| (KIND.to_string(), s)).collect()
        })
        .await
    }

    /// A proxy member's upstream `InRelease` of the distribution (verified), by hash.
    async fn upstream_source(&self, member: &Repository, dist: &str) -> Result<Option<String>, BuildError> {
        Ok(Upstream(&self.reader, None).upstream_release(member, dist).await?.map(|(sha, _)| sha))
    }

    fn sources_path(&self, dist: &str) -> String {
        group::sources_path(dist)
    }

    fn policy_path(&self, dist: &str) -> Option<String> {
        Some(group::policy_path(dist))
    }
}

impl AptBuilder {
    /// `InRelease` and `Release.gpg` of `text`, signed by every key that signs the repository
    /// (two during a rotation's overlap: a client trusting either verifies them).
    async fn sign(
        &self,
        ctx: &BuildContext<'_>,
        repo: &Repository,
        text: &str,
    ) -> Result<(String, String), BuildError> {
        let signers = crate::apt::keys::signers(ctx.db, &self.keystore, repo.id, &crate::apt::keys::user_id(repo))
            .await
            .map_err(|e| BuildError::Other(format!("signing key: {e}")))?;
        let signers: Vec<&packyard_codecs::apt::signing::Signer> = signers.iter().collect();
        let clear = packyard_codecs::apt::signing::clearsign_all(&signers, text)
            .map_err(|e| BuildError::Other(e.to_string()))?;
        let detached = packyard_codecs::apt::signing::detached_all(&signers, text.as_bytes())
            .map_err(|e| BuildError::Other(e.to_string()))?;
        Ok((clear, detached))
    }

    /// A distribution's `Release`, `InRelease` and `Release.gpg` over its indexes: a hosted
    /// repository's written from its rows, a group's merged from its members'.
    async fn suite(&self, ctx: &mut BuildContext<'_>, repo: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        let settings = AptSettings::of(repo);
        let dist = unit.unit_key.as_str();
        let mut archs: Vec<&str> = settings.architectures.iter().map(String::as_str).filter(|a| *a != "all").collect();
        if archs.is_empty() {
            archs.push("all");
        }
        let mut indexes = Vec::new();
        let mut sources = packyard_core::groups::Sources::new();
        // A group's policy, read once for the whole distribution.
        let gate = BuildGate::for_merge(self.services.as_ref(), repo, Some(&super::spec::AptOsv), dist).await?;
        // The current snapshot's index files, which an incremental build may continue.
        let current: HashMap<String, String> = match ctx.continues(unit) {
            Some(snapshot) => ctx
                .db
                .snapshot_files(snapshot)
                .await?
                .into_iter()
                .filter(|f| f.is_composite())
                .map(|f| (f.path, f.sha256))
                .collect(),
            _ => HashMap::new(),
        };
        // The packages and source packages noted as changed since the last build (hosted).
        let changed = if repo.publishes_merge() {
            Default::default()
        } else {
            self.memory.changes(ctx.db, repo.id, dist, &current).await?
        };
        for component in &settings.components {
            for arch in &archs {
                let base = format!("{component}/binary-{arch}");
                let id = IndexId { component, arch, dist, base: &base, stem: "Packages" };
                let files = if repo.publishes_merge() {
                    let upstream = (&Upstream(&self.reader, gate.clone()), &self.memory);
                    group::merge_index(ctx, upstream, repo, &id, (&mut sources, &current)).await?
                } else {
                    self.index(ctx, repo.id, &id, (&current, &changed[0])).await?
                };
                indexes.extend(files);
            }
            let base = format!("{component}/source");
            let id = IndexId::sources(dist, component, &base);
            let files = if repo.publishes_merge() {
                let upstream = (&Upstream(&self.reader, gate.clone()), &self.memory);
                group::merge_index(ctx, upstream, repo, &id, (&mut sources, &current)).await?
            } else {
                self.sources_index(ctx, repo.id, &id, (&current, &changed[1])).await?
            };
            indexes.extend(files);
        }
        let now = packyard_store::db::now_ms();
        let mut release = String::new();
        // A gated proxy's release says what its upstream's does (apt pins and unattended
        // upgrades match Origin, Label, Suite and Codename; Valid-Until keeps the upstream's
        // protection against a frozen mirror), unless its settings say otherwise.
        let upstream = match repo.repo_type {
            packyard_model::repos::RepoType::Proxy => {
                Upstream(&self.reader, None).upstream_release(repo, dist).await?.map(|(_, text)| text)
            }
            _ => None,
        };
        let said = |name: &str| upstream.as_deref().and_then(|t| group::field(t, name)).map(str::to_string);
        let origin = settings.origin.clone().or_else(|| said("Origin")).unwrap_or_else(|| repo.name.to_string());
        let label = settings.label.clone().or_else(|| said("Label")).unwrap_or_else(|| repo.name.to_string());
        let suite = said("Suite").unwrap_or_else(|| dist.to_string());
        let codename = said("Codename").unwrap_or_else(|| dist.to_string());
        let _ = write!(
            release,
            "Origin: {origin}\nLabel: {label}\nSuite: {suite}\nCodename: {codename}\nDate: {}\n",
            packyard_model::time::rfc1123_utc(now)
        );
        if let Some(until) = said("Valid-Until") {
            let _ = writeln!(release, "Valid-Until: {until}");
        }
        let _ = write!(
            release,
            "Architectures: {}\nComponents: {}\nDescription: {} served by Packyard\nAcquire-By-Hash: yes\n",
            archs.join(" "),
            settings.components.join(" "),
            repo.name
        );
        for (section, pick) in [
            ("MD5Sum", (|h: &Hashed| h.md5.clone()) as fn(&Hashed) -> String),
            ("SHA1", |h: &Hashed| h.sha1.clone()),
            ("SHA256", |h: &Hashed| h.sha256.clone()),
            ("SHA512", |h: &Hashed| h.sha512.clone()),
        ] {
            let _ = writeln!(release, "{section}:");
            for h in &indexes {
                let _ = writeln!(release, " {} {:>16} {}", pick(h), h.size, h.path);
            }
        }
        let (inrelease, detached) = self.sign(ctx, repo, &release).await?;
        if repo.publishes_merge() {
            let text = packyard_core::groups::render_sources(&sources);
            ctx.put(&group::sources_path(dist), TEXT, text.as_bytes()).await?;
        }
        if let (Some(gate), Some(services)) = (&gate, &self.services) {
            ctx.put(&group::policy_path(dist), TEXT, gate.report().render().as_bytes()).await?;
            gate.record(services, repo.id, dist).await?;
        }
        ctx.put(&format!("dists/{dist}/Release"), TEXT, release.as_bytes()).await?;
        ctx.put(&format!("dists/{dist}/InRelease"), TEXT, inrelease.as_bytes()).await?;
        ctx.put(&format!("dists/{dist}/Release.gpg"), "application/pgp-signature", detached.as_bytes()).await?;
        Ok(())
    }

    /// Fills in the MD5 that uploads leave to the worker, so each package is hashed once: the
    /// page's new packages are read from the blob store a piece at a time, up to
    /// [`md5lanes::WIDTH`] at once, and hashed in step on the blocking pool (a lane whose
    /// package ends takes the next one). A package of any size costs a piece of memory.
    async fn complete_digests(
        &self,
        db: &packyard_store::db::Db,
        page: &mut [crate::apt::rows::AptPackage],
    ) -> Result<(), BuildError> {
        use futures_util::StreamExt as _;
        use packyard_codecs::md5lanes::{self, Lanes};
        use packyard_store::blobs::{ByteStream, Sha256Hex};

        let missing: Vec<usize> = page.iter().enumerate().filter(|(_, p)| p.md5.is_empty()).map(|(i, _)| i).collect();
        let width = md5lanes::WIDTH.min(missing.len());
        let mut missing = missing.into_iter();
        let blobs = &self.reader.blobs;
        let mut lanes = Lanes::new(width);
        // The package and the rest of its bytes, per lane.
        let mut open: Vec<Option<(usize, ByteStream)>> = (0..width).map(|_| None).collect();
        let mut computed = Vec::new();
        loop {
            for slot in open.iter_mut().filter(|s| s.is_none()) {
                if let Some(i) = missing.next() {
                    let read = blobs.open(&Sha256Hex::parse(&page[i].sha256)?, None).await?;
                    *slot = Some((i, read.body));
                }
            }
            if open.iter().all(Option::is_none) {
                break;
            }
            // The next piece of every open package, read together.
            let pieces = futures_util::future::join_all(open.iter_mut().map(|slot| async move {
                match slot {
                    Some((_, body)) => body.next().await.transpose(),
                    None => Ok(None),
                }
            }))
            .await;
            let mut ended = Vec::new();
            let mut fed = Vec::with_capacity(width);
            for (lane, piece) in pieces.into_iter().enumerate() {
                match piece.map_err(other)? {
                    Some(bytes) => fed.push((lane, bytes)),
                    None => {
                        if let Some((i, _)) = open[lane].take() {
                            ended.push((lane, i));
                        }
                    }
                }
            }
            let (back, digests) = blocking(move || {
                for (lane, bytes) in &fed {
                    lanes.update(*lane, bytes);
                }
                lanes.hash_ready();
                let digests: Vec<(usize, [u8; 16])> = ended.iter().map(|&(lane, i)| (i, lanes.finish(lane))).collect();
                Ok((lanes, digests))
            })
            .await?;
            lanes = back;
            for (i, digest) in digests {
                page[i].md5 = hex::encode(digest);
                computed.push(i);
            }
        }
        // One write for the page: the rows and the catalogue's assets.
        let digests: Vec<&crate::apt::rows::AptPackage> = computed.iter().map(|&i| &page[i]).collect();
        crate::apt::rows::set_md5s(db, &digests).await?;
        Ok(())
    }

    /// One architecture's index of a hosted repository, from its rows: only the chunks whose
    /// rows changed since the unit's current snapshot are rendered again ([`chunks`]).
    async fn index(
        &self,
        ctx: &mut BuildContext<'_>,
        repo: i64,
        id: &IndexId<'_>,
        since: (&HashMap<String, String>, &[i64]),
    ) -> Result<[Hashed; 3], BuildError> {
        let rows = PackageRows { builder: self, repo, which: (id.dist, id.component, id.arch) };
        chunks::build(ctx, &self.memory, repo, id, &rows, since).await
    }

    /// One component's `Sources` of a hosted repository, from its rows, as [`AptBuilder::index`].
    async fn sources_index(
        &self,
        ctx: &mut BuildContext<'_>,
        repo: i64,
        id: &IndexId<'_>,
        since: (&HashMap<String, String>, &[i64]),
    ) -> Result<[Hashed; 3], BuildError> {
        let rows = SourceRows { repo, which: (id.dist, id.component) };
        chunks::build(ctx, &self.memory, repo, id, &rows, since).await
    }
}

/// A `Packages` index's rows: a component's packages of one architecture and of `all`.
struct PackageRows<'a> {
    builder: &'a AptBuilder,
    repo: i64,
    which: (&'a str, &'a str, &'a str),
}

#[async_trait]
impl IndexRows for PackageRows<'_> {
    async fn render(
        &self,
        db: &Db,
        after: i64,
        upto: i64,
        limit: i64,
        text: &mut String,
    ) -> Result<Vec<i64>, BuildError> {
        let mut page = rows::index_page(db, self.repo, self.which, after, limit).await?;
        page.retain(|p| p.id <= upto);
        self.builder.complete_digests(db, &mut page).await?;
        for p in &page {
            let file = PoolFile {
                filename: &p.pool_path,
                size: u64::try_from(p.size).unwrap_or(0),
                md5: &p.md5,
                sha256: &p.sha256,
            };
            render_stanza(text, &p.control, &file);
        }
        Ok(page.iter().map(|p| p.id).collect())
    }
}

/// A `Sources` index's rows: a component's source packages with their files.
struct SourceRows<'a> {
    repo: i64,
    which: (&'a str, &'a str),
}

#[async_trait]
impl IndexRows for SourceRows<'_> {
    async fn render(
        &self,
        db: &Db,
        after: i64,
        upto: i64,
        limit: i64,
        text: &mut String,
    ) -> Result<Vec<i64>, BuildError> {
        let mut page = rows::sources_page(db, self.repo, self.which, after, limit).await?;
        page.retain(|(s, _)| s.id <= upto);
        for (source, files) in &page {
            let files: Vec<SourceFile<'_>> = files
                .iter()
                .map(|f| SourceFile {
                    name: f.name(),
                    size: u64::try_from(f.size).unwrap_or(0),
                    md5: &f.md5,
                    sha1: &f.sha1,
                    sha256: &f.sha256,
                })
                .collect();
            render_sources_stanza(text, &source.control, &source.directory, &files);
        }
        Ok(page.iter().map(|(s, _)| s.id).collect())
    }
}
