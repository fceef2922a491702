#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| packyard_codecs::conan::fuzzing::conan(data));
