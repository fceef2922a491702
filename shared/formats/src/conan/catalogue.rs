//! Conan in the catalogue: a recipe revision is a component — name and version of its
//! reference, group its `user/channel` (empty without), version the reference's version, keyed
//! by `<reference>#<rrev>` — whose assets are the files of the recipe revision and of its package
//! revisions, at their REST v2 paths. A revision appears once it is complete. A proxy's files
//! are catalogued from their paths.

use async_trait::async_trait;

use super::rows::{self, ConanFile};
use packyard_codecs::conan::Reference;
use packyard_core::catalogue::{small_asset, Catalogue, Details, Stamped};
use packyard_core::hosted::{Component, Entry, Forget, NewAsset};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::db::catalogue::{AssetRow, ComponentRow};
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

/// The most package ids whose `conaninfo.txt` [`Catalogue::details`] reads.
const DETAILS_MAX_PACKAGES: usize = 64;

/// The package id of a package revision's `conaninfo.txt`
/// (`v2/conans/…/revisions/<rrev>/packages/<pkgid>/revisions/<prev>/files/conaninfo.txt`).
fn conaninfo_package(path: &str) -> Option<&str> {
    let rest = path.strip_suffix("/files/conaninfo.txt")?;
    let (rest, _prev) = rest.rsplit_once("/revisions/")?;
    let (recipe, pkgid) = rest.rsplit_once("/packages/")?;
    (recipe.starts_with("v2/conans/") && recipe.contains("/revisions/") && !pkgid.is_empty() && !pkgid.contains('/'))
        .then_some(pkgid)
}

use packyard_codecs::conan::conaninfo_section;

