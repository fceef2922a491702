//! The runtime every database connection is opened on (#44).
//!
//! actix-web runs each HTTP worker on a runtime of its own, and a socket belongs to the runtime
//! it was opened on. With one pool shared by the workers, a connection opened by one worker and
//! lent to a request on another died when a graceful stop ended the first worker (an idle
//! worker stops at once) in the middle of that request: "A Tokio 1.x context was found, but it
//! is being shutdown", a 503 during a restart that should cost nothing. So every acquisition
//! from the pool runs inside this process-wide runtime's context: a connection opened then is
//! driven by a runtime that lives as long as the process, whichever task uses it.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use futures_util::stream::{BoxStream, Stream};
use sqlx::any::{AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::{Any, AnyPool, Describe, Either, Execute, Executor};
use tokio::runtime::Handle;

/// The database's own runtime: one thread that drives the connections' sockets and timers
/// (built once; `None` when it cannot be, and then connections belong to whoever opens them).
fn handle() -> Option<&'static Handle> {
    static RUNTIME: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("packyard-db-io")
                .enable_all()
                .build()
                .map_err(|e| tracing::warn!(error = %e, "cannot start the database's runtime; connections belong to the runtime that opens them"))
                .ok()
        })
        .as_ref()
        .map(tokio::runtime::Runtime::handle)
}

/// Polls `inner` inside the database runtime's context, so that what it opens (a connection's
/// socket, an acquisition's timer) is registered there.
pub struct InIo<T> {
    inner: T,
}

impl<T> InIo<T> {
    pub fn new(inner: T) -> Self {
        Self { inner }
    }
}

impl<T: Future + Unpin> Future for InIo<T> {
    type Output = T::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let _entered = handle().map(Handle::enter);
        Pin::new(&mut self.inner).poll(cx)
    }
}

impl<T: Stream + Unpin> Stream for InIo<T> {
    type Item = T::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let _entered = handle().map(Handle::enter);
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

/// Runs `f` inside the database runtime's context (the pool's creation: its maintenance tasks
/// go there).
pub fn within<R>(f: impl FnOnce() -> R) -> R {
    let _entered = handle().map(Handle::enter);
    f()
}

/// The pool, whose every acquisition runs in the database runtime's context.
#[derive(Clone, Debug)]
pub struct DbPool(AnyPool);

impl DbPool {
    pub fn new(pool: AnyPool) -> Self {
        Self(pool)
    }

    pub async fn acquire(&self) -> Result<sqlx::pool::PoolConnection<Any>, sqlx::Error> {
        InIo::new(Box::pin(self.0.acquire())).await
    }

    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, Any>, sqlx::Error> {
        InIo::new(Box::pin(self.0.begin())).await
    }

    pub async fn begin_with(&self, statement: &'static str) -> Result<sqlx::Transaction<'static, Any>, sqlx::Error> {
        InIo::new(Box::pin(self.0.begin_with(statement))).await
    }

    pub async fn close(&self) {
        InIo::new(Box::pin(self.0.close())).await;
    }

    pub fn size(&self) -> u32 {
        self.0.size()
    }

    pub fn num_idle(&self) -> usize {
        self.0.num_idle()
    }
}

impl<'c> Executor<'c> for &'c DbPool {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Any>,
    {
        Box::pin(InIo::new((&self.0).fetch_many(query)))
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Any>,
    {
        Box::pin(InIo::new((&self.0).fetch_optional(query)))
    }

    fn prepare_with<'e, 'q: 'e>(
        self,
        sql: &'q str,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement<'q>, sqlx::Error>>
    where
        'c: 'e,
    {
        Box::pin(InIo::new((&self.0).prepare_with(sql, parameters)))
    }

    fn describe<'e, 'q: 'e>(self, sql: &'q str) -> BoxFuture<'e, Result<Describe<Any>, sqlx::Error>>
    where
        'c: 'e,
    {
        Box::pin(InIo::new((&self.0).describe(sql)))
    }
}
