//! The glob patterns of tool lists (`hosted_tools`, `long_calls.tools`).

/// `*` matches any run of characters, `?` any one character. A loop, not recursion: the
/// name is a client's, of any length (a recursion as deep as the name overflowed the stack).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    // The common shapes without allocating: checked on every call a tool policy judges.
    if !pattern.contains('?') {
        match pattern.matches('*').count() {
            0 => return pattern == name,
            1 if pattern.ends_with('*') => return name.starts_with(&pattern[..pattern.len() - 1]),
            1 if pattern.starts_with('*') => return name.ends_with(&pattern[1..]),
            _ => {}
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    // The last `*` seen, and where in the name its run ends so far.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                // The last `*` takes one more character, and the rest is tried again.
                Some((sp, sn)) => {
                    star = Some((sp, sn + 1));
                    pi = sp + 1;
                    ni = sn + 1;
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}
