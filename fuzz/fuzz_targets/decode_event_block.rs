#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    for width in [2, 3] { let _ = asof_storage::fuzzing::decode_event_block(data, width); }
});
