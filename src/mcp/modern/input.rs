//! Multi round-trip requests (MRTR, SEP-2322): what a modern server's `InputRequiredResult`
//! asks for, and the retry that answers it. Protocol facts only; the gateway's exchange with
//! the client is `gateway::session::input_rounds`.
//!
//! From `docs/specification/2026-07-28/basic/patterns/mrtr.mdx` and `schema/2026-07-28/schema.ts`:
//!
//! - Only `tools/call`, `prompts/get` and `resources/read` may be answered with one
//!   ([`may_ask`]); a server "MUST NOT" on any other request.
//! - `InputRequiredResult { resultType: "input_required", inputRequests?, requestState? }`,
//!   at least one of the two present. `inputRequests` maps server-assigned keys to request
//!   objects `{method, params}` without an id: `elicitation/create`,
//!   `sampling/createMessage` or `roots/list`, and only those the client declared.
//! - The client retries the original request as a new, independent request: a **different
//!   JSON-RPC id**, `params.inputResponses` mapping each key to the client's *result* for it
//!   (there is no place for an error), and `params.requestState` echoed exactly when the
//!   server sent one (never otherwise) ([`retry`]).
//!
//! How many rounds one request may take, and how many input requests one round may carry,
//! is the gateway's choice ([`InputLimits`], from each upstream's `max_input_rounds` and
//! `max_input_requests`); [`InputRequired::read_round`] enforces both.

use crate::jsonrpc::Method;
use serde_json::{Map, Value};

/// The methods whose result may be an `InputRequiredResult`.
pub const MAY_ASK: [Method; 3] = [Method::ToolsCall, Method::PromptsGet, Method::ResourcesRead];

/// Whether a request of `method` may be answered with an `InputRequiredResult`.
pub fn may_ask(method: &str) -> bool {
    MAY_ASK.contains(&Method::parse(method))
}

/// The client capability an input request needs (`elicitation`, `sampling`, `roots`), or
/// `None` for a method that is not an input request.
pub fn capability_for(method: &str) -> Option<&'static str> {
    match Method::parse(method) {
        Method::ElicitationCreate => Some("elicitation"),
        Method::SamplingCreateMessage => Some("sampling"),
        Method::RootsList => Some("roots"),
        _ => None,
    }
}

/// One entry of `inputRequests`.
#[derive(Clone, Debug, PartialEq)]
pub struct InputRequest {
    pub key: String,
    pub method: String,
    /// `params` as the server sent them (`None`: absent).
    pub params: Option<Value>,
}

/// An `InputRequiredResult`, read.
#[derive(Clone, Debug, PartialEq)]
pub struct InputRequired {
    /// In the order the server listed them.
    pub requests: Vec<InputRequest>,
    pub state: Option<String>,
}

/// Why an `InputRequiredResult` cannot be acted on.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum BadInputRequired {
    #[error("inputRequests must be an object")]
    RequestsNotObject,
    #[error("inputRequests[{0:?}] must be an object with a string method")]
    BadRequest(String),
    #[error("inputRequests[{0:?}].params must be an object")]
    BadParams(String),
    #[error("requestState must be a string")]
    StateNotString,
    #[error("neither inputRequests nor requestState is present")]
    Empty,
    #[error("{count} input requests in one result, more than the {limit} the gateway relays (max_input_requests)")]
    TooMany { count: usize, limit: usize },
}

/// The bounds on one request's input rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputLimits {
    /// Rounds one request may be answered with `input_required`.
    pub rounds: u32,
    /// Input requests one round may carry.
    pub requests: usize,
}

/// Why a round of input requests is not relayed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RoundRefused {
    #[error("the upstream's input request is malformed: {0}")]
    Malformed(#[from] BadInputRequired),
    #[error("the upstream asked for input more than {limit} times for one request (max_input_rounds)")]
    TooManyRounds { limit: u32 },
}

