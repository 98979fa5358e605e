//! Accepting into a Helm chart's values: the values key is traced by rendering the chart
//! (real `helm template`, with the source's options) with marked values.
//!
//! The candidates are the leaves of the merged values (chart `values.yaml`, then the values
//! files, then inline values) equal to Git's current value at the drift path, or, for a
//! string, contained in it (`image: {{ .Values.repo }}:{{ .Values.tag }}`). Each gets a
//! unique marker of its own type (strings, numbers; booleans are flipped one at a time), and
//! the candidate whose marker appears at the drift path of the rendered object is the key.
//! When exactly one key can give the cluster's value, it is edited in the last values file
//! that sets it (or the chart's `values.yaml`); otherwise the change is unplaced and the plan
//! says what to put where.

use std::path::Path as FsPath;

use drift_manifest::parse_manifests;
use drift_model::path::Seg;
use drift_model::{Error, ResourceKey, Result};
use serde_json::Value;

use super::yaml::{self, Change};
use super::{AcceptPlan, FieldChange, Placed, Unplaced, current, put_edit, value};
use crate::config::RenderConfig;
use crate::edit::FileEdit;
use crate::gitops::HelmOptions;
use crate::render::{self, HelmJob};

/// One layer of values: the file it comes from (`None` for inline values) and its content.
#[derive(Debug)]
struct Layer {
    file: Option<String>,
    values: Value,
}

fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (into, from) => *into = from.clone(),
    }
}

/// Every node of `v` with its path (fields, list items by position).
fn leaves(v: &Value, path: &mut Vec<Seg>, out: &mut Vec<(Vec<Seg>, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                path.push(Seg::Field(k.clone()));
                leaves(x, path, out);
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                path.push(Seg::Item { key: Vec::new(), hidden: Vec::new(), index: i });
                leaves(x, path, out);
                path.pop();
            }
        }
        other => out.push((path.clone(), other.clone())),
    }
}

/// Puts a marker at a leaf `leaves` found in `v`: the path exists, so the write cannot miss.
fn set_at(v: &mut Value, path: &[Seg], new: Value) {
    let _ = value::apply(v, path, Some(&new));
}

fn show(path: &[Seg]) -> String {
    drift_model::path::Path(path.to_vec()).to_index_form()
}

/// A drift path with list items by their index in `object` (markers may change merge keys).
fn positional(object: &Value, path: &[Seg]) -> Option<Vec<Seg>> {
    let mut cur = object;
    let mut out = Vec::new();
    for seg in path {
        match seg {
            Seg::Field(f) => {
                out.push(seg.clone());
                cur = cur.get(f)?;
            }
            Seg::Item { .. } => {
                let list = cur.as_array()?;
                let i = value::find_item(list, seg)?;
                out.push(Seg::Item { key: Vec::new(), hidden: Vec::new(), index: i });
                cur = &list[i];
            }
        }
    }
    Some(out)
}

struct Ctx<'a> {
    root: &'a FsPath,
    cfg: &'a RenderConfig,
    chart: &'a str,
    opts: &'a HelmOptions,
    key: &'a ResourceKey,
    /// The chart's own `values.yaml`, repository-relative.
    chart_values: String,
}

impl Ctx<'_> {
    /// Renders the chart with `values` given last (they are the whole merged values) and
    /// returns the object.
    fn render(&self, values: &Value) -> std::result::Result<Value, String> {
        let job = HelmJob {
            release: &self.opts.release,
            chart_dir: self.root.join(self.chart),
            namespace: self.opts.namespace.as_deref(),
            values_files: self.opts.values_files.iter().map(|f| self.root.join(f)).collect(),
            inline_values: Some(values),
            parameters: &self.opts.parameters,
            include_crds: self.opts.include_crds,
        };
        let out = render::helm_template(self.cfg, &job)?;
        let parsed = parse_manifests(&out, "helm template");
        parsed
            .resources
            .into_iter()
            .find(|r| r.key.group == self.key.group && r.key.kind == self.key.kind && r.key.name == self.key.name)
            .map(|r| Value::clone(&r.object))
            .ok_or_else(|| "the marked render does not produce the object".to_owned())
    }
}

