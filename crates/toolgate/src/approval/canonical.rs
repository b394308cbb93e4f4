//! The canonical JSON text of a tool input, the thing a signature binds.
//!
//! Contract: two inputs have the same canonical text exactly when a handler
//! receives the same value from them, whatever their key order.
//!
//! - Object keys are sorted by UTF-16 code units and strings are escaped as
//!   `JSON.stringify` does, as RFC 8785 (JCS) asks.
//! - Integers are written as their exact decimal text. RFC 8785 writes every
//!   number as an IEEE double, which would give `9007199254740993` and
//!   `9007199254740992` one text although the handler receives two different
//!   integers. For integers within ±2^53 both forms are the same text, so
//!   digests of ordinary inputs match RFC 8785 (and the AI SDK) exactly.
//! - Other numbers are doubles, written as ECMAScript writes them (RFC 8785).
//! - A double that is a whole number of magnitude 2^53 or more but below
//!   10^21 has no canonical text: ECMAScript writes it as plain digits that
//!   may name a different integer (2^60 is written `1152921504606847000`).
//!   Such an input is refused with [`CanonicalError::AmbiguousNumber`]
//!   rather than signed ambiguously; write the number as an integer instead.
//!
//! The work is linear in the size of the input.

use std::fmt::Write as _;

use serde_json::{Number, Value};

/// 2^53: above this, doubles no longer hold every integer.
const EXACT_DOUBLE_LIMIT: f64 = 9_007_199_254_740_992.0;
/// From here on ECMAScript writes doubles with an exponent.
const EXPONENT_FORM_START: f64 = 1e21;

/// An input that has no unambiguous canonical form.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CanonicalError {
    /// A whole-number double too large to tell from a neighbouring integer.
    #[error(
        "the number at `{pointer}` ({value}) is a double beyond 2^53 that has no exact canonical form; write it as an integer"
    )]
    AmbiguousNumber {
        /// JSON pointer to the number.
        pointer: String,
        /// The number.
        value: f64,
    },
}

/// The canonical JSON text of `value` (see the module docs).
pub fn canonical_json(value: &Value) -> Result<String, CanonicalError> {
    let mut out = String::new();
    write_canonical(value, None, &mut out)?;
    Ok(out)
}

/// Appends the canonical text of `value` to `out`, leaving out the member
/// named `skip` when `value` is an object (an audit event without its `seq`).
pub(crate) fn write_canonical(value: &Value, skip: Option<&str>, out: &mut String) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => write_number(number, out)?,
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, None, out).map_err(|error| error.within(&index.to_string()))?;
            }
            out.push(']');
        }
        Value::Object(fields) => {
            // A map's keys are distinct: the order is total without a tie-break.
            let mut entries: Vec<(&str, &Value)> =
                fields.iter().map(|(key, item)| (key.as_str(), item)).filter(|(key, _)| Some(*key) != skip).collect();
            entries.sort_unstable_by(|(a, _), (b, _)| utf16_order(a, b));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_canonical(item, None, out).map_err(|error| error.within(key))?;
            }
            out.push('}');
        }
    }
    Ok(())
}

impl CanonicalError {
    /// The same error seen from the parent: `segment` (a key or an index) put before its pointer.
    pub(crate) fn within(self, segment: &str) -> Self {
        match self {
            Self::AmbiguousNumber { pointer, value } => Self::AmbiguousNumber {
                pointer: format!("/{}{pointer}", segment.replace('~', "~0").replace('/', "~1")),
                value,
            },
        }
    }
}

/// The order of object keys: by UTF-16 code units (RFC 8785), computed on
/// the UTF-8 bytes. Byte order is code point order, which differs from
/// UTF-16 order only between a supplementary character (lead byte `F0`–`F4`,
/// a surrogate pair in UTF-16, `D800`–`DBFF`) and one from `U+E000` to `U+FFFF`
/// (lead byte `EE` or `EF`); the first differing byte starts a character in
/// exactly that case.
pub(crate) fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (left, right) = (a.as_bytes(), b.as_bytes());
    let Some(at) = left.iter().zip(right).position(|(x, y)| x != y) else {
        return left.len().cmp(&right.len());
    };
    let (x, y) = (left[at], right[at]);
    let supplementary = |byte: u8| byte >= 0xF0;
    let upper_bmp = |byte: u8| byte == 0xEE || byte == 0xEF;
    if supplementary(x) && upper_bmp(y) {
        std::cmp::Ordering::Less
    } else if upper_bmp(x) && supplementary(y) {
        std::cmp::Ordering::Greater
    } else {
        x.cmp(&y)
    }
}

/// Appends a number's canonical text; the error's pointer is filled in by the callers above it.
pub(crate) fn write_number(number: &Number, out: &mut String) -> Result<(), CanonicalError> {
    if number.is_i64() || number.is_u64() {
        // serde_json writes integers exactly.
        let _ = write!(out, "{number}");
        return Ok(());
    }
    // Without `arbitrary_precision` every other number is a finite double.
    let value = number.as_f64().unwrap_or(f64::NAN);
    let magnitude = value.abs();
    if value.fract() == 0.0 && (EXACT_DOUBLE_LIMIT..EXPONENT_FORM_START).contains(&magnitude) {
        return Err(CanonicalError::AmbiguousNumber { pointer: String::new(), value });
    }
    out.push_str(ryu_js::Buffer::new().format(value));
    Ok(())
}

