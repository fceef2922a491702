//! Storage tests: the same assertions on SQLite, PostgreSQL and MariaDB.

use packyard_core::repositories::{RepoError, RepositoryService};
use packyard_model::repos::{Format, RepoType, RepositorySpec, WritePolicy};
use packyard_store::blobs::Sha256Hex;
use packyard_store::db::DbError;
use packyard_store::db_test;
use packyard_store::testing::TestDb;

fn spec(v: serde_json::Value) -> anyhow::Result<RepositorySpec> {
    Ok(serde_json::from_value(v)?)
}

db_test!(migrations_are_idempotent, |t: TestDb| async move {
    assert!(t.db.migrations_applied().await?);
    assert_eq!(t.db.migrate().await?, 0);
    t.db.ping().await?;
    Ok(())
});

db_test!(repository_crud, |t: TestDb| async move {
    let svc = RepositoryService::new(&t.db);
    let created = svc
        .create(spec(serde_json::json!({
            "name": "debs", "format": "apt", "type": "hosted",
            "apt": {"distribution": "bookworm", "components": ["main", "contrib"], "architectures": ["amd64", "arm64", "all"]}
        }))?)
        .await?;
    assert_eq!(created.name.as_str(), "debs");
    assert_eq!(created.format, Format::Apt);
    assert_eq!(created.repo_type, RepoType::Hosted);
    assert_eq!(created.write_policy, WritePolicy::AllowOnce);
    assert!(created.anonymous_read);
    let apt = created.settings.apt.clone().ok_or_else(|| anyhow::anyhow!("no apt settings"))?;
    assert_eq!(apt.distribution, "bookworm");
    assert_eq!(apt.components, vec!["main", "contrib"]);
    assert_eq!(created.version, 1);

    let dup = svc.create(spec(serde_json::json!({"name": "debs", "format": "go", "type": "hosted"}))?).await;
    assert!(matches!(&dup, Err(RepoError::Conflict(m)) if m == "repository debs already exists"), "{dup:?}");

    svc.create(spec(serde_json::json!({"name": "mods", "format": "go", "type": "hosted", "write_policy": "allow"}))?)
        .await?;
    svc.create(spec(serde_json::json!({
        "name": "gproxy", "format": "go", "type": "proxy",
        "proxy": {"remote_url": "https://proxy.example.test/", "metadata_ttl_secs": 60}
    }))?)
    .await?;
    let names: Vec<String> = svc.list().await?.iter().map(|r| r.name.to_string()).collect();
    assert_eq!(names, vec!["debs", "gproxy", "mods"]);

    let fetched = svc.get("gproxy").await?;
    let proxy = fetched.settings.proxy.clone().ok_or_else(|| anyhow::anyhow!("no proxy settings"))?;
    assert_eq!(proxy.remote_url, "https://proxy.example.test/");
    assert_eq!(proxy.metadata_ttl_secs, 60);

    let updated = svc
        .update(
            "debs",
            spec(
                serde_json::json!({"format": "apt", "type": "hosted", "write_policy": "deny", "anonymous_read": false,
                    "apt": {"distribution": "bookworm", "components": ["main", "contrib"], "architectures": ["amd64", "arm64", "all"]}}),
            )?,
        )
        .await?;
    assert_eq!(updated.write_policy, WritePolicy::Deny);
    assert!(!updated.anonymous_read);
    assert_eq!(updated.version, 2, "an update bumps the watermark");
    assert_eq!(updated.created_at, created.created_at);
    assert_eq!(updated.settings.apt, created.settings.apt);
    // A whole definition may not leave out the settings the repository has.
    let partial = svc.update("debs", spec(serde_json::json!({"format": "apt", "type": "hosted"}))?).await;
    assert!(matches!(&partial, Err(RepoError::Invalid(m)) if m.contains("has no `apt` settings")), "{partial:?}");

    let changed = svc.update("debs", spec(serde_json::json!({"format": "go", "type": "hosted"}))?).await;
    assert!(matches!(&changed, Err(RepoError::Invalid(m)) if m.contains("cannot be changed")), "{changed:?}");

    assert!(matches!(svc.get("nope").await, Err(RepoError::NotFound(n)) if n == "nope"));
    svc.delete("mods").await?;
    assert!(matches!(svc.get("mods").await, Err(RepoError::NotFound(_))));
    assert!(matches!(svc.delete("mods").await, Err(RepoError::NotFound(_))));
    Ok(())
});

