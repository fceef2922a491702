//! The admin API in-process, on SQLite, PostgreSQL and MariaDB, one behaviour per test.

use crate::common;

use actix_web::http::{header, StatusCode};
use actix_web::test::{self, TestRequest};
use common::app::{As, Repo, TestApp};
use common::{admin, error_of, services, Reply};
use packyard_core::auth::hash_password;
use packyard_model::repos::Format;
use packyard_store::db::Backend;
use packyard_store::testing::TestDb;
use serde_json::{json, Value};

async fn call<S, B>(app: &S, req: TestRequest) -> anyhow::Result<(StatusCode, Value, header::HeaderMap)>
where
    S: actix_web::dev::Service<
        actix_http::Request,
        Response = actix_web::dev::ServiceResponse<B>,
        Error = actix_web::Error,
    >,
    B: actix_web::body::MessageBody,
{
    let Reply { status, json, headers, .. } = common::call(app, req).await?;
    Ok((status, json, headers))
}

fn list() -> TestRequest {
    TestRequest::get().uri("/api/v1/repositories")
}

fn create(body: &Value) -> TestRequest {
    TestRequest::post().uri("/api/v1/repositories").set_json(body)
}

/// `debs` (APT), `go-a` and `go-b` (Go, hosted) and the group `go-all` over them.
async fn some_repositories(app: &TestApp) -> anyhow::Result<()> {
    let apt =
        json!({"apt": {"distribution": "stable", "components": ["main"], "architectures": ["amd64", "arm64", "all"]}});
    app.create(Repo::hosted("debs", Format::Apt).with(apt)).await?;
    for name in ["go-a", "go-b"] {
        app.create(Repo::hosted(name, Format::Go)).await?;
    }
    app.create(Repo::group("go-all", Format::Go, &["go-b", "go-a"])).await?;
    Ok(())
}

async fn only_administrators_use_the_admin_api(app: TestApp) -> anyhow::Result<()> {
    let r = app.send(list(), As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.headers.get(header::WWW_AUTHENTICATE).map(|v| v.as_bytes()), Some(&b"Basic realm=\"packyard\""[..]));
    assert_eq!(error_of(&r.json), ("unauthorized", "authentication required"));
    let r = app.send(list(), As::Basic("admin".into(), "wrong".into())).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(error_of(&r.json), ("unauthorized", "invalid username or password"));
    let r = app.send(list(), As::Basic("nobody".into(), "x".into())).await?;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    app.t.db.create_user("alice", &hash_password("alice-pw")?, &[]).await?;
    let r = app.send(list(), As::Basic("alice".into(), "alice-pw".into())).await?;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(error_of(&r.json), ("forbidden", "user alice may not use the admin API"));
    Ok(())
}
app_test!(only_administrators_use_the_admin_api);

async fn repositories_are_created_read_and_listed(app: TestApp) -> anyhow::Result<()> {
    let r = app
        .call(create(&json!({
            "name": "debs", "format": "apt", "type": "hosted",
            "apt": {"distribution": "stable", "components": ["main"], "architectures": ["amd64", "arm64", "all"]}
        })))
        .await?;
    let (s, b, h) = (r.status, r.json, r.headers);
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(h.get(header::LOCATION).map(|v| v.as_bytes()), Some(&b"/api/v1/repositories/debs"[..]));
    assert!(h.contains_key("x-request-id"));
    assert_eq!(b["name"], "debs");
    assert_eq!(b["format"], "apt");
    assert_eq!(b["type"], "hosted");
    assert_eq!(b["url"], "/repository/debs/");
    assert_eq!(b["write_policy"], "allow_once");
    assert_eq!(b["anonymous_read"], true);
    assert_eq!(b["apt"]["architectures"], json!(["amd64", "arm64", "all"]));
    assert!(b.get("proxy").is_none() && b.get("group").is_none());

    let r = app.call(create(&json!({"name": "debs", "format": "apt", "type": "hosted"}))).await?;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(error_of(&r.json), ("conflict", "repository debs already exists"));

    for name in ["go-a", "go-b"] {
        let r = app.call(create(&json!({"name": name, "format": "go", "type": "hosted"}))).await?;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    }
    let group = json!({"name": "go-all", "format": "go", "type": "group", "group": {"members": ["go-b", "go-a"]}});
    let r = app.call(create(&group)).await?;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.json);
    assert_eq!(r.json["group"]["members"], json!(["go-b", "go-a"]));

    let r = app.call(list()).await?;
    assert_eq!(r.status, StatusCode::OK);
    let names: Vec<&str> =
        r.json.as_array().map(|a| a.iter().filter_map(|r| r["name"].as_str()).collect()).unwrap_or_default();
    assert_eq!(names, vec!["debs", "go-a", "go-all", "go-b"]);

    let r = app.call(TestRequest::get().uri("/api/v1/repositories/go-all")).await?;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["type"], "group");
    Ok(())
}
app_test!(repositories_are_created_read_and_listed);

