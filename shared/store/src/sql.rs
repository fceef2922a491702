//! The SQL dialect layer: every statement is written once, in a portable form, and rendered for
//! the connected backend the first time it runs there.
//!
//! The portable form is PostgreSQL's with four additions the layer rewrites:
//! - placeholders `$1, $2, …` in order of use (MySQL gets `?`);
//! - an upsert ([`upsert!`]): an `INSERT`, the conflicting key, and the `SET` list, in which
//!   `NEW.c` is the proposed row's column and `OLD.c` the stored one (`excluded.c` and
//!   `<table>.c` on SQLite and PostgreSQL; `VALUES(c)` and `c` on MySQL);
//! - an insert that leaves a conflicting row alone ([`insert_or_ignore!`]; with the new row's id,
//!   [`insert_or_ignore_id!`] run with [`Db::insert_or_ignore_id`]);
//! - an insert that returns the new row's id ([`insert_id!`], run with [`Db::insert_id`]:
//!   `RETURNING id` where the backend has it, the driver's last insert id on MySQL);
//! - a select that locks the rows it picks and skips those others hold ([`skip_locked!`]:
//!   `FOR UPDATE SKIP LOCKED` on PostgreSQL and MySQL; SQLite has one writer and needs none);
//! - a select that locks the rows it reads, waiting for those others hold, and reads them as
//!   committed now ([`for_update!`]: `FOR UPDATE` on PostgreSQL and MySQL, whose locking reads
//!   see past a repeatable-read snapshot; SQLite's writer lock is taken at `BEGIN IMMEDIATE`);
//! - `CAST(… AS BIGINT)` (a `SUM` is a decimal on PostgreSQL and MySQL, which the driver does not
//!   read as an integer) is `CAST(… AS SIGNED)` on MySQL.
//!
//! Each statement carries the `op` it is counted under in `packyard_db_queries_total`, so that
//! running it is counting it.

use std::sync::OnceLock;

/// The database dialects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

impl Backend {
    pub fn from_url(url: &str) -> Option<Self> {
        let scheme = url.split("://").next()?;
        match scheme {
            "sqlite" => Some(Self::Sqlite),
            "postgres" | "postgresql" => Some(Self::Postgres),
            "mysql" | "mariadb" => Some(Self::MySql),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
            Self::MySql => "mysql",
        }
    }
}

/// What the layer adds to a statement's text.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    Plain,
    /// `INSERT …` that updates `set` when `key` conflicts.
    Upsert {
        table: &'static str,
        key: &'static str,
        set: &'static str,
    },
    /// `INSERT …` that leaves a conflicting row alone.
    InsertOrIgnore,
    /// `INSERT …` whose new row's `id` is returned.
    InsertId,
    /// `INSERT …` that leaves a conflicting row alone and returns the new row's `id`, if any.
    InsertOrIgnoreId,
    /// `SELECT …` that locks what it picks, skipping rows other transactions hold.
    SkipLocked,
    /// `SELECT …` that locks what it reads, waiting for rows other transactions hold.
    ForUpdate,
    /// Takes (or, `release`, gives back) the session lock the text names: PostgreSQL's advisory
    /// lock `pg_key`, MySQL's named lock (waiting up to two minutes); SQLite's single writer
    /// needs none.
    SessionLock {
        pg_key: i64,
        release: bool,
    },
}

/// One statement: its counter name, its portable text, and its renderings per backend.
pub struct Sql {
    op: &'static str,
    text: &'static str,
    shape: Shape,
    /// How many rows an `INSERT … VALUES (…)` inserts: its tuple repeated, placeholders
    /// numbered on ([`sql_rows!`]); 1 for every other statement.
    rows: usize,
    rendered: [OnceLock<String>; 3],
}

impl Sql {
    pub const fn new(op: &'static str, text: &'static str, shape: Shape) -> Self {
        Self::with_rows(op, text, shape, 1)
    }

    pub const fn with_rows(op: &'static str, text: &'static str, shape: Shape, rows: usize) -> Self {
        Self { op, text, shape, rows, rendered: [OnceLock::new(), OnceLock::new(), OnceLock::new()] }
    }

    pub fn op(&self) -> &'static str {
        self.op
    }

    /// How many rows one run of the statement inserts.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The text for `backend` (rendered once).
    pub fn text(&self, backend: Backend) -> &str {
        let slot = match backend {
            Backend::Sqlite => 0,
            Backend::Postgres => 1,
            Backend::MySql => 2,
        };
        self.rendered[slot].get_or_init(|| {
            if self.rows > 1 {
                render(&repeat_values(self.text, self.rows), self.shape, backend)
            } else {
                render(self.text, self.shape, backend)
            }
        })
    }
}

