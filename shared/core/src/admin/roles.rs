//! Roles holding privileges on repository-name patterns.

use packyard_model::time::rfc3339_ms;
use packyard_store::db::security::RoleRecord;
use serde::{Deserialize, Serialize};

use super::{AdminError, AdminResult};
use crate::events::Changed;
use crate::hosted::Actor;
use crate::security::service::{ADMIN_ROLE, ANONYMOUS_ROLE};
use crate::security::{Action, Privilege};
use crate::services::Services;

/// A role as the administration shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RoleView {
    pub name: String,
    pub description: String,
    pub builtin: bool,
    pub privileges: Vec<Privilege>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<RoleRecord> for RoleView {
    fn from(r: RoleRecord) -> Self {
        Self {
            name: r.name,
            description: r.description,
            builtin: r.builtin,
            privileges: r.privileges,
            created_at: rfc3339_ms(r.created_at),
            updated_at: rfc3339_ms(r.updated_at),
        }
    }
}

/// A role's definition: `name` on create (on update, if given, the role's own).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleBody {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    pub privileges: Vec<Privilege>,
}

fn check(name: &str, body: &RoleBody) -> AdminResult<()> {
    let ok = packyard_model::is_plain_name(name, b"._-");
    if !ok {
        return Err(AdminError::Invalid(format!(
            "invalid role name {:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'",
            name.chars().take(80).collect::<String>()
        )));
    }
    if body.description.len() > 1000 {
        return Err(AdminError::Invalid("description: at most 1000 characters".into()));
    }
    for p in &body.privileges {
        p.validate().map_err(AdminError::Invalid)?;
    }
    if name == ANONYMOUS_ROLE && body.privileges.iter().any(|p| p.actions.iter().any(|a| *a != Action::Read)) {
        return Err(AdminError::Invalid(
            "the anonymous role can only hold read privileges: anonymous writes are never allowed".into(),
        ));
    }
    Ok(())
}

pub async fn list(services: &Services) -> AdminResult<Vec<RoleView>> {
    Ok(services.db.list_roles().await?.into_iter().map(RoleView::from).collect())
}

async fn find(services: &Services, name: &str) -> AdminResult<RoleRecord> {
    services.db.role_by_name(name).await?.ok_or_else(|| AdminError::NotFound(format!("role {name} not found")))
}

pub async fn get(services: &Services, name: &str) -> AdminResult<RoleView> {
    Ok(find(services, name).await?.into())
}

pub async fn create(services: &Services, actor: Actor<'_>, body: RoleBody) -> AdminResult<RoleView> {
    let name = body.name.clone().ok_or_else(|| AdminError::Invalid("missing field `name`".into()))?;
    check(&name, &body)?;
    super::selectors::check_named(services, &body.privileges).await?;
    services.db.insert_role(&name, &body.description, false, &body.privileges).await?;
    services.changed(Changed::Security);
    let detail = serde_json::json!({"privileges": body.privileges});
    services.security.audit(actor.username, actor.address, "role.create", &name, detail).await;
    get(services, &name).await
}

/// A role cannot be renamed, and the built-in admin role not changed.
pub async fn update(services: &Services, actor: Actor<'_>, name: &str, body: RoleBody) -> AdminResult<RoleView> {
    if body.name.as_deref().is_some_and(|n| n != name) {
        return Err(AdminError::Invalid("a role cannot be renamed".into()));
    }
    check(name, &body)?;
    if name == ADMIN_ROLE {
        return Err(AdminError::Invalid("the built-in admin role cannot be changed".into()));
    }
    find(services, name).await?;
    super::selectors::check_named(services, &body.privileges).await?;
    services.db.update_role(name, &body.description, &body.privileges).await?;
    services.changed(Changed::Security);
    let detail = serde_json::json!({"privileges": body.privileges});
    services.security.audit(actor.username, actor.address, "role.update", name, detail).await;
    get(services, name).await
}

pub async fn delete(services: &Services, actor: Actor<'_>, name: &str) -> AdminResult<()> {
    let role = find(services, name).await?;
    if role.builtin {
        return Err(AdminError::Conflict(format!("the built-in role {} cannot be deleted", role.name)));
    }
    services.db.delete_role(name).await?;
    services.changed(Changed::Security);
    services.security.audit(actor.username, actor.address, "role.delete", name, serde_json::json!({})).await;
    Ok(())
}
