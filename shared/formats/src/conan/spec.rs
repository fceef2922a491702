//! Conan 2 as the engine sees it: its registry entry.

use std::sync::Arc;

use async_trait::async_trait;
use packyard_core::catalogue::Catalogue;
use packyard_core::formats::{FormatSpec, FormatUi};
use packyard_core::hosted::{self, Actor, ByKey, Deletes, UploadError};
use packyard_core::publication::Builders;
use packyard_core::services::Services;
use packyard_model::repos::{Format, Repository};
use packyard_store::db::blobs::BlobColumn;

use super::hosted::{ConanHosted, Removal, Revision};

pub struct ConanSpec;

#[async_trait]
impl FormatSpec for ConanSpec {
    fn format(&self) -> Format {
        Format::Conan
    }

    fn blob_columns(&self) -> &'static [BlobColumn] {
        &[BlobColumn { table: "conan_files", column: "sha256" }]
    }

    fn catalogue(&self) -> &'static dyn Catalogue {
        &super::catalogue::ConanCatalogue
    }

    fn import(
        &self,
        args: packyard_core::import::ImportArgs,
    ) -> Option<Result<Box<dyn packyard_core::import::ImportJob>, String>> {
        let job = super::import::ConanImport::from_args(args);
        Some(job.map(|i| Box::new(packyard_core::import::Job(i)) as Box<dyn packyard_core::import::ImportJob>))
    }

    fn nexus(&self) -> Option<&dyn packyard_core::formats::NexusShape> {
        Some(&super::nexus::ConanNexus)
    }

    fn osv(&self) -> Option<&dyn packyard_core::formats::OsvSpec> {
        Some(&ConanOsv)
    }

    /// Conan's routes apply a policy; a recipe's licenses are its `conanfile.py`'s `license`
    /// (read once per revision when a rule names licenses), a binary's architecture its
    /// `conaninfo.txt`'s `arch` setting (read once per package id when a rule names
    /// architectures; a rule on architectures holds binaries back, not their recipe).
    fn policy_facets(&self) -> Option<&'static [&'static str]> {
        Some(&["licenses", "architectures"])
    }

    fn ui(&self) -> &dyn FormatUi {
        &super::ui::ConanUi
    }

    /// A reference's files under its REST v2 path; the search index (queried, not fetched) is
    /// not served from a snapshot.
    fn snapshot_path(&self, kind: &str, unit: &str, file: &str) -> Option<String> {
        if kind != super::KIND || !packyard_core::formats::visible(file) {
            return None;
        }
        let reference = packyard_codecs::conan::Reference::parse(unit).ok()?;
        Some(format!("v2/conans/{}/{file}", reference.url_path()))
    }

    fn deletes(&self) -> &dyn Deletes {
        &ByKey(super::hosted::ConanHosted)
    }

    fn copies(&self) -> &dyn packyard_core::hosted::Copies {
        &ByKey(super::hosted::ConanHosted)
    }

    fn builders(&self, services: &Services, builders: Builders) -> Builders {
        let reader = packyard_core::groups::Reader::of(services);
        builders
            .with(super::KIND, Arc::new(super::publish::ConanBuilder { reader: reader.clone() }))
            .with(super::SEARCH_KIND, Arc::new(super::publish::ConanSearchBuilder { reader }))
    }

    /// A recipe revision's component; a package revision's file
    /// (`v2/conans/<n>/<v>/<u>/<c>/revisions/<rrev>/packages/<pkgid>/revisions/<prev>/files/…`)
    /// deletes only that package revision.
    async fn delete_catalogued(
        &self,
        services: &Services,
        repo: &Repository,
        key: &str,
        asset: Option<&str>,
        actor: Actor<'_>,
    ) -> Result<Option<Vec<(i64, i64)>>, UploadError> {
        let package = asset.and_then(|path| {
            let s: Vec<&str> = path.split('/').collect();
            match s.get(8..12) {
                Some(["packages", pkgid, "revisions", prev]) => Some((pkgid.to_string(), prev.to_string())),
                _ => None,
            }
        });
        if let (Some(package), Some((reference, rrev))) = (package, key.rsplit_once('#')) {
            let revision = Revision { reference: reference.into(), rrev: rrev.into(), package: Some(package) };
            let removal = Removal { revision, packages_only: false };
            let deleted = hosted::delete(&ConanHosted, services, repo, &removal, actor).await?;
            return Ok(deleted.map(|d| d.changes));
        }
        let (removed, changes) = self.deletes().delete_components(services, repo, &[key.to_string()], actor).await?;
        Ok((!removed.is_empty()).then_some(changes))
    }
}

/// The format's packages in OSV (`ConanCenter`), in the format's own version order.
struct ConanOsv;

impl packyard_core::formats::OsvSpec for ConanOsv {
    fn ecosystem(&self) -> &'static str {
        "ConanCenter"
    }

    fn compare(&self, a: &str, b: &str) -> std::cmp::Ordering {
        packyard_codecs::conan::version::compare(a, b)
    }
}
