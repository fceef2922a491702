//! The one error type of the HTTP layer: stable snake_case codes, an explicit status table, one
//! JSON shape `{"error":{"code":…,"message":…}}`. Internal causes go to the log, never to the
//! client.

use std::fmt;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use packyard_core::auth::AuthError;
use packyard_core::repositories::RepoError;
use packyard_store::blobs::BlobError;
use packyard_store::db::DbError;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    BadRequest,
    InvalidRepository,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    PayloadTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
    RangeNotSatisfiable,
    /// A required parameter is missing (Nexus's 422).
    Unprocessable,
    InsufficientStorage,
    TooManyRequests,
    ServiceUnavailable,
    BadGateway,
    GatewayTimeout,
    Internal,
}

impl ErrorCode {
    pub fn status(self) -> StatusCode {
        match self {
            Self::BadRequest | Self::InvalidRepository => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict => StatusCode::CONFLICT,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::RangeNotSatisfiable => StatusCode::RANGE_NOT_SATISFIABLE,
            Self::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
            Self::InsufficientStorage => StatusCode::INSUFFICIENT_STORAGE,
            Self::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
            Self::ServiceUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::BadGateway => StatusCode::BAD_GATEWAY,
            Self::GatewayTimeout => StatusCode::GATEWAY_TIMEOUT,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::InvalidRepository => "invalid_repository",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict => "conflict",
            Self::PayloadTooLarge => "payload_too_large",
            Self::RequestTimeout => "request_timeout",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::RangeNotSatisfiable => "range_not_satisfiable",
            Self::Unprocessable => "unprocessable",
            Self::InsufficientStorage => "insufficient_storage",
            Self::TooManyRequests => "too_many_requests",
            Self::ServiceUnavailable => "service_unavailable",
            Self::BadGateway => "bad_gateway",
            Self::GatewayTimeout => "gateway_timeout",
            Self::Internal => "internal_error",
        }
    }
}

#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// For 416: the size to report in `Content-Range: bytes */size`.
    pub range_size: Option<u64>,
    /// For 429 and 503: seconds to put in `Retry-After`.
    pub retry_after: Option<u64>,
    /// A proxy's upstream failed (unreachable, timing out, a 5xx) — not refused: a group may ask
    /// its next member for an immutable file.
    pub upstream_failed: bool,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), range_size: None, retry_after: None, upstream_failed: false }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    /// A 500 whose cause is logged, not shown.
    pub fn internal(cause: impl fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(ErrorCode::Internal, "internal server error; the cause is in the server log")
    }

    /// A 503 with `Retry-After: 1`, its cause logged: the database is down, out of connections,
    /// or busy past its time-outs.
    pub fn unavailable(cause: impl fmt::Display) -> Self {
        tracing::warn!(error = %cause, "dependency unavailable");
        Self {
            retry_after: Some(1),
            ..Self::new(ErrorCode::ServiceUnavailable, "the service is temporarily unavailable; retry shortly")
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
}

/// The JSON error body; used by handlers and by the rewriting of framework errors.
pub fn error_body(code: &str, message: &str) -> String {
    serde_json::to_string(&Body { error: Inner { code, message } })
        .unwrap_or_else(|_| r#"{"error":{"code":"internal_error","message":"internal server error"}}"#.into())
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.code.status()
    }

    fn error_response(&self) -> HttpResponse {
        self.render(false)
    }
}

impl ApiError {
    /// The response: the JSON body, or (`plain`) the message as text.
    fn render(&self, plain: bool) -> HttpResponse {
        let mut res = HttpResponse::build(self.status_code());
        let content_type = if plain { "text/plain; charset=utf-8" } else { "application/json" };
        res.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(content_type)));
        if self.code == ErrorCode::Unauthorized {
            res.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"packyard\"")));
        }
        if let Some(size) = self.range_size {
            res.insert_header((header::CONTENT_RANGE, format!("bytes */{size}")));
        }
        if let Some(secs) = self.retry_after {
            res.insert_header((header::RETRY_AFTER, secs.to_string()));
        }
        if plain {
            return res.body(format!("{}\n", self.message));
        }
        res.body(error_body(self.code.as_str(), &self.message))
    }
}

impl From<DbError> for ApiError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::NotFound => Self::not_found("not found"),
            DbError::Conflict(m) => Self::new(ErrorCode::Conflict, m),
            DbError::Unavailable(m) | DbError::Retry(m) => Self::unavailable(m),
            other => Self::internal(other),
        }
    }
}

