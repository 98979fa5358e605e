//! Server-side field validation (`fieldValidation=Strict|Warn|Ignore`), as the API server's
//! strict decoding does it: fields the schema of the kind does not know, and fields given twice
//! in one JSON object.
//!
//! The body is read in order with its duplicates ([`parse_ordered`]), since a JSON library
//! keeps one value per key; the schema is the kind's definition ([`crate::openapi::schemas`])
//! or, for a custom resource, its CRD's structural schema. Unknown fields are the ones a typed
//! decoder drops: a field of an object whose schema lists its properties and neither preserves
//! unknown fields nor is a map. Values the schema does not describe (`RawExtension`,
//! `x-kubernetes-preserve-unknown-fields`, arbitrary JSON) are not looked into.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::openapi::schemas::{OBJECT_META, REF, Schemas, schemas};

/// What to do with unknown and duplicate fields: the `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// Refuse the request.
    Strict,
    /// Serve it, with a warning per field (the API server's default).
    Warn,
    /// Serve it, silently.
    Ignore,
}

impl Directive {
    /// The directive of a request: `Warn` when the parameter is absent or empty, as on the API
    /// server; any other value than the three is refused with the API server's message.
    pub fn parse(value: Option<&str>) -> Result<Directive, String> {
        match value.unwrap_or("") {
            "" | "Warn" => Ok(Directive::Warn),
            "Strict" => Ok(Directive::Strict),
            "Ignore" => Ok(Directive::Ignore),
            other => Err(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
            )),
        }
    }
}

/// One finding, with the path the API server prints (`spec.template.spec.containers[0].x`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A field the schema does not know.
    Unknown(String),
    /// A field given twice in one object (the line of the second one).
    Duplicate {
        /// The path of the object that holds the key twice.
        path: String,
        /// The key given twice.
        key: String,
        /// The line of its second occurrence in the request body.
        line: usize,
    },
}

impl Finding {
    /// The text of the strict decoding error or warning.
    pub fn message(&self) -> String {
        match self {
            Finding::Unknown(p) => format!("unknown field \"{p}\""),
            Finding::Duplicate { path, .. } => format!("duplicate field \"{path}\""),
        }
    }

    /// The text YAML's strict decoder gives a duplicate (server-side apply).
    pub fn yaml_message(&self) -> Option<String> {
        match self {
            Finding::Duplicate { key, line, .. } => Some(format!("line {line}: key \"{key}\" already set in map")),
            Finding::Unknown(_) => None,
        }
    }

    /// Whether this is an unknown field.
    pub fn is_unknown(&self) -> bool {
        matches!(self, Finding::Unknown(_))
    }
}

/// A JSON value read in order, with every key kept, even when given twice.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// An object: its entries in order (key, line of the key, value).
    Object(Vec<(String, usize, Node)>),
    /// An array.
    Array(Vec<Node>),
    /// A string, number, boolean or null.
    Scalar(Value),
}

impl Node {
    /// A node from a value (one key each, keys sorted: the order the API server's encoder
    /// writes the objects it patches).
    pub fn from_value(v: &Value) -> Node {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Node::Object(keys.into_iter().map(|k| (k.clone(), 0, Node::from_value(&m[k]))).collect())
            }
            Value::Array(a) => Node::Array(a.iter().map(Node::from_value).collect()),
            other => Node::Scalar(other.clone()),
        }
    }
}

/// Read JSON in order, duplicates kept; `None` if the text is not JSON (a YAML body).
pub fn parse_ordered(text: &[u8]) -> Option<Node> {
    let mut p = Parser { b: text, pos: 0, line: 1, depth: 0 };
    p.ws();
    let n = p.value()?;
    p.ws();
    (p.pos == p.b.len()).then_some(n)
}

