//! The task page in a real headless Chromium (Debian's `chromium`, driven by the pinned
//! puppeteer-core in `tests/page`, which `scripts/setup-browser` installs): a slow hosted
//! task with progress runs, the page is opened and given the token (with authentication on;
//! without, it asks for none), the row's bar is seen
//! to rise, Cancel is pressed and the row says cancelled; then the gateway says the task is
//! cancelled and the upstream says its call was. It fails, rather than skips, when node,
//! the driver or chromium is missing.
//!
//! A screenshot taken while the task runs is written to `$TASKGATE_SCREENSHOT` if set
//! (`TASKGATE_SCREENSHOT=$PWD/docs/task-page.png` refreshes the one docs/operating.md shows), else to a
//! temporary directory.

use crate::common;

use common::gateway_proc::start;
use common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const TOKEN: &str = "alice-token-0123456789abcdef";
/// The longest chromium may take to start, and then the page test (which waits for each
/// step at most 45 s).
const BROWSER_TIMEOUT: Duration = Duration::from_secs(180);

fn driver_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/page")
}

/// What the browser test needs, or a message saying what is missing and how to get it.
fn check_prerequisites() {
    let fix = "run scripts/setup-browser (it installs Debian's chromium and tests/page's puppeteer-core)";
    let node = std::process::Command::new("node").arg("--version").output();
    assert!(node.is_ok_and(|o| o.status.success()), "node is not on PATH: {fix}");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(Path::new(&chromium).exists(), "{chromium} is missing: {fix}");
    let driver = driver_dir().join("node_modules/puppeteer-core/package.json");
    assert!(driver.exists(), "{} is missing: {fix}", driver.display());
}

#[tokio::test]
async fn in_chromium_the_bar_rises_and_cancel_cancels_the_task_upstream() {
    in_chromium(true).await;
}

#[tokio::test]
async fn in_chromium_without_authentication_no_token_is_asked_for() {
    in_chromium(false).await;
}

/// The page test against a gateway with bearer authentication (alice's token typed into
/// the page), or without any.
async fn in_chromium(auth: bool) {
    check_prerequisites();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("alice"), format!("{TOKEN}\n")).unwrap();
    let auth_table = format!(
        "[server.auth]\nmode = \"bearer\"\n[[server.auth.tokens]]\nprincipal = \"alice\"\nfile = {:?}\n",
        dir.path().join("alice").display().to_string()
    );
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[server.task_page]\nrefresh = \"200ms\"\n{}[tasks]\nstore = \"memory\"\n{}",
        if auth { auth_table.as_str() } else { "" },
        builtin_upstream("demo")
    );
    let path = dir.path().join("taskgate.toml");
    std::fs::write(&path, config).unwrap();
    let (_gw, addr) = start(&path).await;

    // The browser first (its start may take long on a busy machine), then the task.
    let temp_shot = dir.path().join("task-page.png").display().to_string();
    let shot = if auth { std::env::var("TASKGATE_SCREENSHOT").unwrap_or(temp_shot) } else { temp_shot };
    let mut node = tokio::process::Command::new("node")
        .arg(driver_dir().join("page_test.mjs"))
        .args(["--url", &format!("http://{addr}/tasks"), "--screenshot", &shot])
        .args(if auth { vec!["--token", TOKEN] } else { vec![] })
        .current_dir(driver_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let mut stdout = BufReader::new(node.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(BROWSER_TIMEOUT, stdout.next_line()).await.expect("chromium did not start");
    if ready.as_ref().ok().and_then(|l| l.as_deref()) != Some("ready") {
        let mut err = String::new();
        let _ = node.stderr.take().unwrap().read_to_string(&mut err).await;
        panic!("the driver did not get ready ({ready:?}):\n{err}");
    }

    // A 2025-11-25 session calls the slow tool task-augmented, with a progress token (after
    // a quick task, which the page shows finished beside it).
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.bearer = auth.then(|| TOKEN.into());
    c.initialize("2025-11-25").await;
    let quick = json!({"name": "echo", "arguments": {"text": "hi"}, "task": {"ttl": 300000}});
    let quick = c.request("tools/call", quick).await.result()["task"]["taskId"].as_str().unwrap().to_string();
    let finished = c.request("tasks/result", json!({"taskId": quick})).await;
    assert_eq!(finished.result()["content"][0]["text"], "hi");
    let params = json!({
        "name": "slow", "arguments": {"duration_ms": 20000, "steps": 400},
        "task": {"ttl": 600000}, "_meta": {"progressToken": "browser-1"}
    });
    let out = c.request("tools/call", params).await;
    let id = out.result()["task"]["taskId"].as_str().unwrap_or_else(|| panic!("{}", out.response)).to_string();

    let started = Instant::now();
    let mut stdin = node.stdin.take().unwrap();
    stdin.write_all(format!("{id}\n").as_bytes()).await.unwrap();
    drop(stdin);
    let mut err_pipe = node.stderr.take().unwrap();
    let run = async {
        let mut lines = Vec::new();
        while let Some(l) = stdout.next_line().await.unwrap() {
            lines.push(l);
        }
        let mut err = String::new();
        let _ = err_pipe.read_to_string(&mut err).await;
        (node.wait().await.unwrap(), lines.join("\n"), err)
    };
    let (status, stdout, stderr) = tokio::time::timeout(BROWSER_TIMEOUT, run).await.expect("the browser run timed out");
    let took = started.elapsed();
    assert!(status.success(), "the browser run failed:\n{stderr}\n{stdout}");
    let seen: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("the driver printed no result ({e}):\n{stdout}\n{stderr}"));
    eprintln!("chromium started in {} ms; the page test took {took:?}: {seen}", seen["launchMs"]);

    assert_eq!(seen["login"], auth, "the page asked for a token only with authentication on: {seen}");
    assert_eq!(seen["tool"], "slow", "{seen}");
    let owner = seen["owner"].as_str().unwrap();
    assert!(if auth { owner == "alice" } else { owner.starts_with("session ") }, "{seen}");
    let (first, second) = (seen["first"].as_f64().unwrap(), seen["second"].as_f64().unwrap());
    assert!(0.0 < first && first < second && second < 400.0, "the bar rose part way: {seen}");
    assert_eq!(seen["max"], 400.0);
    assert!(seen["message"].as_str().unwrap().starts_with("step "), "{seen}");
    assert_eq!(seen["status"], "cancelled", "{seen}");
    let by = if auth { "alice" } else { "the operator" };
    assert_eq!(seen["after"], format!("cancelled from the task page by {by}"));
    assert_eq!(seen["cancelButtons"], 0, "a cancelled task has no Cancel button");
    assert_eq!(seen["errors"], json!([]), "no script errors in the page");
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 4096, "a screenshot was saved at {shot}");

    // The gateway's task is cancelled, and the upstream call with it.
    let got = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "cancelled", "{}", got.response);
    eventually("the upstream saw the cancellation", async || {
        let stats = c.request("resources/read", json!({"uri": "demo://stats"})).await;
        stats.result()["contents"][0]["text"] == r#"{"cancelled":1}"#
    })
    .await;
}
