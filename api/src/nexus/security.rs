//! Nexus's security API (`/service/rest/v1/security/…`) over Packyard's users and roles:
//! users (with change-password), roles, privileges (a read-only view: Packyard's privileges are
//! part of its roles, each `(repository pattern, action)` shown under the name Nexus gives the
//! like privilege), user sources and realms (as the configuration makes them). What maps how is
//! in docs/nexus-api.md.

use actix_web::{web, HttpResponse};
use packyard_core::admin::roles::{self, RoleBody, RoleView};
use packyard_core::admin::users::{self, NewUser, PasswordChange, UserUpdate, UserView};
use packyard_core::services::Services;
use packyard_model::security::{Action, Privilege};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::auth::{Admin, Authenticated};
use crate::error::{ApiError, NexusError};

type Result<T> = std::result::Result<T, NexusError>;

pub fn configure(scope: actix_web::Scope) -> actix_web::Scope {
    use super::refused::resource;
    scope
        .service(resource("/security/users").route(web::get().to(list_users)).route(web::post().to(create_user)))
        .service(
            resource("/security/users/{id}").route(web::put().to(update_user)).route(web::delete().to(delete_user)),
        )
        .service(resource("/security/users/{id}/change-password").route(web::put().to(change_password)))
        .service(resource("/security/roles").route(web::get().to(list_roles)).route(web::post().to(create_role)))
        .service(
            resource("/security/roles/{id}")
                .route(web::get().to(get_role))
                .route(web::put().to(update_role))
                .route(web::delete().to(delete_role)),
        )
        .service(
            resource("/security/content-selectors")
                .route(web::get().to(crate::admin::selectors::list))
                .route(web::post().to(crate::admin::selectors::create)),
        )
        .service(
            resource("/security/content-selectors/{name}")
                .route(web::get().to(crate::admin::selectors::get))
                .route(web::put().to(crate::admin::selectors::update))
                .route(web::delete().to(crate::admin::selectors::delete)),
        )
        .service(resource("/security/privileges").route(web::get().to(list_privileges)))
        .service(resource("/security/privileges/{name}").route(web::get().to(get_privilege)))
        .service(resource("/security/user-sources").route(web::get().to(user_sources)))
        .service(resource("/security/anonymous").route(web::get().to(anonymous)))
        .service(resource("/security/realms/available").route(web::get().to(available_realms)))
        .service(
            resource("/security/realms/active").route(web::get().to(active_realms)).route(web::put().to(set_realms)),
        )
}

fn invalid(message: impl Into<String>) -> NexusError {
    NexusError(ApiError::bad_request(message))
}

// --- users ---------------------------------------------------------------------------------

/// Nexus's name of where a user signs in.
fn source_of(u: &UserView) -> &'static str {
    match u.source.as_str() {
        "local" => "default",
        "oidc" => "OIDC",
        _ => "LDAP",
    }
}

/// `ApiUser`: the display name split at its last space into first and last name.
fn api_user(u: &UserView) -> Value {
    let name = u.display_name.clone().unwrap_or_default();
    let (first, last) = match name.trim().rsplit_once(' ') {
        Some((f, l)) => (f.trim().to_string(), l.to_string()),
        None if name.trim().is_empty() => (u.username.clone(), String::new()),
        None => (name.trim().to_string(), String::new()),
    };
    json!({
        "userId": u.username,
        "firstName": first,
        "lastName": last,
        "emailAddress": u.email.clone().unwrap_or_default(),
        "source": source_of(u),
        "status": "active",
        "readOnly": !u.is_local(),
        "roles": u.roles,
        "externalRoles": [],
    })
}

#[derive(Deserialize)]
struct UserQuery {
    #[serde(rename = "userId")]
    user_id: Option<String>,
    source: Option<String>,
}

