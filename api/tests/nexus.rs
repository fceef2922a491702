//! Nexus's REST API under `/service/rest/v1`: the response shapes against the field names and
//! types Nexus documents (`tests/fixtures/nexus/`), what each caller may see, and the status
//! checks.

mod common;

use actix_web::http::StatusCode;
use actix_web::test::TestRequest;
use packyard_model::repos::Format;
use serde_json::{json, Value};

use common::app::{As, Repo, TestApp};

fn fixture(name: &str) -> anyhow::Result<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nexus").join(name);
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

/// The JSON type of a value, as the fixtures spell it.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `got` has exactly the fixture's fields, each of the fixture's type (nested objects that the
/// fixture spells out are compared too).
fn same_shape(got: &Value, want: &Value, at: &str) {
    let (Some(got), Some(want)) = (got.as_object(), want.as_object()) else {
        panic!("{at}: expected an object, got {got}");
    };
    let mut names: Vec<&String> = got.keys().collect();
    let mut wanted: Vec<&String> = want.keys().collect();
    names.sort();
    wanted.sort();
    assert_eq!(names, wanted, "{at}: field names");
    for (k, w) in want {
        let g = &got[k];
        let expected = if w.is_string() { w.as_str().unwrap_or_default() } else { kind(w) };
        assert_eq!(kind(g), expected, "{at}.{k}: {g}");
        if w.as_object().is_some_and(|o| !o.is_empty()) {
            same_shape(g, w, &format!("{at}.{k}"));
        }
    }
}

async fn some_repositories(app: &TestApp) -> anyhow::Result<()> {
    app.create(Repo::hosted("debs", Format::Apt)).await?;
    app.create(Repo::hosted("private", Format::Go).with(json!({"anonymous_read": false}))).await?;
    app.create(Repo::proxy("goproxy", Format::Go, "https://proxy.golang.org/")).await?;
    app.create(Repo::group("go", Format::Go, &["private", "goproxy"])).await?;
    Ok(())
}

fn names(listed: &Value) -> Vec<&str> {
    listed.as_array().map(|a| a.iter().filter_map(|r| r["name"].as_str()).collect()).unwrap_or_default()
}

async fn repositories_are_listed_as_nexus_lists_them(app: TestApp) -> anyhow::Result<()> {
    some_repositories(&app).await?;
    let r = app.send(TestRequest::get().uri("/service/rest/v1/repositories"), As::Admin).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(names(&r.json), ["debs", "go", "goproxy", "private"], "every repository, in name order");
    let want = fixture("repositories.json")?;
    for item in r.json.as_array().into_iter().flatten() {
        same_shape(item, &want["item"], &format!("repository {}", item["name"]));
    }
    let by_name = |n: &str| r.json.as_array().and_then(|a| a.iter().find(|i| i["name"] == n)).cloned();
    let debs = by_name("debs").unwrap_or_default();
    assert_eq!((debs["format"].as_str(), debs["type"].as_str()), (Some("apt"), Some("hosted")));
    let url = debs["url"].as_str().unwrap_or_default();
    assert!(url.starts_with("http://") && url.ends_with("/repository/debs"), "{url}");
    assert_eq!(debs["attributes"], json!({}));
    let proxy = by_name("goproxy").unwrap_or_default();
    assert_eq!(proxy["type"], "proxy");
    same_shape(&proxy["attributes"], &want["proxy_attributes"], "goproxy.attributes");
    assert_eq!(proxy["attributes"]["proxy"]["remoteUrl"], "https://proxy.golang.org/");
    assert_eq!(by_name("go").unwrap_or_default()["type"], "group");
    Ok(())
}
app_test!(repositories_are_listed_as_nexus_lists_them);

/// Anonymous callers see the anonymous-readable repositories; a user sees what their roles let
/// them read, as the repositories' routes decide it; a bad credential is a 401.
async fn each_caller_sees_what_it_may_read(app: TestApp) -> anyhow::Result<()> {
    some_repositories(&app).await?;
    let list = |who: As| app.send(TestRequest::get().uri("/service/rest/v1/repositories"), who);
    let r = list(As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(names(&r.json), ["debs", "go", "goproxy"], "anonymous: not the private repository");

    let role = json!({"name": "private-readers", "privileges": [{"repositories": "private", "actions": ["read"]}]});
    let r = app.call(TestRequest::post().uri("/api/v1/roles").set_json(&role)).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let user = json!({"username": "carol", "password": "carol-password", "roles": ["private-readers"]});
    let r = app.call(TestRequest::post().uri("/api/v1/users").set_json(&user)).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let carol = || As::Basic("carol".into(), "carol-password".into());
    let r = list(carol()).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(names(&r.json), ["private"], "a signed-in user reads what their roles name");
    // The list agrees with the repositories' own routes.
    let r = app.send(TestRequest::get().uri("/repository/debs/dists/stable/InRelease"), carol()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);

    // A repository closed to anonymous readers leaves the anonymous list.
    app.patch_repository("debs", json!({"anonymous_read": false})).await?;
    let r = list(As::Anonymous).await?;
    assert_eq!(names(&r.json), ["go", "goproxy"]);

    let r = list(As::Basic("carol".into(), "wrong".into())).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
    Ok(())
}
app_test!(each_caller_sees_what_it_may_read);

async fn status_answers_while_reads_and_writes_work(app: TestApp) -> anyhow::Result<()> {
    for path in ["/service/rest/v1/status", "/service/rest/v1/status/writable"] {
        let r = app.get(path).await?;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        assert!(r.bytes.is_empty(), "{path}: no body, as Nexus answers");
    }
    // A blob store that cannot be written to: still readable, no longer writable.
    let tmp = app.services.config.blobs.path.join("tmp");
    std::fs::remove_dir_all(&tmp)?;
    std::fs::write(&tmp, b"not a directory")?;
    let r = app.get("/service/rest/v1/status").await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let r = app.get("/service/rest/v1/status/writable").await?;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert!(r.text.starts_with("blob store: "), "{}", r.text);
    std::fs::remove_file(&tmp)?;
    std::fs::create_dir(&tmp)?;
    assert_eq!(app.get("/service/rest/v1/status/writable").await?.status, StatusCode::OK);

    let r = app.send(TestRequest::post().uri("/service/rest/v1/status"), As::Admin).await?;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED, "{}", r.text);
    let doc = app.get("/api/v1/openapi.json").await?;
    for path in ["/service/rest/v1/repositories", "/service/rest/v1/status", "/service/rest/v1/status/writable"] {
        assert!(doc.json["paths"][path]["get"].is_object(), "{path} is in the OpenAPI document");
    }
    Ok(())
}
app_test!(status_answers_while_reads_and_writes_work);