impl InputRequired {
    /// Reads round `round` (1 for the first `input_required` answer of a request) within
    /// `limits`.
    pub fn read_round(result: &Value, round: u32, limits: InputLimits) -> Result<InputRequired, RoundRefused> {
        let asked = InputRequired::read(result, limits.requests)?;
        if round > limits.rounds {
            return Err(RoundRefused::TooManyRounds { limit: limits.rounds });
        }
        Ok(asked)
    }

    /// Reads an `InputRequiredResult` (the `result` of a response whose `resultType` is
    /// `input_required`), with at most `limit` input requests.
    pub fn read(result: &Value, limit: usize) -> Result<InputRequired, BadInputRequired> {
        let state = match result.get("requestState") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(BadInputRequired::StateNotString),
        };
        let requests = match result.get("inputRequests") {
            None => Vec::new(),
            Some(Value::Object(m)) => {
                if m.len() > limit {
                    return Err(BadInputRequired::TooMany { count: m.len(), limit });
                }
                let mut out = Vec::with_capacity(m.len());
                for (key, r) in m {
                    let Some(method) = r.get("method").and_then(Value::as_str) else {
                        return Err(BadInputRequired::BadRequest(key.clone()));
                    };
                    let params = match r.get("params") {
                        None | Some(Value::Null) => None,
                        Some(p @ Value::Object(_)) => Some(p.clone()),
                        Some(_) => return Err(BadInputRequired::BadParams(key.clone())),
                    };
                    out.push(InputRequest { key: key.clone(), method: method.to_string(), params });
                }
                out
            }
            Some(_) => return Err(BadInputRequired::RequestsNotObject),
        };
        // An empty map with no state asks for nothing and says nothing to echo: a retry would
        // be the same request again.
        if requests.is_empty() && state.is_none() {
            return Err(BadInputRequired::Empty);
        }
        Ok(InputRequired { requests, state })
    }
}

/// The retry of `request` (a whole JSON-RPC request): `params.inputResponses` set to
/// `responses` (removed when there are none), `params.requestState` set to `state` or
/// removed; everything else as it was. The caller gives it its new id.
pub fn retry(request: &mut Value, responses: Map<String, Value>, state: Option<&str>) {
    let Some(msg) = request.as_object_mut() else { return };
    let params = msg.entry("params").or_insert_with(|| Value::Object(Map::new()));
    let Some(params) = params.as_object_mut() else { return };
    if responses.is_empty() {
        params.remove("inputResponses");
    } else {
        params.insert("inputResponses".into(), Value::Object(responses));
    }
    match state {
        Some(s) => params.insert("requestState".into(), s.into()),
        None => params.remove("requestState"),
    };
}