struct Parser<'a> {
    b: &'a [u8],
    pos: usize,
    line: usize,
    depth: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            match c {
                b'\n' => self.line += 1,
                b' ' | b'\t' | b'\r' => {}
                _ => return,
            }
            self.pos += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.pos) == Some(&c)).then(|| self.pos += 1)
    }

    fn value(&mut self) -> Option<Node> {
        match *self.b.get(self.pos)? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string().map(|s| Node::Scalar(Value::String(s))),
            _ => self.scalar(),
        }
    }

    fn nest(&mut self) -> Option<()> {
        // Bounded, as the API server's decoder is: a body cannot exhaust the stack.
        self.depth += 1;
        (self.depth <= 10_000).then_some(())
    }

    fn object(&mut self) -> Option<Node> {
        self.nest()?;
        self.pos += 1;
        let mut entries = Vec::new();
        self.ws();
        if self.eat(b'}').is_none() {
            loop {
                self.ws();
                let line = self.line;
                let key = self.string()?;
                self.ws();
                self.eat(b':')?;
                self.ws();
                let v = self.value()?;
                entries.push((key, line, v));
                self.ws();
                if self.eat(b',').is_some() {
                    continue;
                }
                self.eat(b'}')?;
                break;
            }
        }
        self.depth -= 1;
        Some(Node::Object(entries))
    }

    fn array(&mut self) -> Option<Node> {
        self.nest()?;
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat(b']').is_none() {
            loop {
                self.ws();
                items.push(self.value()?);
                self.ws();
                if self.eat(b',').is_some() {
                    continue;
                }
                self.eat(b']')?;
                break;
            }
        }
        self.depth -= 1;
        Some(Node::Array(items))
    }

    fn string(&mut self) -> Option<String> {
        let start = self.pos;
        self.eat(b'"')?;
        let mut escaped = false;
        loop {
            let c = *self.b.get(self.pos)?;
            self.pos += 1;
            match c {
                b'\\' if !escaped => escaped = true,
                b'"' if !escaped => break,
                b'\n' => return None,
                _ => escaped = false,
            }
        }
        // The quoted text, escapes and all, is a JSON string serde reads exactly.
        serde_json::from_slice(&self.b[start..self.pos]).ok()
    }

    fn scalar(&mut self) -> Option<Node> {
        let start = self.pos;
        while let Some(&c) = self.b.get(self.pos) {
            if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                break;
            }
            self.pos += 1;
        }
        serde_json::from_slice::<Value>(&self.b[start..self.pos])
            .ok()
            .filter(|v| !v.is_object() && !v.is_array())
            .map(Node::Scalar)
    }
}

/// Where a walk starts: a built-in kind's definition, or a custom resource's schema.
#[derive(Debug, Clone, Copy)]
pub enum Root<'a> {
    /// The definition name of a built-in kind.
    Builtin(&'a str),
    /// The `openAPIV3Schema` of a custom resource (structural), or none: nothing is unknown.
    Custom(Option<&'a Value>),
}

/// The unknown and duplicate fields of `node`, in document order. An unknown field is
/// reported once (even when given twice), as the API server's typed decoding does.
pub fn check(root: Root<'_>, node: &Node) -> Vec<Finding> {
    let s = schemas();
    let mut w = Walker { s, out: Vec::new(), unknown: BTreeSet::new() };
    match root {
        Root::Builtin(name) => {
            if let Some(d) = s.defs.get(name) {
                w.walk(d, node, "");
            }
        }
        Root::Custom(schema) => {
            let meta = s.defs.get(OBJECT_META).cloned().unwrap_or(Value::Null);
            let Node::Object(entries) = node else { return w.out };
            let mut seen = BTreeSet::new();
            for (k, line, v) in entries {
                if !seen.insert(k.as_str()) {
                    w.out.push(Finding::Duplicate { path: k.clone(), key: k.clone(), line: *line });
                }
                match k.as_str() {
                    "apiVersion" | "kind" => {}
                    "metadata" => w.walk(&meta, v, k),
                    _ => {
                        if let Some(sc) = schema {
                            match sc.get("properties").and_then(|p| p.get(k)) {
                                Some(sub) => w.walk(sub, v, k),
                                None if preserves(sc) => {}
                                None => w.unknown(k),
                            }
                        }
                    }
                }
            }
        }
    }
    w.out
}

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true)
}

