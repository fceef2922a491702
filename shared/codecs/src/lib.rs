//! `packyard-codecs`: what the formats read and write, pure — `.deb` and `.apk` readers, Go module
//! zips, versions and paths, Conan references and manifests, index writers, OpenPGP and RSA
//! signing, whole-archive checks. Nothing here touches a database, a blob store or the network,
//! so the fuzz targets build on this crate alone.

pub mod apk;
pub mod apt;
pub mod archive;
pub mod conan;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod go;
pub mod md5lanes;
pub mod zip;
