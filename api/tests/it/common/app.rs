//! The test harness: a running app in-process on one backend, with repositories made from
//! typed builders, callers with credentials, an optional background worker, and the questions
//! tests ask of storage (how many blobs, which rows) answered in one place.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::rc::Rc;

use actix_web::body::BoxBody;
use actix_web::dev::ServiceResponse;
use actix_web::test::{self, TestRequest};
use packyard_core::services::Services;
use packyard_model::config::Config;
use packyard_store::db::publication::Due;
use packyard_store::db::Backend;
use packyard_store::testing::TestDb;
use serde_json::Value;

use super::Reply;

type Call = Rc<dyn Fn(actix_http::Request) -> Pin<Box<dyn Future<Output = ServiceResponse<BoxBody>>>>>;

pub use super::Repo;

/// Credentials a request is sent with.
#[derive(Debug, Clone)]
pub enum As {
    Admin,
    Anonymous,
    Basic(String, String),
    Bearer(String),
}

impl As {
    pub fn basic(user: &str, password: &str) -> Self {
        Self::Basic(user.into(), password.into())
    }
}

pub struct TestApp {
    pub t: Rc<TestDb>,
    pub services: Services,
    call: Call,
    worker: Rc<RefCell<Option<Worker>>>,
    unpublished_on_purpose: Rc<Cell<bool>>,
}

/// The background publisher [`TestApp::start_worker`] runs.
struct Worker {
    task: tokio::task::JoinHandle<()>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Worker {
    /// Lets the build in flight finish, then stops.
    async fn stop(self) -> anyhow::Result<()> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut task = self.task;
        match tokio::time::timeout(std::time::Duration::from_secs(60), &mut task).await {
            Ok(done) => Ok(done?),
            Err(_) => {
                task.abort();
                anyhow::bail!("the background worker did not stop within a minute")
            }
        }
    }
}

/// What the harness checks when a test has passed ([`TestApp::after_test`]): that the test left
/// no publication unit failed or pending. It keeps the database alive past the app.
pub struct AfterTest {
    t: Rc<TestDb>,
    services: Services,
    worker: Rc<RefCell<Option<Worker>>>,
    unpublished_on_purpose: Rc<Cell<bool>>,
}

impl Drop for AfterTest {
    fn drop(&mut self) {
        if let Some(w) = self.worker.borrow_mut().take() {
            w.task.abort();
        }
    }
}

impl AfterTest {
    /// Publishes what is due, as the worker would, then fails when a unit is still pending or
    /// its last build failed: a test that breaks a repository's publication says so.
    pub async fn check(self) -> anyhow::Result<()> {
        // The test has ended: its background worker finishes the build in flight and stops.
        let worker = self.worker.borrow_mut().take();
        if let Some(w) = worker {
            w.stop().await?;
        }
        if self.unpublished_on_purpose.get() {
            return Ok(());
        }
        publisher(&self.services).run_until_idle().await;
        let db = &self.t.db;
        let names: std::collections::HashMap<i64, String> =
            db.list_repositories().await?.into_iter().map(|r| (r.id, r.name.to_string())).collect();
        let mut left: Vec<String> = db
            .publication_summary()
            .await?
            .into_iter()
            .filter(|(_, s)| s.pending > 0 || s.failing > 0)
            .map(|(id, s)| {
                let name = names.get(&id).cloned().unwrap_or_else(|| format!("#{id}"));
                let error = s.last_error.unwrap_or_default();
                format!("{name}: {} pending, {} failing; last error: {error}", s.pending, s.failing)
            })
            .collect();
        left.sort();
        anyhow::ensure!(
            left.is_empty(),
            "the test left publication units unpublished (a test that means to calls \
             app.leaves_units_unpublished()):\n{}",
            left.join("\n")
        );
        Ok(())
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // Unless the harness's check stops it gracefully once the test has passed.
        if Rc::strong_count(&self.worker) == 1 {
            if let Some(w) = self.worker.borrow_mut().take() {
                w.task.abort();
            }
        }
    }
}