struct Walker<'a> {
    s: &'a Schemas,
    out: Vec<Finding>,
    unknown: BTreeSet<String>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

impl Walker<'_> {
    fn unknown(&mut self, path: &str) {
        if self.unknown.insert(path.to_owned()) {
            self.out.push(Finding::Unknown(path.to_owned()));
        }
    }

    fn walk(&mut self, schema: &Value, node: &Node, path: &str) {
        let schema = resolve(self.s, schema);
        match node {
            Node::Object(entries) => {
                let props = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                if props.is_none() && additional.is_none() {
                    // Arbitrary JSON (RawExtension, FieldsV1, preserved fields): not looked into.
                    return;
                }
                let preserve = preserves(schema);
                let mut seen = BTreeSet::new();
                for (k, line, v) in entries {
                    let p = join(path, k);
                    let sub = props.and_then(|m| m.get(k)).or(additional);
                    match sub {
                        Some(sub) => {
                            if !seen.insert(k.as_str()) {
                                self.out.push(Finding::Duplicate { path: p.clone(), key: k.clone(), line: *line });
                            }
                            self.walk(sub, v, &p);
                        }
                        None if preserve => {}
                        None => self.unknown(&p),
                    }
                }
            }
            Node::Array(items) => {
                if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                    for (i, item) in items.iter().enumerate() {
                        self.walk(item_schema, item, &format!("{path}[{i}]"));
                    }
                }
            }
            Node::Scalar(_) => {}
        }
    }
}

/// The schema behind a reference or an `allOf` of one.
fn resolve<'a>(s: &'a Schemas, schema: &'a Value) -> &'a Value {
    let schema = match schema.get("allOf").and_then(Value::as_array).and_then(|a| a.first()) {
        Some(first) if schema.get("properties").is_none() => first,
        _ => schema,
    };
    s.resolve(schema)
}

/// Remove the fields the schema does not know from a built-in kind's object, as decoding into
/// the API server's types drops them.
pub fn prune(def: &str, object: &mut Value) {
    let s = schemas();
    if let Some(d) = s.defs.get(def) {
        prune_value(s, d, object);
    }
}

