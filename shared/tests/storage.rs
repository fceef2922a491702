//! Storage tests: the same assertions on SQLite, PostgreSQL and MariaDB.

use packyard_core::repositories::{RepoError, RepositoryService};
use packyard_formats::apt::settings::AptSettings;
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
    let svc = RepositoryService::new(&t.db, packyard_formats::registry());
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
    let apt = created.settings.format::<AptSettings>().ok_or_else(|| anyhow::anyhow!("no apt settings"))?;
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
    assert_eq!(updated.settings.format::<AptSettings>(), created.settings.format::<AptSettings>());
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
    let svc = RepositoryService::new(&t.db, packyard_formats::registry());
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
    let svc = RepositoryService::new(&t.db, packyard_formats::registry());
    svc.create(spec(serde_json::json!({"name": "w", "format": "go", "type": "hosted"}))?).await?;
    let (s1, r1, _) = t.db.watermarks().await?;
    assert_eq!((s1, r1), (s0, r0 + 1), "a repository change moves the repositories watermark only");
    t.db.insert_role(
        "r",
        "",
        false,
        &[Privilege { repositories: "*".into(), actions: vec![Action::Read], ..Default::default() }],
    )
    .await?;
    let uid = t.db.create_user("u", "$argon2id$x", &["r".to_string()]).await?;
    t.db.insert_token("abcdefabcdef", uid, "t", "00", None, None, None).await?;
    t.db.revoke_token("abcdefabcdef").await?;
    let (s2, r2, _) = t.db.watermarks().await?;
    assert_eq!((s2, r2), (s1 + 3, r1), "role, user and revocation each move the security watermark");
    assert_eq!(
        t.db.privileges_of(uid).await?,
        vec![Privilege { repositories: "*".into(), actions: vec![Action::Read], ..Default::default() }]
    );
    assert!(matches!(t.db.revoke_token("abcdefabcdef").await, Err(DbError::NotFound)), "revoking twice");
    Ok(())
});

// Directory and identity provider users: created on first sight, their roles replaced only
// when they change, several replicas' syncs of one user at once ending in one row with the
// last roles, and a name that belongs to someone else (a local user, another source, another
// account of the same source) never taken over.
db_test!(external_users_sync, |t: TestDb| async move {
    use packyard_model::security::{Action, Privilege};
    use packyard_store::db::users::{ExternalUser, Synced};
    for role in ["readers", "writers"] {
        t.db.insert_role(
            role,
            "",
            false,
            &[Privilege { repositories: "*".into(), actions: vec![Action::Read], ..Default::default() }],
        )
        .await?;
    }
    let dn = "uid=alice,ou=people,dc=example,dc=org";
    let roles = ["readers".to_string(), "nope".to_string()];
    let alice = ExternalUser {
        username: "alice",
        source: "ldap:corp",
        external_id: Some(dn),
        email: Some("alice@example.org"),
        display_name: Some("Alice"),
        roles: &roles,
    };
    let Synced::User { id, unknown_roles } = t.db.sync_external_user(&alice).await? else {
        anyhow::bail!("alice was not recorded")
    };
    assert_eq!(unknown_roles, ["nope"]);
    let (security, _, _) = t.db.watermarks().await?;
    // The same again: nothing changes, the watermark stays.
    assert_eq!(t.db.sync_external_user(&alice).await?, Synced::User { id, unknown_roles: vec!["nope".into()] });
    assert_eq!(t.db.watermarks().await?.0, security, "an unchanged sign-in leaves every cache alone");

    // Eight syncs at once with new roles: one row, the new roles, no error.
    let both = ["writers".to_string(), "readers".to_string()];
    let changed = ExternalUser { roles: &both, email: Some("alice@corp.example"), ..alice.clone() };
    let results = futures_util::future::join_all((0..8).map(|_| t.db.sync_external_user(&changed))).await;
    for r in results {
        assert_eq!(r?, Synced::User { id, unknown_roles: vec![] });
    }
    assert_eq!(t.db.role_names_of(id).await?, ["readers", "writers"]);
    let row = t.db.user_by_name("alice").await?.ok_or_else(|| anyhow::anyhow!("alice gone"))?;
    assert_eq!(
        (row.source.as_str(), row.external_id.as_deref(), row.email.as_deref(), row.password_hash.as_str()),
        ("ldap:corp", Some(dn), Some("alice@corp.example"), "!")
    );
    assert!(t.db.watermarks().await?.0 > security, "changed roles move the watermark");

    // Eight first sign-ins of one new user at once (two replicas, parallel requests): one row.
    let carol_roles = ["readers".to_string()];
    let carol = ExternalUser {
        username: "carol",
        external_id: Some("uid=carol,ou=people,dc=example,dc=org"),
        roles: &carol_roles,
        ..alice.clone()
    };
    let results = futures_util::future::join_all((0..8).map(|_| t.db.sync_external_user(&carol))).await;
    let mut ids = std::collections::BTreeSet::new();
    for r in results {
        match r? {
            Synced::User { id, .. } => ids.insert(id),
            other => anyhow::bail!("carol: {other:?}"),
        };
    }
    assert_eq!(ids.len(), 1, "one row for carol: {ids:?}");
    assert_eq!(t.db.role_names_of(*ids.first().unwrap_or(&0)).await?, ["readers"]);
    assert_eq!(t.db.directory_sources_of("CAROL").await?, ["ldap:corp"]);

    // Names that belong to someone else.
    t.db.create_user("bob", "$argon2id$fake", &[]).await?;
    let bob =
        ExternalUser { username: "bob", external_id: Some("uid=bob,ou=people,dc=example,dc=org"), ..alice.clone() };
    assert!(matches!(t.db.sync_external_user(&bob).await?, Synced::NameTaken(m) if m.contains("is a local user here")));
    let elsewhere = ExternalUser { source: "oidc", external_id: Some("https://idp alice"), ..alice.clone() };
    assert!(
        matches!(t.db.sync_external_user(&elsewhere).await?, Synced::NameTaken(m) if m.contains("comes from ldap:corp"))
    );
    let reused = ExternalUser { external_id: Some("uid=alice,ou=former,dc=example,dc=org"), ..alice.clone() };
    assert!(matches!(t.db.sync_external_user(&reused).await?, Synced::NameTaken(m) if m.contains("another account")));
    let local = t.db.user_by_name("bob").await?.ok_or_else(|| anyhow::anyhow!("bob gone"))?;
    assert_eq!((local.source.as_str(), local.external_id), ("local", None));
    Ok(())
});

