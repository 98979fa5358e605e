//! The detector reads YAML as the real kubectl reads it: a differential test of
//! `drift_manifest::parse_manifests` against kubectl's client-side reading (`kubectl create
//! --dry-run=client -o json --validate=false` against the test API server) over 10,000 generated
//! documents, and (`kubectl label --local`, the same reader with no server, for kinds the test
//! server does not serve) over every manifest of the repository's examples, of its install
//! manifests (deploy/) and of the corpus.
//! The JSON must be the same, number types included.
//!
//! One difference is deliberate (docs/sources.md, "How YAML is read"): an integer beyond a signed
//! 64-bit integer, which kubectl sends as an inexact float, is refused with its line. The
//! generator never puts in one map two keys that become the same string from different types
//! (`1` and `1.0`): kubectl keeps one of them at random.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::Kubectl;
use serde_json::Value;

/// A small deterministic generator (SplitMix64), seeded from `DRIFT_YAML_SEED` or a constant.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Plain scalars on the edges of YAML 1.1's and Kubernetes' typing rules, each safe to write
/// plain in block and flow context.
#[rustfmt::skip]
const PLAIN: &[&str] = &[
    "0644", "0o644", "0O644", "-0644", "+0644", "0755", "0x1f", "0X1F", "-0x1f", "+0x1f", "0b101", "0B101",
    "-0b101", "0b+1", "0_644", "1__0", "1_000", "1_", "08", "09.5", "00", "-0", "+0", "+12", "12", "-12",
    "007", "0", "1.0", "1e3", "1E3", "1.", "-1.0", "-0.0", "1.5", ".5", "+.5", "-.5", "1e21", "1e20",
    "1e-7", "1e-400", ".1_0", "1_000.5", "1e400", "1.0e400", "0x", "0xg", "0x1p3", "._1", ".", "-", "--",
    "1:30", "190:20:30", "10.0.0.1", "500m", "100Mi", "0.5Gi", "3s", "1e", "e5", "0x1ffffffffffffffff",
    "y", "Y", "yes", "Yes", "YES", "yES", "on", "On", "ON", "oN", "n", "N", "no", "No", "NO", "off", "Off",
    "OFF", "true", "True", "TRUE", "tRUE", "false", "False", "FALSE", "~", "null", "Null", "NULL", "nULL",
    "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14T21:59:43Z", "2001-02-29", "2001-12-14 21:59:43.10",
    "inf", "nan", "Infinity", ".iNf", "9223372036854775807",
    "-9223372036854775808", "123456789012345678", "4294967296", "123456789.0", "0.1", "0.0001", "0.00001",
    "1e6", "123456", "a", "web", "nginx:1.25", "app.kubernetes.io/name", "/var/run", "$HOME", "~foo", "=x",
    "é", "a b", "-Xmx512m", "--port=8080", "90deg", "x_y", "_1", "0.5.1", "1,000",
];

/// Plain scalars that kubectl cannot send (non-finite floats) or sends as an inexact float
/// (integers beyond 64 bits): rarer, since one makes the whole document refused.
const RARE: &[&str] =
    &[".inf", ".Inf", "-.inf", ".NaN", "9223372036854775808", "-9223372036854775809", "18446744073709551616"];

/// Strings that need quotes (or a block scalar) somewhere.
#[rustfmt::skip]
const QUOTED: &[&str] = &[
    "", " ", "a: b", "a #b", "[x]", "{x}", "x, y", "'", "\"", "\\", "line\nbreak", "tab\there", "<<", "@x",
    "`x`", "!x", "&x", "*x", "%x", "|", ">", "# not a comment", "\u{200b}", "\u{202e}rtl", "日本",
];

/// Tags, with the plain values they are tried on.
const TAGS: &[&str] = &["!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!custom", "!"];
const BINARY: &[&str] = &["aGVsbG8=", "/w==", "AAEC", "aGVs\n  bG8=", "not base64", "YQ"];