db_test!(group_rules, |t: TestDb| async move {
    let svc = RepositoryService::new(&t.db);
    for n in ["a", "b"] {
        svc.create(spec(serde_json::json!({"name": n, "format": "go", "type": "hosted"}))?).await?;
    }
    svc.create(spec(serde_json::json!({"name": "debs", "format": "apt", "type": "hosted"}))?).await?;
    let g = svc
        .create(spec(
            serde_json::json!({"name": "g1", "format": "go", "type": "group", "group": {"members": ["b", "a"]}}),
        )?)
        .await?;
    assert_eq!(g.members, vec!["b", "a"], "member order is kept");

    let missing = svc
        .create(spec(serde_json::json!({"name": "g2", "format": "go", "type": "group", "group": {"members": ["zz"]}}))?)
        .await;
    assert!(matches!(&missing, Err(RepoError::Invalid(m)) if m == "group member zz does not exist"), "{missing:?}");
    let mixed = svc
        .create(spec(
            serde_json::json!({"name": "g2", "format": "go", "type": "group", "group": {"members": ["debs"]}}),
        )?)
        .await;
    assert!(
        matches!(&mixed, Err(RepoError::Invalid(m)) if m.contains("group member debs is a apt repository")),
        "{mixed:?}"
    );

    svc.create(spec(serde_json::json!({"name": "g2", "format": "go", "type": "group", "group": {"members": ["g1"]}}))?)
        .await?;
    let cycle = svc
        .update("g1", spec(serde_json::json!({"format": "go", "type": "group", "group": {"members": ["a", "g2"]}}))?)
        .await;
    assert!(
        matches!(&cycle, Err(RepoError::Invalid(m)) if m == "group members form a cycle: g1 -> g2 -> g1"),
        "{cycle:?}"
    );
    assert_eq!(svc.get("g1").await?.members, vec!["b", "a"], "a rejected update changes nothing");

    let in_use = svc.delete("a").await;
    assert!(matches!(&in_use, Err(RepoError::Conflict(m)) if m.contains("member of group g1")), "{in_use:?}");
    svc.delete("g2").await?;
    svc.delete("g1").await?;
    svc.delete("a").await?;
    let listed = svc.list().await?;
    assert_eq!(listed.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), vec!["b", "debs"]);
    Ok(())
});

db_test!(blob_metadata, |t: TestDb| async move {
    let d = Sha256Hex::of(b"some bytes");
    assert_eq!(t.db.blob(&d).await?, None);
    t.db.record_blob(&d, 10).await?;
    t.db.record_blob(&d, 10).await?; // recording again is a no-op
    let rec = t.db.blob(&d).await?.ok_or_else(|| anyhow::anyhow!("blob row missing"))?;
    assert_eq!(rec.sha256, d);
    assert_eq!(rec.size, 10);
    assert!(rec.created_at > 1_700_000_000_000);
    assert!(t.db.delete_blob_record(&d).await?);
    assert!(!t.db.delete_blob_record(&d).await?);
    assert_eq!(t.db.blob(&d).await?, None);
    Ok(())
});

