//! Go in the catalogue: a module version is a component — name the module path's last element
//! (a major-version suffix `/vN` aside: `github.com/acme/yaml/v2` is `yaml`), group the path
//! before it (`github.com/acme`), version the module version, keyed by `<module>@<version>` —
//! with its `.info`, `.mod` and `.zip` as assets at their GOPROXY paths. A proxy's files are
//! catalogued from their paths (canonical versions only: what never changes upstream).

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::rows::{self, GoVersion};
use super::{info_json, Request};
use packyard_codecs::go::{escape, Version};
use packyard_core::catalogue::{small_asset, Catalogue, Details, Stamped};
use packyard_core::hosted::{Component, Entry, NewAsset};
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::db::catalogue::{AssetRow, ComponentRow};
use packyard_store::db::{Db, DbResult};

pub struct GoCatalogue;

/// How people name a module version: `(group, name)`.
fn naming(module: &str) -> (String, String) {
    let (head, last) = module.rsplit_once('/').unwrap_or(("", module));
    let is_major = last.len() > 1 && last.starts_with('v') && last[1..].bytes().all(|b| b.is_ascii_digit());
    match (is_major, head.rsplit_once('/')) {
        (true, Some((group, name))) => (group.to_string(), name.to_string()),
        (true, None) if !head.is_empty() => (String::new(), head.to_string()),
        _ => (head.to_string(), last.to_string()),
    }
}

pub fn component(module: &str, version: &str) -> Component {
    let (group, name) = naming(module);
    Component { key: format!("{module}@{version}"), group, name, version: version.to_string() }
}

/// Where a version's files are, below the repository: `<module>/@v/<version>` (case-encoded),
/// then `.info`, `.mod` or `.zip`.
pub fn version_base(module: &str, version: &str) -> String {
    format!("{}/@v/{}", escape(module), escape(version))
}

/// What a content selector sees of a version: its zip's path and its component.
pub fn content(module: &str, version: &str) -> (String, Component) {
    (format!("{}.zip", version_base(module, version)), component(module, version))
}

/// A hosted version's entry.
pub fn entry(v: &GoVersion) -> Entry {
    let base = version_base(&v.module, &v.version);
    let info = info_json(&v.version, v.time_ms);
    let asset = |ext: &str, sha256: String, size: i64, content_type: &str| NewAsset {
        path: format!("{base}.{ext}"),
        sha256,
        sha1: None,
        md5: None,
        size,
        content_type: content_type.into(),
    };
    let info_size = i64::try_from(info.len()).unwrap_or(i64::MAX);
    let assets = vec![
        asset("info", hex::encode(Sha256::digest(info.as_bytes())), info_size, "application/json"),
        asset("mod", v.mod_sha256.clone(), v.mod_size, "text/plain; charset=utf-8"),
        asset("zip", v.zip_sha256.clone(), v.zip_size, "application/zip"),
    ];
    Entry { component: component(&v.module, &v.version), assets }
}

/// A requirement of a go.mod (`<path> <version>`, after `require` or in its block), with
/// ` (indirect)` when its comment says `// indirect` as the go command writes it.
fn requirement(spec: &str, comment: Option<&str>) -> Option<String> {
    let mut tokens = spec.split_whitespace();
    let (path, version) = (tokens.next()?, tokens.next()?);
    if tokens.next().is_some() {
        return None;
    }
    let path = path.trim_matches(|c| c == '"' || c == '`');
    let version = version.trim_matches(|c| c == '"' || c == '`');
    if path.is_empty() || version.is_empty() {
        return None;
    }
    let words: Vec<&str> = comment.map(|c| c.split_whitespace().collect()).unwrap_or_default();
    let indirect = matches!(words.as_slice(), ["indirect"] | ["indirect;", _, ..]);
    Some(if indirect { format!("{path} {version} (indirect)") } else { format!("{path} {version}") })
}

/// What a go.mod says for people: its requirements, single (`require x v`) and in blocks
/// (`require ( … )`), and its `go` and `toolchain` directives as facts.
fn go_mod_details(text: &str) -> Details {
    let mut details = Details::default();
    // The verb of the block being read (`require`, `replace`, …).
    let mut block: Option<&str> = None;
    for line in text.lines() {
        let (code, comment) = match line.split_once("//") {
            Some((code, comment)) => (code.trim(), Some(comment)),
            None => (line.trim(), None),
        };
        if code.is_empty() {
            continue;
        }
        if let Some(verb) = block {
            if code == ")" {
                block = None;
            } else if verb == "require" {
                details.dependencies.extend(requirement(code, comment));
            }
            continue;
        }
        let split = code.find(|c: char| c.is_whitespace() || c == '(').unwrap_or(code.len());
        let (verb, rest) = (&code[..split], code[split..].trim());
        if rest == "(" {
            block = Some(verb);
            continue;
        }
        match verb {
            "require" if !rest.starts_with('(') => details.dependencies.extend(requirement(rest, comment)),
            "go" | "toolchain" if !rest.is_empty() => details.facts.push((verb.to_string(), rest.to_string())),
            _ => {}
        }
    }
    details
}

