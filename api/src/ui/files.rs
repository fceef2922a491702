//! A repository's files as a tree, Nexus's "Browse": folders from the repository's root down
//! (APT's `dists/` and `pool/`, APK's `branch/repository/arch`, Go's module paths, Conan's
//! `v2/conans/…`), each file with its size, SHA-256 and a download link. What it lists: the
//! files of the repository's published snapshots (its indexes) and its stored assets (what was
//! uploaded or fetched through a proxy). A folder is grouped from the paths under it; a folder
//! with more than [`LIMIT`] files below it is listed from the first of them (stored files in
//! the order they came, published ones by path), and says that some may be missing.

use std::collections::BTreeMap;

use actix_web::{web, HttpResponse};
use maud::html;
use packyard_core::security::Action;
use packyard_core::services::Services;
use packyard_model::repos::RepoType;

use super::browse::readable_repositories;
use super::{bytes, count, time, UiError, Viewer};

/// The files read below one folder, of each kind.
const LIMIT: i64 = 20_000;

/// One entry of a folder.
pub(crate) enum Entry {
    Folder { files: i64, bytes: i64 },
    File { size: i64, sha256: Option<String>, published: bool, stored: Option<i64>, downloads: Option<i64> },
}

pub async fn root(
    viewer: Viewer,
    services: web::Data<Services>,
    name: web::Path<String>,
) -> Result<HttpResponse, UiError> {
    folder(&viewer, &services, &name, "").await
}

pub async fn below(
    viewer: Viewer,
    services: web::Data<Services>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, UiError> {
    let (name, path) = path.into_inner();
    folder(&viewer, &services, &name, &path).await
}

async fn folder(viewer: &Viewer, services: &Services, name: &str, path: &str) -> Result<HttpResponse, UiError> {
    let (repos, by_name) = readable_repositories(services, viewer).await?;
    let Some(repo) = repos.iter().find(|r| r.name.as_str() == name).cloned() else {
        return Err(UiError::not_found(format!("There is no repository {name} you may read.")));
    };
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if segments.iter().any(|s| s.starts_with('.')) {
        return Err(UiError::not_found(format!("There is no folder {path} in {name}.")));
    }
    let prefix: String = segments.iter().map(|s| format!("{s}/")).collect();
    let keep = |p: &str| crate::content::allows_path(&viewer.caller, services, &repo, Action::Read, p, None);
    let (entries, truncated) = listing(services, repo.id, &prefix, &keep).await?;
    if entries.is_empty() && !prefix.is_empty() {
        return Err(UiError::not_found(format!("There is no folder {prefix} in {name}.")));
    }
    let here = |upto: usize| {
        format!(
            "/browse/{name}/files/{}",
            linkable(&segments[..upto].iter().map(|s| format!("{s}/")).collect::<String>())
        )
    };
    let body = html! {
        div.crumbs {
            a href=(viewer.base.link("/")) { "Repositories" } " / "
            a href=(viewer.base.link(&format!("/browse/{name}"))) { (name) } " / "
            a href=(viewer.base.link(&format!("/browse/{name}/files/"))) { "files" } " / "
            @for (i, s) in segments.iter().enumerate() {
                @if i + 1 < segments.len() { a href=(viewer.base.link(&here(i + 1))) { (s) } " / " }
            }
        }
        h1 { (name) ": /" (prefix) }
        @if repo.repo_type == RepoType::Group {
            p.muted {
                "A group publishes its own indexes; the packages they list are its members' files: "
                @for (i, m) in repo.members.iter().enumerate() {
                    @if i > 0 { ", " }
                    @if by_name.get(m.as_str()).is_some_and(|r| repos.iter().any(|x| x.id == r.id)) {
                        a href=(viewer.base.link(&format!("/browse/{m}/files/"))) { (m.as_str()) }
                    } @else { (m.as_str()) }
                }
                "."
            }
        }
        @if truncated {
            p.notice role="status" { "More than " (LIMIT) " files lie below this folder: the list is made from the first " (LIMIT) " of each kind, so a folder or file may be missing here. Open a folder to narrow it down." }
        }
        @if entries.is_empty() {
            p.muted { "Nothing here yet: nothing is published or stored in " (name) "." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Name" } th.num scope="col" { "Size" } th scope="col" { "SHA-256" } th scope="col" { "What" } } }
                tbody { @for (entry, e) in &entries { tr {
                    @match e {
                        Entry::Folder { files, bytes: total } => {
                            td.wrap { a href=(viewer.base.link(&format!("/browse/{name}/files/{}", linkable(&format!("{prefix}{entry}"))))) { (entry) } }
                            td.num { (bytes(*total)) }
                            td { span.muted { (count(*files, "file", "files")) } }
                            td { "folder" }
                        }
                        Entry::File { size, sha256, published, stored, downloads } => {
                            td.wrap { a href=(viewer.base.link(&format!("/repository/{name}/{}", linkable(&format!("{prefix}{entry}"))))) download { (entry) } }
                            td.num { (bytes(*size)) }
                            td.sha { @if let Some(h) = sha256 { code.hash { (h) } } @else { span.muted { "assembled when served" } } }
                            td {
                                @if *published { "published index" }
                                @else {
                                    "stored" @if let Some(t) = stored { " " (time(*t)) }
                                    @if let Some(n) = downloads { br; span.muted { (count(*n, "download", "downloads")) } }
                                }
                            }
                        }
                    }
                } } }
            } }
        }
    };
    Ok(viewer.page(&format!("{name}: /{prefix}"), body))
}

