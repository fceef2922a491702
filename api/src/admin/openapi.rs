//! `/api/v1/openapi.json`: the OpenAPI 3.1 description of the admin API.

use actix_web::{web, HttpResponse};
use packyard_core::formats::Registry;
use std::sync::OnceLock;

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(crate::admin::resource::resource("/openapi.json").route(web::get().to(openapi)));
}

async fn openapi() -> HttpResponse {
    // One registry per process, so one document.
    static DOC: OnceLock<String> = OnceLock::new();
    let doc = DOC.get_or_init(|| document(packyard_formats::registry()).to_string());
    HttpResponse::Ok().content_type("application/json").body(doc.as_str())
}

fn error_ref(description: &str) -> serde_json::Value {
    serde_json::json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

/// The document, with each registered format's settings; built once.
pub fn document(formats: &Registry) -> serde_json::Value {
    let mut doc = repositories_document();
    with_format_settings(&mut doc, formats);
    for more in [security_paths(), run_paths(), nexus_paths(), nexus_admin_paths()] {
        if let (Some(paths), serde_json::Value::Object(more)) = (doc["paths"].as_object_mut(), more) {
            paths.extend(more);
        }
    }
    doc
}

/// Nexus's REST API (`crate::nexus`).
fn nexus_paths() -> serde_json::Value {
    let status = |summary: &str| {
        serde_json::json!({"get": {"summary": summary, "security": [], "responses": {
            "200": {"description": "Available"},
            "503": {"description": "Unavailable; the body says why", "content": {"text/plain": {"schema": {"type": "string"}}}}
        }}})
    };
    let repository = serde_json::json!({"type": "object", "required": ["name", "format", "type", "url", "attributes"], "properties": {
        "name": {"type": "string"}, "format": {"type": "string"}, "type": {"type": "string", "enum": ["hosted", "proxy", "group"]},
        "url": {"type": "string"},
        "attributes": {"type": "object", "description": "a proxy's {\"proxy\": {\"remoteUrl\": …}}"}
    }});
    let query = |name: &str, description: &str| serde_json::json!({"name": name, "in": "query", "required": false, "description": description, "schema": {"type": "string"}});
    let token = query("continuationToken", "the previous page's continuationToken");
    let formats_listed = packyard_model::repos::Format::listed("or");
    let mut search: Vec<serde_json::Value> = [
        ("repository", "a repository (a group: its members as the group serves them)"),
        ("format", formats_listed.as_str()),
        ("group", "the component's group; a trailing * matches a prefix"),
        ("name", "the component's name; a trailing * matches a prefix"),
        ("version", "the component's version; a trailing * matches a prefix"),
        ("q", "a keyword: a word of the group, name or version, any case; a trailing * matches a prefix"),
        ("sha256", "an asset's SHA-256"),
        ("sha1", "an asset's SHA-1"),
        ("md5", "an asset's MD5"),
        ("sort", "group, name, version or repository"),
        ("direction", "asc or desc (version sorts desc by default)"),
    ]
    .iter()
    .map(|(n, d)| query(n, d))
    .collect();
    search.push(token.clone());
    let search = serde_json::Value::Array(search);
    let listing = serde_json::json!([
        {"name": "repository", "in": "query", "required": true, "schema": {"type": "string"}},
        token
    ]);
    let id = serde_json::json!([{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]);
    let asset = serde_json::json!({"type": "object", "properties": {
        "downloadUrl": {"type": "string"}, "path": {"type": "string"}, "id": {"type": "string"},
        "repository": {"type": "string"}, "format": {"type": "string"},
        "checksum": {"type": "object", "description": "sha256, sha1 and md5 (sha1 and md5 that the format does not give are computed by the worker from the bytes, a moment after the upload or fetch)"},
        "contentType": {"type": "string"}, "lastModified": {"type": "string", "format": "date-time"},
        "lastDownloaded": {"type": "string", "format": "date-time", "nullable": true},
        "uploader": {"type": "string", "nullable": true}, "fileSize": {"type": "integer"},
        "blobCreated": {"type": "string", "format": "date-time"}, "downloadCount": {"type": "integer"}
    }});
    let component = serde_json::json!({"type": "object", "properties": {
        "id": {"type": "string"}, "repository": {"type": "string"}, "format": {"type": "string"},
        "group": {"type": "string"}, "name": {"type": "string"}, "version": {"type": "string"},
        "assets": {"type": "array", "items": asset}
    }});
    let page = |items: &serde_json::Value| {
        serde_json::json!({"type": "object", "properties": {
            "items": {"type": "array", "items": items},
            "continuationToken": {"type": "string", "nullable": true, "description": "null on the last page"}
        }})
    };
    let (component_page, asset_page) = (page(&component), page(&asset));
    let catalogue_op = |summary: &str, parameters: &serde_json::Value, schema: &serde_json::Value| {
        serde_json::json!({"summary": summary, "parameters": parameters, "responses": {
            "200": {"description": "A page", "content": {"application/json": {"schema": schema}}},
            "400": error_ref("A bad parameter or continuationToken"),
            "401": error_ref("Bad credentials")
        }})
    };
    serde_json::json!({
        "/service/rest/v1/repositories": {"get": {
            "summary": "Nexus: the repositories the caller may read, by name",
            "responses": {
                "200": {"description": "Repositories", "content": {"application/json": {"schema": {"type": "array", "items": repository}}}},
                "401": error_ref("Bad credentials")
            }
        }},
        "/service/rest/v1/search": {"get": catalogue_op("Nexus: a page of the components matching every parameter given (the caller's readable repositories)", &search, &component_page)},
        "/service/rest/v1/search/assets": {"get": catalogue_op("Nexus: a page of the assets of the matching components (checksum parameters match the assets)", &search, &asset_page)},
        "/service/rest/v1/search/assets/download": {"get": {
            "summary": "Nexus: a redirect to the one asset the parameters match",
            "parameters": search,
            "responses": {"302": {"description": "Location: the asset's downloadUrl"}, "400": error_ref("Several assets match, or a bad parameter"), "404": error_ref("No asset matches")}
        }},
        "/service/rest/v1/components": {
            "get": catalogue_op("Nexus: a repository's components, in catalogue order", &listing, &component_page),
            "post": {
                "summary": "Nexus: uploads a component (multipart/form-data with Nexus's field names of the repository's format — <format>.asset and the format's others, in docs/nexus-api.md; a format that takes no such upload is a 400), checked as the format's own upload; needs the write privilege",
                "parameters": [{"name": "repository", "in": "query", "required": true, "schema": {"type": "string"}}],
                "responses": {"204": {"description": "Stored (a Go version once listed)"}, "400": error_ref("The format's message for a package it refuses, or a repository that takes no components upload"), "401": error_ref("No credentials"), "403": error_ref("Not permitted"), "404": error_ref("No such repository"), "422": error_ref("No repository parameter")}
            }
        },
        "/service/rest/v1/components/{id}": {
            "parameters": id,
            "get": {"summary": "Nexus: one component with its assets", "responses": {"200": {"description": "The component", "content": {"application/json": {"schema": component}}}, "404": error_ref("Not found or not readable")}},
            "delete": {"summary": "Nexus: deletes a component as its format's delete does (hosted: indexes republished, audit entry; proxy: the cached copy); needs the delete privilege", "responses": {"204": {"description": "Deleted"}, "401": error_ref("No credentials"), "403": error_ref("Not permitted"), "404": error_ref("Not found")}}
        },
        "/service/rest/v1/assets": {"get": catalogue_op("Nexus: a repository's assets, in catalogue order", &listing, &asset_page)},
        "/service/rest/v1/assets/{id}": {
            "parameters": id,
            "get": {"summary": "Nexus: one asset", "responses": {"200": {"description": "The asset", "content": {"application/json": {"schema": asset}}}, "404": error_ref("Not found or not readable")}},
            "delete": {"summary": "Nexus: deletes what the asset belongs to (its component; a Conan package file: its package revision); needs the delete privilege", "responses": {"204": {"description": "Deleted"}, "401": error_ref("No credentials"), "403": error_ref("Not permitted"), "404": error_ref("Not found")}}
        },
        "/service/rest/v1/status": status("Nexus: 200 while reads are answered (the database answers)"),
        "/service/rest/v1/status/writable": status("Nexus: 200 while reads and writes are answered (database with migrations, writable blob store)")
    })
}

/// Nexus's administration API (`crate::nexus::{repositories, security, system}`, the read-only
/// switch): what each Nexus field becomes is in docs/nexus-api.md.
fn nexus_admin_paths() -> serde_json::Value {
    let param =
        |name: &str| serde_json::json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}});
    let params = |names: &[&str]| serde_json::Value::Array(names.iter().map(|n| param(n)).collect());
    serde_json::json!({
        "/service/rest/v1/repositorySettings": {"get": op("Nexus: every repository's full definition, as Nexus's per-format GET shows it (admin)", "200")},
        "/service/rest/v1/repositories/{name}": {
            "parameters": params(&["name"]),
            "get": op("Nexus: a repository the caller may read, by name", "200"),
            "delete": op("Nexus: deletes a repository with its packages (admin)", "204")
        },
        "/service/rest/v1/repositories/{format}/{type}": {
            "parameters": params(&["format", "type"]),
            "post": op("Nexus: creates a repository from Nexus's definition of the format and type (hosted, proxy, group) the path names (a format Nexus lacks: its settings in Packyard's block); a field Packyard cannot honour is a 400 naming it (admin)", "201")
        },
        "/service/rest/v1/repositories/{format}/{type}/{name}": {
            "parameters": params(&["format", "type", "name"]),
            "get": op("Nexus: a repository's full definition of that format and type (admin)", "200"),
            "put": op("Nexus: replaces a repository's definition; the name is the path's (admin)", "204")
        },
        "/service/rest/v1/security/users": {
            "get": op("Nexus: the users (?userId= a prefix, ?source=), with their roles (admin)", "200"),
            "post": op("Nexus: creates a local user: {userId, firstName, lastName, emailAddress, password, status: active, roles} (admin)", "200")
        },
        "/service/rest/v1/security/users/{id}": {
            "parameters": params(&["id"]),
            "put": op("Nexus: replaces a local user's names, email and roles (admin)", "204"),
            "delete": op("Nexus: deletes a user (admin)", "204")
        },
        "/service/rest/v1/security/users/{id}/change-password": {
            "parameters": params(&["id"]),
            "put": op("Nexus: sets a local user's password, the plain-text body (admin)", "204")
        },
        "/service/rest/v1/security/roles": {
            "get": op("Nexus: the roles, with their privileges' Nexus names (admin)", "200"),
            "post": op("Nexus: creates a role from Nexus privileges that have a Packyard counterpart (admin)", "200")
        },
        "/service/rest/v1/security/roles/{id}": {
            "parameters": params(&["id"]),
            "get": op("Nexus: one role (admin)", "200"),
            "put": op("Nexus: replaces a role's privileges (admin)", "204"),
            "delete": op("Nexus: deletes a role (admin; built-in roles stay)", "204")
        },
        "/service/rest/v1/security/content-selectors": {
            "get": op("Nexus: the content selectors: {name, type: csel, description, expression} (admin)", "200"),
            "post": op("Nexus: creates a content selector from a CSEL expression (admin)", "201")
        },
        "/service/rest/v1/security/content-selectors/{name}": {
            "parameters": params(&["name"]),
            "get": op("Nexus: one content selector (admin)", "200"),
            "put": op("Nexus: replaces a content selector's description and expression (admin)", "200"),
            "delete": op("Nexus: deletes a content selector no role uses (admin)", "204")
        },
        "/service/rest/v1/security/privileges": {"get": op("Nexus: the privileges Packyard has, by their Nexus names (admin)", "200")},
        "/service/rest/v1/security/privileges/{name}": {
            "parameters": params(&["name"]),
            "get": op("Nexus: one privilege (admin)", "200")
        },
        "/service/rest/v1/security/user-sources": {"get": op("Nexus: the user sources: default (local), LDAP, OIDC as configured (admin)", "200")},
        "/service/rest/v1/security/anonymous": {"get": op("Nexus: whether anonymous reads are allowed, and as which user (admin)", "200")},
        "/service/rest/v1/security/realms/available": {"get": op("Nexus: the realms Packyard knows (admin)", "200")},
        "/service/rest/v1/security/realms/active": {
            "get": op("Nexus: the active realms (admin)", "200"),
            "put": op("Nexus: sets the active realms; one Packyard cannot switch is a 400 (admin)", "204")
        },
        "/service/rest/v1/blobstores": {"get": op("Nexus: the one blob store, default (File or S3): blob count, bytes, free space, softQuota (admin)", "200")},
        "/service/rest/v1/blobstores/{kind}/{name}": {
            "parameters": params(&["kind", "name"]),
            "get": op("Nexus: the blob store's definition (file or s3, default) (admin)", "200")
        },
        "/service/rest/v1/blobstores/{name}/quota-status": {
            "parameters": params(&["name"]),
            "get": op("Nexus: whether the blob store is past its soft quota or at its hard quota: {isViolation, message, blobStoreName} (admin)", "200")
        },
        "/service/rest/v1/tasks": {"get": op("Nexus: the tasks — blobstore-reclaim and cleanup-<policy> per cleanup policy — with their last and next runs (admin)", "200")},
        "/service/rest/v1/tasks/{id}": {
            "parameters": params(&["id"]),
            "get": op("Nexus: one task (admin)", "200")
        },
        "/service/rest/v1/tasks/{id}/run": {
            "parameters": params(&["id"]),
            "post": op("Nexus: runs a task now (the reclamation: one sweep; a cleanup policy: on each of its repositories, by the workers) (admin)", "204")
        },
        "/service/rest/v1/tasks/{id}/stop": {
            "parameters": params(&["id"]),
            "post": op("Nexus: stops a cleanup task's runs after their current batch; 409 when none runs (admin)", "204")
        },
        "/service/rest/v1/cleanup-policies": {
            "get": op("Nexus: the cleanup policies in Nexus's shape (criteriaLastBlobUpdated, criteriaLastDownloaded, retain, criteriaReleaseType) (admin)", "200"),
            "post": op("Nexus: creates a cleanup policy; criteriaAssetRegex and RELEASES are a 400 (admin)", "201")
        },
        "/service/rest/v1/cleanup-policies/{name}": {
            "parameters": params(&["name"]),
            "get": op("Nexus: one cleanup policy (admin)", "200"),
            "put": op("Nexus: replaces a cleanup policy (admin)", "204"),
            "delete": op("Nexus: deletes a cleanup policy (admin)", "204")
        },
        "/service/rest/v1/read-only": {"get": op("Nexus: whether writes are frozen: {frozen, summaryReason, systemInitiated} (admin)", "200")},
        "/service/rest/v1/read-only/freeze": {"post": op("Nexus: freezes writes on every replica (?reason=); 404 when already frozen (admin)", "204")},
        "/service/rest/v1/read-only/release": {"post": op("Nexus: releases a freeze; 404 when not frozen (admin)", "204")},
        "/service/rest/v1/read-only/force-release": {"post": op("Nexus: as release (Packyard's freeze is never system-initiated) (admin)", "204")},
        "/service/rest/v1/status/check": {"get": op("Nexus: the health checks, each {healthy, message} (admin)", "200")}
    })
}