/// Key texts of a map (each drawn once, some quoted). Several become the same string (`yes`, `on`
/// and `y` are `"true"`), always from the same type, where go-yaml keeps the last: two that
/// became the same string from different types (`1` and `1.0`) would leave kubectl's choice to
/// Go's map order.
const KEYS: &[&str] = &[
    "a",
    "b",
    "yes",
    "on",
    "0644",
    "0x1F",
    "1.5",
    "123456789.0",
    "1e6",
    "2001-12-14",
    "0.00001",
    "-0.0",
    "1_0",
    "y",
    "off",
    "N",
];

struct Gen {
    rng: Rng,
    /// Anchors defined so far, and those whose node is complete (an alias may name only these).
    anchors: usize,
    closed: Vec<usize>,
}

impl Gen {
    /// A scalar in one of its forms: plain, quoted, tagged, a block scalar (block context only).
    fn scalar(&mut self, flow: bool, indent: usize) -> String {
        if self.rng.below(150) == 0 {
            return self.rng.pick(RARE).to_owned();
        }
        match self.rng.below(60) {
            // A lone `-` is an entry in block context; in flow context granit-parser refuses it
            // before `,`, `]` or `}` where libyaml reads it (a known difference,
            // docs/sources.md): it is quoted.
            0..=39 => match self.rng.pick(PLAIN) {
                "-" => "'-'".to_owned(),
                token => token.to_owned(),
            },
            40..=43 => format!("'{}'", self.rng.pick(PLAIN).replace('\'', "''")),
            44..=47 => format!("\"{}\"", self.rng.pick(PLAIN)),
            48 | 49 => {
                let s = self.rng.pick(QUOTED);
                format!(
                    "\"{}\"",
                    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n").replace('\t', "\\t")
                )
            }
            50 | 51 => format!("'{}'", self.rng.pick(QUOTED).replace('\'', "''").replace('\n', "\n\n")),
            52 if self.rng.below(2) == 0 => format!("{} {}", self.rng.pick(TAGS), self.rng.pick(PLAIN)),
            54 => {
                let b = self.rng.pick(BINARY);
                if flow {
                    format!("!!binary \"{}\"", b.replace("\n  ", ""))
                } else {
                    format!("!!binary {}", b.replace("\n  ", &format!("\n{}", " ".repeat(indent))))
                }
            }
            _ if flow => format!("\"{}\"", self.rng.pick(PLAIN)),
            _ => {
                let pad = " ".repeat(indent);
                let header = self.rng.pick(&["|", "|-", "|+", ">", ">-"]);
                format!("{header}\n{pad}{}\n{pad}{}", self.rng.pick(PLAIN), self.rng.pick(PLAIN))
            }
        }
    }

    fn keys(&mut self, n: usize) -> Vec<String> {
        let mut pool: Vec<&str> = KEYS.to_vec();
        (0..n)
            .map(|_| {
                let k = pool.remove(self.rng.below(pool.len()));
                match self.rng.below(6) {
                    0 => format!("'{k}'"),
                    _ => k.to_owned(),
                }
            })
            .collect()
    }

    fn flow(&mut self, depth: usize) -> String {
        match (self.rng.below(4), depth) {
            (0, d) if d < 3 => {
                let items: Vec<String> = (0..self.rng.below(4)).map(|_| self.flow(depth + 1)).collect();
                format!("[{}]", items.join(", "))
            }
            (1, d) if d < 3 => {
                let n = self.rng.below(4);
                let entries: Vec<String> =
                    self.keys(n).into_iter().map(|k| format!("{k}: {}", self.flow(depth + 1))).collect();
                format!("{{{}}}", entries.join(", "))
            }
            _ => self.scalar(true, 0),
        }
    }

