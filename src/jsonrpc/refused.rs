//! [`Refused`]: why [`Message::parse`](super::Message::parse) refused some bytes, with what
//! could still be read of them (the id, whether they are a response).

use super::error::RpcError;
use super::keys::Id;
use serde_json::Value;
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
}

impl Refused {
    /// The id of the request these bytes answered, if they are a response.
    pub fn answers(&self) -> Option<&Id> {
        if self.is_response { self.id.as_ref() } else { None }
    }
}

/// What can still be read of an object whose envelope could not be read (a key twice, a
/// number beyond `f64`): its id, if every `id` in it is the same valid one, and whether it has
/// a `method`. `None` for what is not a JSON object.
pub(super) fn salvage(text: &[u8]) -> Option<(Option<Id>, bool)> {
    struct Salvage;
    impl<'de> serde::de::Visitor<'de> for Salvage {
        type Value = (Option<Id>, bool);

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(Option<Id>, bool), A::Error> {
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
            let read = |raw: &RawValue| serde_json::from_str::<Value>(raw.get()).ok().as_ref().and_then(Id::from_value);
            let id = match ids.split_first() {
                Some((first, rest)) => read(first).filter(|id| rest.iter().all(|r| read(r).as_ref() == Some(id))),
                None => None,
            };
            Ok((id, has_method))
        }
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    serde::de::Deserializer::deserialize_map(&mut de, Salvage).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_method_is_no_method_as_the_envelope_reads_it() {
        assert_eq!(salvage(br#"{"id":7,"method":null,"result":{"n":1e400}}"#), Some((Some(Id::Num(7)), false)));
        assert_eq!(salvage(br#"{"id":7,"method":"x","params":{"n":1e400}}"#), Some((Some(Id::Num(7)), true)));
        assert_eq!(
            salvage(br#"{"id":7,"method":"x","method":null}"#),
            Some((Some(Id::Num(7)), false)),
            "the last one counts"
        );
        assert_eq!(salvage(br#"{"id":7,"method":null,"method":"x"}"#), Some((Some(Id::Num(7)), true)));
    }
}