/// A URL-mode `elicitation/create`'s params, for a legacy client: 2026-07-28 removed
/// `elicitationId` (and `notifications/elicitation/complete`), which 2025-11-25 requires of
/// URL mode; one that has none is given `id`.
pub fn name_url_elicitation(params: &mut Value, id: &str) {
    if let Some(p) = params.as_object_mut()
        && !p.get("elicitationId").is_some_and(Value::is_string)
    {
        p.insert("elicitationId".into(), id.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_spec_example() {
        let r = json!({"resultType": "input_required", "requestState": "blob", "inputRequests": {
            "github_login": {"method": "elicitation/create", "params": {"mode": "form", "message": "name?", "requestedSchema": {"type": "object"}}},
            "roots": {"method": "roots/list"}}});
        let got = InputRequired::read(&r, 8).unwrap();
        assert_eq!(got.state.as_deref(), Some("blob"));
        assert_eq!(got.requests.len(), 2);
        let login = got.requests.iter().find(|q| q.key == "github_login").unwrap();
        assert_eq!(login.method, "elicitation/create");
        assert_eq!(login.params.as_ref().unwrap()["mode"], "form");
        assert!(got.requests.iter().any(|q| q.key == "roots" && q.params.is_none()));
    }

    #[test]
    fn state_alone_is_a_request_to_retry() {
        let got = InputRequired::read(&json!({"resultType": "input_required", "requestState": "s"}), 8).unwrap();
        assert!(got.requests.is_empty());
    }

    #[test]
    fn malformed_results_are_refused() {
        let bad = |r: Value| InputRequired::read(&r, 2).unwrap_err();
        assert_eq!(bad(json!({"inputRequests": {}})), BadInputRequired::Empty);
        assert_eq!(bad(json!({})), BadInputRequired::Empty);
        assert_eq!(bad(json!({"inputRequests": []})), BadInputRequired::RequestsNotObject);
        assert_eq!(bad(json!({"inputRequests": {"k": {"params": {}}}})), BadInputRequired::BadRequest("k".into()));
        assert_eq!(
            bad(json!({"inputRequests": {"k": {"method": "roots/list", "params": 3}}})),
            BadInputRequired::BadParams("k".into())
        );
        assert_eq!(bad(json!({"requestState": 7})), BadInputRequired::StateNotString);
        let three = json!({"inputRequests": {"a": {"method": "roots/list"}, "b": {"method": "roots/list"}, "c": {"method": "roots/list"}}});
        assert_eq!(bad(three), BadInputRequired::TooMany { count: 3, limit: 2 });
    }

    #[test]
    fn rounds_are_bounded_by_the_limits() {
        let limits = InputLimits { rounds: 2, requests: 1 };
        let state = json!({"resultType": "input_required", "requestState": "s"});
        assert!(InputRequired::read_round(&state, 2, limits).is_ok());
        assert_eq!(InputRequired::read_round(&state, 3, limits), Err(RoundRefused::TooManyRounds { limit: 2 }));
        let two = json!({"inputRequests": {"a": {"method": "roots/list"}, "b": {"method": "roots/list"}}});
        let refused = InputRequired::read_round(&two, 1, limits).unwrap_err();
        assert_eq!(refused, RoundRefused::Malformed(BadInputRequired::TooMany { count: 2, limit: 1 }));
        assert!(refused.to_string().contains("max_input_requests"), "{refused}");
    }

    #[test]
    fn the_retry_carries_responses_and_the_state_only_when_sent() {
        let mut req = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t", "arguments": {"x": 1}, "_meta": {"progressToken": "p"}}});
        let mut responses = Map::new();
        responses.insert("k".into(), json!({"action": "accept", "content": {"n": 1}}));
        retry(&mut req, responses, Some("s1"));
        assert_eq!(req["params"]["inputResponses"]["k"]["action"], "accept");
        assert_eq!(req["params"]["requestState"], "s1");
        assert_eq!(req["params"]["arguments"], json!({"x": 1}));
        assert_eq!(req["params"]["_meta"]["progressToken"], "p");
        retry(&mut req, Map::new(), None);
        assert!(req["params"].get("inputResponses").is_none() && req["params"].get("requestState").is_none());
    }

    #[test]
    fn a_url_elicitation_gets_an_id_unless_it_has_one() {
        let mut p = json!({"mode": "url", "url": "https://x", "message": "m"});
        name_url_elicitation(&mut p, "g1");
        assert_eq!(p["elicitationId"], "g1");
        name_url_elicitation(&mut p, "g2");
        assert_eq!(p["elicitationId"], "g1");
    }

    #[test]
    fn which_requests_may_ask() {
        assert!(may_ask("tools/call") && may_ask("prompts/get") && may_ask("resources/read"));
        assert!(!may_ask("tools/list") && !may_ask("completion/complete"));
        assert_eq!(capability_for("elicitation/create"), Some("elicitation"));
        assert_eq!(capability_for("sampling/createMessage"), Some("sampling"));
        assert_eq!(capability_for("roots/list"), Some("roots"));
        assert_eq!(capability_for("ping"), None);
    }
}
