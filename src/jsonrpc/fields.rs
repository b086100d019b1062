//! Where the parts of a message the gateway reads stand in its bytes: [`Span`]s, and the
//! [`Key`]s of `params` (or `result`) it routes by, found in one pass over that object.
//!
//! `_meta` is read in the same pass, member by member (its `progressToken` and related-task
//! key); the two small objects below it that the gateway reads (the related-task key's value,
//! `result.task`, and `params.task` for its `ttl`) are read again on their own. A key read here that appears twice in its
//! object is refused ([`Repeated`]); a repeat of any other key is passed on as it came.

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;
use std::ops::Range;

/// The `_meta` key that relates a message to a task (2025-11-25).
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Where a part of the message stands in its bytes (a message is far below 4 GiB: every
/// body and line is bounded by `max_body_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) start: u32,
    pub(super) end: u32,
}

impl Span {
    pub(super) fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    pub(super) fn len(self) -> usize {
        (self.end - self.start) as usize
    }
}

/// A key of `params` (or `result`) the gateway reads, or of the `_meta` object in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Name,
    Task,
    TaskId,
    RequestId,
    ProgressToken,
    ProtocolVersion,
    Progress,
    Total,
    Status,
    /// `_meta.progressToken`.
    MetaProgressToken,
    /// `_meta["io.modelcontextprotocol/related-task"]`.
    RelatedTask,
    /// `_meta["io.modelcontextprotocol/related-task"].taskId`.
    RelatedTaskId,
}

const KEYS: usize = 12;

/// The keys directly in `params` or `result`, by name.
const TOP: [(&str, Key); 9] = [
    ("name", Key::Name),
    ("task", Key::Task),
    ("taskId", Key::TaskId),
    ("requestId", Key::RequestId),
    ("progressToken", Key::ProgressToken),
    ("protocolVersion", Key::ProtocolVersion),
    ("progress", Key::Progress),
    ("total", Key::Total),
    ("status", Key::Status),
];

/// The object the keys are read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Of {
    Params,
    Result,
}

impl Of {
    /// Whether the gateway reads `key` directly in this object (`_meta` it reads in both).
    fn reads(self, key: Key) -> bool {
        match self {
            Of::Params => true,
            Of::Result => matches!(key, Key::Task | Key::TaskId | Key::Status | Key::ProtocolVersion),
        }
    }
}

/// A key the gateway reads that appears twice, as a path below its object (`_meta.progressToken`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Repeated(pub(super) &'static str);

/// Where the values of the [`Key`]s of one object stand in the message's bytes.
#[derive(Default, Clone, Debug)]
pub(super) struct Fields([Option<Span>; KEYS]);

pub(super) fn span_in(text: &[u8], part: &RawValue) -> Span {
    let start = part.get().as_ptr() as usize - text.as_ptr() as usize;
    Span { start: start as u32, end: (start + part.get().len()) as u32 }
}

impl Fields {
    /// The keys of the object at `at` in `text` (valid JSON), in one pass over it; nothing
    /// for what is not an object.
    pub(super) fn read(text: &[u8], at: Span, of: Of) -> Result<Fields, Repeated> {
        let obj = &text[at.range()];
        if obj.first() != Some(&b'{') {
            return Ok(Fields::default());
        }
        let mut found = Found { values: [None; KEYS], repeated: None };
        let mut de = serde_json::Deserializer::from_slice(obj);
        let read = Top { of, found: &mut found }.deserialize(&mut de).and_then(|()| de.end());
        if read.is_err() {
            // The text is valid JSON (`Checked`), so the one error is a repeat.
            return Err(Repeated(found.repeated.unwrap_or("a key")));
        }
        Ok(Fields(found.values.map(|v| v.map(|v| span_in(text, v)))))
    }

    pub(super) fn get(&self, key: Key) -> Option<Span> {
        self.0[key as usize]
    }

    pub(super) fn spans_mut(&mut self) -> impl Iterator<Item = &mut Option<Span>> {
        self.0.iter_mut()
    }
}

/// What one pass found: the values of the keys, or which one appeared twice.
struct Found<'de> {
    values: [Option<&'de RawValue>; KEYS],
    repeated: Option<&'static str>,
}

