//! Content blocks in words: the text block that stands in for a block an older receiver's
//! version lacks, so that nothing is dropped silently.

use serde_json::{Map, Value, json};

fn str_of<'a>(b: &'a Value, key: &str) -> &'a str {
    b.get(key).and_then(Value::as_str).unwrap_or("?")
}

/// A block as text: a text block's own text, anything else described in brackets.
pub fn describe(b: &Value) -> String {
    let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
    match ty {
        "text" => str_of(b, "text").to_string(),
        "image" | "audio" => {
            let size = b.get("data").and_then(Value::as_str).map(|d| format_size(decoded_len(d)));
            format!("[{ty}: {}, {}]", str_of(b, "mimeType"), size.as_deref().unwrap_or("no data"))
        }
        "resource_link" => {
            let mut s = format!("[resource link: {} ({})", str_of(b, "uri"), str_of(b, "name"));
            if let Some(d) = b.get("description").and_then(Value::as_str) {
                s.push_str(": ");
                s.push_str(d);
            }
            s.push(']');
            s
        }
        "resource" => {
            let r = b.get("resource").unwrap_or(&Value::Null);
            match r.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource: {}]\n{text}", str_of(r, "uri")),
                None => format!("[resource: {}]", str_of(r, "uri")),
            }
        }
        "tool_use" => {
            let input = b.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into());
            format!("[tool use {}: {} {input}]", str_of(b, "id"), str_of(b, "name"))
        }
        "tool_result" => {
            let mut parts: Vec<String> = match b.get("content").and_then(Value::as_array) {
                Some(content) => content.iter().map(describe).collect(),
                None => Vec::new(),
            };
            if let Some(sc) = b.get("structuredContent")
                && !carries(b.get("content").and_then(Value::as_array).map_or(&[], Vec::as_slice), sc)
            {
                parts.push(sc.to_string());
            }
            let error = if b.get("isError").and_then(Value::as_bool) == Some(true) { " (error)" } else { "" };
            format!("[tool result {}{error}: {}]", str_of(b, "toolUseId"), parts.join("\n"))
        }
        other => format!("[{other} content]"),
    }
}

/// The text block that stands in for `b`, keeping its annotations (which text blocks have had
/// since 2024-11-05).
pub fn as_text(b: &Value) -> Value {
    let mut t = Map::new();
    t.insert("type".into(), "text".into());
    t.insert("text".into(), describe(b).into());
    if let Some(a) = b.get("annotations") {
        t.insert("annotations".into(), a.clone());
    }
    Value::Object(t)
}

/// One block for a list of blocks: the only one as it is, several as one text block.
pub fn joined(blocks: &[Value]) -> Value {
    match blocks {
        [one] => one.clone(),
        _ => json!({"type": "text", "text": blocks.iter().map(describe).collect::<Vec<_>>().join("\n")}),
    }
}

/// Whether a text block of `content` carries `structured` (its text is that JSON), as the
/// 2025-06-18 schema asks a tool to do for older clients.
pub fn carries(content: &[Value], structured: &Value) -> bool {
    content.iter().any(|b| {
        b.get("type").and_then(Value::as_str) == Some("text")
            && b.get("text").and_then(Value::as_str).and_then(|t| serde_json::from_str::<Value>(t).ok()).as_ref()
                == Some(structured)
    })
}

/// The length of what base64 text `data` decodes to.
fn decoded_len(data: &str) -> usize {
    let digits = data.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').count();
    digits * 3 / 4
}

fn format_size(n: usize) -> String {
    const KIB: usize = 1024;
    if n < KIB {
        format!("{n} B")
    } else if n < KIB * KIB {
        format!("{} KiB", (n + KIB / 2) / KIB)
    } else {
        format!("{:.1} MiB", n as f64 / (KIB * KIB) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(decoded_len("AAAA"), 3);
        assert_eq!(decoded_len("AAA="), 2);
        assert_eq!(decoded_len("AA=="), 1);
        assert_eq!(format_size(1000), "1000 B");
        assert_eq!(format_size(12 * 1024 + 100), "12 KiB");
        assert_eq!(format_size(3 * 1024 * 1024 / 2), "1.5 MiB");
    }

    #[test]
    fn blocks_in_words() {
        let audio = json!({"type": "audio", "mimeType": "audio/wav", "data": "A".repeat(16384)});
        assert_eq!(describe(&audio), "[audio: audio/wav, 12 KiB]");
        let link = json!({"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"});
        assert_eq!(describe(&link), "[resource link: file:///a.txt (a.txt)]");
        let link = json!({"type": "resource_link", "uri": "u", "name": "n", "description": "the log"});
        assert_eq!(describe(&link), "[resource link: u (n): the log]");
        let use_ = json!({"type": "tool_use", "id": "c1", "name": "get", "input": {"k": 1}});
        assert_eq!(describe(&use_), r#"[tool use c1: get {"k":1}]"#);
        let result = json!({"type": "tool_result", "toolUseId": "c1", "isError": true,
            "content": [{"type": "text", "text": "no"}, link], "structuredContent": {"a": 1}});
        assert_eq!(describe(&result), "[tool result c1 (error): no\n[resource link: u (n): the log]\n{\"a\":1}]");
        let embedded = json!({"type": "resource", "resource": {"uri": "file:///b", "text": "hello"}});
        assert_eq!(describe(&embedded), "[resource: file:///b]\nhello");
    }

    #[test]
    fn replacement_keeps_annotations() {
        let audio = json!({"type": "audio", "mimeType": "audio/ogg", "data": "", "annotations": {"priority": 1}});
        assert_eq!(
            as_text(&audio),
            json!({"type": "text", "text": "[audio: audio/ogg, 0 B]", "annotations": {"priority": 1}})
        );
    }
}
