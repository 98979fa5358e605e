//! The OpenAPI v2 document in protobuf, as client-go reads it (`openapi_v2.Document` of
//! gnostic-models' `OpenAPIv2.proto`; field numbers from that file). Only what the server's
//! JSON document holds is encoded: swagger, info, paths with their operations (parameters,
//! responses, vendor extensions) and definitions. A value that protobuf keeps as an `Any`
//! (defaults, enums, vendor extensions) is its JSON text in the `yaml` field, as gnostic writes
//! it: JSON is YAML.

use serde_json::{Map, Value};

/// Protobuf encoding of a message, field by field.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.0.push(byte);
                return;
            }
            self.0.push(byte | 0x80);
        }
    }

    fn tag(&mut self, num: u64, wire: u64) {
        self.varint((num << 3) | wire);
    }

    fn bytes(&mut self, num: u64, b: &[u8]) {
        self.tag(num, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, num: u64, s: &str) {
        if !s.is_empty() {
            self.bytes(num, s.as_bytes());
        }
    }

    fn msg(&mut self, num: u64, m: Msg) {
        self.bytes(num, &m.0);
    }

    fn boolean(&mut self, num: u64, b: bool) {
        if b {
            self.tag(num, 0);
            self.varint(1);
        }
    }

    fn int(&mut self, num: u64, i: i64) {
        if i != 0 {
            self.tag(num, 0);
            // Two's complement, as protobuf encodes int64.
            self.varint(i as u64);
        }
    }

    fn double(&mut self, num: u64, f: f64) {
        if f != 0.0 {
            self.tag(num, 1);
            self.0.extend_from_slice(&f.to_le_bytes());
        }
    }
}

fn str_of<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

fn strings(m: &Map<String, Value>, k: &str) -> Vec<String> {
    match m.get(k) {
        Some(Value::Array(a)) => a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => vec![],
    }
}

/// `Any {yaml = 2}`.
fn any(v: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(2, &v.to_string());
    m
}

/// `NamedAny {name = 1, value = 2}` for every `x-` key.
fn vendor_extensions(out: &mut Msg, num: u64, m: &Map<String, Value>) {
    for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
        let mut named = Msg::default();
        named.string(1, k);
        named.msg(2, any(v));
        out.msg(num, named);
    }
}

/// `Schema`.
fn schema(v: &Value) -> Msg {
    let mut out = Msg::default();
    let Some(m) = v.as_object() else { return out };
    out.string(1, str_of(m, "$ref"));
    out.string(2, str_of(m, "format"));
    out.string(3, str_of(m, "title"));
    out.string(4, str_of(m, "description"));
    if let Some(d) = m.get("default") {
        out.msg(5, any(d));
    }
    let f = |k: &str| m.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let i = |k: &str| m.get(k).and_then(Value::as_i64).unwrap_or(0);
    let b = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
    out.double(6, f("multipleOf"));
    out.double(7, f("maximum"));
    out.boolean(8, b("exclusiveMaximum"));
    out.double(9, f("minimum"));
    out.boolean(10, b("exclusiveMinimum"));
    out.int(11, i("maxLength"));
    out.int(12, i("minLength"));
    out.string(13, str_of(m, "pattern"));
    out.int(14, i("maxItems"));
    out.int(15, i("minItems"));
    out.boolean(16, b("uniqueItems"));
    out.int(17, i("maxProperties"));
    out.int(18, i("minProperties"));
    for r in strings(m, "required") {
        out.string(19, &r);
    }
    if let Some(Value::Array(e)) = m.get("enum") {
        for x in e {
            out.msg(20, any(x));
        }
    }
    match m.get("additionalProperties") {
        // AdditionalPropertiesItem { schema = 1 | boolean = 2 }
        Some(Value::Bool(flag)) => {
            let mut item = Msg::default();
            item.tag(2, 0);
            item.varint(u64::from(*flag));
            out.msg(21, item);
        }
        Some(s @ Value::Object(_)) => {
            let mut item = Msg::default();
            item.msg(1, schema(s));
            out.msg(21, item);
        }
        _ => {}
    }
    let types = strings(m, "type");
    if !types.is_empty() {
        // TypeItem { repeated value = 1 }
        let mut item = Msg::default();
        for t in &types {
            item.string(1, t);
        }
        out.msg(22, item);
    }
    match m.get("items") {
        // ItemsItem { repeated schema = 1 }
        Some(s @ Value::Object(_)) => {
            let mut item = Msg::default();
            item.msg(1, schema(s));
            out.msg(23, item);
        }
        Some(Value::Array(a)) => {
            let mut item = Msg::default();
            for s in a {
                item.msg(1, schema(s));
            }
            out.msg(23, item);
        }
        _ => {}
    }
    if let Some(Value::Array(a)) = m.get("allOf") {
        for s in a {
            out.msg(24, schema(s));
        }
    }
    if let Some(Value::Object(props)) = m.get("properties") {
        // Properties { repeated NamedSchema additional_properties = 1 }
        let mut p = Msg::default();
        for (name, s) in props {
            p.msg(1, named_schema(name, s));
        }
        out.msg(25, p);
    }
    out.string(26, str_of(m, "discriminator"));
    out.boolean(27, b("readOnly"));
    if let Some(e) = m.get("example") {
        out.msg(30, any(e));
    }
    vendor_extensions(&mut out, 31, m);
    out
}

/// `NamedSchema {name = 1, value = 2}`.
fn named_schema(name: &str, s: &Value) -> Msg {
    let mut n = Msg::default();
    n.string(1, name);
    n.msg(2, schema(s));
    n
}

