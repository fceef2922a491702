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
    // `allow`: a different upload of a taken name and version replaces it (the selector must
    // cover what it replaces too).
    app.create(Repo::hosted("shared", Format::Apt).with(json!({"write_policy": "allow"}))).await?;
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
    // Two subscriptions to component events: team A's (narrowed by the selector) and everyone's.
    // Nothing listens at the URL: what matters is what each is given to deliver.
    for (name, selector) in [("team-a-events", json!("team-a")), ("all-events", Value::Null)] {
        let body = json!({"name": name, "url": "http://127.0.0.1:9/hook", "content_selector": selector,
            "events": ["component.published", "component.deleted"]});
        let r = app.call(TestRequest::post().uri("/api/v1/webhooks").set_json(&body)).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    }
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

    // Team A's deployer cannot replace team B's package by naming it from a source of its own
    // (its pool path would be team A's).
    let sneaky = deb(
        "Package: team-b-tool\nSource: team-a-sneaky\nVersion: 1.0\nArchitecture: amd64\nDescription: not B's\n",
        ".gz",
    );
    let r = upload(&app, deployer.clone(), sneaky.clone()).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
    assert!(r.text.contains("may not write team-b-tool 1.0 (/pool/main/t/team-b-tool/"), "{}", r.text);
    assert!(!app.has_blob_row(&sneaky).await?, "the refused replacement leaves no blob");
    assert_eq!(app.call(TestRequest::get().uri(&pool("team-b-tool"))).await?.bytes, theirs, "team B's is intact");

    // Webhooks: team A's subscription is told of team A's components only, everyone's of all;
    // the administrator's delete of team B's package goes to everyone's alone.
    let r = app.call(TestRequest::delete().uri(&pool("team-b-tool"))).await?;
    assert!(r.status.is_success(), "{}", r.text);
    let told = |name: &'static str| {
        let db = app.services.db.clone();
        async move {
            let hook = db.webhook(name).await?.ok_or_else(|| anyhow::anyhow!("no webhook {name}"))?;
            let mut out: Vec<String> = Vec::new();
            for d in db.list_deliveries(hook.id, None, 100).await? {
                let payload: Value = serde_json::from_str(&d.payload)?;
                out.push(format!("{} {}", d.event, payload["component"].as_str().unwrap_or_default()));
            }
            out.sort();
            anyhow::Ok(out)
        }
    };
    assert_eq!(
        told("team-a-events").await?,
        ["component.published example.com/team-a/tool@v1.0.0", "component.published team-a-tool_1.0_amd64"]
    );
    assert_eq!(
        told("all-events").await?,
        [
            "component.deleted team-b-tool_1.0_amd64",
            "component.published example.com/team-a/tool@v1.0.0",
            "component.published example.com/team-b/tool@v1.0.0",
            "component.published team-a-tool_1.0_amd64",
            "component.published team-b-tool_1.0_amd64"
        ]
    );
    assert_eq!(upload(&app, As::Admin, theirs.clone()).await?.status, StatusCode::CREATED);

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

    // A selector that leaves something out (`!`) sees the file however the URL spells the
    // repository's name (an extra slash, an escaped letter).
    let not_b = json!({"name": "not-team-b", "expression": r#"!(path =^ "/pool/main/t/team-b-")"#});
    assert_eq!(app.call(TestRequest::post().uri("/api/v1/content-selectors").set_json(&not_b)).await?.status, 201);
    let body = json!({"name": "all-but-b", "privileges": [
        {"repositories": "shared", "actions": ["read"], "content_selector": "not-team-b"}]});
    assert_eq!(app.call(TestRequest::post().uri("/api/v1/roles").set_json(&body)).await?.status, 201);
    let carol = app.with_user("carol").role("all-but-b").create().await?;
    let file = "pool/main/t/team-b-tool/team-b-tool_1.0_amd64.deb";
    for uri in [
        format!("/repository/shared/{file}"),
        format!("/repository//shared/{file}"),
        format!("/repository/%73hared/{file}"),
    ] {
        let r = app.send(TestRequest::get().uri(&uri), carol.clone()).await?;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{uri}: {}", r.text);
    }
    let r = app
        .send(TestRequest::get().uri("/repository//shared/pool/main/t/team-a-tool/team-a-tool_1.0_amd64.deb"), carol)
        .await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);

    // A changed selector reaches the decisions at once on this replica.
    let changed = json!({"expression": r#"path =^ "/pool/main/t/team-b-""#});
    let r = app.call(TestRequest::put().uri("/api/v1/content-selectors/team-a").set_json(&changed)).await?;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(app.send(TestRequest::get().uri(&pool("team-b-tool")), reader.clone()).await?.status, StatusCode::OK);
    assert_eq!(app.send(TestRequest::get().uri(&pool("team-a-tool")), reader).await?.status, StatusCode::FORBIDDEN);
    Ok(())
}
app_test!(a_selector_narrows_every_route, |c: &mut packyard_model::config::Config| c.webhooks.allowed_networks =
    vec!["127.0.0.1/32".into()]);

/// A web UI sign-in through the form: the session cookie.
pub(crate) async fn sign_in(app: &TestApp, user: &str, password: &str) -> anyhow::Result<String> {
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

/// The real clients as team B's reader: `apt-get update` and the download of team A's package
/// work, team B's package is refused (403); `go list` finds team A's module, not team B's.
fn real_clients_see_what_the_selector_allows(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    use crate::common::process::{basic, server_on, status_of};
    const PW: &str = "selectors-admin-pw";
    let Some((server, _dir)) = server_on(backend, &[("PACKYARD_SECURITY__ADMIN_PASSWORD", PW)])? else {
        return Ok(());
    };
    let public = server.public.clone();
    let admin = basic(PW);
    let post = |path: &str, body: Value| -> anyhow::Result<()> {
        let (s, text) = status_of(ureq::post(&format!("{public}{path}")).set("Authorization", &admin).send_json(body))?;
        anyhow::ensure!(s == 201, "{path}: {s} {text}");
        Ok(())
    };
    post("/api/v1/repositories", Repo::hosted("shared", Format::Apt).0)?;
    post("/api/v1/repositories", Repo::hosted("shared-go", Format::Go).0)?;
    post("/api/v1/content-selectors", json!({"name": "team-a", "expression": TEAM_A}))?;
    post(
        "/api/v1/roles",
        json!({"name": "team-b-readers", "privileges": [
            {"repositories": "shared*", "actions": ["read"], "content_selector": "team-a"}]}),
    )?;
    post("/api/v1/users", json!({"username": "bob", "password": "bob-password", "roles": ["team-b-readers"]}))?;
    for name in ["team-a-tool", "team-b-tool"] {
        let (s, text) = status_of(
            ureq::post(&format!("{public}/repository/shared/?wait=true"))
                .set("Authorization", &admin)
                .send_bytes(&tool(name)),
        )?;
        assert_eq!(s, 201, "{text}");
    }
    for module in ["example.com/team-a/tool", "example.com/team-b/tool"] {
        let zip = simple_module(module, "v1.0.0", "tool", 0)?;
        let (s, text) = status_of(
            ureq::put(&format!("{public}/repository/shared-go/{module}/@v/v1.0.0.zip?wait=true"))
                .set("Authorization", &admin)
                .send_bytes(&zip),
        )?;
        assert_eq!(s, 201, "{text}");
    }

    // apt-get, with bob's credentials in an auth.conf.
    let (_, key) = crate::common::process::get_bytes(&server, "/repository/shared/gpg.key")?;
    let root = crate::common::apt::scratch(&key, |k| {
        format!("deb [signed-by={} arch=amd64] {public}/repository/shared stable main", k.display())
    })?;
    let auth = root.path().join("auth.conf");
    std::fs::write(&auth, format!("machine {public}/repository/shared login bob password bob-password\n"))?;
    let netrc = format!("Dir::Etc::netrc={}", auth.display());
    let run = |args: &[&str]| -> anyhow::Result<(bool, String)> {
        let mut all = vec!["-o", netrc.as_str()];
        all.extend_from_slice(args);
        let out = crate::common::apt::tool("apt-get", root.path(), &all)?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        Ok((out.status.success() && !text.contains("W: ") && !text.contains("E: "), text))
    };
    let (ok, text) = run(&["update"])?;
    assert!(ok, "{text}");
    let (ok, text) = run(&["download", "team-a-tool"])?;
    assert!(ok, "{text}");
    let got = std::fs::read(root.path().join("downloads/team-a-tool_1.0_amd64.deb"))?;
    assert_eq!(got, tool("team-a-tool"), "apt-get got the bytes uploaded");
    let (ok, text) = run(&["download", "team-b-tool"])?;
    assert!(!ok && text.contains("403"), "team B's package is refused: {text}");
    assert!(!root.path().join("downloads/team-b-tool_1.0_amd64.deb").exists());

    // go list. The go command sends no credentials over plain http (tls.rs has it sign in over
    // https), so here anonymous callers read through the same selector: the anonymous role's
    // privilege narrowed to it.
    let (s, text) = status_of(
        ureq::put(&format!("{public}/api/v1/roles/anonymous")).set("Authorization", &admin).send_json(json!({
            "privileges": [{"repositories": "shared*", "actions": ["read"], "content_selector": "team-a"}]})),
    )?;
    assert_eq!(s, 200, "{text}");
    if crate::common::process::available("go", "version") {
        let home = tempfile::tempdir()?;
        let work = tempfile::tempdir()?;
        let proxy = format!("{public}/repository/shared-go");
        let list = |module: &str| -> anyhow::Result<(bool, String, String)> {
            let out =
                crate::common::golang::command(work.path(), home.path(), &proxy, &["list", "-m", "-versions", module])
                    .output()?;
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            Ok((out.status.success(), stdout.trim().to_string(), stderr.into_owned()))
        };
        let (ok, listed, said) = list("example.com/team-a/tool")?;
        assert!(ok, "{said}");
        assert_eq!(listed, "example.com/team-a/tool v1.0.0");
        let (ok, _, said) = list("example.com/team-b/tool")?;
        assert!(!ok && said.contains("401"), "team B's module is refused: {said}");
    }
    assert!(server.terminate()?.success());
    Ok(())
}

#[test]
fn real_clients_see_what_the_selector_allows_on_sqlite() -> anyhow::Result<()> {
    real_clients_see_what_the_selector_allows(packyard_store::db::Backend::Sqlite)
}

#[test]
fn real_clients_see_what_the_selector_allows_on_postgres() -> anyhow::Result<()> {
    real_clients_see_what_the_selector_allows(packyard_store::db::Backend::Postgres)
}

#[test]
fn real_clients_see_what_the_selector_allows_on_mariadb() -> anyhow::Result<()> {
    real_clients_see_what_the_selector_allows(packyard_store::db::Backend::MySql)
}