/// The cleanup runs, and this document itself (a `json!` of their own: one macro holds so much).
fn run_paths() -> serde_json::Value {
    serde_json::json!({
        "/api/v1/cleanup-policies/{name}/run": {
            "parameters": [
                {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "repository", "in": "query", "required": false, "schema": {"type": "string"}, "description": "one of the policy's repositories; absent: each of them"}
            ],
            "post": op("Ask the workers to run the policy now (on one repository, or on each); answers the runs as GET …/runs shows them, the asked ones requested (admin)", "202")
        },
        "/api/v1/cleanup-policies/{name}/runs": {
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
            "get": op("The last (or current) run on each of the policy's repositories: {items: [{repository, state: idle|requested|running, requestedBy, lastStarted, lastFinished, durationMs, components, bytes, error}]} (admin)", "200")
        },
        "/api/v1/openapi.json": {
            "get": {"summary": "This document", "security": [], "responses": {"200": {"description": "The OpenAPI 3.1 document of the admin API and of Nexus's", "content": {"application/json": {}}}}}
        }
    })
}

fn op(summary: &str, ok: &str) -> serde_json::Value {
    serde_json::json!({"summary": summary, "responses": {
        ok: {"description": "Success"},
        "400": error_ref("Invalid request"), "401": error_ref("No or bad credentials"),
        "403": error_ref("Not permitted"), "404": error_ref("Not found"), "409": error_ref("Conflict"),
        "429": error_ref("Too many failed logins (Retry-After)")
    }})
}

