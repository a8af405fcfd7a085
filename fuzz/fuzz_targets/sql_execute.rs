#![no_main]

// SQL statements planned and executed against a small in-memory store (not only parsed), in a
// session that refuses files. This target builds DataFusion (asof-query), unlike the others.
libfuzzer_sys::fuzz_target!(init: { std::panic::set_hook(Box::new(|_| {})); }, |data: &[u8]| {
    let _ = asof_query::fuzzing_sql::execute(data);
});
