//! Format codecs and publication logic, one vertical slice per format.

pub mod apk;
pub mod apt;
pub mod archive;
pub mod conan;
pub mod go;
pub mod upload;