/// `INSERT … VALUES ($1, $2)` inserting `rows` rows: `VALUES ($1, $2), ($3, $4), …`. The
/// tuple is the one after the last `VALUES`, and whatever follows it stays after the last copy.
pub fn repeat_values(text: &str, rows: usize) -> String {
    let Some(at) = text.rfind("VALUES (") else {
        return text.to_string();
    };
    let start = at + "VALUES ".len();
    let mut depth = 0usize;
    let mut end = text.len();
    for (i, c) in text[start..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    end = start + i + 1;
                    break;
                }
            }
            _ => {}
        }
    }
    let tuple = &text[start..end];
    let width = placeholders(tuple).into_iter().max().unwrap_or(0);
    let mut out = String::with_capacity(text.len() + rows * (tuple.len() + 2));
    out.push_str(&text[..start]);
    for row in 0..rows {
        if row > 0 {
            out.push_str(", ");
        }
        out.push_str(&shift_placeholders(tuple, row * width));
    }
    out.push_str(&text[end..]);
    out
}

/// The numbers of the `$n` placeholders in `text`.
fn placeholders(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' {
            let mut n = String::new();
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                n.push(*d);
                chars.next();
            }
            if let Ok(n) = n.parse() {
                found.push(n);
            }
        }
    }
    found
}

/// `text` with each `$n` renumbered `$(n + by)`.
fn shift_placeholders(text: &str, by: usize) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '$' {
            let mut n = String::new();
            while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                n.push(*d);
                chars.next();
            }
            match n.parse::<usize>() {
                Ok(n) => out.push_str(&(n + by).to_string()),
                Err(_) => out.push_str(&n),
            }
        }
    }
    out
}

/// The statement's text for a backend.
pub fn render(text: &str, shape: Shape, backend: Backend) -> String {
    let mysql = backend == Backend::MySql;
    let mut out = match shape {
        Shape::Plain | Shape::InsertId | Shape::SkipLocked | Shape::ForUpdate => text.to_string(),
        Shape::SessionLock { pg_key, release } => match (backend, release) {
            (Backend::Postgres, false) => format!("SELECT pg_advisory_lock({pg_key})"),
            (Backend::Postgres, true) => format!("SELECT pg_advisory_unlock({pg_key})"),
            (Backend::MySql, false) => format!("SELECT GET_LOCK('{text}', 120)"),
            (Backend::MySql, true) => format!("SELECT RELEASE_LOCK('{text}')"),
            (Backend::Sqlite, _) => "SELECT 1".to_string(),
        },
        Shape::InsertOrIgnore | Shape::InsertOrIgnoreId if mysql => {
            text.replacen("INSERT INTO", "INSERT IGNORE INTO", 1)
        }
        Shape::InsertOrIgnore => format!("{text} ON CONFLICT DO NOTHING"),
        Shape::InsertOrIgnoreId => format!("{text} ON CONFLICT DO NOTHING RETURNING id"),
        Shape::Upsert { table, key, set } => {
            if mysql {
                format!("{text} ON DUPLICATE KEY UPDATE {}", rewrite_rows(set, "", |c| format!("VALUES({c})")))
            } else {
                let old = format!("{table}.");
                format!(
                    "{text} ON CONFLICT ({key}) DO UPDATE SET {}",
                    rewrite_rows(set, &old, |c| format!("excluded.{c}"))
                )
            }
        }
    };
    match (shape, backend) {
        (Shape::InsertId, Backend::Sqlite | Backend::Postgres) => out.push_str(" RETURNING id"),
        (Shape::SkipLocked, Backend::Postgres | Backend::MySql) => out.push_str(" FOR UPDATE SKIP LOCKED"),
        (Shape::ForUpdate, Backend::Postgres | Backend::MySql) => out.push_str(" FOR UPDATE"),
        _ => {}
    }
    if mysql {
        out = to_question_marks(&out).replace(" AS BIGINT)", " AS SIGNED)");
    }
    out
}

