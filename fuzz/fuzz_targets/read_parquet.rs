#![no_main]

// asof turns the panics of third-party decoders on damaged input into errors (catch_unwind);
// libFuzzer's panic hook would abort on them first. A panic asof does not catch still aborts.
libfuzzer_sys::fuzz_target!(init: { std::panic::set_hook(Box::new(|_| {})); }, |data: &[u8]| {
    let _ = asof_fuzz::fuzzing::ingest_file(data, asof_fuzz::files::FileFormat::Parquet);
});