db_test!(users_and_query_counting, |t: TestDb| async move {
    t.db.create_user("alice", "$argon2id$fake", &[]).await?;
    let dup = t.db.create_user("alice", "$argon2id$other", &[]).await;
    assert!(matches!(&dup, Err(DbError::Conflict(m)) if m == "user alice already exists"), "{dup:?}");
    let before = t.metrics.db_queries();
    let alice = t.db.user_by_name("alice").await?.ok_or_else(|| anyhow::anyhow!("alice missing"))?;
    assert_eq!(alice.username, "alice");
    assert_eq!(alice.password_hash, "$argon2id$fake");
    assert_eq!(t.db.user_by_name("Alice").await?, None, "usernames are case-sensitive");
    assert_eq!(t.metrics.db_queries() - before, 2, "every storage call counts its query");
    Ok(())
});

db_test!(connection_settings_apply, |t: TestDb| async move {
    use packyard_store::db::Backend;
    use sqlx::Row;
    // Every pooled connection carries the configured settings (defaults: 30 s statements, 5 s busy).
    let (sql, expected) = match t.db.backend() {
        Backend::Sqlite => ("PRAGMA busy_timeout", "5000"),
        Backend::Postgres => ("SELECT current_setting('statement_timeout') AS v", "30s"),
        Backend::MySql => ("SELECT CAST(@@SESSION.max_statement_time AS CHAR) AS v", "30.000000"),
    };
    let row = sqlx::query(sql).fetch_one(t.db.pool()).await?;
    let got = match row.try_get::<String, _>(0) {
        Ok(s) => s,
        Err(_) => row.try_get::<i64, _>(0)?.to_string(),
    };
    assert_eq!(got, expected);
    Ok(())
});

db_test!(secrets_are_sealed_at_rest, |t: TestDb| async move {
    use packyard_core::security::keystore::KeyStore;
    let ks = KeyStore::new("a secret of sufficient length");
    let private = b"-----BEGIN OPENPGP PRIVATE KEY BLOCK-----\nsecret material\n";
    ks.put(&t.db, "apt/debs/signing", private).await?;
    assert_eq!(ks.get(&t.db, "apt/debs/signing").await?.as_deref(), Some(&private[..]));
    let (_, stored) = t.db.get_secret("apt/debs/signing").await?.ok_or_else(|| anyhow::anyhow!("no row"))?;
    assert!(!stored.contains("secret material") && !stored.contains("PRIVATE"), "stored encrypted: {stored}");
    ks.put(&t.db, "apt/debs/signing", b"rotated").await?;
    assert_eq!(ks.get(&t.db, "apt/debs/signing").await?.as_deref(), Some(&b"rotated"[..]));
    let wrong = KeyStore::new("another secret entirely!");
    assert!(wrong.get(&t.db, "apt/debs/signing").await.is_err(), "a different security.secret cannot open it");
    assert_eq!(ks.get(&t.db, "missing").await?, None);
    Ok(())
});

db_test!(watermarks_move_with_changes, |t: TestDb| async move {
    use packyard_model::security::{Action, Privilege};
    let (s0, r0, _) = t.db.watermarks().await?;
    let svc = RepositoryService::new(&t.db);
    svc.create(spec(serde_json::json!({"name": "w", "format": "go", "type": "hosted"}))?).await?;
    let (s1, r1, _) = t.db.watermarks().await?;
    assert_eq!((s1, r1), (s0, r0 + 1), "a repository change moves the repositories watermark only");
    t.db.insert_role("r", "", false, &[Privilege { repositories: "*".into(), actions: vec![Action::Read] }]).await?;
    let uid = t.db.create_user("u", "$argon2id$x", &["r".to_string()]).await?;
    t.db.insert_token("abcdefabcdef", uid, "t", "00", None, None, None).await?;
    t.db.revoke_token("abcdefabcdef").await?;
    let (s2, r2, _) = t.db.watermarks().await?;
    assert_eq!((s2, r2), (s1 + 3, r1), "role, user and revocation each move the security watermark");
    assert_eq!(
        t.db.privileges_of(uid).await?,
        vec![Privilege { repositories: "*".into(), actions: vec![Action::Read] }]
    );
    assert!(matches!(t.db.revoke_token("abcdefabcdef").await, Err(DbError::NotFound)), "revoking twice");
    Ok(())
});
