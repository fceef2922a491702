//! `packyard-worker`: the publication worker, as a library (the api runs it in-process when
//! `worker.embedded = true`) and as a binary. It also owns the management listener that both
//! binaries serve (`/healthz`, `/readyz`, `/metrics`).
//!
//! The publication pipeline itself (leases, debounce, snapshots) arrives with issue #4; until then
//! the standalone worker serves its management endpoints and waits for shutdown.

pub mod management;
pub mod process;
