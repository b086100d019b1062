//! The shape of `src/`, checked: no import cycle between its files, no file over 600 lines,
//! and layers that only import downward (DESIGN.md §3).
//!
//! Dependencies are read from the source text: every `crate::…`, `super::…` and `self::…`
//! path (in `use` trees, `{…}` groups included, and in code), and paths through a child
//! module the file declares (`mod x;` then `x::…`). Declaring a child (`mod x;`) is not a
//! dependency; using it is. Comments, string literals and `#[cfg(test)]` items are left out:
//! what a unit test imports is not part of the layering. A path is resolved to the deepest
//! file that defines a module on it (`crate::a::b::Item` → `src/a/b.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const MAX_LINES: usize = 600;

/// The layers, from the bottom. A file may import files of its own layer or below, and any
/// leaf. Leaves import nothing of ours outside themselves.
///
/// `jsonrpc` (the envelope: ids, frames, error objects) sits under `transport`: the
/// Streamable HTTP client relates responses to the requests it posted by their ids, and a
/// stdio reader answers a line it cannot parse with an error for that id.
const LAYERS: &[(&str, u8)] = &[
    ("jsonrpc", 0),
    ("transport", 1),
    // The process's metrics count requests by their typed method (`jsonrpc::Method`), the
    // one list of method names; nothing below the gateway counts anything.
    ("metrics", 1),
    ("mcp", 2),
    // The built-in demo server: started by upstream::connect like any upstream, it may use
    // what an upstream server would (transport, jsonrpc, mcp), nothing above.
    ("demo", 3),
    // The upstream side: links, the connections they run over, progress discipline.
    ("upstream", 4),
    // Hosted, bridged and relayed tasks and their stores: they use links, sessions use them.
    ("tasks", 5),
    ("gateway", 6),
    ("downstream", 7),
];
const LEAVES: &[&str] = &["client_slots", "clock", "config", "huge_pages", "random", "warn_limit"];
/// Under everything, leaves included: the gateway's counted mutex (`src/locks.rs`), which
/// imports nothing of ours.
const FOUNDATION: &[&str] = &["locks"];
/// Edges inside one layer that would make it two-way.
const FORBIDDEN: &[(&str, &str, &str)] =
    &[("src/mcp/", "src/config", "version knowledge does not depend on how the gateway is configured")];

struct Tree {
    root: PathBuf,
    /// Module path ("" for the crate root) → file, relative to the crate.
    modules: BTreeMap<String, String>,
    /// File → its module path.
    files: BTreeMap<String, String>,
}

impl Tree {
    fn load() -> Tree {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut tree = Tree { root: root.clone(), modules: BTreeMap::new(), files: BTreeMap::new() };
        let mut stack = vec![root.join("src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let rel = path.strip_prefix(&root).unwrap().to_str().unwrap().to_string();
                    if rel == "src/main.rs" {
                        continue; // the binary: a crate of its own, on top of everything
                    }
                    let module = module_of(&rel);
                    tree.modules.insert(module.clone(), rel.clone());
                    tree.files.insert(rel, module);
                }
            }
        }
        tree
    }

    /// The file that defines the deepest module on `path` (segments from the crate root).
    fn resolve(&self, path: &[String]) -> Option<&String> {
        (0..=path.len()).rev().find_map(|n| self.modules.get(&path[..n].join("::")))
    }

    /// Every file each file depends on.
    fn graph(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut graph = BTreeMap::new();
        for (file, module) in &self.files {
            let text = std::fs::read_to_string(self.root.join(file)).unwrap();
            let tokens = tokenize(&strip_test_items(&strip_comments_and_strings(&text)));
            let children = declared_children(&tokens);
            let here: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            let mut deps = BTreeSet::new();
            for path in paths(&tokens) {
                let absolute = match path.first().map(String::as_str) {
                    Some("crate") => path[1..].to_vec(),
                    Some("super") => {
                        let ups = path.iter().take_while(|s| *s == "super").count();
                        let base = &here[..here.len().saturating_sub(ups)];
                        base.iter().cloned().chain(path[ups..].iter().cloned()).collect()
                    }
                    Some("self") => here.iter().cloned().chain(path[1..].iter().cloned()).collect(),
                    Some(first) if children.contains(first) => here.iter().cloned().chain(path).collect(),
                    _ => continue,
                };
                if let Some(target) = self.resolve(&absolute)
                    && target != file
                {
                    deps.insert(target.clone());
                }
            }
            graph.insert(file.clone(), deps);
        }
        graph
    }
}

fn module_of(rel: &str) -> String {
    let p = rel.strip_prefix("src/").unwrap().strip_suffix(".rs").unwrap();
    let p = p.strip_suffix("/mod").unwrap_or(p);
    if p == "lib" { String::new() } else { p.replace('/', "::") }
}

