//! APT as the engine sees it: its registry entry.

use std::sync::Arc;

use async_trait::async_trait;
use packyard_codecs::apt::signing::{Algorithm, Signer};
use packyard_core::catalogue::Catalogue;
use packyard_core::formats::{
    FormatSpec, FormatUi, KeyError, KeyKinds, Part, Rotating, RotatingKeys, SettingsOf, SettingsSpec, SigningKeys,
};
use packyard_core::hosted::{ByKey, Deletes};
use packyard_core::publication::Builders;
use packyard_core::services::Services;
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::db::blobs::BlobColumn;
use packyard_store::db::DbResult;

use super::keys;
use super::settings::AptSettings;

pub struct AptSpec;

#[async_trait]
impl FormatSpec for AptSpec {
    fn format(&self) -> Format {
        Format::Apt
    }

    fn blob_columns(&self) -> &'static [BlobColumn] {
        &[
            BlobColumn { table: "apt_packages", column: "sha256" },
            BlobColumn { table: "apt_source_files", column: "sha256" },
        ]
    }

    fn settings(&self) -> Option<&'static dyn SettingsSpec> {
        Some(&SettingsOf::<AptSettings>::SPEC)
    }

    fn catalogue(&self) -> &'static dyn Catalogue {
        &super::catalogue::AptCatalogue
    }

    fn import(
        &self,
        args: packyard_core::import::ImportArgs,
    ) -> Option<Result<Box<dyn packyard_core::import::ImportJob>, String>> {
        let job = super::import::AptImport::from_args(args);
        Some(job.map(|i| Box::new(packyard_core::import::Job(i)) as Box<dyn packyard_core::import::ImportJob>))
    }

    fn nexus(&self) -> Option<&dyn packyard_core::formats::NexusShape> {
        Some(&super::nexus::AptNexus)
    }

    /// A group applies its policy when it merges its members' indexes, a proxy when it filters
    /// its upstream's (each signs what it publishes); a package declares its architecture to it.
    fn policy_facets(&self) -> Option<&'static [&'static str]> {
        Some(&["architectures"])
    }

    fn policy_refused(
        &self,
        repo_type: packyard_model::repos::RepoType,
        block: Option<&serde_json::Value>,
    ) -> Option<String> {
        packyard_core::formats::signed_index_policy_refused(repo_type, block, "apt")
    }

    fn osv(&self) -> Option<&dyn packyard_core::formats::OsvSpec> {
        Some(&AptOsv)
    }

    fn ui(&self) -> &dyn FormatUi {
        &super::ui::AptUi
    }

    /// A group merges a hosted member's index into each of its distributions, a proxy's or a
    /// nested group's of the same distribution, and verifies a proxy member's upstream
    /// `InRelease` with its `apt.signed_by` before signing it again: a proxy or group member
    /// must serve one of the group's distributions, and a proxy member must have the key.
    fn check_member(&self, group: Part<'_>, member: Part<'_>) -> Result<(), String> {
        let (g, m) = (group.settings::<AptSettings>(), member.settings::<AptSettings>());
        if member.repo_type == RepoType::Proxy && m.signed_by.is_none() {
            return Err(format!(
                "group member {} is a proxy without apt.signed_by: the group verifies what it merges from the upstream and signs it again, so set apt.signed_by on {} to the upstream archive's armored public key",
                member.name, member.name
            ));
        }
        let (served, published) = (m.suites(), g.suites());
        if member.repo_type != RepoType::Hosted && !served.iter().any(|d| published.contains(d)) {
            return Err(format!(
                "group member {} serves {} {}, which group {} does not publish (it publishes {}): list the member's distributions in the group's apt.distributions, e.g. {}",
                member.name,
                if served.len() == 1 { "distribution" } else { "distributions" },
                served.join(", "),
                group.name,
                published.join(", "),
                serde_json::json!({"apt": {"distributions": served}}),
            ));
        }
        Ok(())
    }

    /// A binary package's (`name_version_arch.deb`); a source package's is `source`.
    fn architecture(&self, _group: &str, paths: &[&str]) -> Option<String> {
        let file = |p: &&str| p.rsplit('/').next().unwrap_or_default().to_string();
        if let Some(deb) = paths.iter().map(file).find(|f| f.ends_with(".deb") || f.ends_with(".udeb")) {
            let stem = deb.rsplit_once('.').map_or(deb.as_str(), |(s, _)| s);
            return stem.rsplit_once('_').map(|(_, arch)| arch.to_string()).filter(|a| a != "all");
        }
        paths.iter().any(|p| p.ends_with(".dsc")).then(|| "source".to_string())
    }

    fn rollback(&self) -> Option<packyard_core::formats::Rollback> {
        Some(packyard_core::formats::Rollback { kind: super::KIND, label: "distribution" })
    }

    fn deletes(&self) -> &dyn Deletes {
        &ByKey(super::hosted::AptHosted)
    }

    fn copies(&self) -> &dyn packyard_core::hosted::Copies {
        &ByKey(super::hosted::AptHosted)
    }

    async fn dependencies(
        &self,
        services: &Services,
        repos: (&Repository, &Repository),
        keys: &[String],
    ) -> Result<Vec<String>, packyard_core::hosted::UploadError> {
        super::promote::dependencies(services, repos, keys).await
    }

    fn builders(&self, services: &Services, builders: Builders) -> Builders {
        let builder = super::publish::AptBuilder {
            page_size: 1_000,
            keystore: services.security.keystore.clone(),
            reader: packyard_core::groups::Reader::of(services),
            memory: Default::default(),
            services: Some(services.clone()),
        };
        builders.with(super::KIND, Arc::new(builder))
    }

    async fn settings_changed(
        &self,
        services: &Services,
        before: Option<&Repository>,
        repo: &Repository,
    ) -> DbResult<usize> {
        if let Some(before) = before {
            super::settings_changed(&services.db, before, repo).await?;
        }
        super::request_publication(&services.db, repo).await
    }

    fn signing_keys(&self) -> Option<&dyn SigningKeys> {
        Some(&KEYS)
    }
}