impl TestApp {
    /// The app on a fresh database of `backend`; `None` when that backend is not configured.
    pub async fn new(backend: Backend) -> anyhow::Result<Option<Self>> {
        Self::with_config(backend, |_| {}).await
    }

    /// The same, with the configuration adjusted first.
    pub async fn with_config(backend: Backend, tune: impl FnOnce(&mut Config)) -> anyhow::Result<Option<Self>> {
        let Some(t) = TestDb::fresh(backend).await? else { return Ok(None) };
        let t = Rc::new(t);
        let services = super::services_with(&t, tune).await?;
        let svc = Rc::new(test::init_service(packyard_api::app::public_app(services.clone())).await);
        let call: Call = Rc::new(move |req| {
            let svc = svc.clone();
            Box::pin(async move { test::call_service(&*svc, req).await.map_into_boxed_body() })
        });
        Ok(Some(Self { t, services, call, worker: Rc::default(), unpublished_on_purpose: Rc::default() }))
    }

    /// The check [`app_test!`] runs when the test has passed.
    pub fn after_test(&self) -> AfterTest {
        AfterTest {
            t: self.t.clone(),
            services: self.services.clone(),
            worker: self.worker.clone(),
            unpublished_on_purpose: self.unpublished_on_purpose.clone(),
        }
    }

    /// Ends a test that made its app itself (not through [`app_test!`]) with the same check.
    pub async fn finish(self) -> anyhow::Result<()> {
        let after = self.after_test();
        drop(self);
        after.check().await
    }

    /// Tells the harness that this test leaves publication units failed or pending on purpose
    /// (a build it makes fail for good), so that [`AfterTest::check`] lets it pass.
    pub fn leaves_units_unpublished(&self) {
        self.unpublished_on_purpose.set(true);
    }

