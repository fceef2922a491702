//! Content selectors: named CSEL expressions (`packyard_model::selector`) that a role's
//! privilege names to cover only the content they select; and the preview of what one selects
//! in a repository.

use std::collections::HashMap;

use packyard_model::repos::{RepoType, Repository};
use packyard_model::selector::{Content, Selector};
use packyard_model::time::rfc3339_ms;
use packyard_store::db::security::SelectorRecord;
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminResult};
use crate::events::Changed;
use crate::hosted::Actor;
use crate::services::Services;

/// The most components a preview lists.
pub const PREVIEW_LIMIT: usize = 1000;

/// A selector as the administration shows it (Nexus's shape, with Packyard's times).
#[derive(Debug, Clone, Serialize)]
pub struct SelectorView {
    pub name: String,
    pub description: String,
    pub expression: String,
    /// Nexus's: always `csel`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub created_at: String,
    pub updated_at: String,
}

impl From<SelectorRecord> for SelectorView {
    fn from(r: SelectorRecord) -> Self {
        Self {
            name: r.name,
            description: r.description,
            expression: r.expression,
            kind: "csel",
            created_at: rfc3339_ms(r.created_at),
            updated_at: rfc3339_ms(r.updated_at),
        }
    }
}

/// A selector's definition: `name` on create (on update, if given, the selector's own).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectorBody {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    pub expression: String,
    /// Nexus sends `"type": "csel"`; nothing else is taken.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
}

/// Parses an expression, its error naming the column.
pub fn parse(expression: &str) -> AdminResult<Selector> {
    Selector::parse(expression).map_err(|e| AdminError::Invalid(format!("expression: {e}")))
}

fn check(name: &str, body: &SelectorBody) -> AdminResult<()> {
    if name == "preview" {
        return Err(AdminError::Invalid("`preview` names the preview route; choose another name".into()));
    }
    if !packyard_model::is_plain_name(name, b"._-") {
        return Err(AdminError::Invalid(format!(
            "invalid content selector name {:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'",
            name.chars().take(80).collect::<String>()
        )));
    }
    if body.description.len() > 1000 {
        return Err(AdminError::Invalid("description: at most 1000 characters".into()));
    }
    if body.kind.as_deref().is_some_and(|k| !k.eq_ignore_ascii_case("csel")) {
        return Err(AdminError::Invalid("type: only csel selectors are supported".into()));
    }
    parse(&body.expression).map(|_| ())
}

pub async fn list(services: &Services) -> AdminResult<Vec<SelectorView>> {
    Ok(services.db.list_content_selectors().await?.into_iter().map(SelectorView::from).collect())
}

pub async fn get(services: &Services, name: &str) -> AdminResult<SelectorView> {
    services
        .db
        .content_selector(name)
        .await?
        .map(SelectorView::from)
        .ok_or_else(|| AdminError::NotFound(format!("content selector {name} not found")))
}

pub async fn create(services: &Services, actor: Actor<'_>, body: SelectorBody) -> AdminResult<SelectorView> {
    let name = body.name.clone().ok_or_else(|| AdminError::Invalid("missing field `name`".into()))?;
    check(&name, &body)?;
    services.db.put_content_selector(&name, &body.description, &body.expression, false).await?;
    services.changed(Changed::Security);
    let detail = serde_json::json!({"expression": body.expression});
    services.security.audit(actor.username, actor.address, "content_selector.create", &name, detail).await;
    get(services, &name).await
}

/// A selector cannot be renamed; a change reaches every replica's decisions within the
/// watermark poll.
pub async fn update(
    services: &Services,
    actor: Actor<'_>,
    name: &str,
    body: SelectorBody,
) -> AdminResult<SelectorView> {
    if body.name.as_deref().is_some_and(|n| n != name) {
        return Err(AdminError::Invalid("a content selector cannot be renamed".into()));
    }
    check(name, &body)?;
    services.db.put_content_selector(name, &body.description, &body.expression, true).await.map_err(|e| match e {
        packyard_store::db::DbError::NotFound => AdminError::NotFound(format!("content selector {name} not found")),
        other => other.into(),
    })?;
    services.changed(Changed::Security);
    let detail = serde_json::json!({"expression": body.expression});
    services.security.audit(actor.username, actor.address, "content_selector.update", name, detail).await;
    get(services, name).await
}

