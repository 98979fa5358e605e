//! A document as SOPS sees it: mappings keep the order of their keys, because the MAC is taken
//! over the values in document order (`serde_json::Value` sorts keys).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// A node of a document, in document order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    /// Bytes decrypted from a value of type `bytes` (shown as text).
    Bytes(Vec<u8>),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    /// Reads one YAML or JSON document.
    pub fn parse(text: &str) -> Result<Node, String> {
        let trimmed = text.trim_start_matches('\u{feff}').trim_start();
        if trimmed.starts_with('{') {
            serde_json::from_str(trimmed).map_err(|e| format!("invalid JSON: {e}"))
        } else {
            serde_saphyr::from_str(text).map_err(|e| format!("invalid YAML: {e}"))
        }
    }

    /// The value under `key` of a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes SOPS hashes into the MAC for a leaf (its `ToBytes`): text as is, integers in
    /// decimal, floats in the shortest form without exponent, booleans `True` / `False`.
    pub fn mac_bytes(&self) -> Option<Vec<u8>> {
        match self {
            Node::Str(s) => Some(s.as_bytes().to_vec()),
            Node::Bytes(b) => Some(b.clone()),
            Node::Int(i) => Some(i.to_string().into_bytes()),
            Node::UInt(u) => Some(u.to_string().into_bytes()),
            Node::Float(f) => Some(f.to_string().into_bytes()),
            Node::Bool(true) => Some(b"True".to_vec()),
            Node::Bool(false) => Some(b"False".to_vec()),
            Node::Null | Node::Seq(_) | Node::Map(_) => None,
        }
    }

    /// The document as JSON (keys sorted, as every object of drift-core).
    pub fn into_json(self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(b),
            Node::Int(i) => Value::from(i),
            Node::UInt(u) => Value::from(u),
            // What `sops decrypt` prints: Go's JSON writes a whole float64 below 1e21 as an
            // integer (SOPS reads every JSON number as a float: `"port": 5432` comes back as
            // 5432, never 5432.0). Below 2^53 the integer is exact.
            Node::Float(f) if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => Value::from(f as i64),
            Node::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
            Node::Str(s) => Value::String(s),
            Node::Bytes(b) => Value::String(String::from_utf8_lossy(&b).into_owned()),
            Node::Seq(items) => Value::Array(items.into_iter().map(Node::into_json).collect()),
            Node::Map(entries) => Value::Object(entries.into_iter().map(|(k, v)| (k, v.into_json())).collect()),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML or JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(i64::try_from(v).map_or(Node::UInt(v), Node::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<Node, Node>()? {
            let key = match key {
                Node::Str(s) => s,
                Node::Int(i) => i.to_string(),
                Node::UInt(u) => u.to_string(),
                Node::Float(f) => f.to_string(),
                Node::Bool(b) => b.to_string(),
                Node::Null => "null".to_owned(),
                _ => return Err(de::Error::custom("a mapping key that is not a scalar")),
            };
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn mappings_keep_document_order() {
        let n = Node::parse("b: 1\na: [x, 2.5, true]\nc: {z: null, y: s}\n").unwrap();
        let Node::Map(entries) = &n else { panic!("{n:?}") };
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "c"]);
        let json = Node::parse(r#"{"b": 1, "a": 2}"#).unwrap();
        let Node::Map(entries) = &json else { panic!() };
        assert_eq!(entries[0].0, "b");
    }

    #[test]
    fn leaves_hash_as_sops_writes_them() {
        assert_eq!(Node::Bool(true).mac_bytes().unwrap(), b"True");
        assert_eq!(Node::Float(1.0).mac_bytes().unwrap(), b"1");
        assert_eq!(Node::Float(5432.0).into_json(), serde_json::json!(5432), "as sops decrypt prints it");
        assert_eq!(Node::Float(1.5).into_json(), serde_json::json!(1.5));
        assert_eq!(Node::Float(-0.0).into_json(), serde_json::json!(0));
        assert_eq!(Node::Float(0.000001).mac_bytes().unwrap(), b"0.000001");
        assert_eq!(Node::Int(-3).mac_bytes().unwrap(), b"-3");
        assert_eq!(Node::Null.mac_bytes(), None);
    }
}
