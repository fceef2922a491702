//! What the web UI shows of Go: module paths, `GOPROXY` and `GONOSUMDB`, `go get`.

use async_trait::async_trait;
use packyard_core::formats::{FormatUi, Snippet};
use packyard_core::services::Services;
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::catalogue::ComponentRow;

pub struct GoUi;

/// A component's module path: its group (the path without its last element) and its name.
fn module(c: &ComponentRow) -> String {
    if c.namespace.is_empty() {
        c.name.clone()
    } else {
        format!("{}/{}", c.namespace, c.name)
    }
}

#[async_trait]
impl FormatUi for GoUi {
    fn title(&self) -> &'static str {
        "Go modules"
    }

    fn group_label(&self) -> &'static str {
        "Module path"
    }

    fn display_name(&self, c: &ComponentRow) -> String {
        module(c)
    }

    async fn setup(&self, _services: &Services, url: &str, repo: &Repository, _group: Option<&str>) -> Vec<Snippet> {
        let mut env = format!("go env -w GOPROXY={url}/");
        if repo.repo_type != RepoType::Proxy {
            env.push_str("\n# modules only this repository has are in no public checksum database:\ngo env -w GONOSUMDB=example.com/private");
        }
        let mut out = vec![Snippet::new("The module proxy", env)];
        if repo.repo_type == RepoType::Hosted {
            out.push(Snippet::new(
                "Publish a version",
                format!("curl -u USER:TOKEN -T v1.0.0.zip {url}/example.com/private/mod/@v/v1.0.0.zip"),
            ));
        }
        out
    }

    fn install(&self, _repo: &Repository, c: &ComponentRow) -> String {
        format!("go get {}@{}", module(c), c.version)
    }
}