/// Validation: each a 400 with a message a person can act on.
async fn invalid_definitions_say_why(app: TestApp) -> anyhow::Result<()> {
    some_repositories(&app).await?;
    let cases = [
        (
            json!({"name": "bad name", "format": "go", "type": "hosted"}),
            "invalid_repository",
            "invalid repository name \"bad name\"",
        ),
        (
            json!({"name": "p", "format": "go", "type": "proxy", "proxy": {"remote_url": "file:///etc"}}),
            "invalid_repository",
            "proxy.remote_url must use http or https, not \"file\"",
        ),
        (
            json!({"name": "g", "format": "go", "type": "group", "group": {"members": ["debs"]}}),
            "invalid_repository",
            "group member debs is a apt repository",
        ),
        (
            json!({"name": "g", "format": "go", "type": "group", "group": {"members": ["ghost"]}}),
            "invalid_repository",
            "group member ghost does not exist",
        ),
        (json!({"name": "x", "format": "npm", "type": "hosted"}), "bad_request", "unknown variant `npm`"),
        (
            json!({"name": "x", "format": "go", "type": "hosted", "colour": "red"}),
            "bad_request",
            "unknown field `colour`",
        ),
        (json!({"name": "x", "format": "go"}), "bad_request", "missing field `type`"),
    ];
    for (body, code, needle) in cases {
        let r = app.call(create(&body)).await?;
        let b = r.json;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body} → {b}");
        let (c, m) = error_of(&b);
        assert_eq!(c, code, "{body} → {b}");
        assert!(m.contains(needle), "{body}: {m:?} lacks {needle:?}");
    }
    let r = app
        .call(
            TestRequest::post()
                .uri("/api/v1/repositories")
                .insert_header((header::CONTENT_TYPE, "application/json"))
                .set_payload("{\"name\":"),
        )
        .await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(error_of(&r.json).1.starts_with("invalid JSON body: EOF while parsing"), "{}", r.json);
    let r = app
        .call(
            TestRequest::post()
                .uri("/api/v1/repositories")
                .insert_header((header::CONTENT_TYPE, "text/plain"))
                .set_payload("{}"),
        )
        .await?;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(error_of(&r.json).0, "unsupported_media_type");
    let big = json!({"name": "x".repeat(2 << 20), "format": "go", "type": "hosted"});
    let r = app.call(create(&big)).await?;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error_of(&r.json).0, "payload_too_large");
    Ok(())
}
app_test!(invalid_definitions_say_why);

/// Path and routing errors keep the JSON shape.
async fn path_and_routing_errors_keep_the_json_shape(app: TestApp) -> anyhow::Result<()> {
    some_repositories(&app).await?;
    let r = app.call(TestRequest::get().uri("/api/v1/repositories/a%2Fb")).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    assert!(error_of(&r.json).1.contains("invalid repository name \"a/b\""), "{}", r.json);
    let r = app.call(TestRequest::get().uri("/api/v1/repositories/nope")).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(error_of(&r.json), ("not_found", "repository nope not found"));
    let r = app.send(TestRequest::get().uri("/api/v1/nothing-here"), As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(error_of(&r.json), ("not_found", "no such endpoint: GET /api/v1/nothing-here"));
    let r = app.call(TestRequest::delete().uri("/api/v1/repositories/debs/status")).await?;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        error_of(&r.json),
        ("method_not_allowed", "method DELETE is not allowed on /api/v1/repositories/debs/status")
    );
    let r = app.call(TestRequest::patch().uri("/api/v1/repositories/debs")).await?;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        error_of(&r.json),
        ("unsupported_media_type", "send a JSON merge patch with Content-Type: application/merge-patch+json")
    );
    Ok(())
}
app_test!(path_and_routing_errors_keep_the_json_shape);