fn security_paths() -> serde_json::Value {
    let param =
        |name: &str| serde_json::json!([{"name": name, "in": "path", "required": true, "schema": {"type": "string"}}]);
    serde_json::json!({
        "/api/v1/users": {
            "get": op("List users with their roles (admin)", "200"),
            "post": op("Create a user: {username, password, roles}", "201")
        },
        "/api/v1/users/{username}": {
            "parameters": param("username"),
            "get": op("Get a user (admin)", "200"),
            "put": op("Set a user's password and/or roles: {password?, roles?} (admin)", "200"),
            "delete": op("Delete a user and their tokens (admin)", "204")
        },
        "/api/v1/users/{username}/password": {
            "parameters": param("username"),
            "put": op("Change a password: {current_password, new_password} (the user), or {new_password} (admin)", "204")
        },
        "/api/v1/roles": {
            "get": op("List roles (admin)", "200"),
            "post": op("Create a role: {name, description?, privileges: [{repositories: glob, actions: [read|write|delete|admin] (Nexus's browse = read, add and edit = write), content_selector?: name (the privilege covers only what the selector selects; not with admin)}]}", "201")
        },
        "/api/v1/content-selectors": {
            "get": op("List content selectors (admin)", "200"),
            "post": op("Create a content selector: {name, description?, expression} (a CSEL expression over format, repository, path, name, version, group with ==, !=, =^, =~, and, or, ! and brackets; a parse error is a 400 naming the column) (admin)", "201")
        },
        "/api/v1/content-selectors/preview": {
            "post": op("Which components of a repository a selector selects: {expression | name, repository} → {repository, expression, components, selected: [{repository, format, group, name, version, paths}], truncated} (admin)", "200")
        },
        "/api/v1/content-selectors/{name}": {
            "parameters": param("name"),
            "get": op("Get a content selector (admin)", "200"),
            "put": op("Change a content selector's expression and description (admin; no renaming)", "200"),
            "delete": op("Delete a content selector no role names (admin; 409 naming the roles otherwise)", "204")
        },
        "/api/v1/roles/{name}": {
            "parameters": param("name"),
            "get": op("Get a role (admin)", "200"),
            "put": op("Replace a role's privileges (admin; the built-in admin role is fixed)", "200"),
            "delete": op("Delete a role (admin; built-in roles stay)", "204")
        },
        "/api/v1/cleanup-policies": {
            "get": op("List cleanup policies with their repositories (admin)", "200"),
            "post": op("Create a cleanup policy: {name, format, description?, criteria: {published_before_days?, last_downloaded_before_days?, name_regex?, version_regex?, prereleases_only?, keep_latest?, keep_latest_revisions?}, schedule?: {every_secs} | {cron}, repositories: [hosted or proxy repositories of the format]} (admin)", "201")
        },
        "/api/v1/cleanup-policies/{name}": {
            "parameters": param("name"),
            "get": op("Get a cleanup policy (admin)", "200"),
            "put": op("Replace a cleanup policy's format, criteria, schedule and repositories (admin; no renaming)", "200"),
            "delete": op("Delete a cleanup policy (admin)", "204")
        },
        "/api/v1/cleanup-policies/{name}/preview": {
            "parameters": [
                {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "repository", "in": "query", "required": true, "schema": {"type": "string"}},
                {"name": "continuationToken", "in": "query", "required": false, "schema": {"type": "string"}},
                {"name": "count", "in": "query", "required": false, "schema": {"type": "boolean", "default": true},
                 "description": "false: no totals (count and bytes are null) and each page reads at most 2,000 catalogue rows, so a page may hold fewer than 100 items and still have a continuationToken"}
            ],
            "post": op("What a run of the policy would remove from the repository now: {policy, repository, count, bytes, items: [{component, group, name, version, bytes, published, lastDownloaded}], continuationToken} in pages of 100 (admin); the totals walk the whole repository, count=false does not", "200")
        },
        "/api/v1/webhooks": {
            "get": op("List webhook subscriptions, without secrets (admin)", "200"),
            "post": op("Create a subscription: {name, url, events: [component.published|component.deleted|repository.created|repository.updated|repository.deleted|cleanup.finished|quota.exceeded|…], repository?, secret?, enabled?, batch?, content_selector? (only component events whose content it selects)}; a generated secret is in the response only (admin). Deliveries are POSTs signed in X-Packyard-Signature-256: sha256=<HMAC-SHA256 of the body>", "201")
        },
        "/api/v1/webhooks/{name}": {
            "parameters": param("name"),
            "get": op("Get a subscription (admin)", "200"),
            "put": op("Replace a subscription's url, events, repository, enabled and (when given) secret (admin)", "200"),
            "delete": op("Delete a subscription and its deliveries (admin)", "204")
        },
        "/api/v1/webhooks/{name}/deliveries": {
            "parameters": [
                {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                {"name": "before", "in": "query", "required": false, "schema": {"type": "integer"}},
                {"name": "limit", "in": "query", "required": false, "schema": {"type": "integer", "default": 100}}
            ],
            "get": op("The subscription's delivery log, newest first: {deliveries: [{id, eventId (the event's number, in commit order; null for the moment before a worker numbers it), event, repository, state: pending|delivered|failed, attempts, lastStatus, lastError, createdAt, deliveredAt, nextAttemptAt}], next} (admin)", "200")
        },
        "/api/v1/webhooks/{name}/test": {
            "parameters": param("name"),
            "post": op("Queue a webhook.test event for this subscription alone (whatever events it takes); answers {delivery, event}, the delivery then in its log; 409 while it is disabled (admin)", "202")
        },
        "/api/v1/tokens": {
            "get": op("The caller's tokens, without secrets (?all=true: everyone's, admin)", "200"),
            "post": op("Create a token: {name, expires_at?, repositories?, actions?}; the token is in the response only", "201")
        },
        "/api/v1/tokens/{id}": {
            "parameters": param("id"),
            "delete": op("Revoke a token (its owner or an admin); every replica refuses it within 2 s", "204")
        },
        "/api/v1/repositories/{name}/status": {
            "parameters": param("name"),
            "get": op("Per publication unit: desired and published revision, pending, last error, attempts, last publication (admin)", "200")
        },
        "/api/v1/repositories/{name}/rebuild": {
            "parameters": param("name"),
            "post": op("Rebuild every publication unit of the repository (admin)", "202")
        },
        "/api/v1/repositories/{name}/policy/exceptions": {
            "parameters": param("name"),
            "get": op("The repository's policy exceptions: [{name, version, expires_at, expired, reason, created_by, created_at}] (admin)", "200"),
            "post": op("Let one version through the repository's policy (release age, quarantine rules, enforced advisories) until it expires: {\"name\", \"version\", \"expires_at\": RFC 3339 within a year, \"reason\"}; 201, or 200 when it replaced that version's; audited, announced as policy.exception_added (admin)", "201"),
            "delete": op("Remove the exception ?name=&version=; 204, 404 when there is none; announced as policy.exception_removed (admin)", "204")
        },
        "/api/v1/repositories/{name}/policy/preview": {
            "parameters": param("name"),
            "post": op("Which current components a policy would hold back by its quarantine rules and enforced advisories: the body a policy block (empty: the repository's own); {checked, held: [{repository, name, version, reason, message}], truncated} (admin)", "200")
        },
        "/api/v1/repositories/{name}/snapshots": {
            "parameters": param("name"),
            "get": op("The repository's snapshots, newest first: [{name, repository, created_at, created_by, files, bytes, path, url}]; ?at=<RFC 3339>: the one that was the newest then, 404 when none was (admin)", "200"),
            "post": op("Snapshot the repository once its pending publications are out: {\"name\"?} (default: the time, 20261206T093012Z); 201 with {name, url, files, bytes, …}; clients point at url; audited, announced as snapshot.created (admin)", "201")
        },
        "/api/v1/repositories/{name}/snapshots/{snapshot}": {
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "snapshot", "in": "path", "required": true, "schema": {"type": "string"}}],
            "get": op("One snapshot (admin)", "200"),
            "delete": op("Delete a snapshot: its URL answers 404 at once, the collector frees blobs nothing else lists; announced as snapshot.deleted (admin)", "204")
        },
        "/api/v1/repositories/{name}/snapshots/{snapshot}/diff": {
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "snapshot", "in": "path", "required": true, "schema": {"type": "string"}}],
            "get": op("?to=<snapshot>: the components (name, version) added, removed and changed from this snapshot to that one: {from, to, added, removed, changed} (admin)", "200")
        },
        "/api/v1/repositories/{name}/pins": {
            "parameters": param("name"),
            "get": op("Rollback: the hosted repository's APT distributions or APK branches pointed at one of its snapshots: [{unit, kind, snapshot, pinned_at, pinned_by}] (admin)", "200"),
            "post": op("Point units at a snapshot: {\"snapshot\", \"units\"?: [a distribution, an APK unit, or a branch (every unit under it)]; all the snapshot holds by default}; the snapshot's index is published again as the current one with a new date and signature; uploads go on and are published once pointed back; audited (snapshot.pin), announced (repository.pinned); ?wait=true answers once published; 200 with the pins (admin)", "200"),
            "delete": op("Point units back at the repository's packages: optional {\"units\"}, all by default; built from nothing; audited (snapshot.unpin), announced (repository.unpinned); ?wait=true; 200 with the pins left (admin)", "200")
        },
        "/api/v1/repositories/{name}/copy": {
            "parameters": param("name"),
            "post": op("Copy components of this repository into a hosted repository of its format: {\"to\", \"components\": [component ids from /service/rest/v1/components or search], \"snapshot_diff\"?: {\"from\", \"to\"} (what that later snapshot of this repository added or changed), \"search\"?: {\"group\"?, \"name\"?, \"version\"?} (exact or a prefix ending in *), \"with_dependencies\"?: APT: also what they need that the target lacks, from this repository}; each file checked as its upload is; one transaction (at most 10,000 components), audited (<format>.copy) and announced (component.published) per component; {copied, unchanged, removed}; ?wait=true answers once the target published them (admin)", "200")
        },
        "/api/v1/repositories/{name}/move": {
            "parameters": param("name"),
            "post": op("Move components: a copy that removes them from this hosted repository in the same transaction (audited as <format>.move in both, announced as component.deleted here) (admin)", "200")
        },
        "/api/v1/repositories/{name}/signing-key": {
            "parameters": param("name"),
            "get": op("The public signing key of an APT repository: {fingerprint, algorithm, public_key, previous_fingerprint}; of an APK repository: {fingerprint, algorithm, key_name, public_key, previous_key_name}; of a hosted or group Go repository, its checksum database: {name, algorithm, verifier_key, gosumdb, size} (admin)", "200"),
            "put": op("Rotate: {\"generate\":true, \"algorithm\":\"ed25519|rsa3072|rsa4096\"} or {\"private_key\":\"<armored secret key>\"}; snapshots are re-signed, gpg.key keeps offering the previous key. Go: {\"generate\":true, \"name\":\"<database name>\"} or {\"private_key\":\"PRIVATE+KEY+…\"}, only while the checksum database holds no record (409 after: a log's key never changes) (admin)", "200")
        },
        "/api/v1/repositories/{name}/signing-keys": {
            "parameters": param("name"),
            "get": op("APT and APK: every key of the repository, the signing ones first: [{fingerprint, slot: current|overlap|previous, signs, expires_at?, algorithm, public_key, key_name (APK)}] (admin)", "200"),
            "post": op("Add a key beside the current one ({\"generate\":true, \"algorithm\"?} or {\"private_key\":\"…\"}): both sign every index until one is retired, gpg.key / keys/ offer both; 409 while a rotation's overlap runs; audited as repository.signing_key.add; answers the keys (admin)", "201")
        },
        "/api/v1/repositories/{name}/signing-keys/{fingerprint}": {
            "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "fingerprint", "in": "path", "required": true, "schema": {"type": "string"}}],
            "delete": op("Retire a key: it no longer signs nor is offered to clients; the overlap's other key signs alone (409 for the only signing key, 404 for an unknown one); audited as repository.signing_key.retire; answers the keys (admin)", "200")
        },
        "/api/v1/audit": {
            "get": op("Audit entries, newest first: ?limit=1..1000&before=<id from next>; narrowed by &actor=<exactly>, &action=<its start, e.g. user.>, &target=<containing>", "200")
        }
    })
}

