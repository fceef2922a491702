//! Go modules as the engine sees them: their registry entry.

use std::sync::Arc;

use async_trait::async_trait;
use packyard_codecs::go::sumdb::Signer;
use packyard_core::catalogue::Catalogue;
use packyard_core::formats::{
    FormatSpec, FormatUi, KeyChange, KeyChanged, KeyError, SettingsOf, SettingsSpec, SigningKeys,
};
use packyard_core::hosted::{ByKey, Deletes};
use packyard_core::publication::Builders;
use packyard_core::services::Services;
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::db::blobs::BlobColumn;

use super::settings::{check_checksum_database_name, GoSettings};
use super::sumdb;

pub struct GoSpec;

#[async_trait]
impl FormatSpec for GoSpec {
    fn format(&self) -> Format {
        Format::Go
    }

    fn blob_columns(&self) -> &'static [BlobColumn] {
        &[
            BlobColumn { table: "go_versions", column: "zip_sha256" },
            BlobColumn { table: "go_versions", column: "mod_sha256" },
        ]
    }

    fn settings(&self) -> Option<&'static dyn SettingsSpec> {
        Some(&SettingsOf::<GoSettings>::SPEC)
    }

    fn catalogue(&self) -> &'static dyn Catalogue {
        &super::catalogue::GoCatalogue
    }

    fn import(
        &self,
        args: packyard_core::import::ImportArgs,
    ) -> Option<Result<Box<dyn packyard_core::import::ImportJob>, String>> {
        let job = super::import::GoImport::from_args(args);
        Some(job.map(|i| Box::new(packyard_core::import::Job(i)) as Box<dyn packyard_core::import::ImportJob>))
    }

    fn osv(&self) -> Option<&dyn packyard_core::formats::OsvSpec> {
        Some(&GoOsv)
    }

    /// Go's routes apply a policy; a module declares no license or architecture to it.
    fn policy_facets(&self) -> Option<&'static [&'static str]> {
        Some(&[])
    }

    /// The module path (the catalogue splits it into group and name): `module@version`'s.
    fn policy_name(&self, (key, _, name): (&str, &str, &str)) -> String {
        key.rsplit_once('@').map_or(name, |(module, _)| module).to_string()
    }

    fn ui(&self) -> &dyn FormatUi {
        &super::ui::GoUi
    }

    /// A module's files under its GOPROXY path, the module and version case-encoded.
    fn snapshot_path(&self, kind: &str, unit: &str, file: &str) -> Option<String> {
        if kind != super::KIND || !packyard_core::formats::visible(file) {
            return None;
        }
        use packyard_codecs::go::escape;
        let file = match file.strip_prefix("@v/").and_then(|f| f.strip_suffix(".info")) {
            Some(version) => format!("@v/{}.info", escape(version)),
            None => file.to_string(),
        };
        Some(format!("{}/{file}", escape(unit)))
    }

    fn deletes(&self) -> &dyn Deletes {
        &ByKey(super::hosted::GoHosted)
    }

    fn copies(&self) -> &dyn packyard_core::hosted::Copies {
        &ByKey(super::hosted::GoHosted)
    }

    fn builders(&self, services: &Services, builders: Builders) -> Builders {
        let builder =
            super::publish::GoBuilder { page_size: 1_000, reader: packyard_core::groups::Reader::of(services) };
        builders.with(super::KIND, Arc::new(builder))
    }

    /// A hosted or group repository's checksum database key.
    fn signing_keys(&self) -> Option<&dyn SigningKeys> {
        Some(self)
    }
}

/// A Go repository's checksum database: its name, verifier key, size, and the `GOSUMDB` value
/// that verifies through it.
fn describe(repo: &Repository, url: &str, head: &sumdb::LogHead) -> serde_json::Value {
    serde_json::json!({
        "repository": repo.name.as_str(),
        "algorithm": "ed25519",
        "name": head.name,
        "verifier_key": head.verifier_key,
        "gosumdb": format!("{} {url}/sumdb/{}", head.verifier_key, head.name),
        "size": head.size,
    })
}