/// A trace: the candidate's path, and the text around its marker in the rendered value (for
/// strings built from several values), with other markers put back to their values.
struct Trace {
    path: Vec<Seg>,
    affix: Option<(String, String)>,
}

pub(super) fn plan(
    root: &FsPath,
    cfg: &RenderConfig,
    chart: &str,
    opts: &HelmOptions,
    key: &ResourceKey,
    object: &Value,
    changes: &[FieldChange],
) -> Result<AcceptPlan> {
    let chart_values = if chart.is_empty() { "values.yaml".to_owned() } else { format!("{chart}/values.yaml") };
    let mut layers = Vec::new();
    if root.join(&chart_values).is_file() {
        layers.push(Layer { file: Some(chart_values.clone()), values: read_values(root, &chart_values)? });
    }
    for f in &opts.values_files {
        layers.push(Layer { file: Some(f.clone()), values: read_values(root, f)? });
    }
    if let Some(inline) = &opts.values {
        let v: Value = serde_json::from_str(inline).unwrap_or(Value::Null);
        layers.push(Layer { file: None, values: v });
    }
    let mut merged = Value::Object(Default::default());
    for l in &layers {
        merge(&mut merged, &l.values);
    }
    let ctx = Ctx { root, cfg, chart, opts, key, chart_values: chart_values.clone() };
    let mut plan = AcceptPlan::default();
    for c in changes {
        match place(&ctx, &layers, &merged, object, c, &mut plan) {
            Ok(()) => {}
            Err(reason) => plan.unplaced.push(Unplaced {
                path: c.path.to_string(),
                value: c.value.clone(),
                hint: format!(
                    "{key}: cannot place `{}` in the values of the chart `{}` ({reason}); set it so that the field renders as {}",
                    c.path,
                    if chart.is_empty() { "." } else { chart },
                    c.value.as_ref().map_or("absent".into(), |v| format!("`{v}`"))
                ),
            }),
        }
    }
    Ok(plan)
}

fn read_values(root: &FsPath, file: &str) -> Result<Value> {
    let text = super::read(root, file)?;
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    yaml::parse(&text).map_err(|e| Error::invalid_input(format!("{file}: {e}")))
}

/// Places one change, or says why it cannot be.
fn place(
    ctx: &Ctx<'_>,
    layers: &[Layer],
    merged: &Value,
    object: &Value,
    c: &FieldChange,
    plan: &mut AcceptPlan,
) -> std::result::Result<(), String> {
    let Some(want) = &c.value else {
        return Err("the cluster does not have the field, and no values key removes it".into());
    };
    let git = value::get(object, c.path.segments()).ok_or("Git does not set the field, so no values key feeds it")?;
    let at = positional(object, c.path.segments()).ok_or("the field's list item is not in Git's object")?;
    let mut all = Vec::new();
    leaves(merged, &mut Vec::new(), &mut all);
    let traces = trace(ctx, merged, git, &at, &all)?;
    // The traces that can give the cluster's value by changing their key alone.
    let mut fits: Vec<(Vec<Seg>, Value)> = Vec::new();
    for t in &traces {
        match (&t.affix, want) {
            (None, w) => fits.push((t.path.clone(), w.clone())),
            (Some((pre, post)), Value::String(w)) => {
                if let Some(mid) = w.strip_prefix(pre.as_str()).and_then(|m| m.strip_suffix(post.as_str())) {
                    let old = value::get(merged, &t.path);
                    if old.and_then(Value::as_str) != Some(mid) {
                        fits.push((t.path.clone(), Value::String(mid.to_owned())));
                    }
                }
            }
            (Some(_), _) => {}
        }
    }
    let [(key_path, new)] = fits.as_slice() else {
        return Err(match fits.len() {
            0 if traces.is_empty() => "no values key traces to the field".into(),
            0 => "the values keys that feed the field cannot give the cluster's value".into(),
            n => format!(
                "{n} values keys feed the field: {}",
                fits.iter().map(|(p, _)| show(p)).collect::<Vec<_>>().join(", ")
            ),
        });
    };
    let layer = layers
        .iter()
        .rev()
        .find(|l| value::get(&l.values, key_path).is_some())
        .ok_or("the traced key is set by no values file")?;
    let Some(mut file) = layer.file.as_ref() else {
        return Err(format!("the key {} is set by the application's inline values", show(key_path)));
    };
    // A key only the chart's defaults set goes in the application's own (last) values file when
    // it has one: the chart's values.yaml is shared by every application of the chart.
    if *file == ctx.chart_values
        && let Some(own) = layers.iter().rev().filter_map(|l| l.file.as_ref()).find(|f| **f != ctx.chart_values)
    {
        file = own;
    }
    let text = current(ctx.root, &plan.edits, file).map_err(|e| e.to_string())?;
    let out = yaml::edit_file(&text, &|_| true, &[(key_path.as_slice(), Change::Set(new))])
        .map_err(|e| format!("cannot edit {file}: {e}"))?;
    put_edit(&mut plan.edits, FileEdit { path: file.clone(), content: out.into_bytes(), created: false });
    plan.placed.push(Placed {
        path: c.path.to_string(),
        file: file.clone(),
        how: format!("values key {} in {file}", show(key_path)),
    });
    Ok(())
}