/// Each format's settings block in `RepositorySpec` and `Repository`, under its name, with the
/// schema its spec gives (one that takes none: an empty object, in the body only).
fn with_format_settings(doc: &mut serde_json::Value, formats: &Registry) {
    let schemas = &mut doc["components"]["schemas"];
    let names: Vec<&str> = formats.offered().map(|s| s.format().as_str()).collect();
    schemas["RepositorySpec"]["properties"]["format"] = serde_json::json!({"enum": names});
    for spec in formats.offered() {
        let name = spec.format().as_str();
        let mut chars = name.chars();
        let capital: String = chars.next().map(|c| c.to_ascii_uppercase()).into_iter().chain(chars).collect();
        let schema_name = format!("{capital}Settings");
        let reference = serde_json::json!({"$ref": format!("#/components/schemas/{schema_name}")});
        match spec.settings().map(|s| s.schema()) {
            Some(schema) => {
                schemas[schema_name.as_str()] = schema;
                schemas["RepositorySpec"]["properties"][name] = reference.clone();
                schemas["Repository"]["properties"][name] = reference;
            }
            None => {
                schemas["RepositorySpec"]["properties"][name] = serde_json::json!({"type": "object", "additionalProperties": false, "description": "takes no settings: {} or absent"});
            }
        }
    }
}