/// Refused (409) while a role's privilege names it.
pub async fn delete(services: &Services, actor: Actor<'_>, name: &str) -> AdminResult<()> {
    services.db.delete_content_selector(name).await.map_err(|e| match e {
        packyard_store::db::DbError::NotFound => AdminError::NotFound(format!("content selector {name} not found")),
        other => other.into(),
    })?;
    services.changed(Changed::Security);
    services
        .security
        .audit(actor.username, actor.address, "content_selector.delete", name, serde_json::json!({}))
        .await;
    Ok(())
}

/// Checks that every content selector a role's privileges name exists.
pub async fn check_named(services: &Services, privileges: &[crate::security::Privilege]) -> AdminResult<()> {
    for name in privileges.iter().filter_map(|p| p.content_selector.as_deref()) {
        if services.db.content_selector(name).await?.is_none() {
            return Err(AdminError::Invalid(format!(
                "content selector {name} does not exist: create it first (POST /api/v1/content-selectors)"
            )));
        }
    }
    Ok(())
}

/// What a preview asks: an expression (or a stored selector's name) and a repository.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewBody {
    #[serde(default)]
    pub expression: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    pub repository: String,
}

/// A component a selector selects, with the files of it that it selects.
#[derive(Debug, Clone, Serialize)]
pub struct Selected {
    pub repository: String,
    pub format: String,
    pub group: String,
    pub name: String,
    pub version: String,
    pub paths: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Preview {
    pub repository: String,
    pub expression: String,
    /// The components of the repository looked at (a group's: its members').
    pub components: usize,
    pub selected: Vec<Selected>,
    /// More than [`PREVIEW_LIMIT`] were selected; the list stops there.
    pub truncated: bool,
}

/// Which components of `repository` (a group: its members' components, seen as the group's,
/// as its clients see them) the selector selects, as a request would decide it: a component is
/// selected when one of its files is.
pub async fn preview(services: &Services, body: PreviewBody) -> AdminResult<Preview> {
    let expression = match (body.expression, body.name) {
        (Some(e), None) => e,
        (None, Some(n)) => get(services, &n).await?.expression,
        _ => return Err(AdminError::Invalid("give either `expression` or the `name` of a stored selector".into())),
    };
    let selector = parse(&expression)?;
    let repo = services
        .db
        .repository_by_name(&body.repository)
        .await?
        .ok_or_else(|| AdminError::NotFound(format!("repository {} not found", body.repository)))?;
    let mut sources = vec![std::sync::Arc::new(repo.clone())];
    if repo.repo_type == RepoType::Group {
        let by_name: HashMap<String, std::sync::Arc<Repository>> = services
            .db
            .list_repositories()
            .await?
            .into_iter()
            .map(|r| (r.name.to_string(), std::sync::Arc::new(r)))
            .collect();
        sources = crate::groups::leaf_members(&repo, &by_name);
    }
    let mut out = Preview {
        repository: repo.name.to_string(),
        expression,
        components: 0,
        selected: Vec::new(),
        truncated: false,
    };
    for source in &sources {
        let rows = services.db.catalogue_components_named(source.id).await?;
        out.components += rows.len();
        for chunk in rows.chunks(500) {
            let ids: Vec<i64> = chunk.iter().map(|c| c.id).collect();
            let mut assets: HashMap<i64, Vec<String>> = HashMap::new();
            for a in services.db.catalogue_assets_of(&ids).await? {
                assets.entry(a.component_id).or_default().push(a.path);
            }
            for c in chunk {
                let paths = assets.remove(&c.id).unwrap_or_else(|| vec![c.component_key.clone()]);
                let selected: Vec<String> = paths
                    .into_iter()
                    .map(|p| format!("/{p}"))
                    .filter(|p| {
                        selector.matches(&Content {
                            format: repo.format.as_str(),
                            repository: repo.name.as_str(),
                            path: p,
                            name: Some(&c.name),
                            version: Some(&c.version),
                            group: Some(&c.namespace),
                        })
                    })
                    .collect();
                if selected.is_empty() {
                    continue;
                }
                if out.selected.len() == PREVIEW_LIMIT {
                    out.truncated = true;
                    continue;
                }
                out.selected.push(Selected {
                    repository: source.name.to_string(),
                    format: c.format.clone(),
                    group: c.namespace.clone(),
                    name: c.name.clone(),
                    version: c.version.clone(),
                    paths: selected,
                });
            }
        }
    }
    Ok(out)
}
