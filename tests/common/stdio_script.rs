//! A scripted stdio upstream: a small bash script the gateway starts as its child, for what
//! the demo server never does (bytes that are not UTF-8, over-long lines, batches).
//!
//! The script answers `initialize` itself, with the capabilities in `$CAPS` (default
//! `{"tools":{}}`). For every other request it runs the test's `case`
//! arms (bash `case` patterns on the tool name of a `tools/call`, else the method) with
//! `$id`, `$method` and `$name` set and a `reply RESULT_JSON` helper; a request no arm
//! matches gets `{}`. Notifications and responses are ignored.

use std::path::PathBuf;

pub struct StdioScript {
    dir: tempfile::TempDir,
}

const PROLOGUE: &str = r#"
reply() { printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$1"; }
caps=${CAPS:-'{"tools":{}}'}
while IFS= read -r line; do
  id=$(sed -n 's/^{[^{]*"id":\([0-9]*\).*/\1/p' <<<"$line")
  method=$(sed -n 's/^{[^{]*"method":"\([^"]*\)".*/\1/p' <<<"$line")
  [ -n "$id" ] && [ -n "$method" ] || continue
  if [ "$method" = initialize ]; then
    v=$(sed -n 's/.*"protocolVersion":"\([^"]*\)".*/\1/p' <<<"$line")
    reply "{\"protocolVersion\":\"$v\",\"capabilities\":$caps,\"serverInfo\":{\"name\":\"script\",\"version\":\"0\"}}"
    continue
  fi
  name=$method
  [ "$method" = tools/call ] && name=$(sed -n 's/.*"params":{"name":"\([^"]*\)".*/\1/p' <<<"$line")
  case "$name" in
"#;

const EPILOGUE: &str = r#"
    *) reply '{}' ;;
  esac
done
"#;

impl StdioScript {
    /// `arms` are bash `case` arms, e.g. `pid) reply "{\"pid\":$$}" ;;`.
    pub fn new(arms: &str) -> StdioScript {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("server.sh"), format!("{PROLOGUE}{arms}{EPILOGUE}")).unwrap();
        StdioScript { dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("server.sh")
    }

    /// The `[[upstream]]` table that runs the script with bash.
    pub fn upstream(&self, name: &str) -> String {
        format!("[[upstream]]\nname = \"{name}\"\ncommand = \"bash\"\nargs = [{:?}]\n", self.path().to_str().unwrap())
    }
}
