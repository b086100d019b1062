//! The `[server.auth]` section of a test gateway that takes bearer tokens.

/// `[server.auth]` in bearer mode with one `[[server.auth.tokens]]` per (principal, token),
/// each token written to a file of its principal's name in `dir`.
pub fn bearer_tokens(dir: &tempfile::TempDir, tokens: &[(&str, &str)]) -> String {
    let mut config = String::from("[server.auth]\nmode = \"bearer\"\n");
    for (name, token) in tokens {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("{token}\n")).unwrap();
        config.push_str(&format!(
            "[[server.auth.tokens]]\nprincipal = \"{name}\"\nfile = {:?}\n",
            path.display().to_string()
        ));
    }
    config
}
