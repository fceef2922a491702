//! What a format's route table is made of: the routes' access needs ([`Access`]), the request
//! a route serves ([`Cx`]), the path below the repository ([`Tail`]) and the table itself
//! ([`Routes`]). The dispatcher (`crate::repository`) uses them; no format's routes use another's.

use std::sync::Arc;

use actix_web::http::Method;
use actix_web::{web, HttpRequest, HttpResponse};
use packyard_core::proxy::{FetchRequest, ProxyError};
use packyard_core::publication::cache::ServedFile;
use packyard_core::security::Action;
use packyard_core::services::Services;
use packyard_model::repos::Repository;

use crate::auth::Caller;
use crate::error::{ApiError, FormatError};

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// An action on the repository.
    Action(Action),
    /// Anyone, anonymous included, whatever the repository allows (Conan's `v1/ping`).
    Anyone,
    /// A proven user; with `Some(action)`, also allowed that action.
    SignedIn(Option<Action>),
}

impl Access {
    pub const READ: Self = Self::Action(Action::Read);
    pub const WRITE: Self = Self::Action(Action::Write);
    pub const DELETE: Self = Self::Action(Action::Delete);

    /// Whether the route changes what is stored (refused while the instance is read-only).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Self::Action(Action::Write | Action::Delete) | Self::SignedIn(Some(Action::Write | Action::Delete))
        )
    }

    /// What a method needs where no route says otherwise.
    pub fn of_method(method: &Method) -> Option<Self> {
        match *method {
            Method::GET | Method::HEAD => Some(Self::READ),
            Method::PUT | Method::POST => Some(Self::WRITE),
            Method::DELETE => Some(Self::DELETE),
            _ => None,
        }
    }
}

/// A request to a route, once its access was decided.
pub struct Cx<'a> {
    pub req: &'a HttpRequest,
    pub services: &'a Services,
    pub repo: Arc<Repository>,
    pub caller: Caller,
    pub body: web::Payload,
    /// Where the route offers what its answer was made from, for the hot answers.
    pub hot: &'a crate::hot::Slot,
}

impl Cx<'_> {
    /// Answers with a file of a unit's current snapshot ([`crate::formats::serve_published`]),
    /// offered to the hot answers: the route adds nothing to this answer.
    pub fn serve_current(&self, f: ServedFile) -> HttpResponse {
        self.hot.offer(crate::hot::Reusable::File(f.clone()));
        crate::formats::serve_published(self.req, f)
    }

    /// A 404 for a path of this repository.
    pub fn not_found(&self, path: &str) -> FormatError {
        ApiError::not_found(format!("not found: /{path} in repository {}", self.repo.name)).into()
    }

    /// The repository whose own signing keys a key route serves: a 404 for a proxy, which
    /// passes its upstream's signatures through unchanged (`whose`: whose key to trust instead),
    /// unless its policy has it sign the index it filters.
    pub fn signing_repository(&self, whose: &str) -> Result<&Repository, FormatError> {
        if self.repo.repo_type == packyard_model::repos::RepoType::Proxy && !self.repo.publishes_merge() {
            return Err(ApiError::not_found(format!(
                "proxy repository {} serves its upstream's signatures unchanged; trust {whose}",
                self.repo.name
            ))
            .into());
        }
        Ok(&self.repo)
    }
}

/// The path below `/repository/<name>/`: as the router matched it (escapes decoded, except those
/// of reserved characters such as `%2F`) and as the client sent it.
#[derive(Debug, Clone, Copy)]
pub struct Tail<'a> {
    pub matched: &'a str,
    pub raw: &'a str,
}

/// A format's route table: which of its routes a method and path name (with the path's parts
/// parsed into typed values) and what each needs; then the route itself. (Its futures need not
/// be `Send`: actix runs each request on one thread.)
#[allow(async_fn_in_trait)]
pub trait Routes {
    type Route;

    /// `None`: no route of this format; `Some(Err)`: a route of this format, but a malformed
    /// path (answered after access is decided by the method).
    fn route(method: &Method, tail: Tail<'_>) -> Option<Result<(Self::Route, Access), FormatError>>;

    async fn serve(cx: Cx<'_>, route: Self::Route) -> Result<HttpResponse, FormatError>;

    /// The route that takes Nexus's components upload (`POST /service/rest/v1/components`, a
    /// multipart form of this format's fields), or why the format takes none.
    fn form_upload() -> Result<Self::Route, String>;

    /// Whether a path below a repository snapshot's URL is one of the format's routes that
    /// answer the same whatever the repository holds (a ping, a sign-in), served by this table
    /// as under the repository's own URL; every other path is a file of the snapshot.
    fn outside_snapshot(_path: &str) -> bool {
        false
    }

    /// How a snapshot of proxy `repo` fetches `path` (decoded) on its first request, when no
    /// client had fetched it before the snapshot was made: the proxy's request for it. Only a
    /// file whose name fixes its bytes qualifies (`crate::snapshot` checks that the request is
    /// immutable); `None` for the rest — an index is what the snapshot holds, never fetched anew.
    fn snapshot_fill(_repo: &Repository, _path: &str) -> Option<Result<FetchRequest, ProxyError>> {
        None
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