/// Appends a string as `JSON.stringify` writes it: `"` and `\` escaped, and
/// \b \f \n \r \t by name, other control characters as lowercase `\u00xx`,
/// nothing else (as serde_json escapes).
pub(crate) fn write_string(text: &str, out: &mut String) {
    out.push('"');
    let mut start = 0;
    for (at, byte) in text.bytes().enumerate() {
        let named = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0C => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1F => "",
            _ => continue,
        };
        // An ASCII byte: `at` is a character boundary.
        out.push_str(&text[start..at]);
        if named.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(named);
        }
        start = at + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn integers_beyond_two_to_the_53_keep_their_digits() {
        let a = canonical_json(&json!({"amount": 9_007_199_254_740_993_u64})).unwrap();
        let b = canonical_json(&json!({"amount": 9_007_199_254_740_992_u64})).unwrap();
        assert_eq!(a, r#"{"amount":9007199254740993}"#);
        assert_ne!(a, b);
        assert_eq!(canonical_json(&json!(-9_223_372_036_854_775_808_i64)).unwrap(), "-9223372036854775808");
        assert_eq!(canonical_json(&json!(u64::MAX)).unwrap(), "18446744073709551615");
    }

    #[test]
    fn doubles_are_written_as_ecmascript_writes_them() {
        assert_eq!(canonical_json(&json!(1.0)).unwrap(), "1");
        assert_eq!(canonical_json(&json!(-0.0)).unwrap(), "0");
        assert_eq!(canonical_json(&json!(0.1)).unwrap(), "0.1");
        assert_eq!(canonical_json(&json!(1e21)).unwrap(), "1e+21");
        assert_eq!(canonical_json(&json!(1.5e-7)).unwrap(), "1.5e-7");
        assert_eq!(canonical_json(&json!(4_503_599_627_370_495.5)).unwrap(), "4503599627370495.5");
    }

    #[test]
    fn whole_doubles_that_could_name_another_integer_are_refused() {
        let two_to_the_60 = 1_152_921_504_606_846_976.0_f64;
        let error = canonical_json(&json!({"ids": [1, two_to_the_60]})).unwrap_err();
        assert_eq!(error, CanonicalError::AmbiguousNumber { pointer: "/ids/1".into(), value: two_to_the_60 });
        // The integer that ECMAScript's text for 2^60 would name is fine, and distinct.
        assert_eq!(canonical_json(&json!(1_152_921_504_606_847_000_u64)).unwrap(), "1152921504606847000");
        let parsed: Value = serde_json::from_str(r#"{"a/b~": 1e20}"#).unwrap();
        assert!(
            matches!(canonical_json(&parsed), Err(CanonicalError::AmbiguousNumber { pointer, .. }) if pointer == "/a~1b~0")
        );
    }

    #[test]
    fn keys_order_by_utf16_where_it_differs_from_code_points() {
        for (a, b) in [("\u{1F600}", "\u{E000}"), ("a\u{10000}", "a\u{FFFF}"), ("\u{10FFFF}", "\u{EFFF}"), ("x", "xy")]
        {
            assert_eq!(utf16_order(a, b), a.encode_utf16().cmp(b.encode_utf16()), "{a:?} {b:?}");
            assert_eq!(utf16_order(b, a), b.encode_utf16().cmp(a.encode_utf16()), "{b:?} {a:?}");
        }
        assert_eq!(utf16_order("\u{D7FF}", "\u{10000}"), std::cmp::Ordering::Less);
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+E000 sorts after U+1F600 in UTF-8 order but before it in UTF-16.
        let value = json!({"\u{1F600}": 1, "\u{E000}": 2, "a": 3});
        assert_eq!(canonical_json(&value).unwrap(), "{\"a\":3,\"\u{1F600}\":1,\"\u{E000}\":2}");
    }

    /// JSON values whose numbers RFC 8785 writes exactly.
    fn safe_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-(1_i64 << 53)..=(1_i64 << 53)).prop_map(Value::from),
            (-1e15_f64..1e15).prop_map(Value::from),
            ".{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(".{0,6}", inner, 0..6)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn matches_rfc_8785_wherever_rfc_8785_is_exact(value in safe_json()) {
            let ours = canonical_json(&value).unwrap();
            prop_assert_eq!(&ours, &serde_json_canonicalizer::to_string(&value).unwrap());
            let reparsed: Value = serde_json::from_str(&ours).unwrap();
            prop_assert_eq!(canonical_json(&reparsed).unwrap(), ours);
        }

        #[test]
        fn keys_order_as_their_utf16_code_units(a in "\\PC{0,6}", b in "\\PC{0,6}") {
            prop_assert_eq!(utf16_order(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
        }

        #[test]
        fn strings_are_escaped_as_serde_json_escapes_them(text in "(\\PC|[\\x00-\\x1f\\x7f\"\\\\])*") {
            let mut out = String::new();
            write_string(&text, &mut out);
            prop_assert_eq!(out, serde_json::to_string(&text).unwrap());
        }

        #[test]
        fn distinct_integers_have_distinct_texts(a in any::<i64>(), b in any::<u64>()) {
            let (left, right) = (json!(a), json!(b));
            prop_assert_eq!(canonical_json(&left).unwrap() == canonical_json(&right).unwrap(), left == right);
        }
    }
}