    /// A user to sign in as, made through the admin API: `app.with_user("dave").can("*",
    /// &["read"]).create().await?` gives its credentials (password `<name>-password`), with a
    /// role of its own when it `can` something; `.token()` gives a bearer token of it instead.
    pub fn with_user<'a>(&'a self, name: &str) -> UserBuilder<'a> {
        UserBuilder { app: self, name: name.to_string(), roles: Vec::new(), privileges: Vec::new() }
    }

    /// Another replica on the same database and blob store: its own caches, its own counts of
    /// what it served.
    pub async fn replica(&self) -> anyhow::Result<Replica> {
        let config = (*self.services.config).clone();
        let blobs = std::sync::Arc::new(
            packyard_store::blobs::FileStore::open(&config.blobs.path, self.t.metrics.clone()).await?,
        );
        let services =
            Services::assemble(config, self.t.metrics.clone(), self.t.db.clone(), blobs, &self.services.secret)?;
        let svc = Rc::new(test::init_service(packyard_api::app::public_app(services.clone())).await);
        let call: Call = Rc::new(move |req| {
            let svc = svc.clone();
            Box::pin(async move { test::call_service(&*svc, req).await.map_into_boxed_body() })
        });
        Ok(Replica { services, call })
    }

    /// Publishes in the background from now on, as the embedded worker does (no debounce), so
    /// that uploads that wait for their publication return.
    pub fn start_worker(&mut self) {
        let s = self.services.clone();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                publisher(&s).run_until_idle().await;
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        });
        *self.worker.borrow_mut() = Some(Worker { task, stop });
    }

    /// Stops the background worker once the build in flight is done (so that nothing but the
    /// requests queries the database, and no unit is left leased).
    pub async fn stop_worker(&mut self) -> anyhow::Result<()> {
        let worker = self.worker.borrow_mut().take();
        match worker {
            Some(w) => w.stop().await,
            None => Ok(()),
        }
    }

    /// Publishes everything due now; returns how many units were published.
    pub async fn publish(&self) -> usize {
        publisher(&self.services).run_until_idle().await.len()
    }

    pub async fn send(&self, req: TestRequest, who: As) -> anyhow::Result<Reply> {
        let req = match who {
            As::Admin => req.insert_header(super::admin()),
            As::Anonymous => req,
            As::Basic(u, p) => req.insert_header(super::basic(&u, &p)),
            As::Bearer(token) => req.insert_header(super::bearer(&token)),
        };
        Ok(super::reply((self.call)(req.to_request()).await).await)
    }

    /// A request as the bootstrap administrator.
    pub async fn call(&self, req: TestRequest) -> anyhow::Result<Reply> {
        self.send(req, As::Admin).await
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Reply> {
        self.send(TestRequest::get().uri(path), As::Anonymous).await
    }

    pub async fn put(&self, path: &str, body: impl Into<actix_web::web::Bytes>) -> anyhow::Result<Reply> {
        self.call(TestRequest::put().uri(path).set_payload(body.into())).await
    }

    pub async fn post(&self, path: &str, body: impl Into<actix_web::web::Bytes>) -> anyhow::Result<Reply> {
        self.call(TestRequest::post().uri(path).set_payload(body.into())).await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Reply> {
        self.call(TestRequest::delete().uri(path)).await
    }

    /// Creates a repository; fails the test unless the API answers 201.
    pub async fn create(&self, repo: Repo) -> anyhow::Result<Value> {
        let r = self.call(TestRequest::post().uri("/api/v1/repositories").set_json(&repo.0)).await?;
        anyhow::ensure!(r.status == 201, "creating {}: {} {}", repo.0, r.status, r.text);
        Ok(r.json)
    }

    /// Changes a repository with a JSON merge patch; fails the test unless the API answers 200.
    pub async fn patch_repository(&self, name: &str, patch: Value) -> anyhow::Result<Value> {
        let r = self
            .call(
                TestRequest::patch()
                    .uri(&format!("/api/v1/repositories/{name}"))
                    .insert_header(("content-type", "application/merge-patch+json"))
                    .set_payload(patch.to_string()),
            )
            .await?;
        anyhow::ensure!(r.status == 200, "patching {name}: {} {}", r.status, r.text);
        Ok(r.json)
    }

    /// The files in the blob store.
    pub fn blob_files(&self) -> usize {
        fn walk(dir: &Path) -> usize {
            std::fs::read_dir(dir)
                .map(|rd| rd.filter_map(Result::ok).map(|e| if e.path().is_dir() { walk(&e.path()) } else { 1 }).sum())
                .unwrap_or(0)
        }
        walk(&self.services.config.blobs.path.join("sha256"))
    }

    /// Temporaries left in the blob store.
    pub fn blob_temporaries(&self) -> usize {
        std::fs::read_dir(self.services.config.blobs.path.join("tmp")).map(Iterator::count).unwrap_or(0)
    }

    /// Whether the database records a blob of these bytes.
    pub async fn has_blob_row(&self, bytes: &[u8]) -> anyhow::Result<bool> {
        use sha2::Digest as _;
        let digest = packyard_store::blobs::Sha256Hex::parse(&hex::encode(sha2::Sha256::digest(bytes)))?;
        Ok(self.services.db.blob(&digest).await?.is_some())
    }

    /// The newest audit entries' actions and targets, newest first.
    pub async fn audit(&self) -> anyhow::Result<Vec<(String, String)>> {
        let r = self.call(TestRequest::get().uri("/api/v1/audit?limit=20")).await?;
        anyhow::ensure!(r.status == 200, "audit: {}", r.text);
        Ok(r.json["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["action"].as_str().unwrap_or_default().to_string(),
                    e["target"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect())
    }
}

/// A user [`TestApp::with_user`] makes.
pub struct UserBuilder<'a> {
    app: &'a TestApp,
    name: String,
    roles: Vec<String>,
    privileges: Vec<Value>,
}

impl UserBuilder<'_> {
    /// Grants `actions` on the repositories `repositories` names (a name, a pattern or `*`).
    pub fn can(mut self, repositories: &str, actions: &[&str]) -> Self {
        self.privileges.push(serde_json::json!({"repositories": repositories, "actions": actions}));
        self
    }

    /// Gives the user an existing role.
    pub fn role(mut self, role: &str) -> Self {
        self.roles.push(role.to_string());
        self
    }

    /// Creates the user (and its own role, when it was granted privileges); returns its
    /// username and password as credentials.
    pub async fn create(mut self) -> anyhow::Result<As> {
        if !self.privileges.is_empty() {
            let role = format!("{}-role", self.name);
            let body = serde_json::json!({"name": role, "privileges": self.privileges});
            let r = self.app.call(TestRequest::post().uri("/api/v1/roles").set_json(&body)).await?;
            anyhow::ensure!(r.status == 201, "creating role {role}: {} {}", r.status, r.text);
            self.roles.push(role);
        }
        let password = format!("{}-password", self.name);
        let body = serde_json::json!({"username": self.name, "password": password, "roles": self.roles});
        let r = self.app.call(TestRequest::post().uri("/api/v1/users").set_json(&body)).await?;
        anyhow::ensure!(r.status == 201, "creating user {}: {} {}", self.name, r.status, r.text);
        Ok(As::Basic(self.name, password))
    }

    /// Creates the user and a token of theirs; returns the token as credentials.
    pub async fn token(self) -> anyhow::Result<As> {
        let app = self.app;
        let name = self.name.clone();
        let user = self.create().await?;
        let body = serde_json::json!({"name": format!("{name}-token")});
        let r = app.send(TestRequest::post().uri("/api/v1/tokens").set_json(&body), user).await?;
        anyhow::ensure!(r.status == 201, "creating a token for {name}: {} {}", r.status, r.text);
        let token = r.json["token"].as_str().ok_or_else(|| anyhow::anyhow!("no token in {}", r.text))?;
        Ok(As::Bearer(token.to_string()))
    }
}

/// A second replica of a [`TestApp`].
pub struct Replica {
    pub services: Services,
    call: Call,
}

impl Replica {
    /// An anonymous GET.
    pub async fn get(&self, path: &str) -> anyhow::Result<Reply> {
        self.send(TestRequest::get().uri(path)).await
    }

    /// An anonymous request.
    #[allow(dead_code)]
    pub async fn send(&self, req: TestRequest) -> anyhow::Result<Reply> {
        Ok(super::reply((self.call)(req.to_request()).await).await)
    }
}

fn publisher(s: &Services) -> packyard_worker::publisher::Publisher {
    packyard_worker::publisher::Publisher::new(s.clone(), packyard_worker::builders(s))
        .with_due(Due { debounce_ms: 0, max_delay_ms: 0 })
}

/// Declares `name::{sqlite,postgres,mysql}` tests that call `name(app)` with a fresh
/// [`TestApp`] of each backend (skipped with a note where a backend is not configured); with a
/// second argument, a function that adjusts the configuration first.
#[macro_export]
macro_rules! app_test {
    ($name:ident) => {
        app_test!($name, |_: &mut packyard_model::config::Config| {});
    };
    ($name:ident, $tune:expr) => {
        mod $name {
            async fn run(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
                #[allow(unused_imports)]
                use super::*;
                match $crate::common::app::TestApp::with_config(backend, $tune).await? {
                    Some(app) => {
                        let after = app.after_test();
                        super::$name(app).await?;
                        after.check().await
                    }
                    None => Ok(()),
                }
            }
            #[actix_web::test]
            async fn sqlite() -> anyhow::Result<()> {
                run(packyard_store::db::Backend::Sqlite).await
            }
            #[actix_web::test]
            async fn postgres() -> anyhow::Result<()> {
                run(packyard_store::db::Backend::Postgres).await
            }
            #[actix_web::test]
            async fn mysql() -> anyhow::Result<()> {
                run(packyard_store::db::Backend::MySql).await
            }
        }
    };
}
