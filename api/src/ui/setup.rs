//! What a person pastes to point a client at a repository, and to install one component, with
//! this server's public URLs: each format's `FormatUi` says what.

use packyard_core::formats::Snippet;
use packyard_core::services::Services;
use packyard_model::repos::{Format, Repository};
use packyard_store::db::catalogue::ComponentRow;

use super::Base;

/// The repository's URL as clients are given it (no trailing slash).
pub fn url(base: &Base, repo: &Repository) -> String {
    base.url(&format!("/repository/{}", repo.name))
}

/// How to point a client at the repository. `groups` are catalogue groups the repository holds
/// (APK's set-up names each branch).
pub async fn repository(services: &Services, base: &Base, repo: &Repository, groups: &[String]) -> Vec<Snippet> {
    let ui = packyard_formats::registry().get(repo.format).ui();
    let mut named: Vec<String> = groups.iter().filter_map(|g| ui.setup_group(g)).collect();
    named.sort();
    named.dedup();
    ui.setup(services, &url(base, repo), repo, &named).await
}

/// How to install one component through `repo` (the repository it is seen through).
pub async fn component(services: &Services, base: &Base, repo: &Repository, c: &ComponentRow) -> Vec<Snippet> {
    let ui = packyard_formats::registry().get(repo.format).ui();
    let mut out = repository(services, base, repo, std::slice::from_ref(&c.namespace)).await;
    out.retain(|s| !s.label.starts_with("Upload") && !s.label.starts_with("Publish"));
    out.push(Snippet::new("Install this version", ui.install(repo, c)));
    out
}

/// How people name a component (its format's way: a Go module's whole path).
pub fn display_name(c: &ComponentRow) -> String {
    match c.format.parse::<Format>() {
        Ok(format) => packyard_formats::registry().get(format).ui().display_name(c),
        Err(_) => c.name.clone(),
    }
}
