//! What a person pastes to point a client at a repository, and to install one component: the
//! apt sources line with its key, the `/etc/apk/repositories` line with its key file, `GOPROXY`
//! and `GONOSUMDB`, `conan remote add` and `conan install` — with this server's public URLs.

use packyard_core::services::Services;
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::db::catalogue::ComponentRow;

use super::Base;

/// A labelled text to copy.
pub struct Snippet {
    pub label: String,
    pub text: String,
}

fn snippet(label: impl Into<String>, text: impl Into<String>) -> Snippet {
    Snippet { label: label.into(), text: text.into() }
}

/// The repository's URL as clients are given it (no trailing slash).
pub fn url(base: &Base, repo: &Repository) -> String {
    base.url(&format!("/repository/{}", repo.name))
}

/// The file name an APK client keeps the repository's public key under, when Packyard signs its
/// indexes (a hosted repository or a group); a proxy serves its upstream's.
async fn apk_key_name(services: &Services, repo: &Repository) -> Option<String> {
    if repo.repo_type == RepoType::Proxy {
        return None;
    }
    let key = packyard_formats::apk::keys::current(&services.db, &services.security.keystore, repo.id).await.ok()?;
    key.file_name(repo.name.as_str()).ok()
}

fn apt_keyring(repo: &Repository) -> String {
    if repo.repo_type == RepoType::Proxy {
        // A proxy serves its upstream's signed indexes, verified with the upstream's key.
        "/usr/share/keyrings/debian-archive-keyring.gpg".to_string()
    } else {
        format!("/etc/apt/keyrings/packyard-{}.asc", repo.name)
    }
}

/// How to point a client at the repository. `branch` (APK) is a `branch/repository` the
/// repository holds, when one is known.
pub async fn repository(services: &Services, base: &Base, repo: &Repository, branch: Option<&str>) -> Vec<Snippet> {
    let url = url(base, repo);
    let mut out = Vec::new();
    match repo.format {
        Format::Apt => {
            let apt = repo.settings.apt.clone().unwrap_or_default();
            let components = if apt.components.is_empty() { "main".to_string() } else { apt.components.join(" ") };
            let keyring = apt_keyring(repo);
            if repo.repo_type != RepoType::Proxy {
                out.push(snippet(
                    "The signing key",
                    format!(
                        "sudo install -d /etc/apt/keyrings\ncurl -fsSL {url}/gpg.key | sudo tee {keyring} >/dev/null"
                    ),
                ));
            }
            out.push(snippet(
                "The sources line",
                format!(
                    "echo \"deb [signed-by={keyring}] {url} {} {components}\" | sudo tee /etc/apt/sources.list.d/packyard-{}.list\nsudo apt-get update",
                    apt.distribution, repo.name
                ),
            ));
            if repo.repo_type == RepoType::Hosted {
                out.push(snippet("Upload a package", format!("curl -u USER:TOKEN --data-binary @package.deb {url}/")));
            }
        }
        Format::Apk => {
            let branch = branch.unwrap_or("v3.20/main");
            if let Some(name) = apk_key_name(services, repo).await {
                out.push(snippet("The signing key", format!("wget -O /etc/apk/keys/{name} {url}/keys/{name}")));
            }
            out.push(snippet(
                "The repositories line",
                format!("echo {url}/{branch} >> /etc/apk/repositories\napk update"),
            ));
            if repo.repo_type == RepoType::Hosted {
                out.push(snippet(
                    "Upload a package",
                    format!("curl -u USER:TOKEN -T hello-2.12-r1.apk {url}/{branch}/x86_64/hello-2.12-r1.apk"),
                ));
            }
        }
        Format::Go => {
            let mut env = format!("go env -w GOPROXY={url}/");
            if repo.repo_type != RepoType::Proxy {
                env.push_str("\n# modules only this repository has are in no public checksum database:\ngo env -w GONOSUMDB=example.com/private");
            }
            out.push(snippet("The module proxy", env));
            if repo.repo_type == RepoType::Hosted {
                out.push(snippet(
                    "Publish a version",
                    format!("curl -u USER:TOKEN -T v1.0.0.zip {url}/example.com/private/mod/@v/v1.0.0.zip"),
                ));
            }
        }
        Format::Conan => {
            let mut remote = format!("conan remote add {} {url}", repo.name);
            if !repo.anonymous_read || !services.security.anonymous_read {
                remote.push_str(&format!("\nconan remote login {} USER", repo.name));
            }
            out.push(snippet("The remote", remote));
            if repo.repo_type == RepoType::Hosted {
                out.push(snippet(
                    "Upload",
                    format!("conan remote login {} USER\nconan upload \"pkg/*\" -r {} -c", repo.name, repo.name),
                ));
            }
        }
    }
    out
}

/// How to install one component through `repo` (the repository it is seen through).
pub async fn component(services: &Services, base: &Base, repo: &Repository, c: &ComponentRow) -> Vec<Snippet> {
    let branch = (repo.format == Format::Apk).then(|| c.namespace.rsplit_once('/').map_or("", |(b, _)| b));
    let mut out = repository(services, base, repo, branch.filter(|b| !b.is_empty())).await;
    out.retain(|s| !s.label.starts_with("Upload") && !s.label.starts_with("Publish"));
    let install = match repo.format {
        Format::Apt => format!("sudo apt-get install {}={}", c.name, c.version),
        Format::Apk => format!("apk add {}={}", c.name, c.version),
        Format::Go => format!("go get {}@{}", go_module(c), c.version),
        Format::Conan => {
            let user_channel = if c.namespace.is_empty() { String::new() } else { format!("@{}", c.namespace) };
            let rrev = c.component_key.rsplit_once('#').map_or(String::new(), |(_, r)| format!("#{r}"));
            format!("conan install --requires=\"{}/{}{user_channel}{rrev}\" -r {}", c.name, c.version, repo.name)
        }
    };
    out.push(snippet("Install this version", install));
    out
}

/// A Go component's module path: its group (the path without its last element) and its name.
pub fn go_module(c: &ComponentRow) -> String {
    if c.namespace.is_empty() {
        c.name.clone()
    } else {
        format!("{}/{}", c.namespace, c.name)
    }
}