/// The entries of folder `prefix` (`""` or ending in `/`) of a repository: its published and
/// stored files there that `keep` keeps (the caller's content selectors) and the folders
/// below, and whether the list is cut at [`LIMIT`].
pub(crate) async fn listing(
    services: &Services,
    repository_id: i64,
    prefix: &str,
    keep: &dyn Fn(&str) -> bool,
) -> Result<(BTreeMap<String, Entry>, bool), packyard_store::db::DbError> {
    let published = services.db.published_files_under(repository_id, prefix, LIMIT).await?;
    let stored = services.db.assets_under(repository_id, prefix, LIMIT).await?;
    let truncated = published.len() as i64 >= LIMIT || stored.len() as i64 >= LIMIT;
    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    let mut add = |rest: &str, size: i64, file: Entry| match rest.split_once('/') {
        Some((dir, _)) => {
            let e = entries.entry(format!("{dir}/")).or_insert(Entry::Folder { files: 0, bytes: 0 });
            if let Entry::Folder { files, bytes } = e {
                *files += 1;
                *bytes += size;
            }
        }
        None => {
            entries.insert(rest.to_string(), file);
        }
    };
    for f in published.iter().filter(|f| keep(&f.path)) {
        let Some(rest) = f.path.strip_prefix(prefix) else { continue };
        // Internal files of a build (their names begin with a dot) are not served.
        if rest.split('/').any(|s| s.starts_with('.')) {
            continue;
        }
        let parts = f.content_type.starts_with(packyard_store::db::publication::PARTS);
        let sha256 = (!parts).then(|| f.sha256.clone());
        add(rest, f.size, Entry::File { size: f.size, sha256, published: true, stored: None, downloads: None });
    }
    for a in stored.iter().filter(|a| keep(&a.path)) {
        let Some(rest) = a.path.strip_prefix(prefix) else { continue };
        let file = Entry::File {
            size: a.size,
            sha256: Some(a.sha256.clone()),
            published: false,
            stored: Some(a.created_at),
            downloads: Some(a.download_count),
        };
        add(rest, a.size, file);
    }
    Ok((entries, truncated))
}

/// A stored path as a link's path: as clients request it (APT's `%3a` stays, the routes expect
/// it), with only what would end or break a URL's path escaped (`?`, `#`, spaces, controls).
pub(crate) fn linkable(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '?' | '#' | ' ' | '"' | '<' | '>' | '\\' | '^' | '`' | '{' | '|' | '}' => {
                out.push_str(&format!("%{:02X}", c as u32))
            }
            c if c.is_control() => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_link_escapes_only_what_would_break_it() {
        assert_eq!(
            super::linkable("pool/main/h/hello/hello_1%3a2.0+b1_amd64.deb"),
            "pool/main/h/hello/hello_1%3a2.0+b1_amd64.deb"
        );
        assert_eq!(super::linkable("a b/c?d#e"), "a%20b/c%3Fd%23e");
    }
}
