//! A JSON value borrowed from the line it was parsed from, and its
//! canonical text: what the verifier reads an export line into.
//!
//! serde_json's parser reads it, so what is accepted, and every number and
//! string, are exactly what a [`serde_json::Value`] of the same text holds;
//! but a string without escapes stays in the line, and an object is a list
//! of members, not a map, so a line costs a few allocations rather than one
//! per key and string. The canonical text of a [`Json`] is the one
//! [`crate::approval::canonical_json`] gives the `Value` of the same text,
//! or [`Fallback`] where the two could differ (an object with a key twice,
//! which a `Value` keeps once; serde_json's raw-value marker) or where the
//! `Value` has none (a number without a canonical form): the caller then
//! reads the line as a `Value`.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

use crate::approval::canonical::{utf16_order, write_number, write_string};

/// A JSON value borrowing its strings from the text where it can.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Json<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    /// Members in the text's order.
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

/// This text must be read as a [`Value`] to be sure of its canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fallback;

impl<'a> Json<'a> {
    /// The value in `text`.
    pub(super) fn parse(text: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Takes the member `key` out of an object (the last, as a `Value` keeps the last).
    pub(super) fn take(&mut self, key: &str) -> Option<Json<'a>> {
        let Json::Object(members) = self else { return None };
        let at = members.iter().rposition(|(name, _)| name == key)?;
        Some(members.remove(at).1)
    }

    /// Appends the canonical text to `out`, leaving out the member `skip` of an object.
    /// Sorts objects' members in place.
    pub(super) fn write_canonical(&mut self, skip: Option<&str>, out: &mut String) -> Result<(), Fallback> {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
            Json::Number(number) => write_number(number, out).map_err(|_| Fallback)?,
            Json::String(text) => write_string(text, out),
            Json::Array(items) => {
                out.push('[');
                for (index, item) in items.iter_mut().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    item.write_canonical(None, out)?;
                }
                out.push(']');
            }
            Json::Object(members) => {
                members.sort_unstable_by(|(a, _), (b, _)| utf16_order(a, b));
                if members.windows(2).any(|pair| pair[0].0 == pair[1].0) {
                    return Err(Fallback);
                }
                out.push('{');
                let mut first = true;
                for (key, item) in members.iter_mut().filter(|(key, _)| Some(&**key) != skip) {
                    if !std::mem::take(&mut first) {
                        out.push(',');
                    }
                    write_string(key, out);
                    out.push(':');
                    item.write_canonical(None, out)?;
                }
                out.push('}');
            }
        }
        Ok(())
    }
}

/// What the verifier reads of a JSON value, the same on a [`Value`] and a [`Json`].
pub(super) trait Fields {
    /// The member `key` of an object (the last of that name).
    fn member(&self, key: &str) -> Option<&Self>;
    /// The string it is.
    fn text(&self) -> Option<&str>;
    /// The integer it is, when it fits an `i64`.
    fn integer(&self) -> Option<i64>;
}

impl Fields for Value {
    fn member(&self, key: &str) -> Option<&Self> {
        self.get(key)
    }

    fn text(&self) -> Option<&str> {
        self.as_str()
    }

    fn integer(&self) -> Option<i64> {
        self.as_i64()
    }
}

impl Fields for Json<'_> {
    fn member(&self, key: &str) -> Option<&Self> {
        let Json::Object(members) = self else { return None };
        members.iter().rev().find(|(name, _)| name == key).map(|(_, value)| value)
    }

    fn text(&self) -> Option<&str> {
        match self {
            Json::String(text) => Some(text),
            _ => None,
        }
    }

    fn integer(&self) -> Option<i64> {
        match self {
            Json::Number(number) => number.as_i64(),
            _ => None,
        }
    }
}

/// serde_json's marker for a raw value, which a `Value` reads differently.
const RAW_VALUE_MARKER: &str = "$serde_json::private::RawValue";

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

/// A string kept borrowed where the text allows.
struct Text<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(text)))
    }
}

