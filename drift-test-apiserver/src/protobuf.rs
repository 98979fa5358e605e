//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`) for
//! the few kinds kubectl's typed clients send that way in the commands tests use
//! (`kubectl create namespace|configmap|secret`). Other kinds get 415 Unsupported Media Type.
//!
//! A body is the magic `k8s\0` followed by a `runtime.Unknown` message
//! (`typeMeta` = 1 {apiVersion = 1, kind = 2}, `raw` = 2), whose raw bytes are the object's
//! own message. Field numbers are those of `k8s.io/api/core/v1/generated.proto`.

use base64::Engine as _;
use serde_json::{Map, Value, json};

/// The magic prefix of protobuf bodies.
pub const MAGIC: &[u8] = b"k8s\x00";

#[derive(Debug, Clone)]
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// A body that could not be decoded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("protobuf body: {0}")]
pub struct ProtoError(pub String);

fn err(m: &str) -> ProtoError {
    ProtoError(m.to_owned())
}

fn varint(b: &[u8], pos: &mut usize) -> Result<u64, ProtoError> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos).ok_or_else(|| err("truncated varint"))?;
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(err("varint too long"))
}

fn fields(b: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ProtoError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let tag = varint(b, &mut pos)?;
        let (num, wt) = (tag >> 3, tag & 7);
        let w = match wt {
            0 => Wire::Varint(varint(b, &mut pos)?),
            1 => {
                pos += 8;
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(varint(b, &mut pos)?).map_err(|_| err("length"))?;
                let end = pos.checked_add(len).ok_or_else(|| err("length"))?;
                let s = b.get(pos..end).ok_or_else(|| err("truncated bytes"))?;
                pos = end;
                Wire::Bytes(s)
            }
            5 => {
                pos += 4;
                Wire::Fixed
            }
            _ => return Err(err("unsupported wire type")),
        };
        out.push((num, w));
    }
    Ok(out)
}

fn string(w: &Wire<'_>) -> Result<String, ProtoError> {
    match w {
        Wire::Bytes(b) => String::from_utf8(b.to_vec()).map_err(|_| err("invalid UTF-8")),
        _ => Err(err("expected a string")),
    }
}

fn bytes<'a>(w: &Wire<'a>) -> Result<&'a [u8], ProtoError> {
    match w {
        Wire::Bytes(b) => Ok(b),
        _ => Err(err("expected bytes")),
    }
}

/// A map entry (key = 1, value = 2); `binary` values are base64-encoded as in JSON.
fn map_entry(w: &Wire<'_>, binary: bool) -> Result<(String, Value), ProtoError> {
    let mut k = String::new();
    let mut v = Value::String(String::new());
    for (n, f) in fields(bytes(w)?)? {
        match n {
            1 => k = string(&f)?,
            2 if binary => {
                v = json!(base64::engine::general_purpose::STANDARD.encode(bytes(&f)?));
            }
            2 => v = json!(string(&f)?),
            _ => {}
        }
    }
    Ok((k, v))
}

fn insert_map(m: &mut Map<String, Value>, key: &str, entry: (String, Value)) {
    let slot = m.entry(key.to_owned()).or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(inner) = slot {
        inner.insert(entry.0, entry.1);
    }
}

fn object_meta(b: &[u8]) -> Result<Value, ProtoError> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        match n {
            // Go's protobuf encoding writes empty strings too: they mean absent.
            1..=3 => {
                let v = string(&f)?;
                let key = match n {
                    1 => "name",
                    2 => "generateName",
                    _ => "namespace",
                };
                if !v.is_empty() {
                    m.insert(key.into(), json!(v));
                }
            }
            11 => insert_map(&mut m, "labels", map_entry(&f, false)?),
            12 => insert_map(&mut m, "annotations", map_entry(&f, false)?),
            14 => {
                let s = string(&f)?;
                let slot = m.entry("finalizers").or_insert_with(|| Value::Array(Vec::new()));
                if let Value::Array(a) = slot {
                    a.push(json!(s));
                }
            }
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

/// Decode a protobuf body into the JSON form of the object.
pub fn decode(body: &[u8]) -> Result<Value, ProtoError> {
    let rest = body.strip_prefix(MAGIC).ok_or_else(|| err("missing k8s magic"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, f) in fields(rest)? {
        match n {
            1 => {
                for (tn, tf) in fields(bytes(&f)?)? {
                    match tn {
                        1 => api_version = string(&tf)?,
                        2 => kind = string(&tf)?,
                        _ => {}
                    }
                }
            }
            2 => raw = bytes(&f)?,
            _ => {}
        }
    }
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!(api_version));
    o.insert("kind".into(), json!(kind));
    for (n, f) in fields(raw)? {
        match (kind.as_str(), n) {
            (_, 1) => {
                o.insert("metadata".into(), object_meta(bytes(&f)?)?);
            }
            ("Namespace", 2) => {
                let mut fin = Vec::new();
                for (sn, sf) in fields(bytes(&f)?)? {
                    if sn == 1 {
                        fin.push(json!(string(&sf)?));
                    }
                }
                let spec = if fin.is_empty() { json!({}) } else { json!({"finalizers": fin}) };
                o.insert("spec".into(), spec);
            }
            ("Namespace", _) => {}
            ("ConfigMap", 2) => insert_map(&mut o, "data", map_entry(&f, false)?),
            ("ConfigMap", 3) => insert_map(&mut o, "binaryData", map_entry(&f, true)?),
            ("ConfigMap", 4) => {
                if let Wire::Varint(v) = f {
                    o.insert("immutable".into(), json!(v != 0));
                }
            }
            ("Secret", 2) => insert_map(&mut o, "data", map_entry(&f, true)?),
            ("Secret", 3) => {
                let t = string(&f)?;
                if !t.is_empty() {
                    o.insert("type".into(), json!(t));
                }
            }
            ("Secret", 4) => insert_map(&mut o, "stringData", map_entry(&f, false)?),
            ("Secret", 5) => {
                if let Wire::Varint(v) = f {
                    o.insert("immutable".into(), json!(v != 0));
                }
            }
            ("ConfigMap" | "Secret", _) => {}
            (other, _) => {
                return Err(ProtoError(format!(
                    "protobuf bodies of kind {other:?} are not supported by this test server; send JSON"
                )));
            }
        }
    }
    if matches!(kind.as_str(), "Namespace" | "ConfigMap" | "Secret") {
        Ok(Value::Object(o))
    } else {
        Err(ProtoError(format!("protobuf bodies of kind {kind:?} are not supported by this test server; send JSON")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![u8::try_from(n << 3 | 2).unwrap(), u8::try_from(payload.len()).unwrap()];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn decodes_a_namespace() {
        let labels = [field(1, b"team"), field(2, b"a")].concat();
        let meta = [field(1, b"demo"), field(11, &labels)].concat();
        let raw = [field(1, &meta), field(2, &[]), field(3, &[])].concat();
        let tm = [field(1, b"v1"), field(2, b"Namespace")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &raw)].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "demo", "labels": {"team": "a"}}, "spec": {}})
        );
    }
}
