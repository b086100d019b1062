//! The questions upstreams ask during tasks that wait for a client (`[tasks]
//! max_held_input_bytes`): held ones are counted in bytes, all tasks together, and past the
//! bound the upstream's next question is refused naming the key, while the questions held,
//! their tasks and other sessions are unaffected.

use crate::common;

use common::*;
use serde_json::{Value, json};

/// Waits until task `id` has status `want` (bounded).
async fn status_becomes(c: &mut HttpMcp, id: &str, want: &str) -> Value {
    let mut last = Value::Null;
    let became = pace::until_async(STEP, async || {
        last = c.request("tasks/get", json!({"taskId": id})).await.result().clone();
        (last["status"] == want).then(|| last.clone())
    })
    .await;
    became.unwrap_or_else(|| panic!("task {id} never became {want}: {last}"))
}

#[tokio::test]
async fn questions_past_the_byte_bound_are_refused_and_the_held_ones_stay() {
    let gw = start_gateway(&format!("[tasks]\nmax_held_input_bytes = 100000\n{}", builtin_upstream("demo"))).await;
    // Clients that cannot answer yet: the questions are held for their tasks. (One session
    // each: the demo answers one call of a session at a time while it waits for its question.)
    let client = async || {
        let mut c = HttpMcp::new(&gw.url("demo"));
        let mut params = init_params("2025-11-25");
        params["capabilities"] = json!({"tasks": {}});
        c.initialize_with(params).await;
        c
    };
    let ask = |question: String| json!({"name": "ask", "arguments": {"question": question}, "task": {}});
    let task = async |c: &mut HttpMcp, question: String| -> String {
        let created = c.request("tools/call", ask(question)).await;
        created.result()["task"]["taskId"].as_str().unwrap_or_else(|| panic!("{}", created.response)).to_string()
    };
    let (mut c, mut c2, mut c3) = (client().await, client().await, client().await);

    let first = task(&mut c, "q".repeat(60_000)).await;
    status_becomes(&mut c, &first, "input_required").await;
    // A second question of the same size does not fit: the upstream is refused, and its
    // tool (the demo's `ask`) ends saying why.
    let second = task(&mut c2, "r".repeat(60_000)).await;
    status_becomes(&mut c2, &second, "failed").await;
    let out = c2.request("tasks/result", json!({"taskId": second})).await;
    let text = out.result()["content"][0]["text"].as_str().unwrap_or_default().to_string();
    assert!(text.contains("tasks.max_held_input_bytes"), "{}", out.response);
    assert_eq!(out.result()["isError"], true);
    // A small one still fits beside the first.
    let third = task(&mut c3, "small?".into()).await;
    status_becomes(&mut c3, &third, "input_required").await;
    // The first is still held, whole.
    let got = c.request("tasks/get", json!({"taskId": first})).await;
    assert_eq!(got.result()["status"], "input_required", "{}", got.response);
}