/// The newest `conaninfo.txt` of each package id among a recipe revision's `assets` (at most
/// [`DETAILS_MAX_PACKAGES`]), as `(pkgid, text)`.
async fn conaninfos(services: &Services, assets: &[AssetRow]) -> Vec<(String, String)> {
    let mut newest: std::collections::BTreeMap<&str, &AssetRow> = std::collections::BTreeMap::new();
    for asset in assets {
        let Some(pkgid) = conaninfo_package(&asset.path) else { continue };
        let entry = newest.entry(pkgid).or_insert(asset);
        if (asset.created_at, asset.id) > (entry.created_at, entry.id) {
            *entry = asset;
        }
    }
    let mut packages = Vec::new();
    for (pkgid, asset) in newest.into_iter().take(DETAILS_MAX_PACKAGES) {
        if let Some(bytes) = small_asset(services, asset).await {
            packages.push((pkgid.to_string(), String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    packages
}

/// What the `conaninfo.txt` of each package id (`(pkgid, text)`) says for people: the
/// `[requires]` of all, each once, and each package's `[settings]` as a fact
/// (`package <pkgid's first 12>`: `os=Linux, arch=x86_64`).
fn conaninfo_details(packages: &[(String, String)]) -> Details {
    let mut details = Details::default();
    for (pkgid, text) in packages {
        for require in conaninfo_section(text, "requires") {
            if !details.dependencies.iter().any(|d| d == require) {
                details.dependencies.push(require.to_string());
            }
        }
        let settings = conaninfo_section(text, "settings").join(", ");
        let settings = if settings.is_empty() { "(no settings)".to_string() } else { settings };
        let short: String = pkgid.chars().take(12).collect();
        details.facts.push((format!("package {short}"), settings));
    }
    details
}

#[async_trait]
impl Catalogue for ConanCatalogue {
    /// From the `conaninfo.txt` assets of the recipe revision's package revisions (the newest
    /// revision of each package id), hosted and cached alike.
    async fn details(
        &self,
        services: &Services,
        _repo: &Repository,
        _c: &ComponentRow,
        assets: &[AssetRow],
    ) -> Details {
        conaninfo_details(&conaninfos(services, assets).await)
    }

    /// The recipe's licenses (its `conanfile.py`'s `license`), and each binary's architecture
    /// (its `conaninfo.txt`'s `arch`): a rule on architectures judges the binaries, not the
    /// recipe.
    async fn policy_facts(
        &self,
        services: &Services,
        _repo: &Repository,
        _c: &ComponentRow,
        assets: &[AssetRow],
    ) -> packyard_core::catalogue::PolicyFacts {
        let mut licenses = Vec::new();
        let recipe = assets.iter().find(|a| a.path.ends_with("/files/conanfile.py") && !a.path.contains("/packages/"));
        if let Some(bytes) = match recipe {
            Some(a) => small_asset(services, a).await,
            None => None,
        } {
            let text = String::from_utf8_lossy(&bytes);
            for l in packyard_codecs::conan::recipe::declared_licenses(&text) {
                licenses.extend(packyard_model::policy::license_names(&l));
            }
        }
        let mut artifacts = vec![(String::new(), None)];
        for (pkgid, text) in conaninfos(services, assets).await {
            let arch = packyard_codecs::conan::conaninfo_setting(&text, "arch").map(str::to_string);
            artifacts.push((format!("package {pkgid}"), arch));
        }
        packyard_core::catalogue::PolicyFacts { licenses, artifacts }
    }

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

    /// Conan 2's order (`1.2.10` > `1.2.9`, `1.0-rc` < `1.0`).
    /// Conan's order; versions it holds equal (`1` and `1.0`) are still two references, ordered
    /// by their text, so cleanup never counts one as the other's revision.
    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        packyard_codecs::conan::version::compare(a, b).then_with(|| a.cmp(b))
    }

    fn revisions(&self) -> bool {
        true
    }

    fn selectable(&self) -> packyard_model::cleanup::Selectable {
        packyard_model::cleanup::Selectable {
            prereleases: Some("revisions that are not the latest"),
            revisions: Some("recipe revisions"),
        }
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

    const LINUX: &str = "[settings]\narch=x86_64\nbuild_type=Release\nos=Linux\n\n[options]\nshared=False\n\n[requires]\nzlib/1.3.Z\nopenssl/3.2.Z\n\n[python_requires]\ntool/1.Y.Z\n";
    const WINDOWS: &str = "[settings]\n    arch=x86_64\n    os=Windows\n[requires]\n    zlib/1.3.Z\n    bzip2/1.0.Z\n";

    #[test]
    fn a_conaninfo_path_names_its_package() {
        let path = "v2/conans/zlib/1.3/_/_/revisions/abc/packages/0123456789abcdef/revisions/r1/files/conaninfo.txt";
        assert_eq!(conaninfo_package(path), Some("0123456789abcdef"));
        for other in [
            "v2/conans/zlib/1.3/_/_/revisions/abc/files/conaninfo.txt",
            "v2/conans/zlib/1.3/_/_/revisions/abc/packages/p1/revisions/r1/files/conan_package.tgz",
            "v2/conans/zlib/1.3/_/_/revisions/abc/packages/p1/revisions/r1/files/sub/conaninfo.txt",
        ] {
            assert_eq!(conaninfo_package(other), None, "{other}");
        }
    }

    #[test]
    fn conaninfo_sections_are_read() {
        assert_eq!(conaninfo_section(LINUX, "settings"), ["arch=x86_64", "build_type=Release", "os=Linux"]);
        assert_eq!(conaninfo_section(LINUX, "requires"), ["zlib/1.3.Z", "openssl/3.2.Z"]);
        assert_eq!(conaninfo_section(WINDOWS, "settings"), ["arch=x86_64", "os=Windows"]);
        assert_eq!(packyard_codecs::conan::conaninfo_setting(WINDOWS, "arch"), Some("x86_64"));
        assert_eq!(packyard_codecs::conan::conaninfo_setting(LINUX, "os"), Some("Linux"));
        assert_eq!(packyard_codecs::conan::conaninfo_setting("[options]\narch=x\n", "arch"), None);
        assert!(conaninfo_section(LINUX, "conf").is_empty());
        assert!(conaninfo_section("", "requires").is_empty());
    }

    #[test]
    fn conaninfo_requires_are_deduplicated_and_settings_are_facts() {
        let packages = [
            ("0123456789abcdef0123".to_string(), LINUX.to_string()),
            ("fedcba9876543210fedc".to_string(), WINDOWS.to_string()),
            ("da39a3ee5e6b4b0d3255bfef95601890afd80709".to_string(), "[requires]\n".to_string()),
        ];
        let d = conaninfo_details(&packages);
        assert_eq!(d.dependencies, ["zlib/1.3.Z", "openssl/3.2.Z", "bzip2/1.0.Z"]);
        let facts: Vec<(&str, &str)> = d.facts.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            facts,
            [
                ("package 0123456789ab", "arch=x86_64, build_type=Release, os=Linux"),
                ("package fedcba987654", "arch=x86_64, os=Windows"),
                ("package da39a3ee5e6b", "(no settings)")
            ]
        );
        assert_eq!(conaninfo_details(&[]), Details::default());
    }

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