fn marker_of(i: usize, git_leaf: &Value) -> Option<Value> {
    match git_leaf {
        Value::String(_) => Some(Value::String(format!("driftmark{i}x"))),
        // Helm prints numbers as Go float64s, in exponent notation from 1e6 on: markers stay
        // below it (and end in 1, so that none is a round number).
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(Value::from(700_001_u64 + 10 * (i as u64 % 29_000))),
        Value::Number(_) => Some(serde_json::json!(700_000.5 + (i % 29_000) as f64)),
        _ => None,
    }
}

/// The candidates whose marker shows at the drift path.
fn trace(
    ctx: &Ctx<'_>,
    merged: &Value,
    git: &Value,
    at: &[Seg],
    all: &[(Vec<Seg>, Value)],
) -> std::result::Result<Vec<Trace>, String> {
    let git_text = git.as_str();
    let candidates: Vec<&(Vec<Seg>, Value)> = all
        .iter()
        .filter(|(_, v)| {
            v == git
                || match (v, git_text) {
                    (Value::String(s), Some(g)) => !s.is_empty() && g.contains(s.as_str()),
                    _ => false,
                }
        })
        .collect();
    let mut traces = Vec::new();
    let mut marked = merged.clone();
    let mut markers: Vec<(usize, Value)> = Vec::new();
    for (i, (path, v)) in candidates.iter().enumerate() {
        if let Some(m) = marker_of(i, v) {
            set_at(&mut marked, path, m.clone());
            markers.push((i, m));
        }
    }
    if !markers.is_empty() {
        let rendered = ctx.render(&marked).map_err(|e| format!("the marked render failed: {e}"))?;
        let got = value::get(&rendered, at).cloned().unwrap_or(Value::Null);
        for (i, m) in &markers {
            let path = candidates[*i].0.clone();
            if &got == m {
                traces.push(Trace { path, affix: None });
            } else if let (Value::String(g), Some(mt)) = (&got, marker_text(m))
                && let Some(pos) = g.find(&mt)
            {
                let restore = |s: &str| {
                    let mut s = s.to_owned();
                    for (j, other) in &markers {
                        if let Some(ot) = marker_text(other) {
                            let original = &candidates[*j].1;
                            let text = original.as_str().map_or_else(|| original.to_string(), str::to_owned);
                            s = s.replace(&ot, &text);
                        }
                    }
                    s
                };
                let pre = restore(&g[..pos]);
                let post = restore(&g[pos + mt.len()..]);
                traces.push(Trace { path, affix: Some((pre, post)) });
            }
        }
    }
    // Booleans cannot carry a unique marker: flip them one at a time.
    if let Value::Bool(b) = git {
        for (path, v) in candidates.iter().map(|c| (&c.0, &c.1)) {
            if v != git {
                continue;
            }
            let mut flipped = merged.clone();
            set_at(&mut flipped, path, Value::Bool(!b));
            if let Ok(rendered) = ctx.render(&flipped)
                && value::get(&rendered, at) == Some(&Value::Bool(!b))
            {
                traces.push(Trace { path: path.clone(), affix: None });
            }
        }
    }
    Ok(traces)
}

fn marker_text(m: &Value) -> Option<String> {
    match m {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
