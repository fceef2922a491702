//! Content selectors (#43): a privilege narrowed to what a CSEL expression selects — uploads,
//! reads, deletes, the Nexus API, the web UI and the preview; the real `apt-get` and `go`
//! clients seeing only what a reader's selector allows; a warmed decision without a query.

use actix_web::http::{header, StatusCode};
use actix_web::test::TestRequest;
use packyard_codecs::apt::testing::deb;
use packyard_codecs::go::testing::simple_module;
use packyard_model::repos::Format;
use serde_json::{json, Value};

use crate::common::app::{As, Repo, TestApp};

/// Team A's content in the shared repositories: its APT packages (and the indexes apt needs
/// to find them) and its Go modules.
pub const TEAM_A: &str = r#"(format == "apt" and (path =^ "/dists/" or path =^ "/pool/main/t/team-a-")) or (format == "go" and path =^ "/example.com/team-a/")"#;

fn tool(name: &str) -> Vec<u8> {
    deb(&format!("Package: {name}\nVersion: 1.0\nArchitecture: amd64\nDescription: {name}\n"), ".gz")
}

fn pool(name: &str) -> String {
    format!("/repository/shared/pool/main/t/{name}/{name}_1.0_amd64.deb")
}

/// The repositories, the selector and two users: team A's deployer (read and write through
/// the selector) and team B's reader (read through it).
async fn teams(app: &TestApp) -> anyhow::Result<(As, As)> {
    app.create(Repo::hosted("shared", Format::Apt)).await?;
    app.create(Repo::hosted("shared-go", Format::Go)).await?;
    let r = app
        .call(
            TestRequest::post()
                .uri("/api/v1/content-selectors")
                .set_json(json!({"name": "team-a", "expression": TEAM_A})),
        )
        .await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    assert_eq!(r.json["expression"], TEAM_A);
    for (role, actions) in [("team-a-deployers", json!(["read", "add", "edit"])), ("team-b-readers", json!(["browse"]))]
    {
        let body = json!({"name": role, "privileges": [
            {"repositories": "shared*", "actions": actions, "content_selector": "team-a"}]});
        let r = app.call(TestRequest::post().uri("/api/v1/roles").set_json(&body)).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
    let deployer = app.with_user("alice").role("team-a-deployers").create().await?;
    let reader = app.with_user("bob").role("team-b-readers").create().await?;
    Ok((deployer, reader))
}

async fn upload(app: &TestApp, who: As, bytes: Vec<u8>) -> anyhow::Result<crate::common::Reply> {
    app.send(TestRequest::post().uri("/repository/shared/?wait=true").set_payload(bytes), who).await
}

fn names(v: &Value) -> Vec<String> {
    let mut out: Vec<String> =
        v["items"].as_array().into_iter().flatten().filter_map(|c| c["name"].as_str().map(String::from)).collect();
    out.sort();
    out
}

/// Definitions: errors name the column; a role naming a selector that does not exist and the
/// delete of a selector a role uses are refused.
async fn selectors_are_defined_with_their_errors_shown(app: TestApp) -> anyhow::Result<()> {
    teams(&app).await?;
    let bad = json!({"name": "broken", "expression": r#"format == "apt" and path =^ pool"#});
    let r = app.call(TestRequest::post().uri("/api/v1/content-selectors").set_json(&bad)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("column 29") && r.text.contains("expected a quoted string"), "{}", r.text);
    let role = json!({"name": "nobody", "privileges": [
        {"repositories": "shared", "actions": ["read"], "content_selector": "missing"}]});
    let r = app.call(TestRequest::post().uri("/api/v1/roles").set_json(&role)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
    assert!(r.text.contains("content selector missing does not exist"), "{}", r.text);
    let r = app.call(TestRequest::delete().uri("/api/v1/content-selectors/team-a")).await?;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text);
    assert!(r.text.contains("team-a-deployers") && r.text.contains("team-b-readers"), "{}", r.text);
    // Nexus's API lists it in its own shape, and shows the narrowed privilege by name.
    let r = app.call(TestRequest::get().uri("/service/rest/v1/security/content-selectors")).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json[0]["name"], "team-a");
    assert_eq!(r.json[0]["type"], "csel");
    let r = app.call(TestRequest::get().uri("/service/rest/v1/security/roles/team-b-readers")).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let privileges: Vec<&str> =
        r.json["privileges"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    assert_eq!(
        privileges,
        ["packyard-content-selector-team-a@shared*-read", "packyard-content-selector-team-a@shared*-browse"]
    );
    let audit = app.audit().await?;
    assert!(audit.contains(&("content_selector.create".into(), "team-a".into())), "{audit:?}");
    Ok(())
}
app_test!(selectors_are_defined_with_their_errors_shown);

/// Team A's deployer uploads team A's package and module, not team B's (403 naming the
/// selector, nothing stored); team B's reader reads, lists and finds only team A's, in the
/// format routes, the Nexus API and the web UI; the preview lists what the selector selects; a
/// warmed decision runs no query.
async fn a_selector_narrows_every_route(mut app: TestApp) -> anyhow::Result<()> {
    app.start_worker();
    let (deployer, reader) = teams(&app).await?;
    let r = upload(&app, deployer.clone(), tool("team-a-tool")).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    let theirs = tool("team-b-tool");
    let r = upload(&app, deployer.clone(), theirs.clone()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert!(
        r.text.contains("user alice may not write team-b-tool 1.0")
            && r.text.contains("limited to content selector(s) team-a"),
        "{}",
        r.text
    );
    assert!(!app.has_blob_row(&theirs).await?, "a refused upload leaves no blob");
    let r = app.send(TestRequest::delete().uri(&pool("team-a-tool")), deployer.clone()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "the deployer may not delete: {}", r.text);
    // Go: the path of the module decides.
    for (module, status) in
        [("example.com/team-a/tool", StatusCode::CREATED), ("example.com/team-b/tool", StatusCode::FORBIDDEN)]
    {
        let zip = simple_module(module, "v1.0.0", "tool", 0)?;
        let uri = format!("/repository/shared-go/{module}/@v/v1.0.0.zip?wait=true");
        let r = app.send(TestRequest::put().uri(&uri).set_payload(zip), deployer.clone()).await?;
        assert_eq!(r.status, status, "{module}: {}", r.text);
    }
    // The administrator uploads team B's (the reader must not see it).
    assert_eq!(upload(&app, As::Admin, theirs.clone()).await?.status, StatusCode::CREATED);
    let zip = simple_module("example.com/team-b/tool", "v1.0.0", "tool", 0)?;
    let r = app.put("/repository/shared-go/example.com/team-b/tool/@v/v1.0.0.zip?wait=true", zip).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);

    // Format routes.
    for (path, status) in [
        (pool("team-a-tool"), StatusCode::OK),
        (pool("team-b-tool"), StatusCode::FORBIDDEN),
        ("/repository/shared/dists/stable/Release".into(), StatusCode::OK),
        ("/repository/shared-go/example.com/team-a/tool/@v/list".into(), StatusCode::OK),
        ("/repository/shared-go/example.com/team-b/tool/@v/list".into(), StatusCode::FORBIDDEN),
        ("/repository/shared-go/example.com/team-b/tool/@v/v1.0.0.zip".into(), StatusCode::FORBIDDEN),
        ("/repository/shared/-/export/manifest".into(), StatusCode::FORBIDDEN),
    ] {
        let r = app.send(TestRequest::get().uri(&path), reader.clone()).await?;
        assert_eq!(r.status, status, "{path}: {}", r.text);
        if status == StatusCode::FORBIDDEN {
            assert!(r.text.contains("user bob may not read") && r.text.contains("team-a"), "{path}: {}", r.text);
        }
    }
    assert_eq!(
        app.send(TestRequest::get().uri(&pool("team-a-tool")), reader.clone()).await?.bytes,
        tool("team-a-tool")
    );

    // Nexus's API: search, the repository's components and assets, by id.
    let r = app.send(TestRequest::get().uri("/service/rest/v1/search?repository=shared"), reader.clone()).await?;
    assert_eq!(names(&r.json), ["team-a-tool"], "{}", r.text);
    let r = app.call(TestRequest::get().uri("/service/rest/v1/search?repository=shared")).await?;
    assert_eq!(names(&r.json), ["team-a-tool", "team-b-tool"], "the administrator sees both: {}", r.text);
    let hidden = r.json["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "team-b-tool")
        .and_then(|c| c["id"].as_str())
        .unwrap_or_default()
        .to_string();
    let r = app.send(TestRequest::get().uri(&format!("/service/rest/v1/components/{hidden}")), reader.clone()).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text);
    let r =
        app.send(TestRequest::get().uri("/service/rest/v1/components?repository=shared-go"), reader.clone()).await?;
    assert_eq!(names(&r.json), ["tool"], "{}", r.text);
    assert_eq!(r.json["items"][0]["group"], "example.com/team-a", "{}", r.text);
    let r = app.send(TestRequest::get().uri("/service/rest/v1/assets?repository=shared"), reader.clone()).await?;
    let paths: Vec<&str> =
        r.json["items"].as_array().into_iter().flatten().filter_map(|a| a["path"].as_str()).collect();
    assert_eq!(paths, ["pool/main/t/team-a-tool/team-a-tool_1.0_amd64.deb"], "{}", r.text);

    // The web UI, signed in as the reader: search, the repository's page and its files.
    let session = sign_in(&app, "bob", "bob-password").await?;
    let page =
        |uri: &str| TestRequest::get().uri(uri).insert_header((header::COOKIE, format!("packyard_session={session}")));
    for uri in ["/search?q=tool", "/browse/shared", "/browse/shared/files/pool/main/t/"] {
        let r = app.send(page(uri), As::Anonymous).await?;
        assert_eq!(r.status, StatusCode::OK, "{uri}: {}", r.text);
        assert!(r.text.contains("team-a-tool"), "{uri}: {}", r.text);
        assert!(!r.text.contains("team-b-tool"), "{uri} shows what the selector leaves out: {}", r.text);
    }

    // The preview: what the selector selects in each repository.
    let r = app
        .call(
            TestRequest::post()
                .uri("/api/v1/content-selectors/preview")
                .set_json(json!({"name": "team-a", "repository": "shared"})),
        )
        .await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["components"], 2);
    assert_eq!(names(&json!({"items": r.json["selected"]})), ["team-a-tool"], "{}", r.text);
    assert_eq!(r.json["selected"][0]["paths"], json!(["/pool/main/t/team-a-tool/team-a-tool_1.0_amd64.deb"]));
    let r = app
        .call(TestRequest::post().uri("/api/v1/content-selectors/preview").set_json(
            json!({"expression": r#"format == "go" and group =^ "example.com/team-b""#, "repository": "shared-go"}),
        ))
        .await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json["selected"][0]["group"], "example.com/team-b", "{}", r.text);
    assert_eq!(r.json["selected"].as_array().map(Vec::len), Some(1), "{}", r.text);

    // A warmed decision, allowed or refused, runs no query.
    let reads = [(pool("team-a-tool"), StatusCode::OK), (pool("team-b-tool"), StatusCode::FORBIDDEN)];
    for (path, status) in &reads {
        assert_eq!(app.send(TestRequest::get().uri(path), reader.clone()).await?.status, *status);
    }
    let before = app.t.metrics.db_queries();
    for _ in 0..3 {
        for (path, status) in &reads {
            assert_eq!(app.send(TestRequest::get().uri(path), reader.clone()).await?.status, *status, "{path}");
        }
    }
    assert_eq!(app.t.metrics.db_queries() - before, 0, "warmed selector decisions ran database queries");

    // A changed selector reaches the decisions at once on this replica.
    let changed = json!({"expression": r#"path =^ "/pool/main/t/team-b-""#});
    let r = app.call(TestRequest::put().uri("/api/v1/content-selectors/team-a").set_json(&changed)).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(app.send(TestRequest::get().uri(&pool("team-b-tool")), reader.clone()).await?.status, StatusCode::OK);
    assert_eq!(app.send(TestRequest::get().uri(&pool("team-a-tool")), reader).await?.status, StatusCode::FORBIDDEN);
    Ok(())
}
app_test!(a_selector_narrows_every_route);

/// A web UI sign-in through the form: the session cookie.
async fn sign_in(app: &TestApp, user: &str, password: &str) -> anyhow::Result<String> {
    let cookie = |r: &crate::common::Reply, name: &str| {
        r.headers.get_all(header::SET_COOKIE).filter_map(|v| v.to_str().ok()).find_map(|v| {
            let (pair, _) = v.split_once(';').unwrap_or((v, ""));
            let (n, value) = pair.split_once('=')?;
            (n == name && !value.is_empty()).then(|| value.to_string())
        })
    };
    let form = app.send(TestRequest::get().uri("/signin"), As::Anonymous).await?;
    let anchor = cookie(&form, "packyard_csrf").ok_or_else(|| anyhow::anyhow!("no CSRF cookie"))?;
    let at = form.text.find("name=\"csrf\" value=\"").ok_or_else(|| anyhow::anyhow!("no CSRF field"))?;
    let rest = &form.text[at + "name=\"csrf\" value=\"".len()..];
    let csrf = &rest[..rest.find('"').unwrap_or(rest.len())];
    let r = app
        .send(
            TestRequest::post()
                .uri("/signin")
                .insert_header((header::COOKIE, format!("packyard_csrf={anchor}")))
                .set_form([("csrf", csrf), ("username", user), ("password", password), ("next", "/")]),
            As::Anonymous,
        )
        .await?;
    anyhow::ensure!(r.status == StatusCode::SEE_OTHER, "sign-in: {} {}", r.status, r.text);
    cookie(&r, "packyard_session").ok_or_else(|| anyhow::anyhow!("no session cookie"))
}
