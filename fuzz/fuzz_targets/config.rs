//! The config parser: arbitrary TOML text, with a `${VAR}` lookup that knows some names and
//! not others. A config that parses must describe itself without panicking, and its secrets
//! must stay out of that description.

#![no_main]

use libfuzzer_sys::fuzz_target;
use taskgate::config::Config;

/// What the lookup returns; a byte sequence the description must never contain.
const SECRET: &str = "\u{1}fuzz-secret\u{2}";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let env = |name: &str| -> Option<String> {
        (!name.is_empty() && name.len().is_multiple_of(2)).then(|| format!("{SECRET}{name}"))
    };
    match Config::parse(text, &env) {
        Ok(config) => {
            assert!(!config.upstreams.is_empty(), "a config has at least one upstream");
            let described = config.describe();
            // Unless the text itself spells the marker (literally or through escapes).
            if !text.contains("secret") && !text.contains('\\') {
                assert!(!described.contains(SECRET), "a secret was printed:\n{described}");
            }
            for u in &config.upstreams {
                assert!(config.upstream(&u.name).is_some());
            }
        }
        Err(e) => assert!(!e.0.is_empty(), "errors say what is wrong"),
    }
});
