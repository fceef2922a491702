//! Conan in the catalogue: a recipe revision is a component — name and version of its
//! reference, group its `user/channel` (empty without), version the reference's version, keyed
//! by `<reference>#<rrev>` — whose assets are the files of the recipe revision and of its package
//! revisions, at their REST v2 paths. A revision appears once it is complete. A proxy's files
//! are catalogued from their paths.

use async_trait::async_trait;

use super::rows::{self, ConanFile};
use packyard_codecs::conan::Reference;
use packyard_core::catalogue::{Catalogue, Stamped};
use packyard_core::hosted::{Actor, UploadError};
use packyard_core::hosted::{Component, Entry, Forget, NewAsset};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::db::{Db, DbResult};

pub struct ConanCatalogue;

const FILE_TYPE: &str = "application/octet-stream";

/// The recipe revision's component.
pub fn component(reference: &Reference, rrev: &str) -> Component {
    let group = match (&reference.user, &reference.channel) {
        (Some(u), Some(c)) => format!("{u}/{c}"),
        _ => String::new(),
    };
    Component {
        key: format!("{}#{rrev}", reference.display()),
        group,
        name: reference.name.clone(),
        version: reference.version.clone(),
    }
}

/// Where a revision's files are: `v2/conans/<ref>/revisions/<rrev>/` then `files/…` (a recipe
/// revision) or `packages/<pkgid>/revisions/<prev>/files/…`.
pub fn base(reference: &Reference, rrev: &str, package: Option<(&str, &str)>) -> String {
    let recipe = format!("v2/conans/{}/revisions/{rrev}/", reference.url_path());
    match package {
        None => recipe,
        Some((pkgid, prev)) => format!("{recipe}packages/{pkgid}/revisions/{prev}/"),
    }
}

/// The entry of a complete revision (a package revision's files are assets of its recipe
/// revision's component); `None` when the reference does not parse.
pub fn entry(reference: &str, rrev: &str, package: Option<(&str, &str)>, files: &[ConanFile]) -> Option<Entry> {
    let reference = Reference::parse(reference).ok()?;
    let base = base(&reference, rrev, package);
    let assets = files
        .iter()
        .map(|f| NewAsset {
            path: format!("{base}files/{}", f.path),
            sha256: f.sha256.clone(),
            sha1: Some(f.sha1.clone()),
            md5: Some(f.md5.clone()),
            size: f.size,
            content_type: FILE_TYPE.into(),
        })
        .collect();
    Some(Entry { component: component(&reference, rrev), assets })
}

/// What a delete takes out: a recipe revision's component, or the files of its package
/// revisions (all, or one).
pub fn forget(reference: &str, rrev: &str, package: Option<(&str, &str)>, packages_only: bool) -> Forget {
    let Ok(r) = Reference::parse(reference) else { return Forget::Nothing };
    match (package, packages_only) {
        (Some(p), _) => Forget::Assets { prefix: base(&r, rrev, Some(p)) },
        (None, true) => Forget::Assets { prefix: format!("{}packages/", base(&r, rrev, None)) },
        (None, false) => Forget::Component(component(&r, rrev).key),
    }
}

#[async_trait]
impl Catalogue for ConanCatalogue {
    async fn hosted_page(&self, db: &Db, repo: &Repository, after: i64, limit: i64) -> DbResult<Vec<(i64, Stamped)>> {
        let mut out = Vec::new();
        for rev in rows::complete_page(db, repo.id, after, limit).await? {
            let files = rows::files(db, rev.id).await?;
            let package = (!rev.pkgid.is_empty()).then_some((rev.pkgid.as_str(), rev.prev.as_str()));
            if let Some(entry) = entry(&rev.reference, &rev.rrev, package, &files) {
                out.push((rev.id, Stamped { entry, uploaded_by: String::new(), created_at: rev.time_ms }));
            }
        }
        Ok(out)
    }

    /// Versions as dotted numbers and words compare (Debian's order serves: `1.2.10` > `1.2.9`,
    /// `1.0-rc` < `1.0`).
    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        packyard_codecs::apt::version::compare(&a.replace('-', "~"), &b.replace('-', "~"))
    }

    fn revisions(&self) -> bool {
        true
    }

    async fn delete_batch(
        &self,
        services: &Services,
        repo: &Repository,
        keys: &[String],
        actor: Actor<'_>,
    ) -> Result<(usize, Vec<(i64, i64)>), UploadError> {
        let removals: Vec<super::hosted::Removal> = keys
            .iter()
            .filter_map(|k| k.rsplit_once('#'))
            .map(|(reference, rrev)| super::hosted::Removal {
                revision: super::hosted::Revision { reference: reference.into(), rrev: rrev.into(), package: None },
                packages_only: false,
            })
            .collect();
        packyard_core::hosted::delete_batch(&super::hosted::ConanHosted, services, repo, &removals, actor).await
    }

    fn cached(&self, path: &str) -> Option<Component> {
        let s: Vec<&str> = path.split('/').collect();
        match s.as_slice() {
            ["v2", "conans", n, v, u, c, "revisions", rrev, "files", _, ..]
            | ["v2", "conans", n, v, u, c, "revisions", rrev, "packages", _, "revisions", _, "files", _, ..]
                if !path.contains('?') =>
            {
                Some(component(&Reference::from_url(n, v, u, c).ok()?, rrev))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_path_names_its_recipe_revision() {
        let path = "v2/conans/zlib/1.3/acme/stable/revisions/abc/packages/p1/revisions/r1/files/conan_package.tgz";
        assert_eq!(
            ConanCatalogue.cached(path),
            Some(Component {
                key: "zlib/1.3@acme/stable#abc".into(),
                group: "acme/stable".into(),
                name: "zlib".into(),
                version: "1.3".into()
            })
        );
        let path = "v2/conans/zlib/1.3/_/_/revisions/abc/files/conanfile.py";
        assert_eq!(
            ConanCatalogue.cached(path),
            Some(Component {
                key: "zlib/1.3#abc".into(),
                group: "".into(),
                name: "zlib".into(),
                version: "1.3".into()
            })
        );
        for metadata in ["v2/conans/zlib/1.3/_/_/latest", "v2/conans/zlib/1.3/_/_/revisions/abc/files"] {
            assert_eq!(ConanCatalogue.cached(metadata), None, "{metadata}");
        }
    }
}
