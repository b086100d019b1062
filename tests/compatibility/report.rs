//! docs/compatibility.md, written from the matrix's results: the rows, a table through the
//! gateway and one direct, the cells that pass direct and fail through the gateway, and the
//! servers left out. Deterministic: no timings, and ports, ids and other long numbers in
//! failure reasons are masked, so that a run with the same outcomes writes the same file.

use super::clients::{COLUMNS, Run};
use super::servers::{LEFT_OUT, Server};

/// One cell's outcome: through the gateway, and direct (or why not).
pub struct Cell {
    pub gateway: Run,
    pub direct: Result<Run, &'static str>,
    /// The task the cell runs, or why none.
    pub task: Result<&'static str, &'static str>,
}

impl Cell {
    /// The steps that passed direct and not through the gateway.
    pub fn regressions(&self) -> Vec<String> {
        let Ok(direct) = &self.direct else { return vec![] };
        direct.steps.iter().filter(|s| s.ok && !self.gateway.ok(&s.step)).map(|s| s.step.clone()).collect()
    }
}

/// Ports, ids, pids and the like replaced by `…`; dates (`2025-11-25`) kept. Table pipes escaped.
pub fn mask(text: &str) -> String {
    let mut out = String::new();
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        let is_date = token.len() == 10 && token.as_bytes()[4] == b'-' && token.as_bytes()[7] == b'-';
        let digits = token.bytes().filter(u8::is_ascii_digit).count();
        if !is_date && (digits >= 4 || (token.len() >= 8 && digits > 0)) {
            out.push('…');
        } else {
            out.push_str(token);
        }
        token.clear();
    };
    for c in text.chars() {
        if c.is_ascii_hexdigit() || c == '-' {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            match c {
                '|' => out.push_str("\\|"),
                '\n' | '\r' => out.push(' '),
                _ => out.push(c),
            }
        }
    }
    flush(&mut token, &mut out);
    out.chars().take(160).collect()
}

fn describe(run: &Run, task: Result<&str, &str>) -> String {
    match run.first_failure() {
        None => match task {
            Ok(kind) => format!("pass ({kind} task)"),
            Err(_) => "pass".into(),
        },
        Some(s) => format!("**fail** at {}: {}", s.step, mask(&s.detail)),
    }
}

fn describe_direct(cell: &Cell) -> String {
    match &cell.direct {
        Err(why) => format!("n/a: {why}"),
        Ok(run) => match run.first_failure() {
            None => describe(run, cell.task),
            // Hosted and bridged tasks are the gateway's: direct, the task step is expected to fail.
            Some(s) if s.step == "task" && matches!(cell.task, Ok("hosted" | "bridged")) => {
                format!(
                    "pass (task n/a: {})",
                    if cell.task == Ok("hosted") { "the server has none" } else { "the server requires one" }
                )
            }
            Some(s) => format!("fail at {}: {}", s.step, mask(&s.detail)),
        },
    }
}

fn table(out: &mut String, servers: &[Server], cells: &[Vec<Cell>], f: impl Fn(&Cell) -> String) {
    out.push_str("| server |");
    for c in COLUMNS {
        out.push_str(&format!(" {} |", c.title));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(COLUMNS.len()));
    out.push('\n');
    for (server, row) in servers.iter().zip(cells) {
        out.push_str(&format!("| {} ({}) |", server.name, server.transport));
        for cell in row {
            out.push_str(&format!(" {} |", f(cell)));
        }
        out.push('\n');
    }
}

/// The heading of the section after the matrix that the matrix keeps as it finds it: the
/// conformance suite's figures, which tests/conformance.rs checks.
pub const KEPT: &str = "## Conformance\n";

/// The kept section of `old` (the file as it was), from its heading to the end; empty if none.
pub fn kept(old: &str) -> String {
    match old.find(&format!("\n{KEPT}")) {
        Some(at) => old[at..].to_string(),
        None => String::new(),
    }
}

pub fn render(servers: &[Server], cells: &[Vec<Cell>]) -> String {
    let mut out = String::from(
        "# Compatibility matrix\n\n\
         Checked by `tests/compatibility.rs` (run by `scripts/test`): a run that finds otherwise fails\n\
         with the lines that differ, and `UPDATE_DOCS=1` writes what it found. The last section,\n\
         [Conformance](#conformance), is kept as written and checked by `tests/conformance.rs`. Published\n\
         MCP servers, pinned in `tests/compat/` (npm, PyPI) and `tests/interop/rmcp_server` (crates.io),\n\
         each behind one taskgate gateway with the default configuration (one upstream per server, no\n\
         other key), driven by one client of each generation: the official TypeScript SDK at four\n\
         releases (each offers its own newest version), the official Python SDK in its two modes, and a\n\
         raw 2026-07-28 client (plain HTTP POSTs). Each cell connects (`initialize` or\n\
         `server/discover`), lists the tools, calls one, and runs a task where the gateway hosts one\n\
         (the server has no tasks), relays one (both sides have tasks) or bridges one (the server runs\n\
         the tool as a task, the client calls it plainly). The same cell is run direct, the client\n\
         straight to the server, where their transports meet; the test fails when a step passes\n\
         direct and fails through the gateway.\n\n## Servers\n\n\
         | server | package | SDK | protocol versions | transport |\n|---|---|---|---|---|\n",
    );
    for s in servers {
        out.push_str(&format!("| {} | {} | {} | {} | {} |\n", s.name, s.package, s.sdk, s.protocol, s.transport));
    }
    out.push_str("\n## Through the gateway\n\n");
    table(&mut out, servers, cells, |c| describe(&c.gateway, c.task));
    out.push_str("\n## Direct\n\n");
    table(&mut out, servers, cells, describe_direct);
    out.push_str("\n## Passing direct, failing through the gateway\n\n");
    let mut any = false;
    for (server, row) in servers.iter().zip(cells) {
        for (col, cell) in COLUMNS.iter().zip(row) {
            let lost = cell.regressions();
            if !lost.is_empty() {
                any = true;
                out.push_str(&format!("- {} × {}: {}\n", server.name, col.title, lost.join(", ")));
            }
        }
    }
    if !any {
        out.push_str("None.\n");
    }
    out.push_str("\n## Left out\n\n");
    for (what, why) in LEFT_OUT {
        out.push_str(&format!("- {what}: {why}.\n"));
    }
    out
}

/// The lines of `new` that `old` lacks (`+`) and those of `old` that `new` lacks (`-`), in
/// order: enough to say what a run changed in a table of whole-line cells.
pub fn diff(old: &str, new: &str) -> String {
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let mut out = String::new();
    for l in old_lines.iter().filter(|l| !new_lines.contains(l)) {
        out.push_str(&format!("- {l}\n"));
    }
    for l in new_lines.iter().filter(|l| !old_lines.contains(l)) {
        out.push_str(&format!("+ {l}\n"));
    }
    out
}
