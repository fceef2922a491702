//! APT: `.deb` reading, control-field rules, pool paths, `Packages` stanzas and OpenPGP signing.

pub mod control;
pub mod deb;
pub mod dsc;
pub mod fields;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod packages;
pub mod signing;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod version;
