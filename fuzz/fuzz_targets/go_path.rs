#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| packyard_shared::fuzzing::go_path(data));
