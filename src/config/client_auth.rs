//! `authorization` of an `[[upstream]]`: whether a client's own `Authorization` header goes
//! on to that upstream. The default is that it never does: the upstream receives only the
//! `headers` configured for it. A client's token is passed on only where the operator asked,
//! only to an HTTP upstream, and only over a link of the client's own session.

use super::error::{ConfigError, err};
use super::settings::{ClientAuthorization, Transport};

/// Reads `<at>.authorization`, checked against the upstream's transport and `share`.
pub(super) fn parse(
    at: &str,
    raw: Option<&str>,
    transport: &Transport,
    share: bool,
) -> Result<ClientAuthorization, ConfigError> {
    let mode = match raw {
        None | Some("replace") => return Ok(ClientAuthorization::Replace),
        Some("pass") => ClientAuthorization::Pass,
        Some(other) => return err(format!("{at}.authorization: \"{other}\" is not one of \"replace\", \"pass\"")),
    };
    let Transport::Http { headers, .. } = transport else {
        return err(format!("{at}.authorization: \"pass\" only applies to an HTTP upstream (one with `url`)"));
    };
    if share {
        return err(format!(
            "{at}.authorization: \"pass\" needs a link per session (share = false): a shared link speaks for every client at once"
        ));
    }
    if headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization")) {
        return err(format!(
            "{at}.authorization: \"pass\" sends the client's Authorization; remove the configured headers.Authorization"
        ));
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use crate::config::{ClientAuthorization, Config};

    fn load(upstream: &str) -> Result<Config, String> {
        Config::parse(&format!("[[upstream]]\nname = \"u\"\n{upstream}"), &|_| None).map_err(|e| e.0)
    }

    #[test]
    fn replace_unless_pass_is_asked_for_an_http_upstream_of_its_own() {
        let c = load("url = \"http://127.0.0.1:9/mcp\"\n").unwrap();
        assert_eq!(c.upstreams[0].authorization, ClientAuthorization::Replace);
        let c = load("url = \"http://127.0.0.1:9/mcp\"\nauthorization = \"pass\"\n").unwrap();
        assert_eq!(c.upstreams[0].authorization, ClientAuthorization::Pass);
        let c = load(
            "url = \"http://127.0.0.1:9/mcp\"\nauthorization = \"replace\"\nheaders = { Authorization = \"Bearer x\" }\n",
        );
        assert_eq!(c.unwrap().upstreams[0].authorization, ClientAuthorization::Replace);

        for (bad, says) in [
            ("url = \"http://127.0.0.1:9/mcp\"\nauthorization = \"forward\"\n", "is not one of"),
            ("builtin = \"demo\"\nauthorization = \"pass\"\n", "only applies to an HTTP upstream"),
            ("command = \"x\"\nauthorization = \"pass\"\n", "only applies to an HTTP upstream"),
            ("url = \"http://127.0.0.1:9/mcp\"\nshare = true\nauthorization = \"pass\"\n", "share = false"),
            (
                "url = \"http://127.0.0.1:9/mcp\"\nauthorization = \"pass\"\nheaders = { authorization = \"Bearer x\" }\n",
                "remove the configured headers.Authorization",
            ),
        ] {
            let e = load(bad).unwrap_err();
            assert!(e.contains("upstream \"u\".authorization"), "{e}");
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