/// The source with comments, string and char literals blanked out (lines kept).
fn strip_comments_and_strings(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[u8]| out.extend(s.iter().map(|&c| if c == b'\n' { '\n' } else { ' ' }));
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            i + rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, i);
            loop {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break j;
                    }
                } else {
                    j += 1;
                }
            }
        } else if rest[0] == b'r' && (rest.starts_with(b"r\"") || rest.starts_with(b"r#")) && !ident_before(b, i) {
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            if rest.get(1 + hashes) != Some(&b'"') {
                out.push(rest[0] as char);
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let body = i + 2 + hashes;
            body + b[body..].windows(close.len()).position(|w| w == close.as_slice()).unwrap() + close.len()
        } else if rest[0] == b'"' {
            let mut j = i + 1;
            while b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        } else if rest[0] == b'\'' && rest.len() > 2 && (rest[1] == b'\\' || rest[2] == b'\'') {
            // A char literal ('x', '\n', '\u{..}'); a lifetime ('a) is left alone.
            let mut j = i + 2;
            while b[j] != b'\'' {
                j += 1;
            }
            j + 1
        } else {
            // Copy one whole UTF-8 character.
            let len = src[i..].chars().next().unwrap().len_utf8();
            out.push_str(&src[i..i + len]);
            i += len;
            continue;
        };
        blank(&mut out, &b[i..end]);
        i = end;
    }
    out
}

fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// Removes each `#[cfg(test)]` item: up to its `;`, or its whole `{…}` block.
fn strip_test_items(src: &str) -> String {
    let mut s = src.to_string();
    while let Some(at) = s.find("#[cfg(test)]") {
        let b = s.as_bytes();
        let mut j = at + "#[cfg(test)]".len();
        while b[j] != b'{' && b[j] != b';' {
            j += 1;
        }
        if b[j] == b'{' {
            let mut depth = 0;
            loop {
                match b[j] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        s.replace_range(at..=j, "");
    }
    s
}

fn tokenize(src: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = src.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            tokens.push(src[i..end].to_string());
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            tokens.push("::".into());
        } else if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
    }
    tokens
}

/// The modules a file declares with `mod x;`.
fn declared_children(tokens: &[String]) -> BTreeSet<String> {
    tokens.windows(3).filter(|w| w[0] == "mod" && w[2] == ";").map(|w| w[1].clone()).collect()
}

/// Every path the file names: the leaves of its `use` trees, and `a::b::c` paths in code.
fn paths(tokens: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" {
            let end = i + tokens[i..].iter().position(|t| t == ";").unwrap();
            use_tree(&tokens[i + 1..end], &[], &mut out);
            i = end;
        } else if tokens.get(i + 1).is_some_and(|t| t == "::") && (i == 0 || tokens[i - 1] != "::") {
            let mut path = vec![tokens[i].clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::") && tokens.get(j + 1).is_some_and(|t| is_ident(t)) {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            out.push(path);
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// Expands one `use` tree (`a::b::{c, d::{self, e}}`) into its paths.
fn use_tree(tokens: &[String], prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i].as_str() {
            "::" | "pub" | "(" | ")" => {}
            "{" => {
                let close = matching(tokens, i);
                for part in split_top(&tokens[i + 1..close]) {
                    use_tree(part, &path, out);
                }
                return;
            }
            "as" => break,
            "*" => break,
            "self" if !path.is_empty() => {}
            t => path.push(t.to_string()),
        }
        i += 1;
    }
    if !path.is_empty() {
        out.push(path);
    }
}

fn matching(tokens: &[String], open: usize) -> usize {
    let mut depth = 0;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        match t.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces in a use tree")
}

fn split_top(tokens: &[String]) -> Vec<&[String]> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (j, t) in tokens.iter().enumerate() {
        match t.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 0 => {
                parts.push(&tokens[start..j]);
                start = j + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
}

/// One cycle through each strongly connected group of files, as `a → b → … → a`.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for start in graph.keys() {
        if seen.contains(start) {
            continue;
        }
        // Shortest path from start back to itself (breadth first).
        let mut prev: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        let mut closing = None;
        while let Some(f) = queue.pop_front() {
            for d in &graph[f] {
                if d == start {
                    closing = Some(f);
                    break;
                }
                if !prev.contains_key(d) {
                    prev.insert(d, f);
                    queue.push_back(d);
                }
            }
            if closing.is_some() {
                break;
            }
        }
        let Some(mut f) = closing else { continue };
        let mut cycle = vec![start.clone()];
        while f != start {
            cycle.push(f.clone());
            f = prev[f];
        }
        cycle.reverse();
        cycle.insert(0, start.clone());
        cycle.pop();
        seen.extend(cycle.iter().cloned());
        cycle.push(start.clone());
        found.push(cycle.join(" → "));
    }
    found
}

