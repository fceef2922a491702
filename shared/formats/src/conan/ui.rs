//! What the web UI shows of Conan: user/channel groups, `conan remote add`, `conan install`.

use async_trait::async_trait;
use packyard_core::formats::{FormatUi, Snippet};
use packyard_core::services::Services;
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::catalogue::ComponentRow;

pub struct ConanUi;

#[async_trait]
impl FormatUi for ConanUi {
    fn title(&self) -> &'static str {
        "Conan 2"
    }

    fn group_label(&self) -> &'static str {
        "User / channel"
    }

    async fn setup(&self, services: &Services, url: &str, repo: &Repository, _groups: &[String]) -> Vec<Snippet> {
        let mut remote = format!("conan remote add {} {url}", repo.name);
        if !repo.anonymous_read || !services.security.anonymous_read {
            remote.push_str(&format!("\nconan remote login {} USER", repo.name));
        }
        let mut out = vec![Snippet::new("The remote", remote)];
        if repo.repo_type == RepoType::Hosted {
            out.push(Snippet::new(
                "Upload",
                format!("conan remote login {} USER\nconan upload \"pkg/*\" -r {} -c", repo.name, repo.name),
            ));
        }
        out
    }

    fn install(&self, repo: &Repository, c: &ComponentRow) -> String {
        let user_channel = if c.namespace.is_empty() { String::new() } else { format!("@{}", c.namespace) };
        let rrev = c.component_key.rsplit_once('#').map_or(String::new(), |(_, r)| format!("#{r}"));
        format!("conan install --requires=\"{}/{}{user_channel}{rrev}\" -r {}", c.name, c.version, repo.name)
    }
}
