//! APT in the catalogue: a package is a component — group its archive component (`main`), name
//! and version as its control file says, one per architecture, keyed by its pool path — with its
//! `.deb` as the asset. A proxy's `.deb`s are catalogued from their pool paths
//! (`pool/<component>/…/<name>_<version>_<arch>.deb`: the version as the file name writes it,
//! without an epoch).

use async_trait::async_trait;

use super::rows::{self, AptPackage};
use packyard_codecs::apt::deb::{read_package, Limits};
use packyard_core::catalogue::{small_asset, stamped, Catalogue, Details, Stamped};
use packyard_core::hosted::{Component, Entry, NewAsset};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::db::catalogue::{AssetRow, ComponentRow};
use packyard_store::db::{Db, DbResult};

pub const DEB_TYPE: &str = "application/vnd.debian.binary-package";

pub struct AptCatalogue;

/// A hosted package's entry.
pub fn entry(p: &AptPackage) -> Entry {
    let component = Component {
        key: p.pool_path.clone(),
        group: p.component.clone(),
        name: p.name.clone(),
        version: p.version.clone(),
    };
    let deb = NewAsset {
        path: p.pool_path.clone(),
        sha256: p.sha256.clone(),
        sha1: None,
        md5: Some(p.md5.clone()).filter(|m| !m.is_empty()),
        size: p.size,
        content_type: DEB_TYPE.into(),
    };
    Entry { component, assets: vec![deb] }
}

/// How much of a cached `.deb` is unpacked to read its control file (it is at most
/// [`packyard_core::catalogue::DETAILS_MAX_FILE`] bytes).
const DETAILS_LIMITS: Limits =
    Limits { control_member: 1 << 20, control_tar: 16 << 20, control_file: 1 << 20, data_tar: 64 << 20 };

/// The control file of a component without a row (a proxy's): from its `.deb`, if small.
async fn deb_control(services: &Services, assets: &[AssetRow]) -> Option<String> {
    let deb = assets.iter().find(|a| a.path.ends_with(".deb") || a.path.ends_with(".udeb"))?;
    let bytes = small_asset(services, deb).await?;
    tokio::task::spawn_blocking(move || deb_control_text(&bytes)).await.ok().flatten()
}

/// The control text of a `.deb` in memory, if it reads as one.
fn deb_control_text(deb: &[u8]) -> Option<String> {
    read_package(deb, DETAILS_LIMITS).ok().map(|c| c.text)
}

/// A field of a control stanza, its continuation lines folded into one line; `None` when
/// absent or empty.
pub(super) fn control_field(stanza: &str, name: &str) -> Option<String> {
    let mut lines = stanza.lines();
    let first = lines.find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (!l.starts_with([' ', '\t']) && k.trim().eq_ignore_ascii_case(name)).then_some(v)
    })?;
    let mut value = first.trim().to_string();
    for more in lines.take_while(|l| l.starts_with([' ', '\t'])) {
        let more = more.trim();
        if !more.is_empty() && more != "." {
            if !value.is_empty() {
                value.push(' ');
            }
            value.push_str(more);
        }
    }
    (!value.is_empty()).then_some(value)
}

/// The entries of a relationship field (`Depends`): split at commas, white space collapsed
/// (`libc6 (>= 2.36)`, alternatives kept together: `awk | mawk`).
pub(super) fn relations(value: &str) -> Vec<String> {
    value.split(',').map(|e| e.split_whitespace().collect::<Vec<_>>().join(" ")).filter(|e| !e.is_empty()).collect()
}

/// What a control stanza says for people: its `Depends`, and its architecture, other
/// relationships, size, section and maintainer.
fn control_details(stanza: &str) -> Details {
    let dependencies = control_field(stanza, "Depends").map(|d| relations(&d)).unwrap_or_default();
    let mut facts = Vec::new();
    for name in ["Architecture", "Pre-Depends", "Recommends", "Installed-Size", "Section", "Maintainer"] {
        let Some(value) = control_field(stanza, name) else { continue };
        let value = match name {
            "Pre-Depends" | "Recommends" => relations(&value).join(", "),
            "Installed-Size" => format!("{value} KiB"),
            _ => value,
        };
        facts.push((name.to_string(), value));
    }
    Details { dependencies, facts }
}

