//! What the incremental publication tests share: publishing whatever unit is due with a format's
//! builder, and the parts a snapshot lists.

use std::collections::{HashMap, HashSet};

use packyard_core::publication::{BuildContext, Builder};
use packyard_model::repos::{RepoType, Repository};
use packyard_store::blobs::FileStore;
use packyard_store::db::publication::{Due, SnapshotFile};
use packyard_store::testing::TestDb;

/// Claims the unit due (it must be `repo`'s), builds it with `builder` (a group's merged) and
/// publishes it; returns the snapshot's files by path.
pub async fn publish(
    t: &TestDb,
    blobs: &FileStore,
    builder: &dyn Builder,
    repo: &Repository,
) -> anyhow::Result<HashMap<String, SnapshotFile>> {
    let claim =
        t.db.claim_due("test", Due { debounce_ms: 0, max_delay_ms: 0 }, 60_000)
            .await?
            .ok_or_else(|| anyhow::anyhow!("nothing due"))?;
    assert_eq!(claim.unit.repository_id, repo.id, "the unit due is {}'s", repo.name);
    let mut ctx = BuildContext::new(&t.db, blobs);
    if repo.repo_type == RepoType::Group {
        builder.merge(&mut ctx, repo, &claim.unit).await?;
    } else {
        builder.build(&mut ctx, repo, &claim.unit).await?;
    }
    let files = ctx.finish().await?;
    t.db.publish_snapshot(&claim, &files, &[], 0).await?.ok_or_else(|| anyhow::anyhow!("fenced"))?;
    Ok(files.into_iter().map(|f| (f.path.clone(), f)).collect())
}

/// The parts (by SHA-256) a snapshot lists.
pub fn parts(files: &HashMap<String, SnapshotFile>) -> HashSet<String> {
    files.values().filter(|f| f.path.starts_with(".parts/")).map(|f| f.sha256.clone()).collect()
}