#[async_trait]
impl Catalogue for GoCatalogue {
    /// From the version's go.mod: its `.mod` asset's blob (a hosted version's and a proxy's
    /// alike).
    async fn details(
        &self,
        services: &Services,
        _repo: &Repository,
        _c: &ComponentRow,
        assets: &[AssetRow],
    ) -> Details {
        let Some(go_mod) = assets.iter().find(|a| a.path.ends_with(".mod")) else { return Details::default() };
        match small_asset(services, go_mod).await {
            Some(bytes) => go_mod_details(&String::from_utf8_lossy(&bytes)),
            None => Details::default(),
        }
    }

    async fn hosted_page(&self, db: &Db, repo: &Repository, after: i64, limit: i64) -> DbResult<Vec<(i64, Stamped)>> {
        let page = rows::stamped_page(db, repo.id, after, limit).await?;
        Ok(page
            .into_iter()
            .map(|(v, by)| {
                let stamped = Stamped { entry: entry(&v), uploaded_by: by, created_at: v.time_ms };
                (v.id, stamped)
            })
            .collect())
    }

    /// A package is a module: the key before its `@version`.
    fn package(&self, c: &ComponentRow) -> String {
        c.component_key.rsplit_once('@').map_or(c.component_key.as_str(), |(m, _)| m).to_string()
    }

    fn compare_versions(&self, a: &str, b: &str) -> std::cmp::Ordering {
        match (Version::parse(a), Version::parse(b)) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => a.cmp(b),
        }
    }

    fn selectable(&self) -> packyard_model::cleanup::Selectable {
        packyard_model::cleanup::Selectable { prereleases: Some("pre-release and pseudo-versions"), revisions: None }
    }

    fn prerelease(&self, version: &str) -> bool {
        Version::parse(version).is_ok_and(|v| !v.is_release() || v.is_pseudo())
    }

    fn cached(&self, path: &str) -> Option<Component> {
        match Request::parse(path).ok()? {
            Request::File { module, version, .. }
                if Version::parse(&version).is_ok_and(|v| v.canonical() == version) =>
            {
                Some(component(&module, &version))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_mod_requirements_single_and_in_blocks() {
        let go_mod = "// A module.\nmodule github.com/acme/yaml\n\ngo 1.22\n\ntoolchain go1.22.3\n\nrequire github.com/pkg/errors v0.9.1\nrequire golang.org/x/sys v0.20.0 // indirect\n\nrequire (\n\tgithub.com/stretchr/testify v1.9.0\n\t\"gopkg.in/yaml.v3\" v3.0.1 // indirect\n\tgithub.com/davecgh/go-spew v1.1.1 // indirect; for testify\n\tgithub.com/kr/text v0.2.0 // not indirect\n\t// a comment\n) // end\n\nreplace (\n\tgithub.com/pkg/errors v0.9.1 => ../errors\n)\nexclude github.com/kr/text v0.1.0\nretract v1.0.0 // broken\n";
        let d = go_mod_details(go_mod);
        assert_eq!(
            d.dependencies,
            [
                "github.com/pkg/errors v0.9.1",
                "golang.org/x/sys v0.20.0 (indirect)",
                "github.com/stretchr/testify v1.9.0",
                "gopkg.in/yaml.v3 v3.0.1 (indirect)",
                "github.com/davecgh/go-spew v1.1.1 (indirect)",
                "github.com/kr/text v0.2.0"
            ]
        );
        assert_eq!(
            d.facts,
            [("go".to_string(), "1.22".to_string()), ("toolchain".to_string(), "go1.22.3".to_string())]
        );
    }

    #[test]
    fn go_mod_oddities_are_left_out() {
        let d = go_mod_details(
            "module m\nrequire(\nexample.com/a v1.0.0\nexample.com/b\n)\nrequire ()\nrequire x v1 extra\n",
        );
        assert_eq!(d.dependencies, ["example.com/a v1.0.0"]);
        assert!(d.facts.is_empty());
        assert_eq!(go_mod_details(""), Details::default());
        assert_eq!(requirement("a v1", Some(" indirect; ")), Some("a v1".into()));
        assert_eq!(requirement("a v1", Some("indirect")), Some("a v1 (indirect)".into()));
    }

    #[test]
    fn a_module_is_named_by_its_last_element() {
        assert_eq!(naming("github.com/acme/yaml"), ("github.com/acme".into(), "yaml".into()));
        assert_eq!(naming("github.com/acme/yaml/v2"), ("github.com/acme".into(), "yaml".into()));
        assert_eq!(naming("gopkg.in/yaml.v3"), ("gopkg.in".into(), "yaml.v3".into()));
        assert_eq!(naming("example.com/v2"), (String::new(), "example.com".into()));
        assert_eq!(naming("rsc.io"), (String::new(), "rsc.io".into()));
    }

    #[test]
    fn a_proxy_path_names_its_version() {
        let path = "github.com/!acme/yaml/@v/v1.2.0.zip";
        assert_eq!(
            GoCatalogue.cached(path),
            Some(Component {
                key: "github.com/Acme/yaml@v1.2.0".into(),
                group: "github.com/Acme".into(),
                name: "yaml".into(),
                version: "v1.2.0".into()
            })
        );
        for metadata in
            ["github.com/acme/yaml/@v/list", "github.com/acme/yaml/@latest", "github.com/acme/yaml/@v/main.info"]
        {
            assert_eq!(GoCatalogue.cached(metadata), None, "{metadata}");
        }
    }
}
