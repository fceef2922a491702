//! The sample format as the engine sees it: its registry entry and what the web UI shows.

use std::sync::Arc;

use async_trait::async_trait;
use packyard_core::catalogue::Catalogue;
use packyard_core::formats::{FormatSpec, FormatUi, Snippet};
use packyard_core::hosted::{ByKey, Deletes};
use packyard_core::publication::Builders;
use packyard_core::services::Services;
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::db::blobs::BlobColumn;
use packyard_store::db::catalogue::ComponentRow;
use packyard_store::db::DbResult;

use super::entries::{self, Entries};
use super::publish::SampleBuilder;
use super::{INDEX, KIND, UNIT};

pub struct SampleSpec;

#[async_trait]
impl FormatSpec for SampleSpec {
    fn format(&self) -> Format {
        Format::Sample
    }

    fn blob_columns(&self) -> &'static [BlobColumn] {
        &[BlobColumn { table: "sample_files", column: "sha256" }]
    }

    fn catalogue(&self) -> &'static dyn Catalogue {
        &super::catalogue::SampleCatalogue
    }

    fn ui(&self) -> &dyn FormatUi {
        &SampleUi
    }

    fn deletes(&self) -> &dyn Deletes {
        &ByKey(super::hosted::SampleHosted)
    }

    /// The index builder, and the pipeline's test units (slowed by `debug.build_delay_ms`).
    fn builders(&self, services: &Services, builders: Builders) -> Builders {
        let index = SampleBuilder { page_size: 1_000, reader: packyard_core::groups::Reader::of(services) };
        let delay = std::time::Duration::from_millis(services.config.debug.build_delay_ms);
        builders.with(KIND, Arc::new(index)).with(entries::KIND, Arc::new(Entries { page_size: 500, delay }))
    }

    /// A group publishes its index at once (merged from members that may have published none
    /// yet, or be proxies); a proxy's groups merge it anew. A hosted repository publishes its
    /// index with its first file.
    async fn settings_changed(
        &self,
        services: &Services,
        _before: Option<&Repository>,
        repo: &Repository,
    ) -> DbResult<usize> {
        let db = &services.db;
        let mut targets = Vec::new();
        match repo.repo_type {
            RepoType::Hosted => {}
            RepoType::Group => targets.push(repo.id),
            RepoType::Proxy => {
                for name in db.groups_containing(repo.id).await? {
                    let group = db.repository_by_name(&name).await?;
                    targets.extend(group.filter(|g| g.format == repo.format).map(|g| g.id));
                }
            }
        }
        for id in &targets {
            db.request_changes(*id, &[(KIND.to_string(), UNIT.to_string())]).await?;
        }
        Ok(targets.len())
    }
}

/// What the web UI shows of the sample format: its index, `curl`.
pub struct SampleUi;

#[async_trait]
impl FormatUi for SampleUi {
    fn title(&self) -> &'static str {
        "Sample (test-only)"
    }

    fn group_label(&self) -> &'static str {
        "Group"
    }

    fn index_files(&self, _repo: &Repository) -> Vec<String> {
        vec![INDEX.to_string()]
    }

    async fn setup(&self, _services: &Services, url: &str, repo: &Repository, _groups: &[String]) -> Vec<Snippet> {
        let mut out = vec![Snippet::new("The index", format!("curl {url}/{INDEX}"))];
        if repo.repo_type == RepoType::Hosted {
            out.push(Snippet::new("Upload a file", format!("curl -u USER:TOKEN -T FILE {url}/NAME/VERSION")));
        }
        out
    }

    fn install(&self, repo: &Repository, c: &ComponentRow) -> String {
        format!("curl -fO $PACKYARD_URL/repository/{}/{}/{}", repo.name, c.name, c.version)
    }
}