impl From<packyard_model::repos::InvalidRepository> for ApiError {
    fn from(e: packyard_model::repos::InvalidRepository) -> Self {
        Self::new(ErrorCode::InvalidRepository, e.0)
    }
}

impl From<RepoError> for ApiError {
    fn from(e: RepoError) -> Self {
        match e {
            RepoError::Invalid(m) => Self::new(ErrorCode::InvalidRepository, m),
            RepoError::NotFound(name) => Self::not_found(format!("repository {name} not found")),
            RepoError::Conflict(m) => Self::new(ErrorCode::Conflict, m),
            RepoError::Db(db) => db.into(),
        }
    }
}

impl From<BlobError> for ApiError {
    fn from(e: BlobError) -> Self {
        match e {
            BlobError::NotFound(_) => Self::not_found(e.to_string()),
            BlobError::TooLarge { .. } => Self::new(ErrorCode::PayloadTooLarge, e.to_string()),
            BlobError::RangeNotSatisfiable { size } => {
                Self { range_size: Some(size), ..Self::new(ErrorCode::RangeNotSatisfiable, e.to_string()) }
            }
            BlobError::InvalidDigest(_) => Self::bad_request(e.to_string()),
            BlobError::Full(cause) => {
                tracing::error!(error = %cause, "blob store full");
                Self::new(ErrorCode::InsufficientStorage, "the blob store is full; nothing was stored")
            }
            BlobError::Io(cause) => Self::unavailable(format!("blob store: {cause}")),
        }
    }
}

impl From<packyard_core::security::service::AuthFailure> for ApiError {
    fn from(e: packyard_core::security::service::AuthFailure) -> Self {
        use packyard_core::security::service::AuthFailure;
        match e {
            AuthFailure::Invalid(m) => Self::unauthorized(m),
            AuthFailure::Throttled(wait) => Self {
                retry_after: Some(wait.as_millis().div_ceil(1000).max(1) as u64),
                ..Self::new(ErrorCode::TooManyRequests, e.to_string())
            },
            AuthFailure::Unavailable(m) => Self { retry_after: Some(5), ..Self::new(ErrorCode::ServiceUnavailable, m) },
            AuthFailure::Db(db) => db.into(),
        }
    }
}

impl From<packyard_core::security::service::PasswordChangeError> for ApiError {
    fn from(e: packyard_core::security::service::PasswordChangeError) -> Self {
        use packyard_core::security::service::PasswordChangeError;
        match e {
            PasswordChangeError::WrongCurrent => Self::bad_request("current_password is wrong"),
            PasswordChangeError::Throttled(wait) => Self {
                retry_after: Some(wait.as_millis().div_ceil(1000).max(1) as u64),
                ..Self::new(ErrorCode::TooManyRequests, e.to_string())
            },
            PasswordChangeError::Hash(h) => h.into(),
            PasswordChangeError::Db(db) => db.into(),
        }
    }
}

impl From<packyard_core::admin::AdminError> for ApiError {
    fn from(e: packyard_core::admin::AdminError) -> Self {
        use packyard_core::admin::AdminError;
        match e {
            AdminError::Invalid(m) => Self::bad_request(m),
            AdminError::NotFound(m) => Self::not_found(m),
            AdminError::Conflict(m) => Self::new(ErrorCode::Conflict, m),
            AdminError::Forbidden(m) => Self::forbidden(m),
            AdminError::Password(p) => p.into(),
            AdminError::Auth(a) => a.into(),
            AdminError::Db(db) => db.into(),
            AdminError::Repository(r) => r.into(),
            AdminError::Key(k) => k.into(),
            AdminError::Internal(m) => Self::internal(m),
        }
    }
}

impl From<packyard_core::formats::KeyError> for ApiError {
    fn from(e: packyard_core::formats::KeyError) -> Self {
        use packyard_core::formats::KeyError;
        match e {
            KeyError::Invalid(m) => Self::bad_request(m),
            KeyError::Name(e) => e.into(),
            KeyError::Db(e) => e.into(),
            KeyError::Conflict(m) => Self::new(ErrorCode::Conflict, m),
            KeyError::NotFound(m) => Self::not_found(m),
            KeyError::Internal(m) => Self::internal(m),
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Db(db) => db.into(),
            other => Self::internal(other),
        }
    }
}

