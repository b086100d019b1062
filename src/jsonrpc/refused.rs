//! [`Refused`]: why [`Message::parse`](super::Message::parse) refused some bytes, with what
//! could still be read of them (the id, whether they are a response).

use super::error::RpcError;
use super::keys::Id;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// Why [`Message::parse`](super::Message::parse) refused some bytes, with what could still be read of them: enough
/// to answer the sender with the id, and to fail the request a refused response answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    /// The message's id, when it can be read (and, if `id` appears twice, both are the same).
    pub id: Option<Id>,
    /// The bytes are an object without a top-level `"method"`: a response, as far as can be
    /// told (`false` when they are not an object that can be read at all).
    pub is_response: bool,
    pub error: RpcError,
    /// The ids, when `id` appears more than once with different values (`id` is then `None`).
    pub ids: Vec<Id>,
}

impl Refused {
    /// Refused bytes whose id, if any, is `id`.
    pub fn new(id: Option<Id>, is_response: bool, error: RpcError) -> Refused {
        Refused { id, is_response, error, ids: Vec::new() }
    }

    /// The id of the request these bytes answered, if they are a response.
    pub fn answers(&self) -> Option<&Id> {
        if self.is_response { self.id.as_ref() } else { None }
    }

    /// Every request these bytes may have answered, if they are a response: its id, or each
    /// of its different ids. A response that names two cannot be told apart from an answer
    /// to either, and neither will get another: both fail, rather than wait for a timeout.
    pub fn may_answer(&self) -> Vec<Id> {
        match (self.is_response, &self.id) {
            (false, _) => Vec::new(),
            (true, Some(id)) => vec![id.clone()],
            (true, None) => self.ids.clone(),
        }
    }
}

/// What [`salvage`] could read of an object: its one id (if every `id` in it is the same
/// valid one), else its different valid ids, and whether it has a `method`.
#[derive(Debug, PartialEq)]
pub(super) struct Salvaged {
    pub(super) id: Option<Id>,
    pub(super) ids: Vec<Id>,
    pub(super) has_method: bool,
}

/// What can still be read of an object whose envelope could not be read (a key twice, a
/// number beyond `f64`). `None` for what is not a JSON object.
pub(super) fn salvage(text: &[u8]) -> Option<Salvaged> {
    struct Salvage;
    impl<'de> serde::de::Visitor<'de> for Salvage {
        type Value = Salvaged;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Salvaged, A::Error> {
            let (mut ids, mut has_method) = (Vec::new(), false);
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                match key.as_ref() {
                    "id" => ids.push(map.next_value::<&'de RawValue>()?),
                    // As serde reads the envelope: a null method is no method. Repeated, the
                    // last one counts, as a tree reader would have it.
                    "method" => has_method = !map.next_value::<&'de RawValue>()?.get().eq("null"),
                    _ => {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
            }
            let read = |raw: &RawValue| Id::from_raw(raw.get());
            let id = match ids.split_first() {
                Some((first, rest)) => read(first).filter(|id| rest.iter().all(|r| read(r).as_ref() == Some(id))),
                None => None,
            };
            let mut all: Vec<Id> = Vec::new();
            if id.is_none() {
                for found in ids.iter().filter_map(|raw| read(raw)) {
                    if !all.contains(&found) && all.len() < MAX_IDS {
                        all.push(found);
                    }
                }
            }
            Ok(Salvaged { id, ids: all, has_method })
        }
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    serde::de::Deserializer::deserialize_map(&mut de, Salvage).ok()
}

/// The most different ids of one refused message that are kept (each may fail a request).
const MAX_IDS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_method_is_no_method_as_the_envelope_reads_it() {
        let read = |text: &[u8]| salvage(text).map(|s| (s.id, s.has_method));
        assert_eq!(read(br#"{"id":7,"method":null,"result":{"n":1e400}}"#), Some((Some(Id::Num(7)), false)));
        assert_eq!(read(br#"{"id":7,"method":"x","params":{"n":1e400}}"#), Some((Some(Id::Num(7)), true)));
        assert_eq!(
            read(br#"{"id":7,"method":"x","method":null}"#),
            Some((Some(Id::Num(7)), false)),
            "the last one counts"
        );
        assert_eq!(read(br#"{"id":7,"method":null,"method":"x"}"#), Some((Some(Id::Num(7)), true)));
    }

    #[test]
    fn a_response_with_two_different_ids_may_answer_either() {
        let s = salvage(br#"{"jsonrpc":"2.0","id":7,"result":{},"id":"a","id":7}"#).unwrap();
        assert_eq!((s.id, s.ids.clone(), s.has_method), (None, vec![Id::Num(7), Id::Str("a".into())], false));
        let r = Refused { id: None, is_response: true, error: RpcError::new(-32600, "m"), ids: s.ids };
        assert_eq!(r.may_answer(), [Id::Num(7), Id::Str("a".into())]);
        let same = salvage(br#"{"id":7,"result":{},"id":7}"#).unwrap();
        assert_eq!((same.id, same.ids), (Some(Id::Num(7)), vec![]));
        assert_eq!(Refused { is_response: false, ..r }.may_answer(), [], "a request answers nothing");
    }
}
