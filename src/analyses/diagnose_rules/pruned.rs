//! Reading the parts of an analysis's JSON output that the rules use: chosen keys of the top
//! object, long arrays cut to their first elements (the outputs list rows longest first), the
//! rest skipped without building values (`ops.json` of a large run is megabytes of rows).

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// What to keep of the top object: a key, with at most this many elements when it is an
/// array (None: all).
pub type Keep<'a> = &'a [(&'a str, Option<usize>)];

/// The object in `text` with only the keys of `keep` (arrays cut as it says).
pub fn read(text: &str, keep: Keep) -> serde_json::Result<Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Top(keep).deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

struct Top<'a>(Keep<'a>);

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an analysis's JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = m.next_key::<String>()? {
            match self.0.iter().find(|(k, _)| *k == key) {
                Some((_, None)) => {
                    out.insert(key, m.next_value::<Value>()?);
                }
                Some((_, Some(n))) => {
                    out.insert(key, m.next_value_seed(First(*n))?);
                }
                None => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// The first `n` elements of an array (anything else: as it is).
struct First(usize);

impl<'de> DeserializeSeed<'de> for First {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for First {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while out.len() < self.0 {
            match s.next_element::<Value>()? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
        while s.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Array(out))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_f64<E>(self, x: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number))
    }
    fn visit_u64<E>(self, x: u64) -> Result<Value, E> {
        Ok(Value::from(x))
    }
    fn visit_i64<E>(self, x: i64) -> Result<Value, E> {
        Ok(Value::from(x))
    }
    fn visit_str<E>(self, x: &str) -> Result<Value, E> {
        Ok(Value::from(x))
    }
    fn visit_bool<E>(self, x: bool) -> Result<Value, E> {
        Ok(Value::from(x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_keys_asked_and_cuts_arrays() {
        let text =
            r#"{"a": [1, 2, 3, {"x": [4]}], "b": {"c": 1}, "skip": [[1], {"y": "z"}], "n": 5}"#;
        let v = read(text, &[("a", Some(2)), ("b", None), ("n", Some(1))]).unwrap();
        assert_eq!(v, serde_json::json!({"a": [1, 2], "b": {"c": 1}, "n": 5}));
        let all = read(text, &[("a", Some(10))]).unwrap();
        assert_eq!(all["a"].as_array().unwrap().len(), 4);
        // Damaged text is an error, never a partial value.
        assert!(read(r#"{"a": [1, 2"#, &[("a", Some(1))]).is_err());
        assert!(read(r#"{"a": [1]} x"#, &[("a", Some(1))]).is_err());
        assert!(read("[1]", &[]).is_err());
    }
}