/// The errors of the `/repository/<name>/…` scope: rendered once, as the plain text the format
/// clients (apt, apk, go, conan) show their users. Every error a format route meets converts
/// into it with `?`.
#[derive(Debug)]
pub struct FormatError(pub ApiError);

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for FormatError {
    fn status_code(&self) -> StatusCode {
        self.0.status_code()
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = self.0.render(true);
        crate::repository::sandbox(res.headers_mut());
        res
    }
}

impl<E: Into<ApiError>> From<E> for FormatError {
    fn from(e: E) -> Self {
        Self(e.into())
    }
}

impl From<packyard_core::hosted::UploadError> for ApiError {
    fn from(e: packyard_core::hosted::UploadError) -> Self {
        use packyard_core::hosted::UploadError;
        match e {
            UploadError::Invalid(m) | UploadError::Interrupted(m) => ApiError::bad_request(m),
            UploadError::TooLarge(m) => ApiError::new(ErrorCode::PayloadTooLarge, m),
            UploadError::InsufficientStorage(m) => ApiError::new(ErrorCode::InsufficientStorage, m),
            UploadError::Stalled(m) => ApiError::new(ErrorCode::RequestTimeout, m),
            UploadError::Again(m) => ApiError::new(ErrorCode::ServiceUnavailable, m),
            UploadError::Conflict(m) => ApiError::new(ErrorCode::Conflict, m),
            UploadError::ReadOnly(m) | UploadError::Forbidden(m) => ApiError::forbidden(m),
            UploadError::NotHosted(m) => ApiError::new(ErrorCode::MethodNotAllowed, m),
            UploadError::Blob(b) => b.into(),
            UploadError::Db(d) => d.into(),
        }
    }
}

impl From<packyard_core::proxy::ProxyError> for ApiError {
    /// A proxy failure, as a client and an operator can act on it.
    fn from(e: packyard_core::proxy::ProxyError) -> Self {
        use packyard_core::proxy::ProxyError;
        let code = match &e {
            ProxyError::Timeout(_) => ErrorCode::GatewayTimeout,
            ProxyError::Unavailable(_) => ErrorCode::ServiceUnavailable,
            ProxyError::Changing(_) => {
                return ApiError { retry_after: Some(1), ..ApiError::new(ErrorCode::ServiceUnavailable, e.to_string()) }
            }
            ProxyError::Internal(_) => return ApiError::internal(e),
            ProxyError::Full(_) => ErrorCode::InsufficientStorage,
            _ => ErrorCode::BadGateway,
        };
        let upstream_failed = matches!(e, ProxyError::Unreachable(_) | ProxyError::Timeout(_) | ProxyError::Failing(_));
        ApiError { upstream_failed, ..ApiError::new(code, e.to_string()) }
    }
}

impl From<packyard_core::publication::cache::ReadError> for ApiError {
    fn from(e: packyard_core::publication::cache::ReadError) -> Self {
        use packyard_core::publication::cache::ReadError;
        match e {
            ReadError::Db(d) => d.into(),
            ReadError::Blob(b) => b.into(),
        }
    }
}

impl From<packyard_core::groups::GroupError> for ApiError {
    fn from(e: packyard_core::groups::GroupError) -> Self {
        use packyard_core::groups::GroupError;
        match e {
            GroupError::Gone(_) => Self::not_found(e.to_string()),
            GroupError::TooDeep(_) => Self::internal(e),
            GroupError::Building(m) => Self::new(ErrorCode::ServiceUnavailable, m),
            GroupError::Upstream(m) => Self::new(ErrorCode::BadGateway, m),
            GroupError::Db(d) => d.into(),
        }
    }
}

/// An error of Nexus's management API, in Nexus's shape: `{"id": "*", "message": …}` (its
/// `ValidationErrorXO`), with the status (and `WWW-Authenticate`, `Retry-After`) of the error.
#[derive(Debug)]
pub struct NexusError(pub ApiError);

impl fmt::Display for NexusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<E> From<E> for NexusError
where
    ApiError: From<E>,
{
    fn from(e: E) -> Self {
        Self(ApiError::from(e))
    }
}

impl ResponseError for NexusError {
    fn status_code(&self) -> StatusCode {
        self.0.code.status()
    }

    fn error_response(&self) -> HttpResponse {
        let res = self.0.render(false);
        let body = serde_json::json!({"id": "*", "message": self.0.message}).to_string();
        res.set_body(actix_web::body::BoxBody::new(body))
    }
}