/// Rewrites `OLD.<column>` to `<old><column>` and `NEW.<column>` to `new(<column>)`, outside
/// quoted strings.
fn rewrite_rows(set: &str, old: &str, new: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(set.len() + 16);
    let mut in_quote = false;
    let mut i = 0;
    while let Some(c) = set[i..].chars().next() {
        let rest = &set[i..];
        let at_word_start = set[..i].chars().next_back().is_none_or(|p| !(p.is_ascii_alphanumeric() || p == '_'));
        let reference = if in_quote || !at_word_start {
            None
        } else if let Some(after) = rest.strip_prefix("NEW.") {
            Some((true, after))
        } else {
            rest.strip_prefix("OLD.").map(|after| (false, after))
        };
        if let Some((is_new, after)) = reference {
            let len = after.find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_')).unwrap_or(after.len());
            let column = &after[..len];
            if is_new {
                out.push_str(&new(column));
            } else {
                out.push_str(old);
                out.push_str(column);
            }
            i += 4 + len;
            continue;
        }
        if c == '\'' {
            in_quote = !in_quote;
        }
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// Rewrites `$1`, `$2`, … to `?`, leaving quoted strings alone. Parameters must appear in order.
pub fn to_question_marks(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_quote = false;
    while let Some(c) = chars.next() {
        if c == '\'' {
            in_quote = !in_quote;
            out.push(c);
        } else if c == '$' && !in_quote && chars.peek().is_some_and(char::is_ascii_digit) {
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

/// A plain statement: `sql!("op", "SELECT …")`.
#[macro_export]
macro_rules! sql {
    ($op:literal, $text:expr) => {{
        static S: $crate::sql::Sql = $crate::sql::Sql::new($op, $text, $crate::sql::Shape::Plain);
        &S
    }};
}

/// An insert of `rows` rows per run: `sql_rows!("op", "INSERT INTO t (a, b) VALUES ($1, $2)", 100)`
/// binds `$1 … $200`; run it with [`crate::db::Db::insert_rows`]. `upsert` after the count
/// makes it an upsert like [`upsert!`].
#[macro_export]
macro_rules! sql_rows {
    ($op:literal, $text:expr, $rows:expr) => {{
        static S: $crate::sql::Sql = $crate::sql::Sql::with_rows($op, $text, $crate::sql::Shape::Plain, $rows);
        &S
    }};
    ($op:literal, $text:expr, $rows:expr, on $table:literal ($key:literal), set $set:literal) => {{
        static S: $crate::sql::Sql = $crate::sql::Sql::with_rows(
            $op,
            $text,
            $crate::sql::Shape::Upsert { table: $table, key: $key, set: $set },
            $rows,
        );
        &S
    }};
}

/// An upsert: `upsert!("op", "INSERT INTO t (a, b) VALUES ($1, $2)", on "t" ("a"), set "b = NEW.b")`.
#[macro_export]
macro_rules! upsert {
    ($op:literal, $text:expr, on $table:literal ($key:literal), set $set:literal) => {{
        static S: $crate::sql::Sql =
            $crate::sql::Sql::new($op, $text, $crate::sql::Shape::Upsert { table: $table, key: $key, set: $set });
        &S
    }};
}

/// An insert that leaves a conflicting row alone.
#[macro_export]
macro_rules! insert_or_ignore {
    ($op:literal, $text:expr) => {{
        static S: $crate::sql::Sql = $crate::sql::Sql::new($op, $text, $crate::sql::Shape::InsertOrIgnore);
        &S
    }};
}

/// An insert that leaves a conflicting row alone; [`Db::insert_or_ignore_id`] returns the new
/// row's id, or `None` when the row was there.
#[macro_export]
macro_rules! insert_or_ignore_id {
    ($op:literal, $text:expr) => {{
        static S: $crate::sql::Sql = $crate::sql::Sql::new($op, $text, $crate::sql::Shape::InsertOrIgnoreId);
        &S
    }};
}

/// An insert whose new row's id [`Db::insert_id`] returns.
#[macro_export]
macro_rules! insert_id {
    ($op:literal, $text:expr) => {{
        static S: $crate::sql::Sql = $crate::sql::Sql::new($op, $text, $crate::sql::Shape::InsertId);
        &S
    }};
}

/// Takes or releases a session-wide named lock: `session_lock!("op", "name", pg_key, release)`.
#[macro_export]
macro_rules! session_lock {
    ($op:literal, $name:literal, $pg_key:expr, $release:expr) => {{
        static S: $crate::sql::Sql =
            $crate::sql::Sql::new($op, $name, $crate::sql::Shape::SessionLock { pg_key: $pg_key, release: $release });
        &S
    }};
}

/// A select that locks the rows it picks, skipping those other transactions hold.
#[macro_export]
macro_rules! skip_locked {
    ($op:literal, $text:expr) => {{
        static S: $crate::sql::Sql = $crate::sql::Sql::new($op, $text, $crate::sql::Shape::SkipLocked);
        &S
    }};
}

/// A select that locks the rows it reads (waiting for other transactions' locks) and reads them
/// as committed now, also inside a repeatable-read transaction on MySQL.
#[macro_export]
macro_rules! for_update {
    ($op:literal, $text:expr) => {{
        static S: $crate::sql::Sql = $crate::sql::Sql::new($op, $text, $crate::sql::Shape::ForUpdate);
        &S
    }};
}

/// A statement ready to bind and run.
pub type Query<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// The values of a statement's placeholders, `$1` first: a tuple of them (see
/// [`crate::db::Db::bound`]).
pub trait Binds<'q> {
    fn bind_to(self, query: Query<'q>) -> Query<'q>;
}

macro_rules! binds_for_tuples {
    ($($t:ident)+) => {
        impl<'q, $($t),+> Binds<'q> for ($($t,)+)
        where
            $($t: 'q + Send + sqlx::Encode<'q, sqlx::Any> + sqlx::Type<sqlx::Any>),+
        {
            #[allow(non_snake_case)]
            fn bind_to(self, query: Query<'q>) -> Query<'q> {
                let ($($t,)+) = self;
                query$(.bind($t))+
            }
        }
    };
}

binds_for_tuples!(A);
binds_for_tuples!(A B);
binds_for_tuples!(A B C);
binds_for_tuples!(A B C D);
binds_for_tuples!(A B C D E);
binds_for_tuples!(A B C D E F);
binds_for_tuples!(A B C D E F G);
binds_for_tuples!(A B C D E F G H);
binds_for_tuples!(A B C D E F G H I);
binds_for_tuples!(A B C D E F G H I J);
binds_for_tuples!(A B C D E F G H I J K);
binds_for_tuples!(A B C D E F G H I J K L);

/// A table's row type, declared once: the struct, its `parse` from a row (each column read as
/// its field's type, [`crate::db::Column`]; the `trimmed` ones without the padding a
/// fixed-width column may carry), its [`Binds`] (every field but the key it is `keyed by`, in order: the
/// values of an insert), and a macro naming its columns for statements
/// (`concat!("SELECT ", columns!(), " FROM …")`).
#[macro_export]
macro_rules! row {
    (
        $(#[$meta:meta])*
        pub struct $name:ident $(keyed by $key:ident)?, columns $columns:ident, trimmed ($($trimmed:ident),*) {
            $($(#[$field_meta:meta])* pub $field:ident: $ty:ty),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $(pub $key: i64,)?
            $($(#[$field_meta])* pub $field: $ty,)+
        }

        impl $name {
            pub fn parse(r: &sqlx::any::AnyRow) -> $crate::db::DbResult<Self> {
                #[allow(unused_mut)]
                let mut row = Self {
                    $($key: $crate::db::Column::read(r, stringify!($key))?,)?
                    $($field: $crate::db::Column::read(r, stringify!($field))?,)+
                };
                $(row.$trimmed = row.$trimmed.trim().to_string();)*
                Ok(row)
            }
        }

        impl<'q> $crate::sql::Binds<'q> for &'q $name {
            fn bind_to(self, query: $crate::sql::Query<'q>) -> $crate::sql::Query<'q> {
                query$(.bind(&self.$field))+
            }
        }

        $crate::row!(@columns $columns $($key)? $($field)+);
    };
    (@columns $columns:ident $first:ident $($rest:ident)*) => {
        macro_rules! $columns {
            () => {
                concat!(stringify!($first) $(, ", ", stringify!($rest))*)
            };
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_question_marks() {
        assert_eq!(
            to_question_marks("SELECT a FROM t WHERE b = $1 AND c = '$2' AND d = $2"),
            "SELECT a FROM t WHERE b = ? AND c = '$2' AND d = ?"
        );
        assert_eq!(to_question_marks("SELECT 1"), "SELECT 1");
        assert_eq!(to_question_marks("price $ and $12x"), "price $ and ?x");
    }

    #[test]
    fn a_values_tuple_repeats_with_its_placeholders_numbered_on() {
        let t = "INSERT INTO f (a, b, c) VALUES ($1, $2, 'x')";
        assert_eq!(repeat_values(t, 1), t);
        assert_eq!(repeat_values(t, 3), "INSERT INTO f (a, b, c) VALUES ($1, $2, 'x'), ($3, $4, 'x'), ($5, $6, 'x')");
        let s = Sql::with_rows("op", "INSERT INTO f (a, b) VALUES ($1, lower($2))", Shape::Plain, 2);
        assert_eq!(s.text(Backend::Postgres), "INSERT INTO f (a, b) VALUES ($1, lower($2)), ($3, lower($4))");
        assert_eq!(s.text(Backend::MySql), "INSERT INTO f (a, b) VALUES (?, lower(?)), (?, lower(?))");
        let u = Sql::with_rows(
            "op",
            "INSERT INTO f (a, b) VALUES ($1, $2)",
            Shape::Upsert { table: "f", key: "a", set: "b = NEW.b" },
            2,
        );
        assert_eq!(
            u.text(Backend::Sqlite),
            "INSERT INTO f (a, b) VALUES ($1, $2), ($3, $4) ON CONFLICT (a) DO UPDATE SET b = excluded.b"
        );
    }

    #[test]
    fn each_shape_in_each_dialect() {
        let upsert = Shape::Upsert {
            table: "blobs",
            key: "sha256",
            set:
                "created_at = NEW.created_at, origin = CASE WHEN OLD.origin = 'upload' THEN 'NEW.x' ELSE OLD.origin END",
        };
        let insert = "INSERT INTO blobs (sha256, created_at, origin) VALUES ($1, $2, 'x')";
        assert_eq!(
            render(insert, upsert, Backend::Postgres),
            "INSERT INTO blobs (sha256, created_at, origin) VALUES ($1, $2, 'x') ON CONFLICT (sha256) DO UPDATE SET created_at = excluded.created_at, origin = CASE WHEN blobs.origin = 'upload' THEN 'NEW.x' ELSE blobs.origin END"
        );
        assert_eq!(render(insert, upsert, Backend::Sqlite), render(insert, upsert, Backend::Postgres));
        assert_eq!(
            render(insert, upsert, Backend::MySql),
            "INSERT INTO blobs (sha256, created_at, origin) VALUES (?, ?, 'x') ON DUPLICATE KEY UPDATE created_at = VALUES(created_at), origin = CASE WHEN origin = 'upload' THEN 'NEW.x' ELSE origin END"
        );
        let t = "INSERT INTO u (a) VALUES ($1)";
        assert_eq!(
            render(t, Shape::InsertOrIgnore, Backend::Postgres),
            "INSERT INTO u (a) VALUES ($1) ON CONFLICT DO NOTHING"
        );
        assert_eq!(render(t, Shape::InsertOrIgnore, Backend::MySql), "INSERT IGNORE INTO u (a) VALUES (?)");
        assert_eq!(render(t, Shape::InsertId, Backend::Sqlite), "INSERT INTO u (a) VALUES ($1) RETURNING id");
        assert_eq!(render(t, Shape::InsertId, Backend::MySql), "INSERT INTO u (a) VALUES (?)");
        assert_eq!(
            render(t, Shape::InsertOrIgnoreId, Backend::Sqlite),
            "INSERT INTO u (a) VALUES ($1) ON CONFLICT DO NOTHING RETURNING id"
        );
        assert_eq!(render(t, Shape::InsertOrIgnoreId, Backend::MySql), "INSERT IGNORE INTO u (a) VALUES (?)");
        let s = "SELECT id FROM u WHERE a = $1 LIMIT 1";
        assert_eq!(render(s, Shape::SkipLocked, Backend::Sqlite), s);
        assert_eq!(
            render(s, Shape::SkipLocked, Backend::MySql),
            "SELECT id FROM u WHERE a = ? LIMIT 1 FOR UPDATE SKIP LOCKED"
        );
        assert_eq!(render(s, Shape::ForUpdate, Backend::Sqlite), s);
        assert_eq!(render(s, Shape::ForUpdate, Backend::Postgres), "SELECT id FROM u WHERE a = $1 LIMIT 1 FOR UPDATE");
        assert_eq!(render(s, Shape::ForUpdate, Backend::MySql), "SELECT id FROM u WHERE a = ? LIMIT 1 FOR UPDATE");
        // A column whose name ends in NEW is not a reference to the proposed row.
        assert_eq!(rewrite_rows("RENEW.x = 1", "t.", |c| format!("v({c})")), "RENEW.x = 1");
    }
}
