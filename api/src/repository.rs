//! `/repository/<name>/…`: the format endpoints. Every route here is behind [`RepoAccess`]:
//! GET/HEAD need `read`, PUT/POST `write`, DELETE `delete`. Formats mount their own routes in
//! this scope; what no format route answers falls through to [`fallback`], which still decides
//! access first, so an unauthorised caller learns nothing about what is stored.

use actix_web::http::Method;
use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::security::Action;

use crate::auth::authorize_repo;
use crate::error::{ApiError, ErrorCode};

pub fn configure(cfg: &mut web::ServiceConfig, config: &packyard_model::config::Config) {
    cfg.service(
        web::scope("/repository/{repo}")
            .configure(|c| crate::formats::configure(c, config))
            .default_service(web::to(fallback)),
    );
}

/// The action a method needs on a repository.
pub fn action_for(method: &Method) -> Option<Action> {
    match *method {
        Method::GET | Method::HEAD => Some(Action::Read),
        Method::PUT | Method::POST => Some(Action::Write),
        Method::DELETE => Some(Action::Delete),
        _ => None,
    }
}

/// Authorises by method, then answers for what no format route serves: 404 for reads and
/// deletes, 405 for uploads. Format resources use it as their default service too, so an
/// unsupported method is still decided by access first.
pub async fn fallback(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    let Some(action) = action_for(req.method()) else {
        return Err(
            ApiError::new(ErrorCode::MethodNotAllowed, format!("method {} is not allowed here", req.method())).plain()
        );
    };
    let (_caller, repo) = authorize_repo(&req, action).await?;
    let path = req.match_info().unprocessed().trim_start_matches('/');
    match action {
        Action::Write => Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("repository {} ({} {}) accepts no upload at /{path}", repo.name, repo.format, repo.repo_type),
        )
        .plain()),
        _ => Err(ApiError::not_found(format!("not found: /{path} in repository {}", repo.name)).plain()),
    }
}

/// Decodes `%XX` escapes; `None` for a malformed escape or a result that is not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn decodes_escapes() {
        assert_eq!(percent_decode("jq_1.6-2.1%2bdeb12u3_amd64.deb").as_deref(), Some("jq_1.6-2.1+deb12u3_amd64.deb"));
        assert_eq!(percent_decode("a%2F..%2fb").as_deref(), Some("a/../b"));
        assert_eq!(percent_decode("bad%2"), None);
        assert_eq!(percent_decode("bad%zz"), None);
    }
}
