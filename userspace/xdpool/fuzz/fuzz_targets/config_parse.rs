//! The TOML config parser and its validation: never panics on any text; an accepted
//! config yields its rules and worker cores without panicking either.
#![no_main]
use libfuzzer_sys::fuzz_target;
use xdpool::internal::config::Config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = Config::parse(text) {
        let _ = cfg.valid_rules();
        let _ = cfg.worker_cores();
    }
});
