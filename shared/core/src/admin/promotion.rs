//! Copy, move and promote (`POST /api/v1/repositories/{name}/copy` and `/move`): catalogued
//! components of one repository stored into a hosted repository of the same format, each as
//! the format's own upload of its files (every file read back and checked as an upload is), in
//! one transaction per request — with an audit entry and an event per component, and for a
//! move their removal from the source — so the target publishes the whole batch at once
//! (`hosted::Copies`). Components are named by their catalogue ids (what Nexus's search and
//! components API answer) or by a snapshot diff of the source (what a later snapshot added or
//! changed).

use packyard_model::repos::RepoType;
use serde::Deserialize;

use super::AdminError;
use crate::formats::Registry;
use crate::hosted::{Actor, Copied, UploadError};
use crate::repositories::RepositoryService;
use crate::services::Services;

/// At most this many components in one request (one transaction).
pub const MAX_COMPONENTS: usize = 10_000;

/// What a copy or move names: the target, and the components — by their rows in the
/// catalogue (decoded from the API's ids) and by a snapshot diff.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub to: String,
    pub component_rows: Vec<i64>,
    /// `(from, to)`: the components snapshot `to` added or changed since snapshot `from`, as
    /// the source holds them now.
    pub snapshot_diff: Option<(String, String)>,
    /// The source's components a search finds (Nexus's `group`, `name`, `version`, each exact
    /// or a prefix ending in `*`).
    pub search: Option<SearchSelection>,
    /// APT: also the packages the selected ones depend on that the target lacks, as the source
    /// holds them (`FormatSpec::dependencies`).
    pub with_dependencies: bool,
}

/// The body's search.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSelection {
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
}

/// The body's snapshot diff.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffSelection {
    pub from: String,
    pub to: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PromotionError {
    #[error(transparent)]
    Admin(#[from] AdminError),
    #[error(transparent)]
    Upload(#[from] UploadError),
}

impl From<packyard_store::db::DbError> for PromotionError {
    fn from(e: packyard_store::db::DbError) -> Self {
        Self::Admin(e.into())
    }
}

/// Copies (or, `moving`, moves) the selected components of repository `from`.
pub async fn copy(
    services: &Services,
    formats: &Registry,
    actor: Actor<'_>,
    from: &str,
    selection: Selection,
    moving: bool,
) -> Result<Copied, PromotionError> {
    let repos = RepositoryService::new(&services.db, formats);
    let source = repos.get(from).await.map_err(AdminError::from)?;
    let target = repos.get(&selection.to).await.map_err(AdminError::from)?;
    if source.repo_type == RepoType::Group {
        return Err(AdminError::Invalid(format!(
            "repository {} is a group: copy from the member that holds the components",
            source.name
        ))
        .into());
    }
    let mut keys: Vec<String> = Vec::new();
    let rows = services.db.catalogue_components(&selection.component_rows).await?;
    for id in &selection.component_rows {
        match rows.iter().find(|c| c.id == *id) {
            Some(c) if c.repository_id == source.id => keys.push(c.component_key.clone()),
            _ => {
                return Err(
                    AdminError::NotFound(format!("repository {} has no component with that id", source.name)).into()
                )
            }
        }
    }
    if let Some((a, b)) = &selection.snapshot_diff {
        let diff = super::snapshots::diff(services, formats, from, (a, b)).await?;
        let wanted: Vec<_> = diff.added.iter().chain(&diff.changed).collect();
        let present = services.db.catalogue_components_named(source.id).await?;
        for c in wanted {
            // Every component of that name and version (an APT package per architecture).
            let found: Vec<_> = present
                .iter()
                .filter(|r| r.namespace == c.group && r.name == c.name && r.version == c.version)
                .collect();
            match found.as_slice() {
                [_, ..] => keys.extend(found.iter().map(|r| r.component_key.clone())),
                [] => {
                    return Err(AdminError::Conflict(format!(
                        "{} {} (of snapshot {b}) is no longer in repository {}",
                        c.name, c.version, source.name
                    ))
                    .into())
                }
            }
        }
    }
    if let Some(q) = &selection.search {
        use packyard_store::db::catalogue::{Pattern, Search};
        let pattern = |v: &Option<String>| v.as_deref().filter(|s| !s.is_empty()).map(Pattern::parse);
        if q.group.is_none() && q.name.is_none() && q.version.is_none() {
            return Err(
                AdminError::Invalid("a `search` names at least one of `group`, `name`, `version`".into()).into()
            );
        }
        let search = Search {
            repositories: vec![source.id],
            group: pattern(&q.group),
            name: pattern(&q.name),
            version: pattern(&q.version),
            limit: i64::try_from(MAX_COMPONENTS).unwrap_or(i64::MAX) + 1,
            ..Search::default()
        };
        keys.extend(services.db.catalogue_search(&search).await?.into_iter().map(|c| c.component_key));
    }
    let mut seen = std::collections::BTreeSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    if keys.is_empty() {
        return Err(AdminError::Invalid(
            "no component selected: name them by `components` (ids), `search` or `snapshot_diff`".into(),
        )
        .into());
    }
    let spec = formats.get(source.format);
    crate::hosted::check_copy(&source, &target, moving)?;
    let mut dependencies = Vec::new();
    if selection.with_dependencies {
        let more = spec.dependencies(services, (&source, &target), &keys).await?;
        // Copied, never moved: other packages of the source may need them too.
        dependencies.extend(more.into_iter().filter(|k| seen.insert(k.clone())));
    }
    let total = keys.len() + dependencies.len();
    if total > MAX_COMPONENTS {
        return Err(AdminError::Invalid(format!(
            "{total} components in one request (with their dependencies); at most {MAX_COMPONENTS} (one transaction each): send them in batches"
        ))
        .into());
    }
    let batch = crate::hosted::Batch { keys, dependencies, moving };
    Ok(spec.copies().copy_components(services, (&source, &target), &batch, actor).await?)
}