/// `GET /security/users[?userId=<prefix>&source=<source>]`.
async fn list_users(_admin: Admin, services: web::Data<Services>, q: web::Query<UserQuery>) -> Result<HttpResponse> {
    let all = users::list(&services).await?;
    let listed: Vec<Value> = all
        .iter()
        .filter(|u| q.user_id.as_deref().is_none_or(|p| u.username.to_lowercase().starts_with(&p.to_lowercase())))
        .filter(|u| q.source.as_deref().is_none_or(|s| s.eq_ignore_ascii_case(source_of(u))))
        .map(api_user)
        .collect();
    Ok(HttpResponse::Ok().json(listed))
}

/// Nexus's `ApiCreateUser` / `ApiUser` fields Packyard keeps.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ApiUserBody {
    user_id: Option<String>,
    #[serde(default)]
    first_name: Option<String>,
    #[serde(default)]
    last_name: Option<String>,
    #[serde(default)]
    email_address: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    roles: Option<Vec<String>>,
    #[serde(default)]
    source: Option<String>,
}

impl ApiUserBody {
    fn display_name(&self) -> Option<String> {
        let name = format!(
            "{} {}",
            self.first_name.as_deref().unwrap_or("").trim(),
            self.last_name.as_deref().unwrap_or("").trim()
        );
        Some(name.trim().to_string())
    }

    fn check(&self) -> Result<()> {
        match self.status.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("active") => {}
            Some(other) => {
                return Err(invalid(format!(
                    "status {other:?}: Packyard's users are active (take away a user's roles, or delete the user, to stop it)"
                )))
            }
        }
        if self.source.as_deref().is_some_and(|s| s != "default") {
            return Err(invalid(
                "source: Packyard changes users of the default (local) source; a directory's come from it",
            ));
        }
        Ok(())
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| invalid(format!("invalid JSON body: {e}")))
}

/// `POST /security/users`: 200 with the `ApiUser`.
async fn create_user(admin: Admin, services: web::Data<Services>, body: web::Bytes) -> Result<HttpResponse> {
    let b: ApiUserBody = parse(&body)?;
    b.check()?;
    let username = b.user_id.clone().filter(|u| !u.is_empty()).ok_or_else(|| invalid("userId: required"))?;
    let password =
        b.password.clone().filter(|p| !p.is_empty()).ok_or_else(|| invalid("A non-empty password is required."))?;
    let new = NewUser {
        username,
        password,
        roles: b.roles.clone().unwrap_or_default(),
        email: b.email_address.clone(),
        display_name: b.display_name(),
    };
    let view = users::create(&services, admin.actor(), new).await?;
    Ok(HttpResponse::Ok().json(api_user(&view)))
}