#[async_trait]
impl SigningKeys for GoSpec {
    fn label(&self) -> &'static str {
        "Go (checksum database)"
    }

    fn refuse(&self, repo: &Repository) -> Option<String> {
        (repo.repo_type == RepoType::Proxy).then(|| {
            format!(
                "repository {} is a proxy: it serves the checksum databases of go.checksum_databases, and has no key of its own",
                repo.name
            )
        })
    }

    async fn describe(&self, services: &Services, repo: &Repository, url: &str) -> Result<serde_json::Value, KeyError> {
        let head = sumdb::ensure(services, repo).await.map_err(KeyError::internal)?;
        Ok(describe(repo, url, &head))
    }

    /// A new key (named as asked, or as the database is) or an imported one, while the log is
    /// empty (a log's key is never rotated: clients pin it).
    async fn change(
        &self,
        services: &Services,
        repo: &Repository,
        url: &str,
        body: &KeyChange,
    ) -> Result<KeyChanged, KeyError> {
        if body.algorithm.as_deref().is_some_and(|a| a != "ed25519") {
            return Err(KeyError::Invalid("a checksum database key is an Ed25519 note key: algorithm ed25519".into()));
        }
        let signer = match (body.generate, body.private_key.as_deref()) {
            (true, None) => {
                let name = match &body.name {
                    Some(n) => {
                        check_checksum_database_name("name", n)?;
                        n.clone()
                    }
                    None => sumdb::ensure(services, repo).await.map_err(KeyError::internal)?.name,
                };
                Signer::generate(&name).map_err(|e| KeyError::Invalid(e.to_string()))?
            }
            (false, Some(_)) if body.name.is_some() => {
                return Err(KeyError::Invalid("an imported note key carries its name: leave out `name`".into()))
            }
            (false, Some(key)) => {
                let signer = Signer::parse(key.trim())
                    .map_err(|e| KeyError::Invalid(format!("private_key is not a note signing key: {e}")))?;
                check_checksum_database_name("key name", signer.name())?;
                signer
            }
            _ => {
                return Err(KeyError::Invalid(
                    "send either {\"generate\":true} (optionally with \"name\") or {\"private_key\":\"PRIVATE+KEY+<name>+<hash>+<key>\"}".into(),
                ))
            }
        };
        let head = match sumdb::replace_key(services, repo, &signer).await {
            Ok(head) => head,
            Err(sumdb::RekeyError::NotEmpty(m)) => return Err(KeyError::Conflict(m)),
            Err(sumdb::RekeyError::Sumdb(e)) => return Err(KeyError::internal(e)),
        };
        // Replicas drop the signed head they keep.
        services.db.touch_repository(repo.id).await?;
        services.changed(packyard_core::events::Changed::Publications);
        Ok(KeyChanged {
            audit: serde_json::json!({"name": head.name, "verifier_key": head.verifier_key}),
            key: Some(describe(repo, url, &head)),
        })
    }
}

/// Go modules in OSV (`Go`): versions without their `v`, in semantic version order.
struct GoOsv;

impl packyard_core::formats::OsvSpec for GoOsv {
    fn ecosystem(&self) -> &'static str {
        "Go"
    }

    /// Semantic version order; a version that does not parse sorts before every one that does
    /// (a total order: advisories' events are sorted with it).
    fn compare(&self, a: &str, b: &str) -> std::cmp::Ordering {
        let v = |s: &str| packyard_codecs::go::version::Version::parse(&format!("v{}", s.trim_start_matches('v'))).ok();
        match (v(a), v(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (None, None) => a.cmp(b),
        }
    }

    /// The module path: the catalogue's key is `<module>@<version>` (its group and name leave
    /// out a `/vN` major suffix).
    fn package(&self, (key, _, name): (&str, &str, &str)) -> String {
        key.rsplit_once('@').map_or(name, |(module, _)| module).to_string()
    }

    fn osv_version<'a>(&self, version: &'a str) -> std::borrow::Cow<'a, str> {
        std::borrow::Cow::Borrowed(version.strip_prefix('v').unwrap_or(version))
    }
}