/// Every `(table, column)` of the migrated schema whose name says it holds a blob's SHA-256
/// digest (`sha256`, `<what>_sha256`), the blob table itself aside.
async fn digest_columns(t: &TestDb) -> anyhow::Result<Vec<(String, String)>> {
    use packyard_store::db::Backend;
    use sqlx::Row;
    let text = match t.db.backend() {
        Backend::Sqlite => "SELECT m.name AS t, p.name AS c FROM sqlite_master m JOIN pragma_table_info(m.name) p WHERE m.type = 'table'",
        Backend::Postgres => "SELECT CAST(table_name AS TEXT) AS t, CAST(column_name AS TEXT) AS c FROM information_schema.columns WHERE table_schema = current_schema()",
        Backend::MySql => "SELECT CAST(table_name AS CHAR) AS t, CAST(column_name AS CHAR) AS c FROM information_schema.columns WHERE table_schema = DATABASE()",
    };
    let rows = sqlx::query(text).fetch_all(t.db.pool()).await?;
    let mut found = Vec::new();
    for r in rows {
        let (table, column): (String, String) = (r.try_get("t")?, r.try_get("c")?);
        let (table, column) = (table.to_ascii_lowercase(), column.to_ascii_lowercase());
        if table != "blobs" && (column == "sha256" || column.ends_with("_sha256")) {
            found.push((table, column));
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// The digest columns that `references` does not name: blob reclamation would delete the blobs
/// they point at.
fn unregistered(columns: &[(String, String)], references: &packyard_store::db::blobs::BlobReferences) -> Vec<String> {
    let named = |t: &str, c: &str| references.columns().iter().any(|r| r.table == t && r.column == c);
    columns.iter().filter(|(t, c)| !named(t, c)).map(|(t, c)| format!("{t}.{c}")).collect()
}

// Blob reclamation keeps what the registry's columns name: a migration that adds a column
// holding blob digests which no format registers (`FormatSpec::blob_columns`) fails here.
db_test!(every_blob_digest_column_is_registered, |t: TestDb| async move {
    let columns = digest_columns(&t).await?;
    assert!(columns.len() >= 9, "the schema's digest columns were not read: {columns:?}");
    let registry = packyard_formats::registry();
    assert_eq!(unregistered(&columns, registry.blob_references()), Vec::<String>::new());
    // The same check without the formats' columns names each of them: it can fail.
    let store_only = packyard_store::db::blobs::BlobReferences::new(&[]);
    let mut formats: Vec<String> =
        registry.all().flat_map(|s| s.blob_columns().iter().map(|c| format!("{}.{}", c.table, c.column))).collect();
    formats.sort();
    assert_eq!(unregistered(&columns, &store_only), formats);
    // And every registered column exists.
    for c in registry.blob_references().columns() {
        assert!(
            columns.contains(&(c.table.to_string(), c.column.to_string())),
            "{}.{} is not in the schema",
            c.table,
            c.column
        );
    }
    Ok(())
});

/// A connection outlives the runtime that opened it (#44). actix-web serves each HTTP worker on
/// a runtime of its own, and the workers share one pool (made on the main runtime): a
/// connection a worker opened may be lent to a request on another, and a graceful stop ends an
/// idle worker (and its runtime) at once. Here runtime B opens a connection while A holds the
/// other, A begins a transaction on B's (still holding its own), B ends, and the transaction
/// goes on. Before, the connection died with B: a 503 in the middle of an upload during a
/// graceful restart. (SQLite's connections run on threads of their own: there it passes
/// either way, and is kept for the pool's behaviour.)
fn a_connection_outlives_the_runtime_that_opened_it(backend: packyard_store::db::Backend) -> anyhow::Result<()> {
    use std::time::Duration;
    let a = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let Some(t) = a.block_on(TestDb::fresh(backend))? else { return Ok(()) };
    let mut cfg = packyard_model::config::DatabaseConfig { url: t.url.clone(), ..Default::default() };
    cfg.max_connections = 2;
    cfg.min_connections = 0;
    let db = a.block_on(packyard_store::db::Db::connect(&cfg, t.metrics.clone()))?;
    // A holds the pool's one connection (the start's probe, once it is back), so that B opens
    // the second.
    let held = a.block_on(async {
        for _ in 0..500 {
            if db.pool().num_idle() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        db.pool().acquire().await
    })?;
    assert_eq!(db.pool().size(), 1, "one connection before B");
    let (opened, in_a) = std::sync::mpsc::channel::<()>();
    let (end_b, ended) = tokio::sync::oneshot::channel::<()>();
    let on_b = db.clone();
    let b = std::thread::spawn(move || -> anyhow::Result<()> {
        let b = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        // B runs all the time until it is told to end, as an actix worker's runtime does.
        b.block_on(async {
            on_b.ping().await?;
            opened.send(()).map_err(|_| anyhow::anyhow!("the test went away"))?;
            let _ = ended.await;
            anyhow::Ok(())
        })?;
        drop(b);
        Ok(())
    });
    in_a.recv_timeout(Duration::from_secs(30))?;
    a.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), async {
            // The connection B opened goes back to the pool on B's runtime.
            while db.pool().num_idle() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert_eq!(db.pool().size(), 2, "B opened the second connection");
            // The first is still held: the pool lends B's.
            let mut tx = db.begin().await?;
            sqlx::query("SELECT 1").execute(&mut *tx).await?;
            let _ = end_b.send(());
            b.join().map_err(|_| anyhow::anyhow!("runtime B's thread panicked"))??;
            let rows = sqlx::query("SELECT 2").fetch_all(&mut *tx).await.map(|r| r.len());
            assert!(
                matches!(rows, Ok(1)),
                "the transaction's connection died with the runtime that opened it: {rows:?}"
            );
            tx.commit().await?;
            drop(held);
            db.ping().await?;
            anyhow::Ok(())
        })
        .await
        .map_err(|_| anyhow::anyhow!("the transaction hung after runtime B ended"))??;
        db.close().await;
        t.db.close().await;
        anyhow::Ok(())
    })
}

#[test]
fn a_connection_outlives_the_runtime_that_opened_it_sqlite() -> anyhow::Result<()> {
    a_connection_outlives_the_runtime_that_opened_it(packyard_store::db::Backend::Sqlite)
}

#[test]
fn a_connection_outlives_the_runtime_that_opened_it_postgres() -> anyhow::Result<()> {
    a_connection_outlives_the_runtime_that_opened_it(packyard_store::db::Backend::Postgres)
}

#[test]
fn a_connection_outlives_the_runtime_that_opened_it_mysql() -> anyhow::Result<()> {
    a_connection_outlives_the_runtime_that_opened_it(packyard_store::db::Backend::MySql)
}
