//! What the formats' multipart uploads share (a format's own form and Nexus's components upload,
//! `POST /service/rest/v1/components`): telling a form from a raw body, and reading its text
//! fields. Each format names its own fields (`apt.asset`, `apk.asset`, `go.asset`).

use actix_web::http::header;
use actix_web::HttpRequest;
use futures_util::StreamExt;

use crate::error::{ApiError, FormatError};

/// Longest text field a form may carry (a distribution, a branch, a module path).
const MAX_TEXT: usize = 512;

/// A multipart form: `multipart/form-data` with its boundary. Sonatype's documented upload
/// (`curl -H "Content-Type: multipart/form-data" --data-binary @pkg.deb`) sends the raw package
/// under that type without a boundary: that body is the package itself, as Nexus reads it.
pub(crate) fn is_multipart(req: &HttpRequest) -> bool {
    let Some(v) = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let mut parts = v.split(';');
    let essence = parts.next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("multipart/form-data")
        && parts.any(|p| {
            p.split_once('=').is_some_and(|(k, v)| k.trim().eq_ignore_ascii_case("boundary") && !v.trim().is_empty())
        })
}

pub(crate) fn malformed(e: impl std::fmt::Display) -> FormatError {
    ApiError::bad_request(format!("malformed multipart upload: {e}")).into()
}

/// A text field's value, trimmed: UTF-8, at most [`MAX_TEXT`] bytes.
pub(crate) async fn text(
    field: &mut std::pin::Pin<Box<actix_multipart::Field>>,
    name: &str,
) -> Result<String, FormatError> {
    let mut value = Vec::new();
    while let Some(chunk) = field.next().await {
        value.extend_from_slice(&chunk.map_err(malformed)?);
        if value.len() > MAX_TEXT {
            return Err(ApiError::bad_request(format!("the form field {name} is longer than {MAX_TEXT} bytes")).into());
        }
    }
    let value = String::from_utf8(value)
        .map_err(|_| ApiError::bad_request(format!("the form field {name} is not UTF-8 text")))?;
    Ok(value.trim().to_string())
}

/// Reads a field the format does not take to its end (the form goes on after it).
pub(crate) async fn skip(field: &mut std::pin::Pin<Box<actix_multipart::Field>>) -> Result<(), FormatError> {
    while let Some(chunk) = field.next().await {
        chunk.map_err(malformed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    #[test]
    fn a_form_has_a_boundary() {
        let is = |ct: &str| {
            super::is_multipart(&TestRequest::default().insert_header(("content-type", ct)).to_http_request())
        };
        assert!(is("multipart/form-data; boundary=abc"));
        assert!(is("Multipart/Form-Data ;charset=utf-8; Boundary=\"x y\""));
        // Sonatype's documented APT upload: a raw package under a multipart type.
        assert!(!is("multipart/form-data"));
        assert!(!is("multipart/form-data; boundary="));
        assert!(!is("application/vnd.debian.binary-package"));
        assert!(!super::is_multipart(&TestRequest::default().to_http_request()), "no content type");
    }
}
