//! Fuzz target: render_pod::http::fuzz_entries::office_detect on every input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| render_pod::http::fuzz_entries::office_detect(data));
