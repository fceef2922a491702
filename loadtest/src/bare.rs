//! The framework's ceiling: a bare actix-web handler that serves, from memory, exactly what a
//! Packyard target answered for each path — the same status line, headers and bytes — with no
//! middleware, no log, no lookup but one map. `GET` sends the body, `HEAD` the headers alone, a
//! request whose `If-None-Match` names the entity tag (or, without one, whose `If-Modified-Since`
//! is the `Last-Modified` it was given) gets 304 with the validators. Compared with Packyard side by side, it
//! shows what of a small response's time is Packyard's own.

use std::collections::HashMap;

use actix_web::http::{header, StatusCode};
use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};

/// One path's answer as the target gave it.
#[derive(Clone)]
pub struct Recorded {
    pub headers: Vec<(String, String)>,
    pub body: actix_web::web::Bytes,
}

impl Recorded {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Headers the bare server leaves to actix-web (it frames the body itself).
const FRAMING: &[&str] = &["content-length", "transfer-encoding", "connection", "date", "keep-alive"];

/// Fetches each of `paths` (relative to `base`) with a `GET`: what the bare server will answer.
pub fn record(base: &str, paths: &[String]) -> anyhow::Result<HashMap<String, Recorded>> {
    let base = url::Url::parse(base)?;
    let mut out = HashMap::new();
    for p in paths {
        let u = base.join(p)?;
        let r = ureq::get(u.as_str()).call()?;
        anyhow::ensure!(r.status() == 200, "{u} answered {}", r.status());
        let headers = r
            .headers_names()
            .into_iter()
            .filter(|k| !FRAMING.contains(&k.to_ascii_lowercase().as_str()))
            .flat_map(|k| r.all(&k).into_iter().map(|v| (k.clone(), v.to_string())).collect::<Vec<_>>())
            .collect();
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut r.into_reader(), &mut body)?;
        out.insert(format!("/{}", p.trim_start_matches('/')), Recorded { headers, body: body.into() });
    }
    Ok(out)
}

fn not_modified(req: &HttpRequest, r: &Recorded) -> bool {
    let given = |h: header::HeaderName| req.headers().get(h).and_then(|v| v.to_str().ok());
    if let Some(tags) = given(header::IF_NONE_MATCH) {
        return r.header("etag").is_some_and(|etag| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    }
    match (given(header::IF_MODIFIED_SINCE), r.header("last-modified")) {
        (Some(since), Some(modified)) => since == modified,
        _ => false,
    }
}

async fn serve(req: HttpRequest, files: web::Data<HashMap<String, Recorded>>) -> HttpResponse {
    let Some(r) = files.get(req.path()) else { return HttpResponse::NotFound().finish() };
    if not_modified(&req, r) {
        let mut res = HttpResponse::build(StatusCode::NOT_MODIFIED);
        for (k, v) in r
            .headers
            .iter()
            .filter(|(k, _)| matches!(k.to_ascii_lowercase().as_str(), "etag" | "last-modified" | "cache-control"))
        {
            res.insert_header((k.as_str(), v.as_str()));
        }
        return res.finish();
    }
    let mut res = HttpResponse::Ok();
    for (k, v) in &r.headers {
        res.append_header((k.as_str(), v.as_str()));
    }
    // For a HEAD request actix-web sends the length a GET would have, without the body.
    res.body(r.body.clone())
}

/// Serves `files` on `bind` with `workers` threads until the process ends.
pub fn run(bind: &str, workers: usize, files: HashMap<String, Recorded>) -> anyhow::Result<()> {
    let files = web::Data::new(files);
    actix_web::rt::System::new().block_on(async move {
        HttpServer::new(move || App::new().app_data(files.clone()).default_service(web::to(serve)))
            .workers(workers.max(1))
            .bind(bind)?
            .run()
            .await
    })?;
    Ok(())
}
