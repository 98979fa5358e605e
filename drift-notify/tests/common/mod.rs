//! What the integration tests of drift-notify share: the crypto provider, the tools they need,
//! and a checker for the subset of JSON Schema that docs/notify-webhook.schema.json uses.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;

/// Installs rustls' ring provider for this test process, as the `drift` binary does in `main`.
pub fn install_crypto_provider() {
    // An Err only means that a provider is installed already (by another test of the process).
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The folder of the tools scripts/install-tools.sh installs (`DRIFT_TOOLS_DIR`, default
/// /var/tmp/drift-tools).
pub fn tools_dir() -> PathBuf {
    std::env::var_os("DRIFT_TOOLS_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/var/tmp/drift-tools"))
}

/// The Python of the tools venv when it can import aiosmtpd. Otherwise the test named `test`
/// is skipped (it prints `skipped: <test>: <reason>`), unless `DRIFT_REQUIRE_TOOLS=1` (set by
/// scripts/test) makes the absence a failure.
pub fn smtp_python(test: &str) -> Option<PathBuf> {
    let python = tools_dir().join("venv/bin/python");
    let works =
        std::process::Command::new(&python).args(["-c", "import aiosmtpd"]).output().is_ok_and(|o| o.status.success());
    if works {
        return Some(python);
    }
    let reason = format!("{} cannot import aiosmtpd (scripts/install-tools.sh installs it)", python.display());
    let required = std::env::var("DRIFT_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    assert!(!required, "{test}: {reason}, and DRIFT_REQUIRE_TOOLS=1");
    println!("skipped: {test}: {reason}");
    None
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Checks `value` against `schema` (with `root` for `$ref`), for the keywords the webhook
/// schema uses: `$ref`, `type`, `const`, `enum`, `oneOf`, `required`, `properties`,
/// `additionalProperties`, `items`, `maxItems`, `minimum`, `maximum`, and the `^[0-9a-f]{32}$`
/// pattern. Returns the problems, each with its JSON path.
pub fn schema_problems(root: &Value, schema: &Value, value: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local $ref");
        out.extend(schema_problems(root, &root["$defs"][name], value, at));
    }
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            _ => false,
        });
        if !ok {
            out.push(format!("{at}: {value} is not of type {t}"));
            return out;
        }
    }
    if let Some(c) = schema.get("const")
        && c != value
    {
        out.push(format!("{at}: {value} is not {c}"));
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(value)
    {
        out.push(format!("{at}: {value} is not one of {e:?}"));
    }
    if let Some(one) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = one.iter().filter(|s| schema_problems(root, s, value, at).is_empty()).count();
        if matching != 1 {
            out.push(format!("{at}: {value} matches {matching} of oneOf"));
        }
    }
    if schema.get("pattern").is_some() {
        let s = value.as_str().unwrap_or_default();
        if !(s.len() == 32 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))) {
            out.push(format!("{at}: {s:?} is not 32 lowercase hex digits"));
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && value.as_f64().is_some_and(|v| v < min)
    {
        out.push(format!("{at}: {value} < {min}"));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
        && value.as_f64().is_some_and(|v| v > max)
    {
        out.push(format!("{at}: {value} > {max}"));
    }
    if let Some(obj) = value.as_object() {
        for r in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            let key = r.as_str().unwrap();
            if !obj.contains_key(key) {
                out.push(format!("{at}: {key} is missing"));
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, v) in obj {
            let path = format!("{at}.{k}");
            match (props.and_then(|p| p.get(k)), schema.get("additionalProperties")) {
                (Some(s), _) => out.extend(schema_problems(root, s, v, &path)),
                (None, Some(Value::Bool(false))) => out.push(format!("{path}: not allowed")),
                (None, Some(s)) if s.is_object() => out.extend(schema_problems(root, s, v, &path)),
                _ => {}
            }
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            out.push(format!("{at}: {} items, more than {max}", items.len()));
        }
        if let Some(s) = schema.get("items") {
            for (i, v) in items.iter().enumerate() {
                out.extend(schema_problems(root, s, v, &format!("{at}[{i}]")));
            }
        }
    }
    out
}

/// The webhook schema of docs/.
pub fn webhook_schema() -> Value {
    let text = std::fs::read_to_string(repo_root().join("docs/notify-webhook.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}
