#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = asof_storage::fuzzing::decode_source_chunk(data);
});
