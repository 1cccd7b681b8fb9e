//! The pieces every lean object is made of: [`Shape`] where a JSON object is
//! expected (a wrong type parses, and is written back so that the converter
//! names it), and [`Skipped`], a value read for its key alone.

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
        d.deserialize_any(ShapeVisitor(PhantomData))
    }
}

struct ShapeVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ShapeVisitor<T> {
    type Value = Shape<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(m)).map(Shape::Map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
        while s.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Shape::Other)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Shape::Absent)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Shape::Absent)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Shape::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Shape::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Shape::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Shape::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Shape::Other)
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

/// A value read for its key alone, written back as `{}`.
#[derive(Clone, Debug)]
pub(crate) struct Skipped;

impl<'de> Deserialize<'de> for Skipped {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Skipped)
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
