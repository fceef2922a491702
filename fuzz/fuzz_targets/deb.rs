#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| packyard_codecs::apt::fuzzing::deb(data));