/// `ParametersItem { parameter = 1 }` of one parameter: a body parameter or a query one.
fn parameter(p: &Map<String, Value>) -> Msg {
    let mut param = Msg::default();
    if str_of(p, "in") == "body" {
        // BodyParameter { description 1, name 2, in 3, required 4, schema 5 }
        let mut body = Msg::default();
        body.string(1, str_of(p, "description"));
        body.string(2, str_of(p, "name"));
        body.string(3, "body");
        body.boolean(4, p.get("required").and_then(Value::as_bool).unwrap_or(false));
        if let Some(s) = p.get("schema") {
            body.msg(5, schema(s));
        }
        vendor_extensions(&mut body, 6, p);
        param.msg(1, body);
    } else {
        // QueryParameterSubSchema { required 1, in 2, description 3, name 4, type 6,
        // unique_items 20 }, inside NonBodyParameter { query_parameter_sub_schema = 3 }
        let mut q = Msg::default();
        q.boolean(1, p.get("required").and_then(Value::as_bool).unwrap_or(false));
        q.string(2, str_of(p, "in"));
        q.string(3, str_of(p, "description"));
        q.string(4, str_of(p, "name"));
        q.string(6, str_of(p, "type"));
        q.boolean(20, p.get("uniqueItems").and_then(Value::as_bool).unwrap_or(false));
        vendor_extensions(&mut q, 23, p);
        let mut non_body = Msg::default();
        non_body.msg(3, q);
        param.msg(2, non_body);
    }
    let mut item = Msg::default();
    item.msg(1, param);
    item
}

/// `Operation`.
fn operation(op: &Map<String, Value>) -> Msg {
    let mut out = Msg::default();
    for t in strings(op, "tags") {
        out.string(1, &t);
    }
    out.string(2, str_of(op, "summary"));
    out.string(3, str_of(op, "description"));
    out.string(5, str_of(op, "operationId"));
    for p in strings(op, "produces") {
        out.string(6, &p);
    }
    for c in strings(op, "consumes") {
        out.string(7, &c);
    }
    if let Some(Value::Array(params)) = op.get("parameters") {
        for p in params.iter().filter_map(Value::as_object) {
            out.msg(8, parameter(p));
        }
    }
    if let Some(Value::Object(responses)) = op.get("responses") {
        // Responses { repeated NamedResponseValue response_code = 1 }; NamedResponseValue
        // { name 1, value 2 }; ResponseValue { response = 1 }; Response { description 1,
        // schema 2 }; SchemaItem { schema = 1 }
        let mut rs = Msg::default();
        for (code, r) in responses {
            let Some(r) = r.as_object() else { continue };
            let mut response = Msg::default();
            response.string(1, str_of(r, "description"));
            if let Some(s) = r.get("schema") {
                let mut item = Msg::default();
                item.msg(1, schema(s));
                response.msg(2, item);
            }
            let mut value = Msg::default();
            value.msg(1, response);
            let mut named = Msg::default();
            named.string(1, code);
            named.msg(2, value);
            rs.msg(1, named);
        }
        out.msg(9, rs);
    }
    vendor_extensions(&mut out, 13, op);
    out
}

/// `Document`, from the JSON OpenAPI v2 document.
pub fn document(doc: &Value) -> Vec<u8> {
    let mut out = Msg::default();
    let Some(d) = doc.as_object() else { return out.0 };
    out.string(1, str_of(d, "swagger"));
    if let Some(Value::Object(info)) = d.get("info") {
        let mut i = Msg::default();
        i.string(1, str_of(info, "title"));
        i.string(2, str_of(info, "version"));
        out.msg(2, i);
    }
    if let Some(Value::Object(paths)) = d.get("paths") {
        // Paths { repeated NamedPathItem path = 2 }; PathItem { get 2, put 3, post 4,
        // delete 5, options 6, head 7, patch 8 }
        let mut ps = Msg::default();
        for (path, item) in paths {
            let Some(item) = item.as_object() else { continue };
            let mut pi = Msg::default();
            for (verb, num) in
                [("get", 2), ("put", 3), ("post", 4), ("delete", 5), ("options", 6), ("head", 7), ("patch", 8)]
            {
                if let Some(Value::Object(op)) = item.get(verb) {
                    pi.msg(num, operation(op));
                }
            }
            let mut named = Msg::default();
            named.string(1, path);
            named.msg(2, pi);
            ps.msg(2, named);
        }
        out.msg(8, ps);
    }
    if let Some(Value::Object(defs)) = d.get("definitions") {
        // Definitions { repeated NamedSchema additional_properties = 1 }
        let mut ds = Msg::default();
        for (name, s) in defs {
            ds.msg(1, named_schema(name, s));
        }
        out.msg(9, ds);
    }
    vendor_extensions(&mut out, 16, d);
    out.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_fields_with_their_numbers() {
        let bytes = document(&json!({"swagger": "2.0", "definitions": {"a": {"type": "string"}}}));
        // swagger = 1: "2.0"; definitions = 9 { 1: NamedSchema { 1: "a", 2: Schema { 22: TypeItem { 1: "string" } } } }
        let expected: Vec<u8> = vec![
            0x0a, 3, b'2', b'.', b'0', 0x4a, 18, 0x0a, 16, 0x0a, 1, b'a', 0x12, 11, 0xb2, 0x01, 8, 0x0a, 6, b's', b't',
            b'r', b'i', b'n', b'g',
        ];
        assert_eq!(bytes, expected);
    }
}
