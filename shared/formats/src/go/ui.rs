//! What the web UI shows of Go: module paths, `GOPROXY` and `GONOSUMDB`, `go get`.

use async_trait::async_trait;
use packyard_core::formats::{FormatUi, Snippet};
use packyard_core::services::Services;
use packyard_model::repos::{FormatSettings, RepoType, Repository};

use super::settings::GoSettings;
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

    /// `GOPROXY`; the checksum database the repository serves (a hosted repository's or a
    /// group's own log, with its verifier key — made on first need, as a reader's request for
    /// its `sumdb/<name>/latest` makes it —; a proxy's `go.checksum_databases`); `.netrc`
    /// credentials where anonymous reads are off (the go command sends them only over https).
    async fn setup(&self, services: &Services, url: &str, repo: &Repository, _groups: &[String]) -> Vec<Snippet> {
        let mut out = vec![Snippet::new("The module proxy", format!("go env -w GOPROXY={url}/"))];
        if repo.repo_type == RepoType::Proxy {
            let dbs = GoSettings::of(repo).checksum_databases.unwrap_or_default();
            let text = match dbs.first() {
                Some(db) => format!(
                    "# verified against {0}, which this repository serves through its cache\ngo env -w GOSUMDB={0}",
                    db.name
                ),
                None => "# this repository serves no checksum database: the go command asks sum.golang.org itself\ngo env -w GOSUMDB=sum.golang.org".into(),
            };
            out.push(Snippet::new("The checksum database", text));
        } else if let Ok(head) = super::sumdb::ensure(services, repo).await {
            out.push(Snippet::new(
                "The checksum database",
                format!(
                    "# this repository's own log: every module it serves is verified against it\ngo env -w GOSUMDB=\"{} {url}/sumdb/{}\"\n# or leave its private modules unverified instead:\n# go env -w GONOSUMDB=example.com/private",
                    head.verifier_key, head.name
                ),
            ));
        }
        if !repo.anonymous_read || !services.security.anonymous_read {
            let host = netrc_machine(url);
            out.push(Snippet::new(
                "Credentials",
                format!("# the go command sends them only over https\necho \"machine {host} login USER password TOKEN\" >> ~/.netrc\nchmod 600 ~/.netrc"),
            ));
        }
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

/// The `.netrc` machine of a repository URL: its host, without scheme, port or path.
fn netrc_machine(url: &str) -> &str {
    let authority = url.split_once("://").map_or(url, |(_, rest)| rest).split('/').next().unwrap_or_default();
    match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_netrc_machine_is_the_host() {
        assert_eq!(super::netrc_machine("https://repo.example.com:8443/x/repository/go"), "repo.example.com");
        assert_eq!(super::netrc_machine("http://[::1]:8080/repository/go"), "::1");
        assert_eq!(super::netrc_machine("https://localhost/repository/go"), "localhost");
    }
}
