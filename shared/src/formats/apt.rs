//! APT: `.deb` parsing, control-field rules, pool paths and `Packages` stanzas.

pub mod control;
pub mod deb;
pub mod hosted;
pub mod packages;
pub mod publish;
pub mod signing;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
