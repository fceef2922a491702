//! Authentication extractors. A route declares what it needs by taking one of these as an
//! argument; the check happens before the handler runs. The security model (#3) grows this into
//! roles, privileges, tokens and a decision cache behind the same extractors.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use base64::Engine;
use packyard_shared::auth::{authenticate_password, ADMIN_USER};
use packyard_shared::services::Services;

use crate::error::ApiError;

/// Credentials as sent, before they are checked.
#[derive(Debug, PartialEq, Eq)]
pub enum Credentials {
    Basic { username: String, password: String },
    Bearer(String),
}

/// Parses the `Authorization` header. `Ok(None)`: no header. A malformed header is a 401, never
/// anonymous.
pub fn parse_authorization(req: &HttpRequest) -> Result<Option<Credentials>, ApiError> {
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| ApiError::unauthorized("malformed Authorization header"))?;
    let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .map_err(|_| ApiError::unauthorized("malformed Basic credentials: not base64"))?;
        let decoded = String::from_utf8(decoded)
            .map_err(|_| ApiError::unauthorized("malformed Basic credentials: not UTF-8"))?;
        let (username, password) = decoded.split_once(':').ok_or_else(|| {
            ApiError::unauthorized("malformed Basic credentials: expected user:password")
        })?;
        Ok(Some(Credentials::Basic {
            username: username.to_string(),
            password: password.to_string(),
        }))
    } else if scheme.eq_ignore_ascii_case("bearer") {
        Ok(Some(Credentials::Bearer(rest.trim().to_string())))
    } else {
        Err(ApiError::unauthorized(format!(
            "unsupported authorization scheme {scheme:?}; use Basic or Bearer"
        )))
    }
}

/// An authenticated user (anonymous is not a `User`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub username: String,
}

impl User {
    pub fn is_admin(&self) -> bool {
        self.username == ADMIN_USER
    }
}

async fn authenticate(req: HttpRequest) -> Result<User, ApiError> {
    let services = req
        .app_data::<web::Data<Services>>()
        .ok_or_else(|| ApiError::internal("Services missing from app data"))?
        .clone();
    match parse_authorization(&req)? {
        None => Err(ApiError::unauthorized("authentication required")),
        Some(Credentials::Bearer(_)) => Err(ApiError::unauthorized("invalid or expired token")),
        Some(Credentials::Basic { username, password }) => {
            match authenticate_password(&services.db, &username, &password).await? {
                Some(u) => Ok(User {
                    id: u.id,
                    username: u.username,
                }),
                None => Err(ApiError::unauthorized("invalid username or password")),
            }
        }
    }
}

impl FromRequest for User {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        Box::pin(authenticate(req.clone()))
    }
}

/// A user allowed to administer Packyard: the `admin` privilege on everything.
#[derive(Debug, Clone)]
pub struct Admin(pub User);

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, Self::Error>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let user = authenticate(req).await?;
            if user.is_admin() {
                Ok(Admin(user))
            } else {
                Err(ApiError::forbidden(format!(
                    "user {} may not use the admin API",
                    user.username
                )))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn creds(value: &str) -> Result<Option<Credentials>, ApiError> {
        parse_authorization(
            &TestRequest::default()
                .insert_header((header::AUTHORIZATION, value))
                .to_http_request(),
        )
    }

    #[test]
    fn parses_basic_and_bearer() {
        let basic = creds("Basic YWRtaW46cGE6c3M=").ok().flatten();
        assert_eq!(
            basic,
            Some(Credentials::Basic {
                username: "admin".into(),
                password: "pa:ss".into()
            })
        );
        assert_eq!(
            creds("bearer abc").ok().flatten(),
            Some(Credentials::Bearer("abc".into()))
        );
        assert!(
            parse_authorization(&TestRequest::default().to_http_request())
                .is_ok_and(|c| c.is_none())
        );
    }

    #[test]
    fn malformed_headers_are_401() {
        for bad in ["Basic !!!", "Basic YWRtaW4=", "Digest x"] {
            let err = creds(bad).err().map(|e| e.code);
            assert_eq!(err, Some(crate::error::ErrorCode::Unauthorized), "{bad}");
        }
    }
}