/// What a source package's `.dsc` says for people: its `Build-Depends`, and the binaries it
/// builds, its format and maintainer.
fn source_details(dsc: &str) -> Details {
    let dependencies = control_field(dsc, "Build-Depends").map(|d| relations(&d)).unwrap_or_default();
    let mut facts = Vec::new();
    for name in ["Binary", "Architecture", "Format", "Maintainer", "Homepage"] {
        if let Some(value) = control_field(dsc, name) {
            facts.push((name.to_string(), value));
        }
    }
    Details { dependencies, facts }
}

/// The architecture a pool file's name says (`hello_2.10-3_amd64.deb`: `amd64`); a source
/// package's files (`.dsc`, tarballs) are `source`.
fn pool_architecture(path: &str) -> &str {
    let file = path.rsplit('/').next().unwrap_or(path);
    match file.strip_suffix(".deb").or_else(|| file.strip_suffix(".udeb")).or_else(|| file.strip_suffix(".ddeb")) {
        Some(stem) => stem.rsplit('_').next().unwrap_or_default(),
        None => "source",
    }
}

#[async_trait]
impl Catalogue for AptCatalogue {
    /// Its architecture, from its pool file's name (no blob is read); Debian packages declare
    /// no license to the policy.
    async fn policy_facts(
        &self,
        _services: &Services,
        _repo: &Repository,
        c: &ComponentRow,
        _assets: &[AssetRow],
    ) -> packyard_core::catalogue::PolicyFacts {
        let arch = pool_architecture(&c.component_key).to_string();
        packyard_core::catalogue::PolicyFacts { licenses: Vec::new(), artifacts: vec![(String::new(), Some(arch))] }
    }

    /// From the package's row (its control text) when hosted, else from the control file of
    /// its `.deb`.
    async fn details(&self, services: &Services, repo: &Repository, c: &ComponentRow, assets: &[AssetRow]) -> Details {
        let db = &services.db;
        if c.component_key.ends_with(".dsc") {
            let source = rows::source_by_dsc_path(db, db.pool(), repo.id, &c.component_key).await.ok().flatten();
            return source.map(|s| source_details(&s.control)).unwrap_or_default();
        }
        let row = rows::by_pool_path(db, db.pool(), repo.id, &c.component_key).await.ok().flatten();
        let control = match row {
            Some(p) => p.control,
            None => match deb_control(services, assets).await {
                Some(text) => text,
                None => return Details::default(),
            },
        };
        control_details(&control)
    }

    /// The binary packages' rows (source packages came with the catalogue: each is catalogued
    /// as it is uploaded).
    async fn hosted_page(&self, db: &Db, repo: &Repository, after: i64, limit: i64) -> DbResult<Vec<(i64, Stamped)>> {
        Ok(stamped(rows::stamped_page(db, repo.id, after, limit).await?, |p| p.id, entry))
    }

