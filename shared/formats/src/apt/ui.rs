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

fn keyring(repo: &Repository) -> String {
    if repo.repo_type == RepoType::Proxy {
        // A proxy serves its upstream's signed indexes, verified with the upstream's key.
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

    fn group_files(&self, repo: &Repository, group: &str) -> Vec<String> {
        let apt = AptSettings::of(repo);
        apt.architectures
            .iter()
            .filter(|a| a.as_str() != "all")
            .map(|a| format!("dists/{}/{group}/binary-{a}/Packages", apt.distribution))
            .collect()
    }

    fn index_files(&self, repo: &Repository) -> Vec<String> {
        let apt = AptSettings::of(repo);
        let mut files: Vec<String> =
            ["InRelease", "Release"].iter().map(|f| format!("dists/{}/{f}", apt.distribution)).collect();
        if repo.repo_type != RepoType::Proxy {
            files.push("gpg.key".into());
        }
        files
    }

    fn facts(&self, repo: &Repository) -> Vec<(&'static str, String)> {
        let Some(apt) = repo.settings.format::<AptSettings>() else { return Vec::new() };
        vec![
            ("Distribution", apt.distribution.clone()),
            ("Components", apt.components.join(", ")),
            ("Architectures", apt.architectures.join(", ")),
        ]
    }

    async fn setup(&self, _services: &Services, url: &str, repo: &Repository, _group: Option<&str>) -> Vec<Snippet> {
        let apt = AptSettings::of(repo);
        let components = if apt.components.is_empty() { "main".to_string() } else { apt.components.join(" ") };
        let keyring = keyring(repo);
        let mut out = Vec::new();
        if repo.repo_type != RepoType::Proxy {
            out.push(Snippet::new(
                "The signing key",
                format!("sudo install -d /etc/apt/keyrings\ncurl -fsSL {url}/gpg.key | sudo tee {keyring} >/dev/null"),
            ));
        }
        out.push(Snippet::new(
            "The sources line",
            format!(
                "echo \"deb [signed-by={keyring}] {url} {} {components}\" | sudo tee /etc/apt/sources.list.d/packyard-{}.list\nsudo apt-get update",
                apt.distribution, repo.name
            ),
        ));
        if repo.repo_type == RepoType::Hosted {
            out.push(Snippet::new("Upload a package", format!("curl -u USER:TOKEN --data-binary @package.deb {url}/")));
        }
        out
    }

    fn install(&self, _repo: &Repository, c: &ComponentRow) -> String {
        format!("sudo apt-get install {}={}", c.name, c.version)
    }
}