fn prune_value(s: &Schemas, schema: &Value, v: &mut Value) {
    let schema = resolve(s, schema);
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if props.is_none() && additional.is_none() {
                return;
            }
            let preserve = preserves(schema);
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                match props.and_then(|p| p.get(&k)).or(additional) {
                    Some(sub) => {
                        if let Some(child) = m.get_mut(&k) {
                            prune_value(s, sub, child);
                        }
                    }
                    None if preserve => {}
                    None => {
                        m.remove(&k);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) {
                for item in items {
                    prune_value(s, item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// The unknown fields of an applied configuration, as server-side apply's typed conversion
/// reports them: `.spec.x`, list items by their keys (`[name="web"]`) or position, one per
/// object (the conversion stops at the first field it cannot place in an object).
pub fn apply_unknown(root: Root<'_>, applied: &Value) -> Vec<String> {
    let s = schemas();
    let mut out = Vec::new();
    match root {
        Root::Builtin(name) => {
            if let Some(d) = s.defs.get(name) {
                apply_walk(s, d, applied, "", &mut out);
            }
        }
        Root::Custom(Some(schema)) => {
            let mut wrapped = schema.clone();
            if let Some(Value::Object(p)) = wrapped.get_mut("properties") {
                p.insert("apiVersion".into(), json!({"type": "string"}));
                p.insert("kind".into(), json!({"type": "string"}));
                p.insert("metadata".into(), json!({"$ref": format!("{REF}{OBJECT_META}")}));
            }
            if wrapped.get("properties").is_some() {
                apply_walk(s, &wrapped, applied, "", &mut out);
            }
        }
        Root::Custom(None) => {}
    }
    out
}

fn apply_walk(s: &Schemas, schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    let schema = resolve(s, schema);
    match v {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if (props.is_none() && additional.is_none()) || preserves(schema) {
                return;
            }
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                let p = format!("{path}.{k}");
                match props.and_then(|pr| pr.get(k)).or(additional) {
                    Some(sub) => apply_walk(s, sub, &m[k], &p, out),
                    None => {
                        out.push(format!("{p}: field not declared in schema"));
                        return;
                    }
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items").filter(|i| i.is_object()) else { return };
            let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for (i, item) in items.iter().enumerate() {
                let element = match list_type {
                    Some("map") if !keys.is_empty() => {
                        let parts: Vec<String> =
                            keys.iter().filter_map(|k| item.get(*k).map(|val| format!("{k}={}", val))).collect();
                        format!("[{}]", parts.join(","))
                    }
                    Some("set") => format!("[={item}]"),
                    _ => format!("[{i}]"),
                };
                apply_walk(s, item_schema, item, &format!("{path}{element}"), out);
            }
        }
        _ => {}
    }
}

/// The object printed as Go prints a `map[string]interface{}` with `%+v`, as the API server
/// quotes a strategic merge patch in its errors.
pub fn go_map(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys.iter().map(|k| format!("{k}:{}", go_map(&m[*k]))).collect();
            format!("map[{}]", parts.join(" "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(go_map).collect::<Vec<_>>().join(" ")),
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".to_owned(),
        other => other.to_string(),
    }
}

/// The findings of a JSON patch's operations: keys other than `op`, `path`, `from` and `value`,
/// and keys given twice, as the API server reports them (`json patch unknown field "[0].foo"`).
pub fn json_patch_ops(node: &Node) -> Vec<String> {
    let mut out = Vec::new();
    let Node::Array(ops) = node else { return out };
    for (i, op) in ops.iter().enumerate() {
        let Node::Object(entries) = op else { continue };
        let mut seen = BTreeSet::new();
        for (k, _, _) in entries {
            if !matches!(k.as_str(), "op" | "path" | "from" | "value") {
                out.push(format!("json patch unknown field \"[{i}].{k}\""));
            } else if !seen.insert(k.as_str()) {
                out.push(format!("json patch duplicate field \"[{i}].{k}\""));
            }
        }
    }
    out
}

/// The duplicate fields of a patch body, in document order (its fields are not checked
/// against the schema: that is done on the patched object).
pub fn duplicates(node: &Node) -> Vec<Finding> {
    let mut out = Vec::new();
    dup_walk(node, "", &mut out);
    out
}

fn dup_walk(node: &Node, path: &str, out: &mut Vec<Finding>) {
    match node {
        Node::Object(entries) => {
            let mut seen = BTreeSet::new();
            for (k, line, v) in entries {
                let p = join(path, k);
                if !seen.insert(k.as_str()) {
                    out.push(Finding::Duplicate { path: p.clone(), key: k.clone(), line: *line });
                }
                dup_walk(v, &p, out);
            }
        }
        Node::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                dup_walk(item, &format!("{path}[{i}]"), out);
            }
        }
        Node::Scalar(_) => {}
    }
}

/// The unknown fields of a whole object (a patched one): sorted by path, as the API server
/// finds them in the object its encoder wrote with sorted keys.
pub fn unknown_in_value(root: Root<'_>, v: &Value) -> Vec<Finding> {
    check(root, &Node::from_value(v)).into_iter().filter(Finding::is_unknown).collect()
}

/// Keys of a map, for tests.
#[cfg(test)]
fn keys(n: &Node) -> Vec<String> {
    match n {
        Node::Object(e) => e.iter().map(|(k, _, _)| k.clone()).collect(),
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYMENT: &str = r#"{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {"name": "a", "name": "b", "unknownMeta": 1, "labels": {"app": "x"}},
  "spec": {
    "unknown1": "v",
    "unknownDupe": "a",
    "unknownDupe": "b",
    "paused": true,
    "paused": false,
    "selector": {"matchLabels": {"app": "x"}},
    "template": {"spec": {"containers": [{"name": "c", "unknownNested": 1,
      "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]}}
  }
}"#;

    #[test]
    fn reads_json_in_order_with_duplicates_and_lines() {
        let n = parse_ordered(br#"{"b": 1, "a": {"x": "\"q\u00e9"}, "b": [true, null, -1.5e3]}"#).unwrap();
        assert_eq!(keys(&n), ["b", "a", "b"]);
        assert!(parse_ordered(b"a: 1\n").is_none());
        assert!(parse_ordered(b"{\"a\": 1} x").is_none());
        let n = parse_ordered(DEPLOYMENT.as_bytes()).unwrap();
        let found = check(Root::Builtin("io.k8s.api.apps.v1.Deployment"), &n);
        let lines: Vec<usize> = found
            .iter()
            .filter_map(|f| if let Finding::Duplicate { line, .. } = f { Some(*line) } else { None })
            .collect();
        assert_eq!(lines, [4, 10, 13]);
    }

    #[test]
    fn findings_are_those_of_the_api_servers_strict_decoding_in_document_order() {
        let n = parse_ordered(DEPLOYMENT.as_bytes()).unwrap();
        let found: Vec<String> =
            check(Root::Builtin("io.k8s.api.apps.v1.Deployment"), &n).iter().map(Finding::message).collect();
        assert_eq!(
            found,
            [
                r#"duplicate field "metadata.name""#,
                r#"unknown field "metadata.unknownMeta""#,
                r#"unknown field "spec.unknown1""#,
                r#"unknown field "spec.unknownDupe""#,
                r#"duplicate field "spec.paused""#,
                r#"unknown field "spec.template.spec.containers[0].unknownNested""#,
                r#"duplicate field "spec.template.spec.containers[0].imagePullPolicy""#,
            ]
        );
    }

    #[test]
    fn maps_and_raw_json_are_not_unknown() {
        let v = json!({"metadata": {"labels": {"any": "x"}, "managedFields": [{"fieldsV1": {"f:x": {}}}]},
            "data": {"k": "v"}});
        assert!(unknown_in_value(Root::Builtin("io.k8s.api.core.v1.ConfigMap"), &v).is_empty());
        let crd_schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"a": {"type": "string"}, "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}});
        let cr = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "bad": 1},
            "spec": {"a": "1", "b": 2, "free": {"any": 1}}, "status": {}});
        let found: Vec<String> =
            unknown_in_value(Root::Custom(Some(&crd_schema)), &cr).iter().map(Finding::message).collect();
        assert_eq!(
            found,
            [r#"unknown field "metadata.bad""#, r#"unknown field "spec.b""#, r#"unknown field "status""#]
        );
    }

    #[test]
    fn pruning_drops_exactly_the_unknown_fields() {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "x": 1},
            "data": {"k": "v"}, "bogus": {"y": 2}});
        prune("io.k8s.api.core.v1.ConfigMap", &mut v);
        assert_eq!(v, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}));
    }

    #[test]
    fn apply_paths_name_list_items_by_their_keys() {
        let v = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "bogus": 1}]}}}, "zzz": 1});
        assert_eq!(
            apply_unknown(Root::Builtin("io.k8s.api.apps.v1.Deployment"), &v),
            [
                ".spec.template.spec.containers[name=\"web\"].bogus: field not declared in schema",
                ".zzz: field not declared in schema"
            ]
        );
    }

    #[test]
    fn json_patch_operations_and_go_maps() {
        let n = parse_ordered(
            br#"[{"op": "add", "path": "/a", "value": 1, "foo": 2}, {"op": "add", "path": "/b", "path": "/c"}]"#,
        )
        .unwrap();
        assert_eq!(
            json_patch_ops(&n),
            [r#"json patch unknown field "[0].foo""#, r#"json patch duplicate field "[1].path""#]
        );
        assert_eq!(go_map(&json!({"spec": {"b": [1, "x"], "a": null}})), "map[spec:map[a:<nil> b:[1 x]]]");
        assert_eq!(Directive::parse(None), Ok(Directive::Warn));
        assert!(Directive::parse(Some("Loud")).is_err());
    }
}
