//! Fuzz target: render_pod::http::fuzz_entries::query on every input.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| render_pod::http::fuzz_entries::query(data));