    /// A value after `key:` (or `- `) at `indent`.
    fn block(&mut self, indent: usize, depth: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        let choice = self.rng.below(6);
        if choice == 3 && !self.closed.is_empty() {
            let n = self.closed[self.rng.below(self.closed.len())];
            out.push_str(&format!(" *n{n}"));
            return;
        }
        let id = (self.rng.below(12) == 0).then(|| {
            self.anchors += 1;
            self.anchors
        });
        let anchor = id.map(|n| format!(" &n{n}")).unwrap_or_default();
        self.node(choice, &anchor, indent, depth, &pad, out);
        self.closed.extend(id);
    }

    fn node(&mut self, choice: usize, anchor: &str, indent: usize, depth: usize, pad: &str, out: &mut String) {
        match (choice, depth) {
            (0, d) if d < 4 => {
                out.push_str(anchor);
                let n = 1 + self.rng.below(3);
                for _ in 0..n {
                    out.push_str(&format!("\n{pad}-"));
                    self.block(indent + 2, depth + 1, out);
                }
            }
            (1 | 2, d) if d < 4 => {
                out.push_str(anchor);
                let n = 1 + self.rng.below(4);
                if self.rng.below(6) == 0 {
                    // A merge of string-keyed maps, before or after the explicit keys.
                    out.push_str(&format!("\n{pad}<<: {{a: 1, b: {}, c: x}}", self.flow(3)));
                }
                for k in self.keys(n) {
                    out.push_str(&format!("\n{pad}{k}:"));
                    self.block(indent + 2, depth + 1, out);
                }
                if self.rng.below(8) == 0 {
                    out.push_str(&format!("\n{pad}<<: [{{a: 2, z: 1}}, {{a: 3, b: 4}}]"));
                }
            }
            (4, _) => {
                out.push_str(anchor);
                out.push(' ');
                out.push_str(&self.flow(depth));
            }
            _ => {
                out.push_str(anchor);
                out.push(' ');
                out.push_str(&self.scalar(false, indent));
            }
        }
    }

    fn document(&mut self, i: usize) -> String {
        self.anchors = 0;
        self.closed.clear();
        let mut out = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: g{i}\nvalue:");
        self.block(2, 0, &mut out);
        out.push('\n');
        out
    }
}

/// The objects kubectl printed: a stream of JSON values, `List`s flattened.
fn objects(stdout: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for value in serde_json::Deserializer::from_str(stdout).into_iter::<Value>() {
        let value = value.expect("kubectl prints JSON");
        match value.get("items").and_then(Value::as_array) {
            Some(items) if value["kind"] == "List" => out.extend(items.iter().cloned()),
            _ => out.push(value),
        }
    }
    out
}

/// What drift makes of one document: the object, or the reason it refuses it.
fn drift(text: &str) -> Result<Value, String> {
    let parsed = drift_manifest::parse_manifests(text, "doc.yaml");
    if let Some(w) = parsed.warnings.iter().find(|w| w.fatal) {
        return Err(w.message.clone());
    }
    match parsed.resources.as_slice() {
        [one] => Ok((*one.object).clone()),
        other => Err(format!("{} objects, warnings {:?}", other.len(), parsed.warnings)),
    }
}

fn duplicate_keys(text: &str) -> bool {
    drift_manifest::parse_manifests(text, "doc.yaml").warnings.iter().any(|w| w.message.contains("given twice"))
}

