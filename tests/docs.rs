//! The docs the code keeps true: the generated parts of docs/configuration.md and
//! docs/versions.md match what the code writes, every config key is described, the README
//! stays short and its config snippets load, every relative link and anchor in README.md and
//! docs/ resolves, and each command's `--help` names a docs page that exists.
//!
//! Regenerate both generated parts with one command:
//! `UPDATE_DOCS=1 cargo test --test all docs::`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const REGENERATE: &str = "UPDATE_DOCS=1 cargo test --test all docs::";
const END: &str = "<!-- END GENERATED -->";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Checks that the part of `page` between its `<!-- BEGIN GENERATED: what -->` line and
/// `END` is `generated`; with `UPDATE_DOCS` set, writes it there instead.
fn ensure_generated(page: &str, what: &str, generated: &str) {
    let text = read(page);
    let begin = format!("<!-- BEGIN GENERATED: {what}. Regenerate: {REGENERATE} -->\n");
    let start = text.find(&begin).unwrap_or_else(|| panic!("{page} lacks the line {begin:?}")) + begin.len();
    let end = start + text[start..].find(END).unwrap_or_else(|| panic!("{page} lacks {END:?} after its BEGIN line"));
    if text[start..end] == *generated {
        return;
    }
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{}{generated}{}", &text[..start], &text[end..]);
        std::fs::write(root().join(page), updated).unwrap();
        eprintln!("{page}: regenerated");
        return;
    }
    let first = text[start..end].lines().zip(generated.lines()).position(|(a, b)| a != b);
    panic!(
        "{page} differs from what the code writes ({what}){}.\nRegenerate it with: {REGENERATE}",
        first.map(|n| format!(", first at generated line {}", n + 1)).unwrap_or_default()
    );
}

#[test]
fn configuration_md_is_what_the_config_types_say() {
    ensure_generated("docs/configuration.md", "config reference", &taskgate::config_reference());
}

#[test]
fn versions_md_holds_the_translation_table() {
    ensure_generated("docs/versions.md", "taskgate versions", &taskgate::version_table());
}

#[test]
fn every_config_key_is_described() {
    let (missing, stale) = taskgate::undescribed_config_keys();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "src/config/reference/keys.rs should describe every config key: add {missing:?}, remove {stale:?}; then {REGENERATE}"
    );
}

/// The fenced blocks of `lang` in Markdown text.
fn fenced(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim_start().strip_prefix("```")) {
            (None, Some(l)) if l.trim() == lang => current = Some(String::new()),
            (Some(block), Some(_)) => {
                out.push(std::mem::take(block));
                current = None;
            }
            (Some(block), None) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    out
}

#[test]
fn the_readme_config_snippets_load() {
    let readme = read("README.md");
    let blocks = fenced(&readme, "toml");
    assert!(blocks.len() >= 2, "the README should show a config for a stdio and for an HTTP server");
    let mut shown = String::new();
    for block in &blocks {
        let config = taskgate::Config::parse(block, &|_| Some("value-from-the-environment".into()))
            .unwrap_or_else(|e| panic!("README.md's config does not load: {e}\n{block}"));
        shown.push_str(&config.describe());
    }
    // `check` shows a stdio upstream's `command` and an HTTP upstream's `url`.
    assert!(shown.contains("\ncommand = ") && shown.contains("\nurl = "), "{shown}");
}

#[test]
fn the_readme_is_read_in_five_minutes() {
    let lines = read("README.md").lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: keep it at most 300 and move the rest to a docs/ page");
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces
/// made `-`; a repeated one gets `-1`, `-2`, ….
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let Some(heading) = line.strip_prefix('#').map(|h| h.trim_start_matches('#')) else { continue };
        if in_code || !heading.starts_with(' ') {
            continue;
        }
        let slug: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while out.contains(&unique) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
        out.insert(unique);
    }
    out
}

/// The targets of the Markdown links and images in `text`, outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        // Inline code spans are not links.
        let plain: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(j) = after.find(')') else { break };
            out.push(after[..j].split_whitespace().next().unwrap_or("").to_string());
            rest = &after[j..];
        }
    }
    out
}

fn markdown_files() -> Vec<String> {
    let mut files = vec!["README.md".to_string()];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    files.sort();
    files
}

#[test]
fn relative_links_and_anchors_resolve() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        let dir = Path::new(&file).parent().unwrap().to_path_buf();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() { PathBuf::from(&file) } else { dir.join(path) };
            let on_disk = root().join(&target);
            if !on_disk.exists() {
                broken.push(format!("{file}: {link}: no such file {}", target.display()));
                continue;
            }
            if !anchor.is_empty() {
                let target_text = std::fs::read_to_string(&on_disk).unwrap_or_default();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{file}: {link}: no heading with anchor #{anchor}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_checker_sees_what_github_sees() {
    let a = anchors("# taskgate\n## Legacy HTTP+SSE (the 2024-11-05 transport)\n### `[server]`\n## Tasks\n## Tasks\n");
    for want in ["taskgate", "legacy-httpsse-the-2024-11-05-transport", "server", "tasks", "tasks-1"] {
        assert!(a.contains(want), "{want}: {a:?}");
    }
    let l = links("see [a](x.md#y) and `[b](not-a-link)`\n```\n[c](in-code)\n```\n![img](p.png)");
    assert_eq!(l, ["x.md#y", "p.png"]);
}

#[test]
fn each_command_help_names_its_docs_page() {
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["stdio", "--help"],
        &["check", "--help"],
        &["versions", "--help"],
        &["demo-server", "--help"],
        &["import", "--help"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_taskgate")).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        let pages: Vec<&str> = help
            .split_whitespace()
            .filter_map(|w| w.trim_end_matches(['.', ',', ')', ';']).strip_prefix("docs/"))
            .collect();
        assert!(!pages.is_empty(), "taskgate {args:?} should name a docs/ page:\n{help}");
        for page in pages {
            let page = page.split('#').next().unwrap();
            assert!(root().join("docs").join(page).is_file(), "taskgate {args:?} names docs/{page}, which is missing");
        }
    }
}