/// APT's keys: OpenPGP, Ed25519 unless asked; the old one stays offered in `gpg.key`.
pub struct AptKeys;

static KEYS: Rotating<AptKeys> = Rotating(AptKeys);

static KINDS: KeyKinds = KeyKinds {
    what: "APT signing keys",
    algorithms: &["ed25519", "rsa3072", "rsa4096"],
    default: "ed25519",
    import: "<armored secret key>",
};

#[async_trait]
impl RotatingKeys for AptKeys {
    type Key = Signer;

    fn kinds(&self) -> &'static KeyKinds {
        &KINDS
    }

    fn label(&self) -> &'static str {
        "APT"
    }

    fn rotation_note(&self) -> &'static str {
        "gpg.key"
    }

    fn generate(repo: &Repository, algorithm: &'static str) -> Result<Signer, String> {
        let algorithm = match algorithm {
            "rsa3072" => Algorithm::Rsa3072,
            "rsa4096" => Algorithm::Rsa4096,
            _ => Algorithm::Ed25519,
        };
        Signer::generate_with(&keys::user_id(repo), algorithm).map_err(|e| e.to_string())
    }

    fn import(armored: &str) -> Result<Signer, String> {
        Signer::import(armored)
            .map_err(|e| format!("private_key is not a usable OpenPGP secret key without passphrase: {e}"))
    }

    fn fingerprint(key: &Signer) -> Result<String, KeyError> {
        Ok(key.fingerprint())
    }

    async fn install(&self, services: &Services, repo: &Repository, key: &Signer) -> Result<(), KeyError> {
        keys::rotate(&services.db, &services.security.keystore, repo.id, key).await.map_err(KeyError::internal)
    }

    const STORE: &'static str = "apt";

    fn encode(key: &Signer) -> Result<Vec<u8>, String> {
        key.to_armored_secret().map(String::into_bytes).map_err(|e| e.to_string())
    }

    fn decode(bytes: &[u8]) -> Result<Signer, String> {
        Signer::from_armored(&String::from_utf8_lossy(bytes)).map_err(|e| e.to_string())
    }

    fn public(_repo: &Repository, key: &Signer) -> Result<serde_json::Map<String, serde_json::Value>, KeyError> {
        let mut m = serde_json::Map::new();
        m.insert("algorithm".into(), key.algorithm_name().into());
        m.insert("public_key".into(), key.public_armored().map_err(KeyError::internal)?.into());
        Ok(m)
    }

    fn expires_at(key: &Signer) -> Option<i64> {
        key.expires_at()
    }

    async fn describe(&self, services: &Services, repo: &Repository) -> Result<serde_json::Value, KeyError> {
        let ks = &services.security.keystore;
        let current =
            keys::signer(&services.db, ks, repo.id, &keys::user_id(repo)).await.map_err(KeyError::internal)?;
        let previous = keys::previous(&services.db, ks, repo.id).await.map_err(KeyError::internal)?;
        Ok(serde_json::json!({
            "repository": repo.name.as_str(),
            "fingerprint": current.fingerprint(),
            "algorithm": current.algorithm_name(),
            "public_key": current.public_armored().map_err(KeyError::internal)?,
            "previous_fingerprint": previous.map(|p| p.fingerprint()),
        }))
    }
}

/// The format's packages in OSV (`Debian`), in the format's own version order.
pub(crate) struct AptOsv;

impl packyard_core::formats::OsvSpec for AptOsv {
    fn ecosystem(&self) -> &'static str {
        "Debian"
    }

    fn compare(&self, a: &str, b: &str) -> std::cmp::Ordering {
        packyard_codecs::apt::version::compare(a, b)
    }

    /// A Debian codename's release number (a suite such as `stable` moves: not known).
    fn release_of(&self, dist: &str) -> Option<String> {
        let n = match dist.split(['-', '/']).next().unwrap_or(dist) {
            "jessie" => 8,
            "stretch" => 9,
            "buster" => 10,
            "bullseye" => 11,
            "bookworm" => 12,
            "trixie" => 13,
            "forky" => 14,
            "duke" => 15,
            _ => return None,
        };
        Some(n.to_string())
    }

    /// A repository's pool serves all its distributions: its components are of their one
    /// release when they all name the same (`bookworm`, `bookworm-updates`,
    /// `bookworm-security`), else of none known.
    fn component_release(&self, repo: &Repository, _namespace: &str) -> Option<String> {
        let settings = <super::settings::AptSettings as packyard_model::repos::FormatSettings>::of(repo);
        let mut releases = settings.suites().into_iter().map(|d| self.release_of(d));
        let first = releases.next()??;
        releases.all(|r| r.as_deref() == Some(first.as_str())).then_some(first)
    }

    /// Debian's advisories name source packages: a package's is the directory of its pool
    /// path (`pool/<component>/<prefix>/<source>/<file>`; `libssl3` is `openssl`'s), else its
    /// own name.
    fn package(&self, (key, _, name): (&str, &str, &str)) -> String {
        let parts: Vec<&str> = key.split('/').collect();
        match parts.as_slice() {
            ["pool", _, _, source, _] if !source.is_empty() => (*source).to_string(),
            _ => name.to_string(),
        }
    }
}