/// Reads any value as a `Value` would (the same calls for numbers), keeping strings borrowed.
struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, flag: bool) -> Result<Self::Value, E> {
        Ok(Json::Bool(flag))
    }

    fn visit_i64<E>(self, number: i64) -> Result<Self::Value, E> {
        Ok(Json::Number(number.into()))
    }

    fn visit_u64<E>(self, number: u64) -> Result<Self::Value, E> {
        Ok(Json::Number(number.into()))
    }

    fn visit_f64<E>(self, number: f64) -> Result<Self::Value, E> {
        Ok(Number::from_f64(number).map_or(Json::Null, Json::Number))
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Json::String(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Json::String(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
        Ok(Json::String(Cow::Owned(text)))
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        Json::deserialize(deserializer)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(items.size_hint().unwrap_or(0));
        while let Some(item) = items.next_element()? {
            out.push(item);
        }
        Ok(Json::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(members.size_hint().unwrap_or(0));
        while let Some(Text(key)) = members.next_key()? {
            if out.is_empty() && key == RAW_VALUE_MARKER {
                return Err(de::Error::custom("serde_json's raw value marker"));
            }
            out.push((key, members.next_value()?));
        }
        Ok(Json::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::canonical_json;
    use proptest::prelude::*;

    fn both(text: &str) -> (Result<String, Fallback>, Option<String>) {
        let value: Value = serde_json::from_str(text).unwrap();
        let mut json = Json::parse(text).unwrap();
        let mut out = String::new();
        let ours = json.write_canonical(None, &mut out).map(|()| out);
        (ours, canonical_json(&value).ok())
    }

    #[test]
    fn its_canonical_text_is_the_values() {
        for text in [
            r#"{"b":[1,2.5,"é\u0001",-0,1e21,-7],"a":{"z":null,"y":true},"€":1,"\ud83d\ude00":2,"\ue000":3}"#,
            r#"[18446744073709551615,-9223372036854775808,0.1,1.5e-7,"tab\tquote\"slash\\"]"#,
            r#""plain""#,
            "4503599627370495.5",
        ] {
            let (ours, value) = both(text);
            assert_eq!(ours.ok(), value, "{text}");
        }
    }

    #[test]
    fn what_a_value_reads_otherwise_falls_back() {
        // A key twice: a `Value` keeps the last.
        assert_eq!(both(r#"{"a":1,"a":2}"#).0, Err(Fallback));
        // No canonical form.
        assert_eq!(both(r#"{"n":1e20}"#).0, Err(Fallback));
        assert!(Json::parse(r#"{"$serde_json::private::RawValue":"1"}"#).is_err());
    }

    #[test]
    fn members_are_the_last_of_their_name_and_strings_stay_borrowed() {
        let mut json = Json::parse(r#"{"seq":1,"kind":"a","seq":7,"tag":"x\n"}"#).unwrap();
        assert_eq!(json.member("seq").and_then(Fields::integer), Some(7));
        assert!(matches!(json.member("kind"), Some(Json::String(Cow::Borrowed("a")))));
        assert!(matches!(json.member("tag"), Some(Json::String(Cow::Owned(_)))));
        assert_eq!(json.take("seq"), Some(Json::Number(7.into())));
        assert_eq!(json.member("seq").and_then(Fields::integer), Some(1));
    }

    /// JSON values of every kind, numbers and strings included.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1e15_f64..1e15).prop_map(Value::from),
            "(\\PC|[\\x00-\\x1f\"\\\\])*".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map("\\PC{0,4}", inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn matches_canonical_json_of_the_same_text(value in any_json(), skip in "seq|a|") {
            let text = value.to_string();
            let mut json = Json::parse(&text).unwrap();
            let mut out = String::new();
            json.write_canonical(Some(&skip), &mut out).unwrap();
            // The `Value` of the same text (a double may not come back as the same bits).
            let reread: Value = serde_json::from_str(&text).unwrap();
            let mut expected = String::new();
            crate::approval::canonical::write_canonical(&reread, Some(&skip), &mut expected).unwrap();
            prop_assert_eq!(out, expected);
        }
    }
}
