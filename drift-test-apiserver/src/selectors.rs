//! Label selectors (`app=web,tier!=db,env in (a,b),!legacy`) and field selectors
//! (`metadata.name=x,metadata.namespace!=y`, any dotted path of the object).

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Req>);

/// A selector that does not parse.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unable to parse requirement: {0}")]
pub struct SelectorError(pub String);

/// Split on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

fn values(s: &str) -> Result<Vec<String>, SelectorError> {
    let inner =
        s.trim().strip_prefix('(').and_then(|r| r.strip_suffix(')')).ok_or_else(|| SelectorError(s.to_owned()))?;
    Ok(inner.split(',').map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).collect())
}

impl LabelSelector {
    /// Parse the text form.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let req = if let Some(k) = part.strip_prefix('!') {
                Req::NotExists(k.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("!=") {
                Req::Ne(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==") {
                Req::Eq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once('=') {
                Req::Eq(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once(" notin ") {
                Req::NotIn(k.trim().to_owned(), values(v)?)
            } else if let Some((k, v)) = part.split_once(" in ") {
                Req::In(k.trim().to_owned(), values(v)?)
            } else if part.contains(['(', ')', ' ', '<', '>']) {
                return Err(SelectorError(part.to_owned()));
            } else {
                Req::Exists(part.to_owned())
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's labels match.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.get("metadata").and_then(|m| m.get("labels"));
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Req::NotIn(k, vs) => get(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }

    /// The text form of a `LabelSelector` object (`matchLabels`, `matchExpressions`), as the
    /// scale subresource reports it.
    pub fn text_of(selector: &Value) -> String {
        let mut parts = Vec::new();
        if let Some(m) = selector.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in m {
                parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
            }
        }
        if let Some(exprs) = selector.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let vals: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str) {
                    Some("In") => parts.push(format!("{key} in ({})", vals.join(","))),
                    Some("NotIn") => parts.push(format!("{key} notin ({})", vals.join(","))),
                    Some("Exists") => parts.push(key.to_owned()),
                    Some("DoesNotExist") => parts.push(format!("!{key}")),
                    _ => {}
                }
            }
        }
        parts.join(",")
    }
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parse the text form (`=`, `==`, `!=` terms separated by commas).
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(SelectorError(part.to_owned()));
            };
            terms.push((k.trim().to_owned(), eq, v.trim().to_owned()));
        }
        Ok(FieldSelector(terms))
    }

    /// Whether an object matches.
    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let mut cur = Some(object);
            for seg in path.split('.') {
                cur = cur.and_then(|c| c.get(seg));
            }
            let actual = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_forms() {
        let o = json!({"metadata": {"name": "a", "labels": {"app": "web", "env": "prod"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=web,env=dev", false),
            ("env in (dev, prod)", true),
            ("env notin (prod)", false),
            ("app", true),
            ("!app", false),
            ("!tier", true),
            ("", true),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&o), want, "{sel}");
        }
    }

    #[test]
    fn field_selector_forms() {
        let o = json!({"metadata": {"name": "a", "namespace": "n"}, "type": "Opaque"});
        assert!(FieldSelector::parse("metadata.name=a").unwrap().matches(&o));
        assert!(!FieldSelector::parse("metadata.name!=a").unwrap().matches(&o));
        assert!(FieldSelector::parse("metadata.namespace==n,type=Opaque").unwrap().matches(&o));
        assert!(FieldSelector::parse("bogus").is_err());
    }
}
