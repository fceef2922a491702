//! The APK snapshot of one unit (`<branch>/<channel>/<arch>`): `APKINDEX.tar.gz`, signed with
//! the repository's RSA index key — for a hosted repository its records read from the rows in
//! keyset pages, for a group the members' records merged (see `group.rs`).

use std::sync::Arc;

use async_trait::async_trait;

use packyard_codecs::apk::signing::ApkKey;

use super::chunks::Signing;
use super::{group, Unit, INDEX_FILE};
use packyard_core::groups::{self, Reader};
use packyard_core::publication::{BuildContext, BuildError, Builder, Rebuilds};
use packyard_core::security::keystore::KeyStore;
use packyard_model::repos::{Format, Repository};
use packyard_store::db::publication::UnitRecord;
use packyard_store::db::Db;

pub struct ApkBuilder {
    /// Where each repository's index key is sealed.
    pub keystore: Arc<KeyStore>,
    /// Reads group members.
    pub reader: Reader,
    /// What the last builds left of each hosted index (reused while still published).
    pub memory: super::chunks::Memory,
    /// The worker's services: a group's policy is applied with them (`None`: a group with a
    /// policy is not built).
    pub services: Option<packyard_core::services::Services>,
}

#[async_trait]
impl Builder for ApkBuilder {
    /// A hosted unit's index, built incrementally from its rows ([`super::chunks`]).
    async fn build(&self, ctx: &mut BuildContext<'_>, repo: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        let keys = self.keys(ctx, repo).await?;
        let (path, current) = current_index(ctx, unit).await?;
        let description = format!("{} {}", repo.name, unit.unit_key);
        let signing = Signing { keys: &keys, description: &description, mtime: mtime() };
        let at = (repo.id, unit.unit_key.as_str(), path.as_str());
        super::chunks::build(ctx, &self.memory, at, current.as_deref(), &signing).await
    }

    /// A group unit's index merged from its members' (only those that changed read again), and
    /// the hidden `.members` and `.sources` files beside it.
    async fn merge(&self, ctx: &mut BuildContext<'_>, group: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        let u: Unit = unit.unit_key.parse().map_err(BuildError::Other)?;
        let keys = self.keys(ctx, group).await?;
        let (_, current) = current_index(ctx, unit).await?;
        let description = format!("{} {}", group.name, unit.unit_key);
        let signing = Signing { keys: &keys, description: &description, mtime: mtime() };
        let gate = packyard_core::policy::BuildGate::for_merge(
            self.services.as_ref(),
            group,
            Some(&super::spec::ApkOsv),
            &unit.unit_key,
        )
        .await?;
        let reading = (&self.reader, &self.memory, gate.clone());
        let merged = group::merge(ctx, reading, (group, &u, current.as_deref()), &signing).await?;
        let mut hidden = vec![
            (group::members_path(&unit.unit_key), groups::members_map(&merged.members)),
            (group::sources_path(&unit.unit_key), groups::render_sources(&merged.sources)),
        ];
        if let Some(gate) = &gate {
            hidden.push((group::policy_path(&unit.unit_key), gate.report().render()));
        }
        for (path, text) in hidden {
            ctx.put(&path, "text/plain; charset=utf-8", text.as_bytes()).await?;
        }
        if let (Some(gate), Some(services)) = (&gate, &self.services) {
            gate.record(services, group.id, &unit.unit_key).await?;
        }
        Ok(())
    }

    /// The unit's index as a snapshot kept it, its signature made again with the repository's
    /// current key (the index member's bytes unchanged).
    async fn republish(
        &self,
        ctx: &mut BuildContext<'_>,
        repo: &Repository,
        unit: &UnitRecord,
        files: Vec<packyard_store::db::publication::SnapshotFile>,
    ) -> Result<(), BuildError> {
        let path = format!("{}/{INDEX_FILE}", unit.unit_key);
        let index = files
            .iter()
            .find(|f| f.path == path)
            .ok_or_else(|| BuildError::Other(format!("the snapshot has no {path}")))?;
        let bytes = packyard_core::publication::read_file(ctx.blobs(), index).await?;
        let members = packyard_core::publication::work::spawn_blocking(move || {
            packyard_codecs::apk::index::split_members(&bytes)
        })
        .await
        .map_err(BuildError::other)?
        .map_err(|e| BuildError::Other(format!("the snapshot's {path}: {e}")))?;
        let member = members
            .last()
            .filter(|_| members.len() >= 2)
            .ok_or_else(|| BuildError::Other(format!("the snapshot's {path} is not signed")))?;
        let keys = self.keys(ctx, repo).await?;
        let mut signed = packyard_codecs::apk::index::signature_member_all(member, &keys, mtime())
            .map_err(|e| BuildError::Other(format!("signing {path}: {e}")))?;
        signed.extend_from_slice(member);
        ctx.put(&path, "application/gzip", &signed).await?;
        // Other files of the unit (none a hosted unit publishes today) as they were.
        for f in files {
            if f.path != path && !f.path.starts_with(".parts/") {
                ctx.keep(f);
            }
        }
        Ok(())
    }

    async fn after_publish(&self, db: &Db, unit: &UnitRecord) -> Result<Rebuilds, BuildError> {
        groups::same_unit_after_member_publish(db, unit, Format::Apk).await
    }

    /// A proxy member's upstream `APKINDEX.tar.gz` of the unit (verified), by hash.
    async fn upstream_source(&self, member: &Repository, unit_key: &str) -> Result<Option<String>, BuildError> {
        let Ok(u) = unit_key.parse::<Unit>() else { return Ok(None) };
        group::upstream_verified(&self.reader, member, &u).await
    }

    fn sources_path(&self, unit_key: &str) -> String {
        group::sources_path(unit_key)
    }

    fn policy_path(&self, unit_key: &str) -> Option<String> {
        Some(group::policy_path(unit_key))
    }
}

impl ApkBuilder {
    /// The repository's index keys that sign (the current one, and the one it was added beside
    /// during a rotation's overlap) and the names clients keep them under.
    async fn keys(&self, ctx: &BuildContext<'_>, repo: &Repository) -> Result<Vec<(ApkKey, String)>, BuildError> {
        crate::apk::keys::signing_named(ctx.db, &self.keystore, repo)
            .await
            .map_err(|e| BuildError::Other(format!("index key: {e}")))
    }
}

/// The unit's index path, and the part list digest of its current (composite) file.
async fn current_index(ctx: &BuildContext<'_>, unit: &UnitRecord) -> Result<(String, Option<String>), BuildError> {
    let path = format!("{}/{INDEX_FILE}", unit.unit_key);
    let current = match ctx.continues(unit) {
        Some(snapshot) => {
            ctx.db.snapshot_files(snapshot).await?.into_iter().find(|f| f.path == path && f.is_composite())
        }
        None => None,
    };
    Ok((path, current.map(|f| f.sha256)))
}

fn mtime() -> u64 {
    u64::try_from(packyard_store::db::now_ms() / 1000).unwrap_or(0)
}