    /// A package is a name on an architecture (the pool file's last `_` field); a source
    /// package's versions (keyed by their `.dsc`) are one package of their own.
    fn package(&self, c: &ComponentRow) -> String {
        let file = c.component_key.rsplit('/').next().unwrap_or_default();
        if file.ends_with(".dsc") {
            return format!("{}\0source", c.name);
        }
        let arch = file.rsplit_once('_').map_or("", |(_, a)| a.trim_end_matches(".deb").trim_end_matches(".udeb"));
        format!("{}\0{arch}", c.name)
    }

    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        packyard_codecs::apt::version::compare(a, b)
    }

    fn cached(&self, path: &str) -> Option<Component> {
        let rest = path.strip_prefix("pool/")?;
        let (group, _) = rest.split_once('/')?;
        let file = rest.rsplit('/').next()?;
        let stem = file.strip_suffix(".deb").or_else(|| file.strip_suffix(".udeb"))?;
        let mut parts = stem.splitn(3, '_');
        let (name, version, _arch) = (parts.next()?, parts.next()?, parts.next()?);
        if name.is_empty() || version.is_empty() || group.is_empty() {
            return None;
        }
        // An epoch's colon, where a file name keeps it, is sent percent-encoded.
        let version = version.replace("%3a", ":").replace("%3A", ":");
        Some(Component { key: path.to_string(), group: group.into(), name: name.into(), version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STANZA: &str = "Package: hello\nVersion: 2.10-3\nArchitecture: amd64\nMaintainer: Santiago <s@example.org>\nInstalled-Size: 280\nPre-Depends: dpkg (>= 1.15)\nDepends: libc6 (>= 2.34),\n libgcc-s1,\n  awk | mawk\nSection: devel\nDescription: greets\n Depends: not a field\n .\n more";

    #[test]
    fn depends_are_split_at_commas() {
        assert_eq!(
            relations("libc6 (>= 2.36), libssl3  (>=\t3.0),, awk | mawk ,"),
            ["libc6 (>= 2.36)", "libssl3 (>= 3.0)", "awk | mawk"]
        );
        assert!(relations(" , ").is_empty());
    }

    #[test]
    fn control_fields_fold_their_continuation_lines() {
        assert_eq!(control_field(STANZA, "depends").as_deref(), Some("libc6 (>= 2.34), libgcc-s1, awk | mawk"));
        assert_eq!(control_field(STANZA, "Description").as_deref(), Some("greets Depends: not a field more"));
        assert_eq!(control_field(STANZA, "Recommends"), None);
        assert_eq!(control_field("Recommends:\n", "Recommends"), None);
    }

    #[test]
    fn a_control_stanza_gives_its_details() {
        let d = control_details(STANZA);
        assert_eq!(d.dependencies, ["libc6 (>= 2.34)", "libgcc-s1", "awk | mawk"]);
        let facts: Vec<(&str, &str)> = d.facts.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            facts,
            [
                ("Architecture", "amd64"),
                ("Pre-Depends", "dpkg (>= 1.15)"),
                ("Installed-Size", "280 KiB"),
                ("Section", "devel"),
                ("Maintainer", "Santiago <s@example.org>")
            ]
        );
        assert_eq!(control_details(""), Details::default());
    }

    #[test]
    fn a_deb_gives_its_control_text() {
        let control = "Package: sl\nVersion: 5.02-1\nArchitecture: amd64\nDepends: libc6 (>= 2.34), libncurses6\n";
        let text = deb_control_text(&packyard_codecs::apt::testing::deb(control, ".xz")).unwrap_or_default();
        assert_eq!(control_details(&text).dependencies, ["libc6 (>= 2.34)", "libncurses6"]);
        assert_eq!(deb_control_text(b"!<arch>\nnot a package"), None);
    }

    #[test]
    fn a_pool_path_names_its_package() {
        let path = "pool/main/s/sl/sl_5.02-1_amd64.deb";
        assert_eq!(
            AptCatalogue.cached(path),
            Some(Component {
                key: "pool/main/s/sl/sl_5.02-1_amd64.deb".into(),
                group: "main".into(),
                name: "sl".into(),
                version: "5.02-1".into()
            })
        );
        assert_eq!(pool_architecture(path), "amd64");
        assert_eq!(pool_architecture("pool/main/h/hello/hello_2.10-3.dsc"), "source");
        assert_eq!(pool_architecture("pool/main/h/hello/hello-doc_2.10-3_all.deb"), "all");
        let path = "pool/main/v/vim/vim_2%3a9.0_amd64.deb";
        assert_eq!(AptCatalogue.cached(path).map(|c| c.version), Some("2:9.0".into()));
        for metadata in ["dists/bookworm/InRelease", "pool/main/s/sl/sl_5.02-1.dsc", "pool/x.deb"] {
            assert_eq!(AptCatalogue.cached(metadata), None, "{metadata}");
        }
    }
}
