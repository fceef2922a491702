//! `/api/v1/repositories`: one handler per action.

use actix_web::web;
use packyard_model::repos::{RepoName, Repository};
use packyard_model::time::rfc3339_ms;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;

pub(crate) mod create;
pub(crate) mod delete;
pub(crate) mod get;
pub(crate) mod list;
mod rebuild;
pub(crate) mod signing_key;
pub(crate) mod status;
pub(crate) mod update;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        crate::admin::resource::resource("/repositories")
            .route(web::get().to(list::list))
            .route(web::post().to(create::create)),
    )
    .service(
        crate::admin::resource::resource("/repositories/{name}")
            .route(web::get().to(get::get))
            .route(web::put().to(update::update))
            .route(web::patch().to(update::patch))
            .route(web::delete().to(delete::delete)),
    )
    .service(crate::admin::resource::resource("/repositories/{name}/status").route(web::get().to(status::status)))
    .service(crate::admin::resource::resource("/repositories/{name}/rebuild").route(web::post().to(rebuild::rebuild)))
    .service(
        crate::admin::resource::resource("/repositories/{name}/signing-key")
            .route(web::get().to(signing_key::get))
            .route(web::put().to(signing_key::put)),
    );
}

/// `{name}` from the path, validated before any handler sees it.
#[derive(Debug, Deserialize)]
#[serde(try_from = "String")]
pub struct NamePath(pub RepoName);

impl TryFrom<String> for NamePath {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        RepoName::parse(&s).map(Self).map_err(|e| e.to_string())
    }
}

#[derive(Debug, Deserialize)]
pub struct RepoPath {
    pub name: NamePath,
}

/// The JSON shape of a repository in responses.
#[derive(Debug, Serialize)]
pub struct RepositoryView {
    pub name: String,
    pub format: &'static str,
    #[serde(rename = "type")]
    pub repo_type: &'static str,
    pub url: String,
    pub write_policy: &'static str,
    pub anonymous_read: bool,
    /// The format's settings, under its name.
    #[serde(flatten)]
    pub formats: std::collections::BTreeMap<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<packyard_model::repos::ProxySettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<packyard_model::repos::GroupSettings>,
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
    /// What it holds, as the worker last counted (`GET /repositories/{name}` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A repository's components and their assets' bytes (a group holds none of its own), counted
/// every `worker.usage_refresh_secs`; absent before the first count.
#[derive(Debug, Serialize)]
pub struct Usage {
    pub components: i64,
    pub bytes: i64,
    pub counted_at: String,
}

impl From<Repository> for RepositoryView {
    fn from(r: Repository) -> Self {
        let group = (r.repo_type == packyard_model::repos::RepoType::Group)
            .then(|| packyard_model::repos::GroupSettings { members: r.members.clone() });
        Self {
            url: format!("/repository/{}/", r.name),
            name: r.name.to_string(),
            format: r.format.as_str(),
            repo_type: r.repo_type.as_str(),
            write_policy: r.write_policy.as_str(),
            anonymous_read: r.anonymous_read,
            formats: r.settings.blocks,
            // The sealed upstream password is never returned.
            proxy: r.settings.proxy.map(|p| packyard_model::repos::ProxySettings { password_sealed: None, ..p }),
            group,
            version: r.version,
            created_at: rfc3339_ms(r.created_at),
            updated_at: rfc3339_ms(r.updated_at),
            usage: None,
        }
    }
}

pub type Result<T> = std::result::Result<T, ApiError>;

/// Seals a proxy's upstream password (sent in clear to this API) with `security.secret` before
/// it is stored; without a new password, an update keeps the one stored (`kept`).
pub fn seal_proxy_password(
    services: &packyard_core::services::Services,
    name: &str,
    spec: &mut packyard_model::repos::RepositorySpec,
    kept: Option<(String, String)>,
) -> Result<()> {
    let Some(proxy) = spec.proxy.as_mut() else { return Ok(()) };
    proxy.password_sealed = None;
    match (proxy.username.as_deref(), proxy.password.take()) {
        (None, Some(_)) => Err(ApiError::bad_request("proxy.password needs proxy.username")),
        (Some(_), Some(password)) => {
            let key = packyard_model::repos::ProxySettings::password_key(name);
            let sealed = services.security.keystore.seal(&key, password.as_bytes()).map_err(ApiError::internal)?;
            proxy.password_sealed = Some(sealed);
            Ok(())
        }
        (Some(_), None) => {
            proxy.password_sealed = kept;
            Ok(())
        }
        (None, None) => Ok(()),
    }
}
