//! Authentication and authorization extractors: a route declares what it needs by the
//! extractor it takes, and the decision is made before the handler runs.
//!
//! - [`Caller`]: anyone, anonymous included (a bad credential is still a 401).
//! - [`Authenticated`]: a proven user.
//! - [`Admin`]: the global `admin` privilege (`admin` on `*`): the admin API.
//!
//! What a repository route needs is decided in [`crate::repository`], by its route table.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};
use base64::Engine;
use packyard_core::security::service::Credentials;
use packyard_core::security::Principal;
use packyard_core::services::Services;

use crate::error::ApiError;

/// Parses the `Authorization` header. `Ok(None)`: no header. A malformed header is a 401, never
/// anonymous.
pub fn parse_authorization(req: &HttpRequest) -> Result<Option<Credentials>, ApiError> {
    let Some(value) = req.headers().get(header::AUTHORIZATION) else { return Ok(None) };
    let value = value.to_str().map_err(|_| ApiError::unauthorized("malformed Authorization header"))?;
    let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .map_err(|_| ApiError::unauthorized("malformed Basic credentials: not base64"))?;
        let decoded =
            String::from_utf8(decoded).map_err(|_| ApiError::unauthorized("malformed Basic credentials: not UTF-8"))?;
        let (username, password) = decoded
            .split_once(':')
            .ok_or_else(|| ApiError::unauthorized("malformed Basic credentials: expected user:password"))?;
        Ok(Some(Credentials::Basic { username: username.to_string(), password: password.to_string() }))
    } else if scheme.eq_ignore_ascii_case("bearer") {
        Ok(Some(Credentials::Bearer(rest.trim().to_string())))
    } else {
        Err(ApiError::unauthorized(format!("unsupported authorization scheme {scheme:?}; use Basic or Bearer")))
    }
}

fn services(req: &HttpRequest) -> Result<web::Data<Services>, ApiError> {
    req.app_data::<web::Data<Services>>().cloned().ok_or_else(|| ApiError::internal("Services missing from app data"))
}

/// Anyone: the proven user, or anonymous when no credentials were sent.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Arc<Principal>,
    pub addr: IpAddr,
}

impl Caller {
    pub fn username(&self) -> &str {
        self.principal.username()
    }

    /// The id of the web UI session the caller came with, if that is how they signed in.
    pub fn session_id(&self) -> Option<&str> {
        match self.principal.as_ref() {
            Principal::User { token: Some(t), .. } if t.session => Some(t.token_id.as_str()),
            _ => None,
        }
    }

    /// Who makes a change, for the audit log.
    pub fn actor(&self) -> packyard_core::hosted::Actor<'_> {
        packyard_core::hosted::Actor {
            username: self.username(),
            address: Some(self.addr),
            principal: Some(&self.principal),
        }
    }
}

pub async fn caller(req: &HttpRequest) -> Result<Caller, ApiError> {
    // Once per request, whichever extractors ask.
    if let Some(c) = req.extensions().get::<Caller>() {
        return Ok(c.clone());
    }
    let c = resolve(req).await?;
    req.extensions_mut().insert(c.clone());
    Ok(c)
}

/// The caller of a request that asks once (the repository routes: the dispatcher passes it on),
/// not kept in the request's extensions.
pub async fn resolve(req: &HttpRequest) -> Result<Caller, ApiError> {
    let services = services(req)?;
    let creds = parse_authorization(req)?;
    let addr = crate::frontage::client_addr(req);
    let principal = match creds {
        None => services.security.anonymous().await?,
        // Boxed: proving a credential (a password's hash, a directory's answer) is a large
        // state, and the anonymous reads should not carry it (the repository routes' future is
        // bounded by a test).
        Some(creds) => Box::pin(services.security.principal(Some(&creds), addr)).await?,
    };
    Ok(Caller { principal, addr })
}

type Fut<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>>>>;

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Fut<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { caller(&req).await })
    }
}

/// A proven user (not anonymous).
#[derive(Debug, Clone)]
pub struct Authenticated(pub Caller);

impl Authenticated {
    pub fn user_id(&self) -> i64 {
        match self.0.principal.as_ref() {
            Principal::User { id, .. } => *id,
            Principal::Anonymous { .. } => 0,
        }
    }

    pub fn username(&self) -> &str {
        self.0.username()
    }

    pub fn is_admin(&self) -> bool {
        self.0.principal.is_admin()
    }

    /// The user changing a password (`require_current`: their own is changed only with the
    /// current one, also by an admin).
    pub fn password_caller(&self, require_current: bool) -> packyard_core::admin::users::PasswordCaller<'_> {
        packyard_core::admin::users::PasswordCaller {
            username: self.username(),
            is_admin: self.is_admin(),
            require_current,
            session_id: self.0.session_id(),
            address: self.0.addr,
        }
    }

    /// The user as the owner of their tokens.
    pub fn owner(&self) -> packyard_core::admin::tokens::Owner<'_> {
        let by_token = matches!(self.0.principal.as_ref(), Principal::User { token: Some(t), .. } if !t.session);
        packyard_core::admin::tokens::Owner {
            user_id: self.user_id(),
            username: self.username(),
            is_admin: self.is_admin(),
            address: self.0.addr,
            by_token,
        }
    }
}

async fn authenticated(req: &HttpRequest) -> Result<Authenticated, ApiError> {
    let c = caller(req).await?;
    if c.principal.is_anonymous() {
        return Err(ApiError::unauthorized("authentication required"));
    }
    Ok(Authenticated(c))
}

impl FromRequest for Authenticated {
    type Error = ApiError;
    type Future = Fut<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { authenticated(&req).await })
    }
}

/// The global admin privilege.
#[derive(Debug, Clone)]
pub struct Admin(pub Authenticated);

impl Admin {
    pub fn username(&self) -> &str {
        self.0.username()
    }

    pub fn addr(&self) -> IpAddr {
        self.0 .0.addr
    }

    /// Who makes a change, for the audit log.
    pub fn actor(&self) -> packyard_core::hosted::Actor<'_> {
        self.0 .0.actor()
    }
}

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = Fut<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let user = authenticated(&req).await?;
            if user.is_admin() {
                Ok(Admin(user))
            } else {
                Err(ApiError::forbidden(format!("user {} may not use the admin API", user.username())))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn creds(value: &str) -> Result<Option<Credentials>, ApiError> {
        parse_authorization(&TestRequest::default().insert_header((header::AUTHORIZATION, value)).to_http_request())
    }

    #[test]
    fn parses_basic_and_bearer() {
        let basic = creds("Basic YWRtaW46cGE6c3M=").ok().flatten();
        assert_eq!(basic, Some(Credentials::Basic { username: "admin".into(), password: "pa:ss".into() }));
        assert_eq!(creds("bearer abc").ok().flatten(), Some(Credentials::Bearer("abc".into())));
        assert!(parse_authorization(&TestRequest::default().to_http_request()).is_ok_and(|c| c.is_none()));
    }

    #[test]
    fn malformed_headers_are_401() {
        for bad in ["Basic !!!", "Basic YWRtaW4=", "Digest x"] {
            let err = creds(bad).err().map(|e| e.code);
            assert_eq!(err, Some(crate::error::ErrorCode::Unauthorized), "{bad}");
        }
    }
}
