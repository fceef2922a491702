//! `packyard-worker`: the publication worker, as a library (the api runs it in-process when
//! `worker.embedded = true`) and as a binary. It also owns the management listener that both
//! binaries serve (`/healthz`, `/readyz`, `/metrics`).

pub mod management;
pub mod process;
pub mod publisher;

use std::sync::Arc;

use packyard_core::publication::testformat::TestFormat;
use packyard_core::publication::Builders;
use packyard_core::services::Services;

/// Every format's builder. Formats add theirs here as they arrive.
pub fn builders(services: &Services) -> Builders {
    let delay = std::time::Duration::from_millis(services.config.debug.build_delay_ms);
    Builders::default()
        .with(Arc::new(TestFormat { page_size: 500, delay }))
        .with(Arc::new(packyard_formats::apt::publish::AptBuilder {
            page_size: 1_000,
            keystore: services.security.keystore.clone(),
            blobs: services.blobs.clone(),
            proxy: Some(services.proxy.clone()),
        }))
        .with(Arc::new(packyard_formats::apk::publish::ApkBuilder {
            page_size: 1_000,
            keystore: services.security.keystore.clone(),
            blobs: services.blobs.clone(),
            proxy: Some(services.proxy.clone()),
        }))
        .with(Arc::new(packyard_formats::go::publish::GoBuilder { page_size: 1_000 }))
        .with(Arc::new(packyard_formats::conan::publish::ConanBuilder))
        .with(Arc::new(packyard_formats::conan::publish::ConanSearchBuilder))
}
