//! What is kept of the strings and lists an object's writer sizes: [`Text`],
//! a string kept to a bounded prefix as it is read, and [`Capped`], a list
//! kept to its first items, the rest skipped unparsed.
//!
//! Whoever writes an object chooses its strings' lengths up to what the API
//! server stores (about 1.5 MiB an object): a core/v1 Event's message has no
//! limit of its own, an ObjectReference's names are not validated. serde_json
//! reads one string whole into its scratch buffer (one at a time, reused);
//! what is kept of it is the prefix, and whether it was cut.

use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, SeqAccess},
};

use super::shape::{AnyJson, any_json};

/// A string kept to its first `N` bytes (cut at a character boundary); any
/// other JSON where a string is expected reads as no string at all, as the
/// converters read a field of the wrong type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Text<const N: usize> {
    kept: Option<String>,
    cut: bool,
}

impl<const N: usize> Text<N> {
    /// The text kept, if a string was there.
    pub(crate) fn as_str(&self) -> Option<&str> {
        self.kept.as_deref()
    }

    /// Whether the string was longer than `N` bytes.
    pub(crate) fn cut(&self) -> bool {
        self.cut
    }
}

impl<'de, const N: usize> Deserialize<'de> for Text<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        any_json(d)
    }
}

impl<const N: usize> AnyJson<'_> for Text<N> {
    fn other() -> Self {
        Self::default()
    }
    fn text(s: &str) -> Self {
        let end = s.floor_char_boundary(N);
        Self {
            kept: Some(s[..end].to_owned()),
            cut: end < s.len(),
        }
    }
}

/// A number where one is expected (an Event's `count`: int32, which a
/// client may write negative); any other JSON reads as none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Count(Option<i64>);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        any_json(d)
    }
}

impl AnyJson<'_> for Count {
    fn other() -> Self {
        Count(None)
    }
    fn int(n: i64) -> Self {
        Count(Some(n))
    }
}

impl Count {
    pub(crate) fn get(self) -> Option<i64> {
        self.0
    }
}

/// A JSON array kept to its first `N` items, the others skipped unparsed;
/// any other JSON reads as an empty list (the converters see no items).
#[derive(Debug)]
pub(crate) struct Capped<T, const N: usize> {
    items: Vec<T>,
    cut: bool,
}

impl<T, const N: usize> Default for Capped<T, N> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            cut: false,
        }
    }
}

impl<T, const N: usize> Capped<T, N> {
    /// The items kept.
    pub(crate) fn items(&self) -> &[T] {
        &self.items
    }

    /// Whether the array had more than `N` items.
    #[cfg(test)]
    pub(crate) fn cut(&self) -> bool {
        self.cut
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Capped<T, N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        any_json(d)
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> AnyJson<'de> for Capped<T, N> {
    fn other() -> Self {
        Self::default()
    }
    fn seq<A: SeqAccess<'de>>(mut s: A) -> Result<Self, A::Error> {
        let mut out = Self::default();
        while out.items.len() < N {
            match s.next_element()? {
                Some(item) => out.items.push(item),
                None => return Ok(out),
            }
        }
        while s.next_element::<IgnoredAny>()?.is_some() {
            out.cut = true;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_is_kept_to_its_prefix_at_a_character_boundary() {
        let t: Text<4> = serde_json::from_str(r#""abcdef""#).expect("text");
        assert_eq!((t.as_str(), t.cut()), (Some("abcd"), true));
        // 'é' is two bytes: the cut falls before it, never inside.
        let t: Text<4> = serde_json::from_str(r#""abcé""#).expect("text");
        assert_eq!((t.as_str(), t.cut()), (Some("abc"), true));
        let t: Text<4> = serde_json::from_str(r#""ab""#).expect("text");
        assert_eq!((t.as_str(), t.cut()), (Some("ab"), false));
    }

    #[test]
    fn other_json_reads_as_no_string_and_is_skipped_whole() {
        for junk in [
            r#"{"a": ["b", {"c": 1}]}"#,
            "[1, [2]]",
            "7",
            "-1.5",
            "true",
            "null",
        ] {
            let t: Text<8> = serde_json::from_str(junk).expect(junk);
            assert_eq!(t, Text::default(), "{junk}");
        }
        let n: Count = serde_json::from_str("-3").expect("count");
        assert_eq!(n, Count(Some(-3)));
        for junk in [
            r#""5""#,
            "[5]",
            r#"{"n": 5}"#,
            "1.5",
            "null",
            "18446744073709551615",
        ] {
            let n: Count = serde_json::from_str(junk).expect(junk);
            assert!(n.get().is_none(), "{junk}");
        }
    }

    #[test]
    fn a_list_keeps_its_first_items_and_skips_the_rest_unparsed() {
        let c: Capped<Text<8>, 2> =
            serde_json::from_str(r#"["a", 5, "c", {"deep": [1]}, "e"]"#).expect("list");
        let kept: Vec<Option<&str>> = c.items().iter().map(Text::as_str).collect();
        assert_eq!((kept, c.cut()), (vec![Some("a"), None], true));
        let c: Capped<Text<8>, 2> = serde_json::from_str(r#"["a", "b"]"#).expect("list");
        assert!(!c.cut() && c.items().len() == 2);
        for junk in [r#"{"a": 1}"#, r#""x""#, "3", "null"] {
            let c: Capped<Text<8>, 2> = serde_json::from_str(junk).expect(junk);
            assert!(c.items().is_empty() && !c.cut(), "{junk}");
        }
    }
}
