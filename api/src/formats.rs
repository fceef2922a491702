//! Format routes under `/repository/{repo}/`, one module per format.

use actix_web::web;
use packyard_shared::config::Config;

pub mod apt;
pub mod testformat;

/// Mounts the routes of every format (inside the `/repository/{repo}` scope).
pub fn configure(cfg: &mut web::ServiceConfig, config: &Config) {
    apt::configure(cfg);
    if config.debug.test_format {
        testformat::configure(cfg);
    }
}