/// `PUT /security/users/{id}`: 204.
async fn update_user(
    admin: Admin,
    services: web::Data<Services>,
    id: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse> {
    let b: ApiUserBody = parse(&body)?;
    b.check()?;
    if b.user_id.as_deref().is_some_and(|u| u != id.as_str()) {
        return Err(invalid(format!("userId {:?} does not match the path ({id})", b.user_id.unwrap_or_default())));
    }
    let change = UserUpdate {
        password: None,
        roles: b.roles.clone(),
        email: Some(b.email_address.clone().unwrap_or_default()),
        display_name: b.display_name(),
    };
    users::update(&services, admin.actor(), &id, change).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `DELETE /security/users/{id}`: 204.
async fn delete_user(admin: Admin, services: web::Data<Services>, id: web::Path<String>) -> Result<HttpResponse> {
    users::delete(&services, admin.actor(), &id).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `PUT /security/users/{id}/change-password` with the new password as the plain-text body:
/// 204 (admins; a user changes their own with the current one through the admin API).
async fn change_password(
    user: Authenticated,
    services: web::Data<Services>,
    id: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse> {
    if !user.is_admin() {
        return Err(NexusError(ApiError::forbidden(
            "an admin sets passwords here; change your own with PUT /api/v1/users/<you>/password and your current password",
        )));
    }
    let password = String::from_utf8(body.to_vec()).map_err(|_| invalid("the password must be UTF-8 text"))?;
    if password.is_empty() {
        return Err(invalid("Password must be supplied."));
    }
    let change = PasswordChange { current_password: None, new_password: password };
    users::change_password(&services, user.password_caller(false), &id, &change).await?;
    Ok(HttpResponse::NoContent().finish())
}

// --- privileges ----------------------------------------------------------------------------

/// Nexus's privilege that is everything.
const ALL: &str = "nx-all";
const VIEW: &str = "nx-repository-view-*-";
const ADMIN: &str = "nx-repository-admin-*-";
/// A privilege narrowed by a content selector (Nexus's `repository-content-selector` type, whose
/// names an administrator chooses): `packyard-content-selector-<selector>@<repository>-<action>`.
const SELECTED: &str = "packyard-content-selector-";

/// The Nexus privilege names one Packyard privilege is: per action, `read` → `read` and
/// `browse`, `write` → `add` and `edit`, `delete` → `delete`; `admin` on `*` is `nx-all`, on
/// other repositories `nx-repository-admin-*-<pattern>-*`.
fn names_of(p: &Privilege) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(selector) = &p.content_selector {
        let view = format!("{SELECTED}{selector}@{}", p.repositories);
        for a in &p.actions {
            match a {
                Action::Read => out.extend(["read", "browse"].map(|v| format!("{view}-{v}"))),
                Action::Write => out.extend(["add", "edit"].map(|v| format!("{view}-{v}"))),
                Action::Delete => out.push(format!("{view}-delete")),
                Action::Admin => {}
            }
        }
        return out;
    }
    for a in &p.actions {
        match a {
            Action::Admin if p.repositories == "*" => out.push(ALL.to_string()),
            Action::Admin => out.push(format!("{ADMIN}{}-*", p.repositories)),
            Action::Read => out.extend(["read", "browse"].map(|v| format!("{VIEW}{}-{v}", p.repositories))),
            Action::Write => out.extend(["add", "edit"].map(|v| format!("{VIEW}{}-{v}", p.repositories))),
            Action::Delete => out.push(format!("{VIEW}{}-delete", p.repositories)),
        }
    }
    out
}

/// A Nexus privilege name as Packyard's privilege: `nx-all`,
/// `nx-repository-view-<format>-<repository>-<action>` (`read`, `browse`, `add`, `edit`,
/// `delete`, `*`) and `nx-repository-admin-<format>-<repository>-*`. The format may be `*` or
/// name the repository's own (Packyard's privileges are by repository, whatever its format).
pub(crate) fn privilege_of(name: &str) -> std::result::Result<Privilege, String> {
    if name == ALL {
        return Ok(Privilege { repositories: "*".into(), actions: Action::ALL.to_vec(), ..Default::default() });
    }
    if let Some(rest) = name.strip_prefix(SELECTED) {
        let (selector, rest) = rest.split_once('@').ok_or_else(|| format!("privilege {name:?}: no @<repository>"))?;
        let (repository, action) = rest.rsplit_once('-').ok_or_else(|| format!("privilege {name:?}: no action"))?;
        let actions = match action {
            "read" | "browse" => vec![Action::Read],
            "add" | "edit" => vec![Action::Write],
            "delete" => vec![Action::Delete],
            "*" => vec![Action::Read, Action::Write, Action::Delete],
            other => return Err(format!("privilege {name:?}: unknown action {other:?}")),
        };
        let p = Privilege {
            repositories: repository.to_string(),
            actions,
            content_selector: Some(selector.to_string()),
            selector: None,
        };
        p.validate()?;
        return Ok(p);
    }
    let (rest, admin) = match (name.strip_prefix("nx-repository-view-"), name.strip_prefix("nx-repository-admin-")) {
        (Some(r), _) => (r, false),
        (_, Some(r)) => (r, true),
        _ => {
            return Err(format!(
                "privilege {name:?} has no counterpart in Packyard: roles hold nx-all, nx-repository-view-<format>-<repository>-<read|browse|add|edit|delete|*> and nx-repository-admin-<format>-<repository>-*"
            ))
        }
    };
    let (format, rest) = rest.split_once('-').ok_or_else(|| format!("privilege {name:?}: no repository"))?;
    let (repository, action) = rest.rsplit_once('-').ok_or_else(|| format!("privilege {name:?}: no action"))?;
    if format != "*" && (repository.contains('*') || repository.contains('?')) {
        return Err(format!(
            "privilege {name:?}: Packyard's privileges are by repository, not by format; use * as the format or name the repository"
        ));
    }
    if admin && (repository == "*" || action != "*") {
        return Err(format!(
            "privilege {name:?}: Packyard's repository administration is nx-repository-admin-<format>-<repository>-* on named repositories (a pattern other than *); everything is nx-all"
        ));
    }
    let actions = match (admin, action) {
        (true, _) => vec![Action::Admin],
        (false, "read" | "browse") => vec![Action::Read],
        (false, "add" | "edit") => vec![Action::Write],
        (false, "delete") => vec![Action::Delete],
        (false, "*") => vec![Action::Read, Action::Write, Action::Delete],
        (false, other) => return Err(format!("privilege {name:?}: unknown action {other:?}")),
    };
    let p = Privilege { repositories: repository.to_string(), actions, ..Default::default() };
    p.validate()?;
    Ok(p)
}

/// Packyard's privileges of `names`, merged by repository pattern.
fn privileges_of(names: &[String]) -> Result<Vec<Privilege>> {
    let each = names.iter().map(|n| privilege_of(n)).collect::<std::result::Result<Vec<_>, _>>().map_err(invalid)?;
    Ok(merged(each))
}

/// Privileges merged by repository pattern (one privilege per pattern, its actions sorted).
pub(crate) fn merged(privileges: Vec<Privilege>) -> Vec<Privilege> {
    let mut out: Vec<Privilege> = Vec::new();
    for p in privileges {
        match out.iter_mut().find(|o| o.repositories == p.repositories && o.content_selector == p.content_selector) {
            Some(o) => {
                for a in p.actions {
                    if !o.actions.contains(&a) {
                        o.actions.push(a);
                    }
                }
                o.actions.sort();
            }
            None => out.push(p),
        }
    }
    out
}

/// Nexus's `ApiPrivilege` for one name.
fn api_privilege(name: &str) -> Value {
    if name == ALL {
        return json!({"type": "wildcard", "name": ALL, "description": "All permissions", "readOnly": true, "pattern": "nexus:*"});
    }
    let admin = name.starts_with("nx-repository-admin-");
    let rest = name.trim_start_matches("nx-repository-view-").trim_start_matches("nx-repository-admin-");
    let (format, rest) = rest.split_once('-').unwrap_or(("*", rest));
    let (repository, action) = rest.rsplit_once('-').unwrap_or((rest, "*"));
    let action = if action == "*" { "ALL".to_string() } else { action.to_ascii_uppercase() };
    json!({
        "type": if admin { "repository-admin" } else { "repository-view" },
        "name": name,
        "description": format!("{} {} of repositories {repository}", if admin { "Administration" } else { "Access" }, action.to_lowercase()),
        "readOnly": true,
        "actions": [action],
        "format": format,
        "repository": repository,
    })
}

/// Every privilege some role holds, by name.
async fn all_privileges(services: &Services) -> Result<Vec<String>> {
    let mut names: Vec<String> =
        roles::list(services).await?.iter().flat_map(|r| r.privileges.iter().flat_map(names_of)).collect();
    names.sort();
    names.dedup();
    Ok(names)
}

async fn list_privileges(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse> {
    let names = all_privileges(&services).await?;
    Ok(HttpResponse::Ok().json(names.iter().map(|n| api_privilege(n)).collect::<Vec<_>>()))
}

async fn get_privilege(_admin: Admin, services: web::Data<Services>, name: web::Path<String>) -> Result<HttpResponse> {
    if !all_privileges(&services).await?.contains(&name) {
        return Err(NexusError(ApiError::not_found(format!("Privilege '{name}' not found"))));
    }
    Ok(HttpResponse::Ok().json(api_privilege(&name)))
}

// --- roles ---------------------------------------------------------------------------------

/// `RoleXOResponse`.
fn api_role(r: &RoleView) -> Value {
    let mut privileges: Vec<String> = r.privileges.iter().flat_map(names_of).collect();
    privileges.dedup();
    json!({"id": r.name, "source": "default", "name": r.name, "description": r.description, "readOnly": r.builtin,
        "privileges": privileges, "roles": []})
}

#[derive(Deserialize)]
struct RoleQuery {
    source: Option<String>,
}

fn check_source(source: Option<&str>) -> Result<()> {
    match source {
        None | Some("default") => Ok(()),
        Some(s) => Err(invalid(format!("source {s:?} does not exist: Packyard's roles are all of the default source"))),
    }
}

async fn list_roles(_admin: Admin, services: web::Data<Services>, q: web::Query<RoleQuery>) -> Result<HttpResponse> {
    check_source(q.source.as_deref())?;
    Ok(HttpResponse::Ok().json(roles::list(&services).await?.iter().map(api_role).collect::<Vec<_>>()))
}

async fn get_role(
    _admin: Admin,
    services: web::Data<Services>,
    id: web::Path<String>,
    q: web::Query<RoleQuery>,
) -> Result<HttpResponse> {
    check_source(q.source.as_deref())?;
    Ok(HttpResponse::Ok().json(api_role(&roles::get(&services, &id).await?)))
}

/// `RoleXORequest`.
#[derive(Deserialize)]
struct RoleRequest {
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    privileges: Vec<String>,
    #[serde(default)]
    roles: Vec<String>,
}

impl RoleRequest {
    fn body(&self, id: &str) -> Result<RoleBody> {
        if !self.roles.is_empty() {
            return Err(invalid("roles: Packyard's roles do not contain other roles; list their privileges instead"));
        }
        if self.name.as_deref().is_some_and(|n| n != id) {
            return Err(invalid("name: a role's name is its id in Packyard; send the same value"));
        }
        Ok(RoleBody {
            name: Some(id.to_string()),
            description: self.description.clone().unwrap_or_default(),
            privileges: privileges_of(&self.privileges)?,
        })
    }
}

/// `POST /security/roles`: 200 with the role.
async fn create_role(admin: Admin, services: web::Data<Services>, body: web::Bytes) -> Result<HttpResponse> {
    let r: RoleRequest = parse(&body)?;
    let id = r.id.clone().filter(|i| !i.is_empty()).ok_or_else(|| invalid("id: required"))?;
    let view = roles::create(&services, admin.actor(), r.body(&id)?).await?;
    Ok(HttpResponse::Ok().json(api_role(&view)))
}

/// `PUT /security/roles/{id}`: 204.
async fn update_role(
    admin: Admin,
    services: web::Data<Services>,
    id: web::Path<String>,
    body: web::Bytes,
) -> Result<HttpResponse> {
    let r: RoleRequest = parse(&body)?;
    if r.id.as_deref().is_some_and(|i| i != id.as_str()) {
        return Err(NexusError(ApiError::new(
            crate::error::ErrorCode::Conflict,
            "The role id in the body does not match the path",
        )));
    }
    roles::update(&services, admin.actor(), &id, r.body(&id)?).await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn delete_role(admin: Admin, services: web::Data<Services>, id: web::Path<String>) -> Result<HttpResponse> {
    roles::delete(&services, admin.actor(), &id).await?;
    Ok(HttpResponse::NoContent().finish())
}

// --- user sources and realms ---------------------------------------------------------------

const LOCAL_REALM: &str = "NexusAuthenticatingRealm";
const LDAP_REALM: &str = "LdapRealm";
const OIDC_REALM: &str = "OidcRealm";

/// The realms this configuration has, in the order they are asked: (id, name).
fn realms(services: &Services) -> Vec<(&'static str, &'static str)> {
    let mut out = vec![(LOCAL_REALM, "Local Authenticating Realm")];
    if !services.security.directories.is_empty() {
        out.push((LDAP_REALM, "LDAP Realm"));
    }
    if services.security.oidc.is_some() {
        out.push((OIDC_REALM, "OpenID Connect Realm"));
    }
    out
}

/// `GET /security/anonymous`: whether anonymous reads are allowed (`security.anonymous_read`;
/// each repository may refuse them still).
async fn anonymous(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok()
        .json(json!({"enabled": services.security.anonymous_read, "userId": "anonymous", "realmName": LOCAL_REALM})))
}

async fn user_sources(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse> {
    let mut out = vec![json!({"id": "default", "name": "Local"})];
    if !services.security.directories.is_empty() {
        out.push(json!({"id": "LDAP", "name": "LDAP"}));
    }
    if services.security.oidc.is_some() {
        out.push(json!({"id": "OIDC", "name": "OpenID Connect"}));
    }
    Ok(HttpResponse::Ok().json(out))
}

async fn available_realms(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok()
        .json(realms(&services).iter().map(|(id, name)| json!({"id": id, "name": name})).collect::<Vec<_>>()))
}

async fn active_realms(_admin: Admin, services: web::Data<Services>) -> Result<HttpResponse> {
    Ok(HttpResponse::Ok().json(realms(&services).iter().map(|(id, _)| *id).collect::<Vec<_>>()))
}

/// `PUT /security/realms/active`: the realms are the configuration's (`security.ldap`,
/// `security.oidc`); a list naming exactly them is accepted (204), any other is a 400 saying so.
async fn set_realms(_admin: Admin, services: web::Data<Services>, body: web::Bytes) -> Result<HttpResponse> {
    let asked: Vec<String> = parse(&body)?;
    let have: Vec<&str> = realms(&services).iter().map(|(id, _)| *id).collect();
    let mut sorted_asked: Vec<&str> =
        asked.iter().map(String::as_str).filter(|r| *r != "NexusAuthorizingRealm").collect();
    sorted_asked.sort_unstable();
    let mut sorted_have = have.clone();
    sorted_have.sort_unstable();
    if sorted_asked != sorted_have {
        return Err(invalid(format!(
            "Packyard's realms follow its configuration (security.ldap, security.oidc): the active ones are {}",
            have.join(", ")
        )));
    }
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileges_map_both_ways() {
        let p = Privilege {
            repositories: "team-*".into(),
            actions: vec![Action::Read, Action::Write, Action::Delete],
            ..Default::default()
        };
        let names = names_of(&p);
        assert_eq!(
            names,
            [
                "nx-repository-view-*-team-*-read",
                "nx-repository-view-*-team-*-browse",
                "nx-repository-view-*-team-*-add",
                "nx-repository-view-*-team-*-edit",
                "nx-repository-view-*-team-*-delete"
            ]
        );
        let back = privileges_of(&names).map_err(|e| e.0.message).unwrap_or_default();
        assert_eq!(back, vec![p]);
        assert_eq!(
            privilege_of("nx-repository-view-apt-debs-read"),
            Ok(Privilege { repositories: "debs".into(), actions: vec![Action::Read], ..Default::default() })
        );
        assert_eq!(privilege_of(ALL).map(|p| p.actions.len()), Ok(4));
        assert!(privilege_of("nx-repository-view-apt-*-read").is_err_and(|e| e.contains("not by format")));
        assert!(privilege_of("nx-search-read").is_err_and(|e| e.contains("no counterpart")));
        assert!(privilege_of("nx-repository-view-*-debs-run").is_err_and(|e| e.contains("unknown action")));
        // Repository administration is never everything's: not on *, not by a lesser action.
        assert!(privilege_of("nx-repository-admin-*-*-*").is_err_and(|e| e.contains("everything is nx-all")));
        assert!(privilege_of("nx-repository-admin-*-*-browse").is_err());
        assert!(privilege_of("nx-repository-admin-apt-debs-read").is_err());
        assert_eq!(
            privilege_of("nx-repository-admin-*-team-*-*"),
            Ok(Privilege { repositories: "team-*".into(), actions: vec![Action::Admin], ..Default::default() })
        );
    }
}
