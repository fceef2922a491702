#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| packyard_codecs::go::fuzzing::go_path(data));
