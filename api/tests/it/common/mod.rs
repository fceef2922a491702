//! Helpers shared by the in-process API tests.
#![allow(dead_code)]

#[macro_use]
pub mod app;
pub mod apt;
pub mod archive;
pub mod broker;
pub mod chaos;
pub mod golang;
pub mod process;
pub mod webdriver;

/// A repository definition for the admin API, built by format and type.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(transparent)]
pub struct Repo(pub serde_json::Value);

impl Repo {
    pub fn hosted(name: &str, format: packyard_model::repos::Format) -> Self {
        Self(serde_json::json!({"name": name, "format": format.as_str(), "type": "hosted", "anonymous_read": true}))
    }

    pub fn proxy(name: &str, format: packyard_model::repos::Format, remote_url: &str) -> Self {
        Self(serde_json::json!({"name": name, "format": format.as_str(), "type": "proxy", "anonymous_read": true,
            "proxy": {"remote_url": remote_url}}))
    }

    pub fn group(name: &str, format: packyard_model::repos::Format, members: &[&str]) -> Self {
        Self(serde_json::json!({"name": name, "format": format.as_str(), "type": "group", "anonymous_read": true,
            "group": {"members": members}}))
    }

    /// Merges `fields` into the definition (a JSON merge patch).
    pub fn with(mut self, fields: serde_json::Value) -> Self {
        packyard_model::repos::merge_patch(&mut self.0, &fields);
        self
    }
}

impl From<Repo> for serde_json::Value {
    fn from(repo: Repo) -> Self {
        repo.0
    }
}

/// Declares `name::{sqlite,postgres,mysql}` actix tests that call `name(backend)`.
#[macro_export]
macro_rules! on_every_backend {
    ($name:ident) => {
        mod $name {
            #[actix_web::test]
            async fn sqlite() -> anyhow::Result<()> {
                super::$name(packyard_store::db::Backend::Sqlite).await
            }
            #[actix_web::test]
            async fn postgres() -> anyhow::Result<()> {
                super::$name(packyard_store::db::Backend::Postgres).await
            }
            #[actix_web::test]
            async fn mysql() -> anyhow::Result<()> {
                super::$name(packyard_store::db::Backend::MySql).await
            }
        }
    };
}

use std::sync::Arc;

use actix_web::http::{header, StatusCode};
use actix_web::test::{self, TestRequest};
use base64::Engine;
use packyard_core::auth::bootstrap_admin;
use packyard_core::services::Services;
use packyard_model::config::Config;
use packyard_store::blobs::FileStore;
use packyard_store::testing::TestDb;
use serde_json::Value;

pub const ADMIN_PW: &str = "correct horse battery staple";

/// Services on the test database, with built-in roles and the bootstrap admin; `tune` may
/// adjust the configuration first.
pub async fn services_with(t: &TestDb, tune: impl FnOnce(&mut Config)) -> anyhow::Result<Services> {
    let mut config = Config::default();
    config.database.url = t.url.clone();
    config.server.data_dir = t.dir.path().join("data");
    config.blobs.path = t.dir.path().join("blobs");
    tune(&mut config);
    let blobs: Arc<dyn packyard_store::blobs::BlobStore> = match config.blobs.kind {
        packyard_model::config::BlobsKind::File => {
            Arc::new(FileStore::open(&config.blobs.path, t.metrics.clone()).await?)
        }
        packyard_model::config::BlobsKind::S3 => {
            Arc::new(packyard_store::blobs::s3::S3Store::open(&config.blobs.s3, t.metrics.clone())?)
        }
    };
    // A test that tunes the pool's time-outs gets a pool of its own with them (the test
    // database's is made with the defaults).
    let defaults = packyard_model::config::DatabaseConfig::default();
    let d = &config.database;
    let tuned = (d.statement_timeout_ms, d.busy_timeout_ms, d.acquire_timeout_ms)
        != (defaults.statement_timeout_ms, defaults.busy_timeout_ms, defaults.acquire_timeout_ms);
    let db = if tuned {
        let cfg = packyard_model::config::DatabaseConfig { max_connections: 4, ..d.clone() };
        packyard_store::db::Db::connect(&cfg, t.metrics.clone()).await?
    } else {
        t.db.clone()
    };
    let services = Services::assemble(config, t.metrics.clone(), db, blobs, "0123456789abcdef0123456789abcdef")?;
    services.security.ensure_builtin_roles().await?;
    bootstrap_admin(&t.db, Some(ADMIN_PW), &services.config.server.data_dir).await?;
    Ok(services)
}

pub async fn services(t: &TestDb) -> anyhow::Result<Services> {
    services_with(t, |_| {}).await
}

pub fn basic(user: &str, pw: &str) -> (header::HeaderName, String) {
    let enc = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"));
    (header::AUTHORIZATION, format!("Basic {enc}"))
}

pub fn bearer(token: &str) -> (header::HeaderName, String) {
    (header::AUTHORIZATION, format!("Bearer {token}"))
}

pub fn admin() -> (header::HeaderName, String) {
    basic("admin", ADMIN_PW)
}

pub struct Reply {
    pub status: StatusCode,
    pub json: Value,
    pub text: String,
    pub headers: header::HeaderMap,
    pub bytes: Vec<u8>,
}

/// Status, headers, and the body as text and (when it parses) JSON.
pub async fn call<S, B>(app: &S, req: TestRequest) -> anyhow::Result<Reply>
where
    S: actix_web::dev::Service<
        actix_http::Request,
        Response = actix_web::dev::ServiceResponse<B>,
        Error = actix_web::Error,
    >,
    B: actix_web::body::MessageBody,
{
    Ok(reply(test::call_service(app, req.to_request()).await).await)
}

/// A service's answer, read whole.
pub async fn reply<B: actix_web::body::MessageBody>(res: actix_web::dev::ServiceResponse<B>) -> Reply {
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = test::read_body(res).await;
    let text = String::from_utf8_lossy(&bytes).to_string();
    let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply { status, json, text, headers, bytes: bytes.to_vec() }
}

pub fn error_of(body: &Value) -> (&str, &str) {
    (body["error"]["code"].as_str().unwrap_or("<none>"), body["error"]["message"].as_str().unwrap_or("<none>"))
}

/// The MD5 of `bytes`, in hex, as Nexus's asset checksums give it.
pub fn md5_hex(bytes: &[u8]) -> String {
    hex::encode(<md5::Md5 as md5::Digest>::digest(bytes))
}