fn repositories_document() -> serde_json::Value {
    let repo_ref = serde_json::json!({"$ref": "#/components/schemas/Repository"});
    let spec_body = serde_json::json!({
        "required": true,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RepositorySpec"}}}
    });
    let name_param = serde_json::json!([{
        "name": "name", "in": "path", "required": true,
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"}
    }]);
    serde_json::json!({
        "openapi": "3.1.0",
        "info": {"title": "Packyard admin API", "version": env!("CARGO_PKG_VERSION")},
        "security": [{"basic": []}, {"bearer": []}],
        "paths": {
            "/api/v1/repositories": {
                "get": {
                    "summary": "List repositories",
                    "responses": {
                        "200": {"description": "All repositories, by name", "content": {"application/json": {"schema": {"type": "array", "items": repo_ref}}}},
                        "401": error_ref("No or bad credentials"), "403": error_ref("Not an administrator")
                    }
                },
                "post": {
                    "summary": "Create a repository",
                    "requestBody": spec_body,
                    "responses": {
                        "201": {"description": "Created", "content": {"application/json": {"schema": repo_ref}}},
                        "400": error_ref("Invalid definition"), "401": error_ref("No or bad credentials"),
                        "403": error_ref("Not an administrator"), "409": error_ref("Name taken")
                    }
                }
            },
            "/api/v1/repositories/{name}": {
                "parameters": name_param,
                "get": {"summary": "Get a repository", "responses": {
                    "200": {"description": "The repository", "content": {"application/json": {"schema": repo_ref}}},
                    "404": error_ref("No such repository")}},
                "put": {"summary": "Replace a repository's whole definition (format and type are fixed; format settings the repository has may not be left out)", "requestBody": spec_body, "responses": {
                    "200": {"description": "Updated", "content": {"application/json": {"schema": repo_ref}}},
                    "400": error_ref("Invalid definition"), "404": error_ref("No such repository")}},
                "patch": {"summary": "Change some fields of a repository (a JSON merge patch, RFC 7396, over the definition GET shows)", "requestBody": {"required": true, "content": {"application/merge-patch+json": {"schema": {"type": "object"}}}}, "responses": {
                    "200": {"description": "Updated", "content": {"application/json": {"schema": repo_ref}}},
                    "400": error_ref("Invalid patch or definition"), "404": error_ref("No such repository"),
                    "415": error_ref("Not a JSON merge patch")}},
                "delete": {"summary": "Delete a repository", "responses": {
                    "204": {"description": "Deleted"}, "404": error_ref("No such repository"),
                    "409": error_ref("Still a member of a group")}}
            }
        },
        "components": {
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}, "bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "required": ["code", "message"], "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
                "Proxy": {"type": "object", "additionalProperties": false, "required": ["remote_url"], "properties": {
                    "remote_url": {"type": "string", "format": "uri"},
                    "metadata_ttl_secs": {"type": "integer", "default": 3600},
                    "negative_ttl_secs": {"type": "integer", "default": 300},
                    "username": {"type": "string", "description": "upstream HTTP Basic user"},
                    "password": {"type": "string", "writeOnly": true, "description": "upstream password; sealed, never returned"},
                    "offline": {"type": "boolean", "default": false, "description": "no upstream traffic at all: cached files are served however old, the rest is a 404"},
                    "max_stale_secs": {"type": "integer", "minimum": 0, "description": "how old a cached copy may be and still be served when the upstream fails (default: any); never an APT index past its Valid-Until"}}},
                "Group": {"type": "object", "additionalProperties": false, "required": ["members"], "properties": {
                    "members": {"type": "array", "items": {"type": "string"}}}},
                "SnapshotSchedule": {"type": "object", "additionalProperties": false,
                    "description": "Snapshots made every every_secs, named by the start of their period; the newest keep of them kept (snapshots made on request are kept until deleted)",
                    "properties": {"every_secs": {"type": "integer", "minimum": 60, "maximum": 31622400},
                        "keep": {"type": "integer", "minimum": 1, "maximum": 10000}}},
                "Replication": {"type": "object", "additionalProperties": false, "required": ["url"],
                    "description": "Pull replication (hosted only): keeps a full copy of another Packyard's repository (or snapshot), of what the filters keep, made to hold exactly that every every_secs",
                    "properties": {"url": {"type": "string", "description": "the source instance's root URL"},
                        "repository": {"type": "string", "description": "the source repository; by default this one's name"},
                        "snapshot": {"type": "string"},
                        "names": {"type": "array", "items": {"type": "string"}, "description": "component names, * globs"},
                        "architectures": {"type": "array", "items": {"type": "string"}},
                        "newest": {"type": "integer", "minimum": 1, "description": "versions kept of each name"},
                        "every_secs": {"type": "integer", "minimum": 1, "maximum": 86400, "default": 60},
                        "key": {"type": "string", "description": "the source instance's bundle key (fingerprint or public key)"},
                        "username": {"type": "string", "description": "a user of the source that may read the repository (HTTP Basic)"},
                        "password": {"type": "string", "writeOnly": true, "description": "sealed before it is stored, never returned; an update without it keeps the stored one"}}},
                "Quota": {"type": "object", "additionalProperties": false,
                    "description": "Storage limits on the bytes of the repository's components' files (a blob shared with another repository counts in each): past soft_bytes a metric, an alert, a quota.exceeded webhook event and a UI banner tell; an upload that would take the use past hard_bytes is refused with 507 and stores nothing (hosted and proxy; not a group)",
                    "properties": {"soft_bytes": {"type": "integer", "minimum": 1}, "hard_bytes": {"type": "integer", "minimum": 1}}},
                "QuotaStatus": {"type": "object", "properties": {
                    "scope": {"enum": ["repository", "blob_store"]}, "name": {"type": "string"},
                    "used_bytes": {"type": "integer"}, "soft_bytes": {"type": "integer"}, "hard_bytes": {"type": "integer"},
                    "standing": {"enum": ["within", "soft", "hard"]}, "message": {"type": "string"}}},
                "Policy": {"type": "object", "additionalProperties": false, "properties": {
                    "min_release_age_secs": {"type": "integer", "default": 0, "description": "a version younger than this is not offered (404 with when it will be)"},
                    "release_age_overrides": {"type": "array", "items": {"type": "object", "additionalProperties": false, "required": ["name", "min_release_age_secs"], "properties": {
                        "name": {"type": "string", "description": "glob over the component's name"}, "min_release_age_secs": {"type": "integer"}}}},
                    "vulnerabilities": {"enum": ["off", "audit", "enforce"], "default": "off"},
                    "vulnerability_severity": {"enum": ["low", "medium", "high", "critical"], "default": "high", "description": "the lowest level enforce refuses"},
                    "rules": {"type": "array", "items": {"type": "object", "additionalProperties": false, "required": ["id", "action"], "properties": {
                        "id": {"type": "string"}, "action": {"enum": ["deny", "allow"]},
                        "name": {"type": "string"}, "version": {"type": "string"},
                        "licenses": {"type": "array", "items": {"type": "string"}},
                        "architectures": {"type": "array", "items": {"type": "string"}}}}}}},
                "RepositorySpec": {"type": "object", "additionalProperties": false, "required": ["format", "type"], "properties": {
                    "name": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"},
                    "format": {"description": "a registered format's name"},
                    "type": {"enum": ["hosted", "proxy", "group"]},
                    "write_policy": {"enum": ["allow_once", "allow", "deny"], "default": "allow_once"},
                    "anonymous_read": {"type": "boolean", "default": true},
                    "proxy": {"$ref": "#/components/schemas/Proxy"}, "group": {"$ref": "#/components/schemas/Group"},
                    "policy": {"$ref": "#/components/schemas/Policy"},
                    "snapshots": {"$ref": "#/components/schemas/SnapshotSchedule"},
                    "replication": {"$ref": "#/components/schemas/Replication"},
                    "quota": {"$ref": "#/components/schemas/Quota"}}},
                "Repository": {"type": "object", "properties": {
                    "name": {"type": "string"}, "format": {"type": "string"}, "type": {"type": "string"},
                    "url": {"type": "string"}, "write_policy": {"type": "string"}, "anonymous_read": {"type": "boolean"},
                    "proxy": {"$ref": "#/components/schemas/Proxy"}, "group": {"$ref": "#/components/schemas/Group"},
                    "policy": {"$ref": "#/components/schemas/Policy"},
                    "snapshots": {"$ref": "#/components/schemas/SnapshotSchedule"},
                    "replication": {"$ref": "#/components/schemas/Replication"},
                    "quota": {"$ref": "#/components/schemas/Quota"},
                    "quota_status": {"$ref": "#/components/schemas/QuotaStatus", "description": "where it stands against its quota, counted as the request is answered (GET of one repository)"},
                    "version": {"type": "integer"}, "created_at": {"type": "string", "format": "date-time"},
                    "updated_at": {"type": "string", "format": "date-time"}}}
            }
        }
    })
}
