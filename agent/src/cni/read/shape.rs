//! The pieces every lean object is made of: [`Shape`] where a JSON object is
//! expected (a wrong type parses, so that the converter names it), [`Typed`]
//! where a field's type is checked, and [`AnyJson`], what reads any JSON.

use std::{fmt, marker::PhantomData};

use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, MapAccess, SeqAccess, Visitor, value::MapAccessDeserializer},
};

/// Where a JSON object is expected: missing (or null), the object read as
/// `T`, or any other JSON, skipped unparsed. Written back as the object, or
/// `[]` for the other JSON: the converter names a wrong type, never its value.
#[derive(Clone, Debug, Default)]
pub(crate) enum Shape<T> {
    #[default]
    Absent,
    Map(T),
    Other,
}

impl<T> Shape<T> {
    /// The object, if one was there.
    pub(crate) fn as_map(&self) -> Option<&T> {
        match self {
            Self::Map(t) => Some(t),
            Self::Absent | Self::Other => None,
        }
    }
}

impl<T: Default> Shape<T> {
    /// The object, or an empty one: a wrong type reads as nothing there.
    pub(crate) fn or_default(self) -> T {
        match self {
            Self::Map(t) => t,
            Self::Absent | Self::Other => T::default(),
        }
    }
}

/// Where a JSON object is expected: the object read as `T`, or `T`'s
/// default for anything else (a wrong type reads as nothing there, as a JSON
/// pointer through it finds nothing).
pub(crate) fn lenient<'de, T, D>(d: D) -> Result<T, D::Error>
where
    T: Deserialize<'de> + Default,
    D: Deserializer<'de>,
{
    Shape::<T>::deserialize(d).map(Shape::or_default)
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Shape<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        any_json(d)
    }
}

impl<'de, T: Deserialize<'de>> AnyJson<'de> for Shape<T> {
    fn other() -> Self {
        Shape::Other
    }
    fn null() -> Self {
        Shape::Absent
    }
    fn map<A: MapAccess<'de>>(m: A) -> Result<Self, A::Error> {
        T::deserialize(MapAccessDeserializer::new(m)).map(Shape::Map)
    }
}

/// A value read from whatever JSON is there: each kind of JSON it takes is
/// read as it says, any other is skipped unparsed and reads as [`Self::other`].
pub(crate) trait AnyJson<'de>: Sized {
    /// What JSON of a kind not taken reads as.
    fn other() -> Self;
    fn null() -> Self {
        Self::other()
    }
    fn text(_: &str) -> Self {
        Self::other()
    }
    /// An integer (one past `i64` reads as [`Self::other`]).
    fn int(_: i64) -> Self {
        Self::other()
    }
    fn map<A: MapAccess<'de>>(mut m: A) -> Result<Self, A::Error> {
        while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Self::other())
    }
    fn seq<A: SeqAccess<'de>>(mut s: A) -> Result<Self, A::Error> {
        while s.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Self::other())
    }
}

/// Reads an [`AnyJson`] type: its `Deserialize::deserialize`.
pub(crate) fn any_json<'de, T: AnyJson<'de>, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(AnyVisitor(PhantomData))
}

struct AnyVisitor<T>(PhantomData<T>);

impl<'de, T: AnyJson<'de>> Visitor<'de> for AnyVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<T, A::Error> {
        T::map(m)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<T, A::Error> {
        T::seq(s)
    }
    fn visit_str<E>(self, s: &str) -> Result<T, E> {
        Ok(T::text(s))
    }
    fn visit_i64<E>(self, n: i64) -> Result<T, E> {
        Ok(T::int(n))
    }
    fn visit_u64<E>(self, n: u64) -> Result<T, E> {
        Ok(i64::try_from(n).map_or_else(|_| T::other(), T::int))
    }
    fn visit_f64<E>(self, _: f64) -> Result<T, E> {
        Ok(T::other())
    }
    fn visit_bool<E>(self, _: bool) -> Result<T, E> {
        Ok(T::other())
    }
    fn visit_unit<E>(self) -> Result<T, E> {
        Ok(T::null())
    }
    fn visit_none<E>(self) -> Result<T, E> {
        Ok(T::null())
    }
}

/// A field read as `T` (its default where absent), or, where the JSON is
/// not a `T`, `T`'s default and serde's words for why: a wrong type names
/// the object instead of failing the list.
#[derive(Clone, Debug, Default)]
pub(crate) struct Typed<T> {
    pub(crate) value: T,
    /// Why the JSON there is not a `T`, if it is not.
    pub(crate) wrong: Option<String>,
}

impl<'de, T: serde::de::DeserializeOwned + Default> Deserialize<'de> for Typed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read as JSON first: a field of the wrong type cannot be skipped
        // once serde has begun to read it as a `T`.
        let v = serde_json::Value::deserialize(d)?;
        let (value, wrong) =
            T::deserialize(v).map_or_else(|e| (T::default(), Some(e.to_string())), |t| (t, None));
        Ok(Self { value, wrong })
    }
}

/// The objects of the real-world corpus whose file names start with `prefix`
/// (each a single object or a List's items), with their file name.
#[cfg(test)]
pub(crate) fn corpus_items(prefix: &str) -> Vec<(String, serde_json::Value)> {
    use serde_json::Value;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus/realworld");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("corpus") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.starts_with(prefix) {
            continue;
        }
        let v: Value = serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
        let items = match v.get("items").and_then(Value::as_array) {
            Some(items) => items.clone(),
            None => vec![v],
        };
        out.extend(items.into_iter().map(|i| (name.to_owned(), i)));
    }
    out
}