async fn a_whole_definition_replaces_the_old_one(app: TestApp) -> anyhow::Result<()> {
    some_repositories(&app).await?;
    let put = |name: &str, body: Value| TestRequest::put().uri(&format!("/api/v1/repositories/{name}")).set_json(body);
    let r = app
        .call(put(
            "debs",
            json!({
                "format": "apt", "type": "hosted", "write_policy": "allow", "anonymous_read": false,
                "apt": {"distribution": "bookworm"}
            }),
        ))
        .await?;
    let b = r.json;
    assert_eq!(r.status, StatusCode::OK, "{b}");
    assert_eq!(b["write_policy"], "allow");
    assert_eq!(b["anonymous_read"], false);
    assert_eq!(b["apt"]["distribution"], "bookworm");
    assert_eq!(b["version"], 2);
    let r = app.call(put("debs", json!({"name": "other", "format": "apt", "type": "hosted"}))).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(error_of(&r.json).1.contains("cannot be renamed"), "{}", r.json);
    let proxy = json!({"format": "go", "type": "proxy", "proxy": {"remote_url": "https://proxy.golang.org/"}});
    let r = app.call(put("go-a", proxy)).await?;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&r.json).1, "the type of repository go-a is hosted and cannot be changed");
    let r = app.call(put("ghost", json!({"format": "go", "type": "hosted"}))).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    Ok(())
}
app_test!(a_whole_definition_replaces_the_old_one);

async fn a_group_member_is_deleted_after_its_group(app: TestApp) -> anyhow::Result<()> {
    some_repositories(&app).await?;
    let delete = |name: &str| TestRequest::delete().uri(&format!("/api/v1/repositories/{name}"));
    let r = app.call(delete("go-a")).await?;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(
        error_of(&r.json),
        ("conflict", "repository go-a is a member of group go-all; remove it from the group first")
    );
    let r = app.call(delete("go-all")).await?;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(r.json, Value::Null);
    assert_eq!(app.call(delete("go-a")).await?.status, StatusCode::NO_CONTENT);
    let r = app.call(TestRequest::get().uri("/api/v1/repositories/go-a")).await?;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    Ok(())
}
app_test!(a_group_member_is_deleted_after_its_group);

/// The OpenAPI document names every route; it is public.
async fn the_openapi_document_names_the_routes(app: TestApp) -> anyhow::Result<()> {
    let r = app.send(TestRequest::get().uri("/api/v1/openapi.json"), As::Anonymous).await?;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["openapi"], "3.1.0");
    assert!(r.json["paths"]["/api/v1/repositories/{name}"]["delete"].is_object());
    Ok(())
}
app_test!(the_openapi_document_names_the_routes);

