//! What Packyard answers to the parts of Nexus's REST API it does not implement: a 404 in
//! Nexus's shape saying why and what to use instead, by the path's prefix (the whole list, with
//! every endpoint, is docs/nexus-api.md; `it/nexus_write.rs` checks the two agree). A method a
//! path of Packyard's does not take is a 405 with the same reason.

use actix_web::{web, HttpRequest, Resource};

use crate::error::{ApiError, ErrorCode, NexusError};

/// `(method or "*", path prefix below /service/rest, reason)`, the first that matches wins.
const REFUSED: &[(&str, &str, &str)] = &[
    ("*", "/v1/azureblobstore", BLOB_STORES),
    ("*", "/v1/blobstores/azure", BLOB_STORES),
    ("*", "/v1/blobstores/google", BLOB_STORES),
    ("*", "/v1/blobstores/group", BLOB_STORES),
    ("*", "/v1/blobstores", BLOB_STORES),
    ("*", "/v1/capabilities", "Packyard has no capabilities: what it does is configured (packyard-api config show)"),
    ("*", "/v1/system/eula", "Packyard has no EULA to accept"),
    ("*", "/v1/system/license", "Packyard needs no licence key"),
    ("*", "/v1/system/node", "Packyard's replicas are stateless: there is no node to name or remove"),
    ("*", "/beta/data-store", "the database is configured (database.url), not changed through the API"),
    ("*", "/v1/email", "Packyard sends no email: it announces events by webhook (/api/v1/webhooks)"),
    ("*", "/v1/formats", "the upload fields of each format are in docs/nexus-api.md"),
    ("*", "/v1/lifecycle", "Packyard's lifecycle is its processes' (start them; SIGTERM drains and stops)"),
    ("*", "/v1/malicious-risk", "Sonatype's malicious-risk data is not part of Packyard"),
    ("*", "/v1/iq", "Sonatype Repository Firewall is not part of Packyard"),
    ("*", "/v1/http", "the outbound HTTP proxy is configured (proxy.* settings), not changed through the API"),
    ("*", "/v1/monthly-metrics", "Packyard's metrics are Prometheus's: GET /metrics on the management listener"),
    ("*", "/v1/plan", "Packyard has no reconciliation plans: blobs nothing refers to are reclaimed by the worker"),
    ("*", "/v1/routing-rules", "Packyard has no routing rules"),
    ("*", "/v1/script", "Packyard runs no scripts"),
    ("*", "/v1/apikeys", SECRETS),
    ("*", "/v1/secrets", SECRETS),
    ("*", "/v1/security/jwt", "Packyard's web sessions are its own (security.session_ttl_secs)"),
    ("*", "/v1/security/ldap", "LDAP directories are configured (security.ldap), shown on /admin/directories"),
    (
        "*",
        "/v1/security/privileges",
        "Packyard's privileges are part of its roles: give a role privileges by name with POST /v1/security/roles",
    ),
    ("*", "/v1/security/saml", "Packyard's single sign-on is OpenID Connect (security.oidc)"),
    ("*", "/v1/security/user-tokens", TOKENS),
    ("*", "/v1/security/users", TOKENS),
    (
        "*",
        "/v1/security/atlassian-crowd",
        "Packyard does not sign in through Atlassian Crowd (LDAP and OpenID Connect)",
    ),
    ("*", "/v1/security/ssl", "trusted certificate authorities are configured (proxy.ca_certificates), not uploaded"),
    (
        "*",
        "/v1/security/anonymous",
        "anonymous reads are configured (security.anonymous_read) and set per repository (anonymous_read)",
    ),
    ("*", "/v1/security/realms", "Packyard's realms follow its configuration"),
    ("*", "/v1/staging", "Packyard has no staging API"),
    ("*", "/beta/status", "GET /v1/status and /v1/status/writable answer for the whole cluster"),
    ("*", "/v1/support", "Packyard logs to standard output; its configuration is shown by packyard-api config show"),
    ("*", "/beta/system", "Packyard's version and configuration: packyard-api --version, packyard-api config show"),
    ("*", "/v1/tags", "Packyard has no tags"),
    (
        "*",
        "/v1/tasks",
        "Packyard's tasks are its cleanup policies (made with /v1/cleanup-policies) and the blob reclamation",
    ),
    ("*", "/v1/repositories", FORMATS),
];

/// Stands for the formats' names (made from the registry's list when the reason is given).
const FORMATS: &str = "{formats}";

const BLOB_STORES: &str = "Packyard has one blob store, default, configured by blobs.* (files or S3)";
const SECRETS: &str = "secrets are sealed with security.secret; they are not re-encrypted through the API";
const TOKENS: &str = "Packyard's API tokens are made and revoked with /api/v1/tokens";

/// Why `method path` (below `/service/rest`) is not Packyard's.
pub fn reason(method: &str, path: &str) -> String {
    let why = REFUSED
        .iter()
        .find(|(m, prefix, _)| (*m == "*" || *m == method) && path.starts_with(prefix))
        .map_or("it is not part of Nexus's API as Packyard implements it", |(_, _, why)| why);
    let why = if why == FORMATS {
        format!(
            "Packyard serves the {} formats (hosted, proxy and group)",
            packyard_model::repos::Format::listed("and")
        )
    } else {
        why.to_string()
    };
    format!("Packyard does not implement {method} /service/rest{path}: {why} (docs/nexus-api.md)")
}

pub async fn refused(req: HttpRequest) -> Result<actix_web::HttpResponse, NexusError> {
    let path = req.path().strip_prefix("/service/rest").unwrap_or(req.path());
    Err(NexusError(ApiError::not_found(reason(req.method().as_str(), path))))
}

/// A method a path of Packyard's does not take: 405, with the reason.
async fn not_allowed(req: HttpRequest) -> Result<actix_web::HttpResponse, NexusError> {
    let path = req.path().strip_prefix("/service/rest").unwrap_or(req.path());
    Err(NexusError(ApiError::new(ErrorCode::MethodNotAllowed, reason(req.method().as_str(), path))))
}

/// A resource of Nexus's API: a method it does not take is refused (405) with the reason.
pub fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(not_allowed))
}
