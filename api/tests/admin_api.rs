//! The admin API in-process, on SQLite, PostgreSQL and MariaDB.

mod common;

use actix_web::http::{header, StatusCode};
use actix_web::test::{self, TestRequest};
use common::{admin, basic, error_of, services, Reply};
use packyard_core::auth::hash_password;
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

async fn admin_api(backend: Backend) -> anyhow::Result<()> {
    let Some(t) = TestDb::fresh(backend).await? else {
        return Ok(());
    };
    let app = test::init_service(packyard_api::app::public_app(services(&t).await?)).await;

    // Authentication.
    let (s, b, h) = call(&app, TestRequest::get().uri("/api/v1/repositories")).await?;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(h.get(header::WWW_AUTHENTICATE).map(|v| v.as_bytes()), Some(&b"Basic realm=\"packyard\""[..]));
    assert_eq!(error_of(&b), ("unauthorized", "authentication required"));
    let (s, b, _) =
        call(&app, TestRequest::get().uri("/api/v1/repositories").insert_header(basic("admin", "wrong"))).await?;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(error_of(&b), ("unauthorized", "invalid username or password"));
    let (s, _, _) =
        call(&app, TestRequest::get().uri("/api/v1/repositories").insert_header(basic("nobody", "x"))).await?;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    t.db.create_user("alice", &hash_password("alice-pw")?, &[]).await?;
    let (s, b, _) =
        call(&app, TestRequest::get().uri("/api/v1/repositories").insert_header(basic("alice", "alice-pw"))).await?;
    assert_eq!(s, StatusCode::FORBIDDEN);
    assert_eq!(error_of(&b), ("forbidden", "user alice may not use the admin API"));

    // Create, read, list.
    let (s, b, h) = call(
        &app,
        TestRequest::post().uri("/api/v1/repositories").insert_header(admin()).set_json(json!({
            "name": "debs", "format": "apt", "type": "hosted",
            "apt": {"distribution": "stable", "components": ["main"], "architectures": ["amd64", "arm64", "all"]}
        })),
    )
    .await?;
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

    let (s, b, _) = call(
        &app,
        TestRequest::post()
            .uri("/api/v1/repositories")
            .insert_header(admin())
            .set_json(json!({"name": "debs", "format": "apt", "type": "hosted"})),
    )
    .await?;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(error_of(&b), ("conflict", "repository debs already exists"));

    for (name, format) in [("go-a", "go"), ("go-b", "go")] {
        let (s, b, _) = call(
            &app,
            TestRequest::post()
                .uri("/api/v1/repositories")
                .insert_header(admin())
                .set_json(json!({"name": name, "format": format, "type": "hosted"})),
        )
        .await?;
        assert_eq!(s, StatusCode::CREATED, "{b}");
    }
    let (s, b, _) = call(
        &app,
        TestRequest::post().uri("/api/v1/repositories").insert_header(admin()).set_json(json!({
            "name": "go-all", "format": "go", "type": "group", "group": {"members": ["go-b", "go-a"]}
        })),
    )
    .await?;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["group"]["members"], json!(["go-b", "go-a"]));

    let (s, b, _) = call(&app, TestRequest::get().uri("/api/v1/repositories").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::OK);
    let names: Vec<&str> =
        b.as_array().map(|a| a.iter().filter_map(|r| r["name"].as_str()).collect()).unwrap_or_default();
    assert_eq!(names, vec!["debs", "go-a", "go-all", "go-b"]);

    let (s, b, _) = call(&app, TestRequest::get().uri("/api/v1/repositories/go-all").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["type"], "group");

    // Validation: each a 400 with a message a person can act on.
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
        let (s, b, _) =
            call(&app, TestRequest::post().uri("/api/v1/repositories").insert_header(admin()).set_json(&body)).await?;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body} → {b}");
        let (c, m) = error_of(&b);
        assert_eq!(c, code, "{body} → {b}");
        assert!(m.contains(needle), "{body}: {m:?} lacks {needle:?}");
    }
    let (s, b, _) = call(
        &app,
        TestRequest::post()
            .uri("/api/v1/repositories")
            .insert_header(admin())
            .insert_header((header::CONTENT_TYPE, "application/json"))
            .set_payload("{\"name\":"),
    )
    .await?;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(error_of(&b).1.starts_with("invalid JSON body: EOF while parsing"), "{b}");
    let (s, b, _) = call(
        &app,
        TestRequest::post()
            .uri("/api/v1/repositories")
            .insert_header(admin())
            .insert_header((header::CONTENT_TYPE, "text/plain"))
            .set_payload("{}"),
    )
    .await?;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(error_of(&b).0, "unsupported_media_type");
    let big = json!({"name": "x".repeat(2 << 20), "format": "go", "type": "hosted"});
    let (s, b, _) =
        call(&app, TestRequest::post().uri("/api/v1/repositories").insert_header(admin()).set_json(&big)).await?;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error_of(&b).0, "payload_too_large");

    // Path and routing errors keep the JSON shape.
    let (s, b, _) = call(&app, TestRequest::get().uri("/api/v1/repositories/a%2Fb").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(error_of(&b).1.contains("invalid repository name \"a/b\""), "{b}");
    let (s, b, _) = call(&app, TestRequest::get().uri("/api/v1/repositories/nope").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(error_of(&b), ("not_found", "repository nope not found"));
    let (s, b, _) = call(&app, TestRequest::get().uri("/api/v1/nothing-here")).await?;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_eq!(error_of(&b), ("not_found", "no such endpoint: GET /api/v1/nothing-here"));
    let (s, b, _) =
        call(&app, TestRequest::delete().uri("/api/v1/repositories/debs/status").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        error_of(&b),
        ("method_not_allowed", "method DELETE is not allowed on /api/v1/repositories/debs/status")
    );
    let (s, b, _) = call(&app, TestRequest::patch().uri("/api/v1/repositories/debs").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(
        error_of(&b),
        ("unsupported_media_type", "send a JSON merge patch with Content-Type: application/merge-patch+json")
    );

    // Update.
    let (s, b, _) = call(
        &app,
        TestRequest::put().uri("/api/v1/repositories/debs").insert_header(admin()).set_json(json!({
            "format": "apt", "type": "hosted", "write_policy": "allow", "anonymous_read": false,
            "apt": {"distribution": "bookworm"}
        })),
    )
    .await?;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["write_policy"], "allow");
    assert_eq!(b["anonymous_read"], false);
    assert_eq!(b["apt"]["distribution"], "bookworm");
    assert_eq!(b["version"], 2);
    let (s, b, _) = call(
        &app,
        TestRequest::put()
            .uri("/api/v1/repositories/debs")
            .insert_header(admin())
            .set_json(json!({"name": "other", "format": "apt", "type": "hosted"})),
    )
    .await?;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(error_of(&b).1.contains("cannot be renamed"), "{b}");
    let (s, b, _) = call(
        &app,
        TestRequest::put()
            .uri("/api/v1/repositories/go-a")
            .insert_header(admin())
            .set_json(json!({"format": "go", "type": "proxy", "proxy": {"remote_url": "https://proxy.golang.org/"}})),
    )
    .await?;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(error_of(&b).1, "the type of repository go-a is hosted and cannot be changed");
    let (s, _, _) = call(
        &app,
        TestRequest::put()
            .uri("/api/v1/repositories/ghost")
            .insert_header(admin())
            .set_json(json!({"format": "go", "type": "hosted"})),
    )
    .await?;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // Delete.
    let (s, b, _) = call(&app, TestRequest::delete().uri("/api/v1/repositories/go-a").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(
        error_of(&b),
        ("conflict", "repository go-a is a member of group go-all; remove it from the group first")
    );
    let (s, b, _) = call(&app, TestRequest::delete().uri("/api/v1/repositories/go-all").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::NO_CONTENT);
    assert_eq!(b, Value::Null);
    let (s, _, _) = call(&app, TestRequest::delete().uri("/api/v1/repositories/go-a").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _, _) = call(&app, TestRequest::get().uri("/api/v1/repositories/go-a").insert_header(admin())).await?;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // The OpenAPI document names every route.
    let (s, b, _) = call(&app, TestRequest::get().uri("/api/v1/openapi.json")).await?;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["openapi"], "3.1.0");
    assert!(b["paths"]["/api/v1/repositories/{name}"]["delete"].is_object());

    // Metrics counted what happened.
    let text = String::from_utf8(t.metrics.render())?;
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

#[actix_web::test]
async fn admin_api_sqlite() -> anyhow::Result<()> {
    admin_api(Backend::Sqlite).await
}

#[actix_web::test]
async fn admin_api_postgres() -> anyhow::Result<()> {
    admin_api(Backend::Postgres).await
}

#[actix_web::test]
async fn admin_api_mysql() -> anyhow::Result<()> {
    admin_api(Backend::MySql).await
}

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
