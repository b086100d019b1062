//! Every key `config.toml` takes, read from the serde derive of the raw types (`raw.rs`):
//! the configuration reference is written from this list, so a key added there cannot be
//! left out of the reference.
//!
//! A tracing deserializer walks [`RawConfig`](super::raw::RawConfig) the way the derive asks
//! to be walked: each struct names its fields, each field's type asks for the value it takes
//! (an option, a string, a number, a list, a table), and the tracer answers with a
//! placeholder while noting the key and its kind.

use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use std::cell::RefCell;
use std::rc::Rc;

/// What a key holds, as TOML writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A table (`[server]`), whose keys are listed on their own.
    Table,
    /// An array of tables (`[[upstream]]`).
    Tables,
    String,
    Integer,
    Boolean,
    /// A list of strings (or of another kind: the element's).
    List,
    /// A table of string values whose keys are the user's (`env`, `headers`).
    Map,
}

impl Kind {
    /// In words, for the reference.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Table => "table",
            Kind::Tables => "array of tables",
            Kind::String => "string",
            Kind::Integer => "integer",
            Kind::Boolean => "boolean",
            Kind::List => "list of strings",
            Kind::Map => "table of strings",
        }
    }
}

/// Every key of the config, dotted from the top (`server.auth.tokens.principal`), in the
/// order the raw types declare them, with its kind.
pub fn keys() -> Vec<(String, Kind)> {
    let out = Rc::new(RefCell::new(Vec::new()));
    let tracer = Tracer { path: String::new(), element: false, out: out.clone() };
    if let Err(e) = <super::raw::RawConfig as serde::Deserialize>::deserialize(tracer) {
        panic!("the config's raw types could not be traced: {e}");
    }
    out.take()
}

#[derive(Debug)]
struct TraceError(String);

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TraceError {}

impl de::Error for TraceError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        TraceError(msg.to_string())
    }
}

struct Tracer {
    path: String,
    /// Deserializing one element of a list: the key is the list's.
    element: bool,
    out: Rc<RefCell<Vec<(String, Kind)>>>,
}

impl Tracer {
    fn note(&self, kind: Kind) {
        let kind = match (self.element, kind) {
            (true, Kind::Table) => Kind::Tables,
            (true, _) => Kind::List,
            (false, k) => k,
        };
        let mut out = self.out.borrow_mut();
        if !self.path.is_empty() && !out.iter().any(|(p, _)| *p == self.path) {
            out.push((self.path.clone(), kind));
        }
    }

    fn child(&self, field: &str) -> Tracer {
        let path = if self.path.is_empty() { field.to_string() } else { format!("{}.{field}", self.path) };
        Tracer { path, element: false, out: self.out.clone() }
    }
}

macro_rules! leaf {
    ($($method:ident => $kind:ident, $visit:ident($value:expr);)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
            self.note(Kind::$kind);
            visitor.$visit($value)
        }
    )*};
}

impl<'de> Deserializer<'de> for Tracer {
    type Error = TraceError;

    leaf! {
        deserialize_bool => Boolean, visit_bool(false);
        deserialize_u8 => Integer, visit_u8(1);
        deserialize_u16 => Integer, visit_u16(1);
        deserialize_u32 => Integer, visit_u32(1);
        deserialize_u64 => Integer, visit_u64(1);
        deserialize_i8 => Integer, visit_i8(1);
        deserialize_i16 => Integer, visit_i16(1);
        deserialize_i32 => Integer, visit_i32(1);
        deserialize_i64 => Integer, visit_i64(1);
        deserialize_f32 => Integer, visit_f32(1.0);
        deserialize_f64 => Integer, visit_f64(1.0);
        deserialize_str => String, visit_str("");
        deserialize_string => String, visit_str("");
        deserialize_char => String, visit_char('x');
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, TraceError> {
        Err(TraceError(format!("{}: a type the config tracer does not know", self.path)))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_seq(OneElement(Some(Tracer { element: true, ..self })))
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        self.note(Kind::Map);
        visitor.visit_map(Fields { tracer: self, fields: &[], next: 0 })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        self.note(Kind::Table);
        visitor.visit_map(Fields { tracer: Tracer { element: false, ..self }, fields, next: 0 })
    }

    serde::forward_to_deserialize_any! {
        i128 u128 bytes byte_buf unit unit_struct newtype_struct tuple tuple_struct enum
        identifier ignored_any
    }
}

/// A list of one element, traced.
struct OneElement(Option<Tracer>);

impl<'de> SeqAccess<'de> for OneElement {
    type Error = TraceError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, TraceError> {
        self.0.take().map(|t| seed.deserialize(t)).transpose()
    }
}

/// A struct's fields, each traced under its key.
struct Fields {
    tracer: Tracer,
    fields: &'static [&'static str],
    next: usize,
}

impl<'de> MapAccess<'de> for Fields {
    type Error = TraceError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, TraceError> {
        let Some(field) = self.fields.get(self.next) else { return Ok(None) };
        seed.deserialize(IntoDeserializer::<TraceError>::into_deserializer(*field)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, TraceError> {
        let field = self.fields[self.next];
        self.next += 1;
        seed.deserialize(self.tracer.child(field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_and_key_is_found() {
        let keys = keys();
        let kind = |k: &str| keys.iter().find(|(p, _)| p == k).map(|(_, kind)| *kind);
        assert_eq!(kind("server"), Some(Kind::Table));
        assert_eq!(kind("server.listen"), Some(Kind::String));
        assert_eq!(kind("server.max_sessions"), Some(Kind::Integer));
        assert_eq!(kind("server.allowed_hosts"), Some(Kind::List));
        assert_eq!(kind("server.auth.tokens"), Some(Kind::Tables));
        assert_eq!(kind("server.auth.tokens.principal"), Some(Kind::String));
        assert_eq!(kind("upstream"), Some(Kind::Tables));
        assert_eq!(kind("upstream.env"), Some(Kind::Map));
        assert_eq!(kind("upstream.share"), Some(Kind::Boolean));
        assert_eq!(kind("upstream.client_info.title"), Some(Kind::String));
        assert_eq!(kind("upstream.dialects.retention"), Some(Kind::String));
        assert_eq!(kind("tasks.redis_prefix"), Some(Kind::String));
    }
}
