//! What the web UI shows of APT: components, the distribution's index files, the sources line
//! with its key.

use super::settings::AptSettings;
use async_trait::async_trait;
use packyard_core::formats::{FormatUi, Snippet};
use packyard_core::services::Services;
use packyard_model::repos::FormatSettings;
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::catalogue::ComponentRow;

pub struct AptUi;

/// Where the set-up keeps the key that verifies the repository's indexes: Packyard's own (a
/// hosted repository or a group), or the upstream's (a proxy: from its `apt.signed_by`, which
/// `gpg.key` serves, or the Debian archive's keyring when none is set).
fn keyring(repo: &Repository, apt: &AptSettings) -> String {
    if repo.repo_type == RepoType::Proxy && apt.signed_by.is_none() {
        "/usr/share/keyrings/debian-archive-keyring.gpg".to_string()
    } else {
        format!("/etc/apt/keyrings/packyard-{}.asc", repo.name)
    }
}

#[async_trait]
impl FormatUi for AptUi {
    fn title(&self) -> &'static str {
        "APT"
    }

    fn group_label(&self) -> &'static str {
        "Component"
    }

    /// Each distribution's `Packages` of the component, per architecture.
    fn group_files(&self, repo: &Repository, group: &str) -> Vec<String> {
        let apt = AptSettings::of(repo);
        let mut files = Vec::new();
        for suite in apt.suites() {
            for arch in apt.architectures.iter().filter(|a| a.as_str() != "all") {
                files.push(format!("dists/{suite}/{group}/binary-{arch}/Packages"));
            }
        }
        files
    }

    fn index_files(&self, repo: &Repository) -> Vec<String> {
        let apt = AptSettings::of(repo);
        let mut files: Vec<String> = apt
            .suites()
            .iter()
            .flat_map(|suite| ["InRelease", "Release"].map(|f| format!("dists/{suite}/{f}")))
            .collect();
        if repo.repo_type != RepoType::Proxy || apt.signed_by.is_some() {
            files.push("gpg.key".into());
        }
        files
    }

    fn facts(&self, repo: &Repository) -> Vec<(&'static str, String)> {
        let Some(apt) = repo.settings.format::<AptSettings>() else { return Vec::new() };
        let mut facts = vec![
            (if apt.suites().len() == 1 { "Distribution" } else { "Distributions" }, apt.suites().join(", ")),
            ("Components", apt.components.join(", ")),
            ("Architectures", apt.architectures.join(", ")),
        ];
        if repo.repo_type == RepoType::Hosted && apt.distributions.len() > 1 {
            facts.push(("Uploads without a distribution go to", apt.distribution.clone()));
        }
        if repo.repo_type == RepoType::Proxy {
            let key = if apt.signed_by.is_some() {
                "apt.signed_by (served as gpg.key)"
            } else {
                "not set: a group over this proxy cannot verify it"
            };
            facts.push(("Upstream key", key.to_string()));
        }
        facts
    }

    /// The key, then one sources line per distribution the repository serves.
    async fn setup(&self, services: &Services, url: &str, repo: &Repository, _groups: &[String]) -> Vec<Snippet> {
        let apt = AptSettings::of(repo);
        let components = if apt.components.is_empty() { "main".to_string() } else { apt.components.join(" ") };
        let keyring = keyring(repo, &apt);
        let mut out = Vec::new();
        if repo.repo_type != RepoType::Proxy || apt.signed_by.is_some() {
            // A proxy with a policy signs what it lets through with its own key.
            let upstreams = repo.repo_type == RepoType::Proxy && !repo.publishes_merge();
            let mut fetch =
                format!("sudo install -d /etc/apt/keyrings\ncurl -fsSL {url}/gpg.key | sudo tee {keyring} >/dev/null");
            let whose = if upstreams {
                "The upstream's signing key"
            } else {
                // The keys that sign: two during a rotation's overlap (gpg.key holds both).
                let uid = super::keys::user_id(repo);
                let ks = &services.security.keystore;
                let signers = super::keys::signers(&services.db, ks, repo.id, &uid).await.unwrap_or_default();
                let prints: Vec<String> = signers.iter().map(|s| s.fingerprint()).collect();
                if !prints.is_empty() {
                    fetch.push_str(&format!("\n# signed by {}", prints.join(" and ")));
                }
                if prints.len() > 1 {
                    "The signing keys (a rotation: either verifies)"
                } else {
                    "The signing key"
                }
            };
            out.push(Snippet::new(whose, fetch));
        }
        let suites = apt.suites();
        for suite in &suites {
            let (label, file) = if suites.len() == 1 {
                ("The sources line".to_string(), format!("packyard-{}", repo.name))
            } else {
                (format!("The sources line: {suite}"), format!("packyard-{}-{suite}", repo.name))
            };
            out.push(Snippet::new(
                label,
                format!(
                    "echo \"deb [signed-by={keyring}] {url} {suite} {components}\" | sudo tee /etc/apt/sources.list.d/{file}.list\nsudo apt-get update"
                ),
            ));
        }
        if repo.repo_type == RepoType::Hosted {
            let to =
                if suites.len() > 1 { format!("{url}/?distribution={}", apt.distribution) } else { format!("{url}/") };
            out.push(Snippet::new("Upload a package", format!("curl -u USER:TOKEN --data-binary @package.deb {to}")));
        }
        out
    }

    fn install(&self, _repo: &Repository, c: &ComponentRow) -> String {
        format!("sudo apt-get install {}={}", c.name, c.version)
    }
}