fn layer_of(file: &str) -> Option<Result<u8, ()>> {
    let top = file.strip_prefix("src/")?.split(['/', '.']).next()?;
    if LEAVES.contains(&top) || FOUNDATION.contains(&top) {
        return Some(Err(()));
    }
    LAYERS.iter().find(|(m, _)| *m == top).map(|(_, r)| Ok(*r))
}

fn top_of(file: &str) -> &str {
    file.strip_prefix("src/").unwrap().split(['/', '.']).next().unwrap()
}

#[test]
fn no_import_cycles() {
    let tree = Tree::load();
    let found = cycles(&tree.graph());
    assert!(found.is_empty(), "import cycles between files of src/:\n  {}", found.join("\n  "));
}

#[test]
fn no_file_over_600_lines() {
    let tree = Tree::load();
    let mut long: Vec<String> = tree
        .files
        .keys()
        .chain(std::iter::once(&"src/main.rs".to_string()))
        .map(|f| (f.clone(), std::fs::read_to_string(tree.root.join(f)).unwrap().lines().count()))
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(f, n)| format!("{f}: {n} lines"))
        .collect();
    long.sort();
    assert!(long.is_empty(), "files over {MAX_LINES} lines:\n  {}", long.join("\n  "));
}

#[test]
fn layers_only_import_downward() {
    let tree = Tree::load();
    let mut wrong = Vec::new();
    for (file, deps) in tree.graph() {
        if file == "src/lib.rs" {
            continue;
        }
        let Some(mine) = layer_of(&file) else {
            wrong.push(format!("{file}: in no layer (add its module to LAYERS or LEAVES in tests/layers.rs)"));
            continue;
        };
        for dep in &deps {
            let ok = match (mine, layer_of(dep)) {
                _ if FOUNDATION.contains(&top_of(dep)) => true,
                // A leaf imports nothing of ours but itself.
                (Err(()), _) => top_of(dep) == top_of(&file),
                (Ok(_), Some(Err(()))) => true,
                (Ok(m), Some(Ok(d))) => d <= m,
                (Ok(_), None) => false,
            };
            if !ok {
                wrong.push(format!("{file} imports {dep}, which is above it"));
            }
            for (from, to, why) in FORBIDDEN {
                if file.starts_with(from) && dep.starts_with(to) {
                    wrong.push(format!("{file} imports {dep}: {why}"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layering:\n  {}", wrong.join("\n  "));
}

/// No folder imports a folder that imports it back, at any depth: `a/` and `b/` (a module with
/// files below it, `a.rs` or `a/mod.rs` included) where neither holds the other. A two-way pair
/// of folders is a decision made in two places, even when no two files form a cycle.
#[test]
fn no_two_folders_import_each_other() {
    let tree = Tree::load();
    // Every module that has files below it, by its path.
    let folders: BTreeSet<String> = tree
        .files
        .values()
        .filter_map(|m| m.rsplit_once("::").map(|(parent, _)| parent.to_string()))
        .flat_map(|m| {
            let parts: Vec<&str> = m.split("::").collect();
            (1..=parts.len()).map(move |n| parts[..n].join("::")).collect::<Vec<_>>()
        })
        .collect();
    let within = |module: &str, folder: &str| module == folder || module.starts_with(&format!("{folder}::"));
    let mut edges: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    for (file, deps) in tree.graph() {
        let from = &tree.files[&file];
        for dep in deps {
            let to = &tree.files[&dep];
            for a in folders.iter().filter(|f| within(from, f)) {
                for b in folders.iter().filter(|f| within(to, f)) {
                    if !within(a, b) && !within(b, a) {
                        edges.entry((a.clone(), b.clone())).or_insert((file.clone(), dep.clone()));
                    }
                }
            }
        }
    }
    let mut both: Vec<String> = edges
        .iter()
        .filter(|((a, b), _)| a < b && edges.contains_key(&(b.clone(), a.clone())))
        .map(|((a, b), (f, d))| {
            let (g, e) = &edges[&(b.clone(), a.clone())];
            format!("{a}/ ⇄ {b}/: {f} imports {d}, and {g} imports {e}")
        })
        .collect();
    both.sort();
    assert!(both.is_empty(), "folders that import each other:\n  {}", both.join("\n  "));
}

/// The reader itself, on a small sample.
#[test]
fn reads_paths_and_groups() {
    let src = r#"
        use crate::{a::b::{self, C}, d};
        use super::e as f;
        // use crate::commented::Out;
        fn g() { let s = "crate::in_string::X"; crate::h::i(); x::y(); }
        #[cfg(test)]
        mod tests { use crate::only_tests; }
    "#;
    let tokens = tokenize(&strip_test_items(&strip_comments_and_strings(src)));
    let got: Vec<String> = paths(&tokens).into_iter().map(|p| p.join("::")).collect();
    assert_eq!(got, ["crate::a::b", "crate::a::b::C", "crate::d", "super::e", "crate::h::i", "x::y"]);
}