impl<'de> Found<'de> {
    /// Keeps `value` as `key`'s, unless `key` already has one.
    fn set<E: de::Error>(&mut self, key: Key, value: &'de RawValue, path: &'static str) -> Result<(), E> {
        let slot = &mut self.values[key as usize];
        if slot.is_some() {
            self.repeated = Some(path);
            return Err(E::custom("a key appears twice"));
        }
        *slot = Some(value);
        Ok(())
    }

    fn repeat<E: de::Error>(&mut self, path: &'static str) -> E {
        self.repeated = Some(path);
        E::custom("a key appears twice")
    }
}

/// The index in `names` of a key, read as a string (escaped or not).
struct NameIn<'n>(&'n [&'n str]);

impl<'de> DeserializeSeed<'de> for NameIn<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for NameIn<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, s: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|n| *n == s))
    }
}

/// The names [`Top`] looks for: [`TOP`]'s, then `_meta`.
const TOP_NAMES: [&str; 10] =
    ["name", "task", "taskId", "requestId", "progressToken", "protocolVersion", "progress", "total", "status", "_meta"];

/// `params` or `result`: the keys the gateway reads there, `_meta` member by member.
struct Top<'f, 'de> {
    of: Of,
    found: &'f mut Found<'de>,
}

impl<'de> DeserializeSeed<'de> for Top<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut meta_seen = false;
        while let Some(name) = map.next_key_seed(NameIn(&TOP_NAMES))? {
            match name {
                Some(i) if i == TOP.len() => {
                    if std::mem::replace(&mut meta_seen, true) {
                        return Err(self.found.repeat("_meta"));
                    }
                    map.next_value_seed(Meta { found: &mut *self.found })?;
                }
                Some(i) if self.of.reads(TOP[i].1) => {
                    let (path, key) = TOP[i];
                    let value: &'de RawValue = map.next_value()?;
                    if key == Key::Task {
                        match self.of {
                            Of::Result => {
                                let mut seen = [None; 2];
                                let paths = ["task.taskId", "task.ttl"];
                                members(value, &["taskId", "ttl"], &paths, &mut seen, self.found)?;
                            }
                            // The ttl a task-augmented request asks for, which the gateway
                            // reads where it hosts or bridges the task.
                            Of::Params => members(value, &["ttl"], &["task.ttl"], &mut [None], self.found)?,
                        }
                    }
                    self.found.set(key, value, path)?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// `_meta`: its progress token and related-task key (and that key's `taskId`). What is not an
/// object holds neither.
struct Meta<'f, 'de> {
    found: &'f mut Found<'de>,
}

impl<'de> DeserializeSeed<'de> for Meta<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Meta<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(name) = map.next_key_seed(NameIn(&["progressToken", RELATED_TASK]))? {
            match name {
                Some(0) => {
                    let value = map.next_value()?;
                    self.found.set(Key::MetaProgressToken, value, "_meta.progressToken")?;
                }
                Some(_) => {
                    let value: &'de RawValue = map.next_value()?;
                    self.found.set(Key::RelatedTask, value, "_meta.io.modelcontextprotocol/related-task")?;
                    let mut task_id = [None];
                    let path = "_meta.io.modelcontextprotocol/related-task.taskId";
                    members(value, &["taskId"], &[path], &mut task_id, self.found)?;
                    self.found.values[Key::RelatedTaskId as usize] = task_id[0];
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// The members `names` of the small object `value` (read again on its own), into `out`; a
/// name that appears twice is refused as its `paths` entry. What is not an object has none.
fn members<'de, E: de::Error>(
    value: &'de RawValue,
    names: &[&str],
    paths: &[&'static str],
    out: &mut [Option<&'de RawValue>],
    found: &mut Found<'de>,
) -> Result<(), E> {
    if !value.get().starts_with('{') {
        return Ok(());
    }
    struct Members<'a, 'de> {
        names: &'a [&'a str],
        out: &'a mut [Option<&'de RawValue>],
        twice: Option<usize>,
    }
    impl<'de> Visitor<'de> for &mut Members<'_, 'de> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(name) = map.next_key_seed(NameIn(self.names))? {
                match name {
                    Some(i) if self.out[i].is_some() => {
                        self.twice = Some(i);
                        return Err(de::Error::custom("a key appears twice"));
                    }
                    Some(i) => self.out[i] = Some(map.next_value()?),
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(())
        }
    }
    let mut m = Members { names, out, twice: None };
    let mut de = serde_json::Deserializer::from_str(value.get());
    match de.deserialize_map(&mut m) {
        Ok(()) => Ok(()),
        Err(_) => Err(found.repeat(m.twice.map_or("a key", |i| paths[i]))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, of: Of) -> Result<Fields, Repeated> {
        Fields::read(text.as_bytes(), Span { start: 0, end: text.len() as u32 }, of)
    }

    fn get(text: &str, of: Of, key: Key) -> Option<&str> {
        read(text, of).unwrap().get(key).map(|s| &text[s.range()])
    }

    #[test]
    fn the_names_looked_for_are_those_of_the_keys() {
        assert!(TOP.iter().zip(TOP_NAMES).all(|((name, _), n)| *name == n));
        assert_eq!(TOP_NAMES[TOP.len()..], ["_meta"]);
        assert_eq!(Key::RelatedTaskId as usize, KEYS - 1);
    }

    #[test]
    fn meta_is_read_member_by_member_in_the_same_pass() {
        let p = r#"{"x":[1,{"_meta":2}],"_meta":{"a":{"progressToken":9},"progressToken":"p","io.modelcontextprotocol/related-task":{"taskId":"t","n":1}},"name":"n"}"#;
        assert_eq!(get(p, Of::Params, Key::MetaProgressToken), Some(r#""p""#));
        assert_eq!(get(p, Of::Params, Key::RelatedTask), Some(r#"{"taskId":"t","n":1}"#));
        assert_eq!(get(p, Of::Params, Key::RelatedTaskId), Some(r#""t""#));
        assert_eq!(get(p, Of::Params, Key::Name), Some(r#""n""#));
        assert_eq!(get(r#"{"_meta":[1,{"progressToken":1}]}"#, Of::Params, Key::MetaProgressToken), None);
        assert_eq!(
            get(r#"{"_meta":{"io.modelcontextprotocol/related-task":"t"}}"#, Of::Params, Key::RelatedTaskId),
            None
        );
        assert_eq!(get(r#"{"_meta":{"progress\u0054oken":3}}"#, Of::Params, Key::MetaProgressToken), Some("3"));
    }

    #[test]
    fn a_repeat_of_what_is_read_is_refused_and_of_anything_else_passes() {
        for (text, of, path) in [
            (r#"{"name":1,"name":2}"#, Of::Params, "name"),
            (r#"{"_meta":{},"_meta":{}}"#, Of::Result, "_meta"),
            (r#"{"_meta":{"progressToken":1,"progressToken":2}}"#, Of::Params, "_meta.progressToken"),
            (r#"{"_meta":{"progressToken":1,"progress\u0054oken":2}}"#, Of::Params, "_meta.progressToken"),
            (
                r#"{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"a","taskId":"b"}}}"#,
                Of::Result,
                "_meta.io.modelcontextprotocol/related-task.taskId",
            ),
            (r#"{"task":{"taskId":"a"},"task":{}}"#, Of::Result, "task"),
            (r#"{"task":{"taskId":"a","ttl":1,"taskId":"b"}}"#, Of::Result, "task.taskId"),
            (r#"{"status":"working","status":"completed"}"#, Of::Result, "status"),
            (r#"{"name":"x","task":{"ttl":1000,"ttl":60000}}"#, Of::Params, "task.ttl"),
        ] {
            assert_eq!(read(text, of).err(), Some(Repeated(path)), "{text}");
        }
        for (text, of) in [
            (r#"{"a":1,"a":2,"_meta":{"k":1,"k":2}}"#, Of::Params),
            (r#"{"name":1,"name":2,"total":1,"total":2}"#, Of::Result),
            (r#"{"task":{"taskId":"a","ttl":1,"taskId":"b"}}"#, Of::Params),
            (r#"{"content":[{"task":1,"task":2}],"task":{"status":1,"status":2}}"#, Of::Result),
        ] {
            assert!(read(text, of).is_ok(), "{text}");
        }
    }
}
