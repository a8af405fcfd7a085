#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = asof_fuzz::fuzzing::ingest_file(data, asof_fuzz::files::FileFormat::Json);
});
