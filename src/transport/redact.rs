//! The secrets an HTTP upstream connection is configured with (its headers' values, the
//! user info and query values of its URL), and the client's `Authorization` where the
//! upstream receives it, kept out of the upstream's own text that the gateway relays: the
//! body and challenge of an HTTP error, which become a client's error and a log line. An
//! upstream that echoes the request it got (an error page listing its headers) shows no
//! secret through the gateway.

use hyper::header::HeaderValue;

/// What a secret is replaced with.
pub(crate) const MASK: &str = "***";
/// Shorter values are not looked for: they would mask ordinary words, and are no secret.
const MIN_SECRET: usize = 4;

/// The configured secrets of one upstream connection, longest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    /// The secrets of an upstream at `url` sent `headers` with every request.
    pub(crate) fn of(url: &str, headers: &[(String, String)]) -> Secrets {
        let mut s = Secrets::default();
        for (_, v) in headers {
            s.add_header_value(v);
        }
        if let Ok(uri) = url.parse::<hyper::Uri>() {
            if let Some((info, _)) = uri.authority().and_then(|a| a.as_str().rsplit_once('@')) {
                for part in info.split(':') {
                    s.add(part);
                }
                s.add(info);
            }
            for pair in uri.query().unwrap_or("").split('&') {
                s.add(pair.split_once('=').map_or(pair, |(_, v)| v));
            }
        }
        s.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        s.values.dedup();
        s
    }

    /// A header value, and its credentials without their scheme (`Bearer <token>`).
    fn add_header_value(&mut self, v: &str) {
        let v = v.trim();
        self.add(v);
        if let Some((_, rest)) = v.split_once(' ') {
            self.add(rest.trim());
        }
    }

    fn add(&mut self, v: &str) {
        if v.len() >= MIN_SECRET {
            self.values.push(v.to_string());
            // Percent-encoded in a URL, it may be echoed decoded.
            if v.contains('%')
                && let Some(decoded) = percent_decoded(v)
                && decoded.len() >= MIN_SECRET
            {
                self.values.push(decoded);
            }
        }
    }

    /// `text` with every secret, and the client's `credential` if one is sent, masked.
    pub(crate) fn redact(&self, text: &str, credential: Option<&HeaderValue>) -> String {
        let mut extra = Secrets::default();
        if let Some(c) = credential.and_then(|c| c.to_str().ok()) {
            extra.add_header_value(c);
        }
        let mut out = text.to_string();
        for v in extra.values.iter().chain(&self.values) {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASK);
            }
        }
        out
    }

    /// [`redact`](Self::redact) for bytes read from the upstream (lossily as UTF-8 if
    /// anything is masked; unchanged otherwise).
    pub(crate) fn redact_bytes(&self, bytes: Vec<u8>, credential: Option<&HeaderValue>) -> Vec<u8> {
        let text = String::from_utf8_lossy(&bytes);
        let masked = self.redact(&text, credential);
        if masked == text { bytes } else { masked.into_bytes() }
    }
}

fn percent_decoded(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_header_values_url_secrets_and_the_clients_token_are_masked() {
        let headers =
            [("Authorization".to_string(), "Bearer up-secret-123".to_string()), ("X-Key".into(), "k2k2k2".into())];
        let s = Secrets::of("https://user:p%40ss-word@h:8443/mcp?api_key=q-secret&x=1", &headers);
        let echoed = "authorization: Bearer up-secret-123\nx-key: k2k2k2\ntoken=up-secret-123\n\
                      user:p%40ss-word p@ss-word api_key=q-secret x=1\nclient: Bearer client-tok-9";
        let client = HeaderValue::from_static("Bearer client-tok-9");
        let out = s.redact(echoed, Some(&client));
        for secret in ["up-secret-123", "k2k2k2", "p%40ss-word", "p@ss-word", "q-secret", "client-tok-9"] {
            assert!(!out.contains(secret), "{secret}: {out}");
        }
        assert!(out.contains("authorization: ***") && out.contains("x=1"), "{out}");
        // Without anything to mask, the bytes are the upstream's.
        assert_eq!(s.redact_bytes(b"plain \xff".to_vec(), None), b"plain \xff");
    }

    #[test]
    fn short_values_are_no_secrets() {
        let s = Secrets::of("http://h/mcp?a=1", &[("Accept-Version".into(), "v1".into())]);
        assert_eq!(s.redact("v1 a=1", None), "v1 a=1");
    }
}