/// Metrics counted what happened: four repositories created, three calls refused a 401.
async fn requests_are_counted_by_status(app: TestApp) -> anyhow::Result<()> {
    some_repositories(&app).await?;
    app.send(list(), As::Anonymous).await?;
    app.send(list(), As::Basic("admin".into(), "wrong".into())).await?;
    app.send(list(), As::Basic("nobody".into(), "x".into())).await?;
    let text = String::from_utf8(app.t.metrics.render())?;
    assert!(
        text.contains(r#"packyard_http_requests_total{format="",method="POST",repository="",status="201"} 4"#),
        "{text}"
    );
    assert!(
        text.contains(r#"packyard_http_requests_total{format="",method="GET",repository="",status="401"} 3"#),
        "{text}"
    );
    Ok(())
}
app_test!(requests_are_counted_by_status);

/// PUT is a whole definition: the README's own example (`write_policy` only) no longer resets
/// an APT repository's distribution, components and architectures, it is refused with a 400
/// that says what to do; PATCH (a JSON merge patch) changes just the fields it names.
async fn put_and_patch(backend: Backend) -> anyhow::Result<()> {
    let Some(t) = TestDb::fresh(backend).await? else {
        return Ok(());
    };
    let app = test::init_service(packyard_api::app::public_app(services(&t).await?)).await;
    let apt = json!({"distribution": "bookworm", "components": ["main", "extra"], "architectures": ["amd64", "all"]});
    let (s, b, _) = call(
        &app,
        TestRequest::post().uri("/api/v1/repositories").insert_header(admin()).set_json(json!({
            "name": "debs", "format": "apt", "type": "hosted", "apt": apt
        })),
    )
    .await?;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let readme_example = json!({"format": "apt", "type": "hosted", "write_policy": "allow"});
    let (s, b, _) =
        call(&app, TestRequest::put().uri("/api/v1/repositories/debs").insert_header(admin()).set_json(readme_example))
            .await?;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert_eq!(
        error_of(&b),
        (
            "invalid_repository",
            "the body has no `apt` settings, which repository debs has: PUT replaces the whole definition, so send `apt` as GET shows it, or change single fields with PATCH (a JSON merge patch)"
        )
    );
    let (s, b, _) = call(&app, TestRequest::get().uri("/api/v1/repositories/debs").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::OK);
    for field in ["distribution", "components", "architectures"] {
        assert_eq!(b["apt"][field], apt[field], "{field} unchanged: {b}");
    }
    assert_eq!((&b["write_policy"], &b["version"]), (&json!("allow_once"), &json!(1)), "{b}");

    let patch = |body: Value| {
        TestRequest::patch()
            .uri("/api/v1/repositories/debs")
            .insert_header(admin())
            .insert_header((header::CONTENT_TYPE, "application/merge-patch+json"))
            .set_payload(body.to_string())
    };
    let (s, b, _) = call(&app, patch(json!({"write_policy": "allow", "apt": {"label": "Ours"}}))).await?;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["write_policy"], "allow");
    assert_eq!(b["apt"]["label"], "Ours");
    assert_eq!(b["apt"]["distribution"], "bookworm");
    assert_eq!(b["apt"]["components"], json!(["main", "extra"]));
    assert_eq!(b["apt"]["architectures"], json!(["amd64", "all"]));
    assert_eq!(b["anonymous_read"], true);
    assert_eq!(b["version"], 2);
    // null removes a field (the label returns to its default, the repository name).
    let (s, b, _) = call(&app, patch(json!({"apt": {"label": null}}))).await?;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert!(b["apt"].get("label").is_none_or(Value::is_null), "{b}");
    assert_eq!(b["apt"]["distribution"], "bookworm");
    // What a patch may not do, each with the reason.
    for (body, code, message) in [
        (
            json!({"format": "go", "apt": null}),
            "invalid_repository",
            "the format of repository debs is apt and cannot be changed",
        ),
        (
            json!({"name": "other"}),
            "invalid_repository",
            "the body names repository \"other\" but the URL names \"debs\"; a repository cannot be renamed",
        ),
        (json!({"version": 7}), "invalid_repository", "`version` is read-only"),
        (json!({"apt": {"components": []}}), "invalid_repository", "apt.components must not be empty"),
        (
            json!(["not", "an", "object"]),
            "invalid_repository",
            "a merge patch is a JSON object of the fields to change",
        ),
    ] {
        let (s, b, _) = call(&app, patch(body.clone())).await?;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {b}");
        assert_eq!(error_of(&b), (code, message), "{body}");
    }
    let (s, b, _) = call(&app, patch(json!({"apt": {"nonsense": 1}}))).await?;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(error_of(&b).1.starts_with("the patched definition is invalid: unknown field `nonsense`"), "{b}");
    let (s, _, _) = call(
        &app,
        TestRequest::patch()
            .uri("/api/v1/repositories/ghost")
            .insert_header(admin())
            .insert_header((header::CONTENT_TYPE, "application/merge-patch+json"))
            .set_payload("{}"),
    )
    .await?;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // A whole definition with every setting is still a PUT.
    let (s, b, _) = call(
        &app,
        TestRequest::put().uri("/api/v1/repositories/debs").insert_header(admin()).set_json(json!({
            "format": "apt", "type": "hosted", "write_policy": "deny",
            "apt": {"distribution": "trixie", "components": ["main"], "architectures": ["arm64"]}
        })),
    )
    .await?;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!((b["apt"]["distribution"].as_str(), b["write_policy"].as_str()), (Some("trixie"), Some("deny")));
    Ok(())
}

#[actix_web::test]
async fn put_and_patch_sqlite() -> anyhow::Result<()> {
    put_and_patch(Backend::Sqlite).await
}

#[actix_web::test]
async fn put_and_patch_postgres() -> anyhow::Result<()> {
    put_and_patch(Backend::Postgres).await
}

#[actix_web::test]
async fn put_and_patch_mysql() -> anyhow::Result<()> {
    put_and_patch(Backend::MySql).await
}
