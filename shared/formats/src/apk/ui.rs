//! What the web UI shows of APK: `branch/repository/arch` groups, their index, the
//! `/etc/apk/repositories` line with its key file.

use super::settings::ApkSettings;
use async_trait::async_trait;
use packyard_core::formats::{FormatUi, Snippet};
use packyard_core::services::Services;
use packyard_model::repos::{FormatSettings, RepoType, Repository};
use packyard_store::db::catalogue::ComponentRow;

pub struct ApkUi;

/// The file name an APK client keeps the repository's public key under, when Packyard signs its
/// indexes (a hosted repository or a group); a proxy serves its upstream's.
async fn key_names(services: &Services, repo: &Repository) -> Vec<String> {
    // (A proxy with a policy signs what it lets through itself.)
    if repo.repo_type == RepoType::Proxy && !repo.publishes_merge() {
        return Vec::new();
    }
    // Both keys during a rotation's overlap: a client that trusts either verifies the index.
    let keys = super::keys::signing_named(&services.db, &services.security.keystore, repo).await.unwrap_or_default();
    keys.into_iter().map(|(_, name)| name).collect()
}

/// A proxy's upstream key names (`group::upstream_keys`), when it has `apk.signed_by`.
async fn upstream_key_names(services: &Services, repo: &Repository) -> Vec<String> {
    if repo.repo_type != RepoType::Proxy || repo.publishes_merge() || ApkSettings::of(repo).signed_by.is_none() {
        return Vec::new();
    }
    let reader = packyard_core::groups::Reader::of(services);
    let keys = super::group::upstream_keys(&services.db, &reader, repo).await.unwrap_or_default();
    keys.into_iter().map(|(name, _)| name).collect()
}

#[async_trait]
impl FormatUi for ApkUi {
    fn title(&self) -> &'static str {
        "Alpine APK"
    }

    fn group_label(&self) -> &'static str {
        "Branch / repository / architecture"
    }

    fn group_files(&self, _repo: &Repository, group: &str) -> Vec<String> {
        vec![format!("{group}/{}", super::INDEX_FILE)]
    }

    fn facts(&self, repo: &Repository) -> Vec<(&'static str, String)> {
        let Some(apk) = repo.settings.format::<ApkSettings>() else { return Vec::new() };
        vec![("Architectures", apk.architectures.join(", "))]
    }

    /// A group's `branch/repository` (its architecture left out).
    fn setup_group(&self, group: &str) -> Option<String> {
        group.rsplit_once('/').map(|(b, _)| b.to_string()).filter(|b| !b.is_empty())
    }

    /// The key (a hosted repository's or a group's), then a repositories line for each
    /// `branch/repository` it holds (an example one while it holds none).
    async fn setup(&self, services: &Services, url: &str, repo: &Repository, groups: &[String]) -> Vec<Snippet> {
        let mut out = Vec::new();
        if let names @ [_, ..] = key_names(services, repo).await.as_slice() {
            let lines: Vec<String> =
                names.iter().map(|name| format!("wget -O /etc/apk/keys/{name} {url}/keys/{name}")).collect();
            let label =
                if names.len() == 1 { "The signing key" } else { "The signing keys (a rotation: either verifies)" };
            out.push(Snippet::new(label, lines.join("\n")));
        } else if let names @ [_, ..] = upstream_key_names(services, repo).await.as_slice() {
            // A proxy serves its upstream's signatures: clients trust the upstream's keys, which
            // it serves under the names the upstream's indexes give them.
            let lines: Vec<String> =
                names.iter().map(|name| format!("wget -O /etc/apk/keys/{name} {url}/keys/{name}")).collect();
            let label = if names.len() == 1 { "The upstream's signing key" } else { "The upstream's signing keys" };
            out.push(Snippet::new(label, lines.join("\n")));
        } else if repo.repo_type == RepoType::Proxy {
            out.push(Snippet::new(
                "The upstream's signing keys",
                "# the upstream signs its indexes: install its keys, e.g. Alpine's\napk add alpine-keys".to_string(),
            ));
        }
        let lines: Vec<String> = if groups.is_empty() {
            vec![
                "# for example (nothing is published yet):".into(),
                format!("echo {url}/v3.20/main >> /etc/apk/repositories"),
            ]
        } else {
            groups.iter().map(|branch| format!("echo {url}/{branch} >> /etc/apk/repositories")).collect()
        };
        out.push(Snippet::new("The repositories line", format!("{}\napk update", lines.join("\n"))));
        if repo.repo_type == RepoType::Hosted {
            let branch = groups.first().map_or("v3.20/main", String::as_str);
            let arch = ApkSettings::of(repo).architectures.first().cloned().unwrap_or_else(|| "x86_64".into());
            out.push(Snippet::new(
                "Upload a package",
                format!("curl -u USER:TOKEN -T hello-2.12-r1.apk {url}/{branch}/{arch}/hello-2.12-r1.apk"),
            ));
        }
        out
    }

    fn install(&self, _repo: &Repository, c: &ComponentRow) -> String {
        format!("apk add {}={}", c.name, c.version)
    }
}