/// `kubectl create --dry-run=client -o json --validate=false -f FILE`: the objects, or the error.
fn kubectl_create(k: &Kubectl, file: &Path) -> Result<Vec<Value>, String> {
    let out = k
        .command(&["create", "--dry-run=client", "-o", "json", "--validate=false", "-f", file.to_str().unwrap()])
        .output()
        .unwrap();
    if out.status.success() {
        Ok(objects(&String::from_utf8(out.stdout).unwrap()))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn generated_documents_read_as_kubectl_reads_them() {
    let seed = std::env::var("DRIFT_YAML_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_u64);
    let count: usize = std::env::var("DRIFT_YAML_DOCUMENTS").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    eprintln!("generated_documents_read_as_kubectl_reads_them: seed {seed}, {count} documents");
    let k = Kubectl::start();
    let mut generator = Gen { rng: Rng(seed), anchors: 0, closed: Vec::new() };
    let docs: Vec<String> = (0..count).map(|i| generator.document(i)).collect();
    let (mut read, mut refused, mut too_big) = (Vec::new(), Vec::new(), 0usize);
    let twice = docs.iter().filter(|doc| duplicate_keys(doc)).count();
    for (i, doc) in docs.iter().enumerate() {
        match drift(doc) {
            Ok(object) => read.push((i, object)),
            Err(why) if why.contains("does not fit in 64 bits") => too_big += 1,
            Err(why) => refused.push((i, why)),
        }
    }
    let mut failures: Vec<String> = Vec::new();
    let compare = |i: usize, ours: &Value, theirs: &Value, failures: &mut Vec<String>| {
        if ours.get("value") != theirs.get("value") {
            failures.push(format!(
                "document {i}:\n{}\ndrift:   {}\nkubectl: {}",
                docs[i],
                ours.get("value").map_or("(none)".into(), Value::to_string),
                theirs.get("value").map_or("(none)".into(), Value::to_string)
            ));
        }
    };
    // The documents drift reads, 500 to a kubectl run; a run kubectl refuses is run again one
    // document at a time, to name the document.
    for batch in read.chunks(500) {
        let text: String = batch.iter().map(|(i, _)| format!("---\n{}", docs[*i])).collect();
        let file = k.file("batch.yaml", &text);
        match kubectl_create(&k, &file) {
            Ok(theirs) => {
                assert_eq!(theirs.len(), batch.len(), "kubectl printed one object per document");
                for ((i, ours), theirs) in batch.iter().zip(&theirs) {
                    assert_eq!(theirs["metadata"]["name"], format!("g{i}"));
                    compare(*i, ours, theirs, &mut failures);
                }
            }
            Err(_) => {
                for (i, ours) in batch {
                    match kubectl_create(&k, &k.file("one.yaml", &docs[*i])) {
                        Ok(theirs) => compare(*i, ours, &theirs[0], &mut failures),
                        Err(e) => failures
                            .push(format!("document {i}: drift reads it, kubectl refuses it: {e}\n{}", docs[*i])),
                    }
                }
            }
        }
    }
    // What drift refuses, kubectl refuses: each of them, or 300 spread over them (a kubectl run
    // each).
    let step = refused.len().div_ceil(300).max(1);
    for (i, why) in refused.iter().step_by(step) {
        if let Ok(theirs) = kubectl_create(&k, &k.file("one.yaml", &docs[*i])) {
            failures.push(format!(
                "document {i}: drift refuses it ({why}), kubectl reads it: {}\n{}",
                theirs[0].get("value").map_or("(none)".into(), Value::to_string),
                docs[*i]
            ));
        }
    }
    eprintln!(
        "{} documents read alike, {} refused by drift ({} of them checked: kubectl refuses them too), {too_big} with an integer beyond 64 bits; {twice} with a key given twice",
        read.len(),
        refused.len(),
        refused.len().div_ceil(step)
    );
    let mut reasons: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for (_, why) in &refused {
        *reasons.entry(why.chars().take(60).collect()).or_default() += 1;
    }
    eprintln!("refused: {reasons:?}");

    assert!(
        failures.is_empty(),
        "{} differences with kubectl; the first ones:\n\n{}",
        failures.len(),
        failures.iter().take(40).cloned().collect::<Vec<_>>().join("\n\n")
    );
    assert!(read.len() * 10 > count * 8, "most generated documents are read: {} of {count}", read.len());
    assert!(too_big > 0, "the generator makes integers beyond 64 bits");
    assert!(!refused.is_empty(), "the generator makes documents that both refuse");
}

/// Every YAML and JSON file under `dir` (`expect.json` files are expectations, not manifests).
fn manifest_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
                && path.file_name().is_some_and(|n| n != "expect.json")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The documents of a YAML stream, split at `---` lines as kubectl's reader splits them, and
/// numbered as drift numbers them (empty ones are not counted).
fn documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare.starts_with("--- ") {
            let rest = bare.strip_prefix("---").unwrap_or("").trim_start();
            docs.push(if rest.is_empty() { String::new() } else { format!("{rest}\n") });
        } else {
            docs.last_mut().unwrap().push_str(line);
        }
    }
    docs.retain(|d| !d.is_empty());
    docs
}

/// kubectl's reading of the objects drift reads in each file under `dirs`, compared; returns
/// (objects compared, files with none drift reads).
fn compare_files_with_kubectl(k: &Kubectl, dirs: &[PathBuf]) -> (usize, usize) {
    let (mut compared, mut none) = (0, 0);
    let mut failures = Vec::new();
    for file in dirs.iter().flat_map(|d| manifest_files(d)) {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let parsed = drift_manifest::parse_manifests(&text, "file");
        if parsed.resources.is_empty() {
            none += 1;
            continue;
        }
        let json = text.trim_start().starts_with(['{', '[']);
        let docs = if json { vec![text.clone()] } else { documents(&text) };
        let mut wanted: Vec<usize> = parsed.resources.iter().filter_map(|r| r.provenance.document).collect();
        wanted.dedup();
        let input: String = wanted.iter().map(|&d| format!("---\n{}\n", docs[d])).collect();
        let name = if json { "input.json" } else { "input.yaml" };
        let input = if json { docs[0].clone() } else { input };
        let out = k
            .command(&[
                "label",
                "--local",
                "--show-managed-fields",
                "-o",
                "json",
                "-f",
                k.file(name, &input).to_str().unwrap(),
                "drift-none-",
            ])
            .output()
            .unwrap();
        if !out.status.success() {
            failures.push(format!(
                "{}: drift reads {} objects, kubectl refuses the file: {}",
                file.display(),
                parsed.resources.len(),
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        let theirs = objects(&String::from_utf8(out.stdout).unwrap());
        if theirs.len() != parsed.resources.len() {
            failures.push(format!(
                "{}: drift reads {} objects, kubectl {}",
                file.display(),
                parsed.resources.len(),
                theirs.len()
            ));
            continue;
        }
        for (ours, mut theirs) in parsed.resources.iter().zip(theirs) {
            // `label --local` with nothing to remove leaves an empty `labels` where there was none.
            if ours.object["metadata"].get("labels").is_none() && theirs["metadata"]["labels"] == serde_json::json!({})
            {
                theirs["metadata"].as_object_mut().unwrap().remove("labels");
            }
            compared += 1;
            if *ours.object != theirs {
                failures.push(format!("{} ({}): drift {}\nkubectl {}", file.display(), ours.key, ours.object, theirs));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences with kubectl:\n\n{}",
        failures.len(),
        failures.iter().take(10).cloned().collect::<Vec<_>>().join("\n\n")
    );
    (compared, none)
}

#[test]
fn the_examples_and_the_install_manifests_read_as_kubectl_reads_them() {
    let k = Kubectl::start();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (compared, none) = compare_files_with_kubectl(&k, &[root.join("examples"), root.join("deploy")]);
    eprintln!("the examples and deploy/: {compared} objects read alike; {none} files hold none drift reads");
    assert!(compared > 15, "{compared} objects compared");
}

#[test]
fn the_corpus_reads_as_kubectl_reads_it() {
    let Some(corpus) = drift_testkit::corpus::dir("the_corpus_reads_as_kubectl_reads_it", "") else { return };
    let k = Kubectl::start();
    let (compared, none) = compare_files_with_kubectl(&k, &[corpus]);
    eprintln!("the corpus: {compared} objects read alike; {none} files hold none drift reads");
    assert!(compared > 100, "{compared} objects compared");
}
