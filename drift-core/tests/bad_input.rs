//! One test per failure mode of the loader: a clear error, no panic, the rest still read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use drift_core::manifest::parse_manifests;

const GOOD: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: good\n";

fn fatal(text: &str) -> Vec<String> {
    let p = parse_manifests(text, "bad.yaml");
    p.warnings.iter().filter(|w| w.fatal).map(|w| w.to_string()).collect()
}

#[test]
fn invalid_yaml_names_file_document_and_line_and_keeps_the_rest() {
    let text = format!("{GOOD}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n");
    let p = parse_manifests(&text, "bad.yaml");
    assert_eq!(p.resources.len(), 1, "the good document is still read");
    let w = &p.warnings[0];
    assert!(w.fatal);
    assert_eq!((w.path.as_deref(), w.document), (Some("bad.yaml"), Some(1)));
    assert!(w.line.is_some_and(|l| l >= 6), "line in the file: {w}");
    assert!(w.message.starts_with("invalid YAML"), "{w}");
}

#[test]
fn missing_kind_or_name_is_an_error() {
    assert!(fatal("apiVersion: v1\nmetadata: {name: x}\n")[0].contains("no kind"));
    assert!(fatal("apiVersion: v1\nkind: Service\nmetadata: {}\n")[0].contains("no metadata.name"));
    assert!(fatal("kind: Service\nmetadata: {name: x}\n")[0].contains("no apiVersion"));
}

#[test]
fn alias_bomb_is_bounded() {
    let mut text = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    let mut prev = 'a';
    for c in 'b'..='j' {
        text.push_str(&format!(
            "{c}: &{c} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
        ));
        prev = c;
    }
    let errors = fatal(&text);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("invalid YAML"), "{errors:?}");
}

#[test]
fn a_50_mb_document_is_refused_without_parsing() {
    let mut text = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  blob: \"");
    text.push_str(&"x".repeat(50 << 20));
    text.push_str("\"\n");
    let errors = fatal(&text);
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("larger than the limit"), "{errors:?}");
}

#[test]
fn nesting_10000_deep_is_an_error_not_a_stack_overflow() {
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\ndata: {}{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert_eq!(fatal(&yaml).len(), 1);
    let mut block = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\n");
    // 3,000 block levels: deep enough for the depth limit, small enough for the size limit.
    for i in 0..3_000 {
        block.push_str(&" ".repeat(i));
        block.push_str("a:\n");
    }
    let errors = fatal(&block);
    assert_eq!(errors.len(), 1);
    assert!(!errors[0].contains("larger than the limit"), "refused for its depth, not its size: {errors:?}");
    let json = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"x\"}},\"data\":{}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert_eq!(fatal(&json).len(), 1);
}

#[test]
fn secret_values_do_not_appear_in_parse_errors() {
    let text =
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData:\n  password: hunter2-very-secret\n  bad: [\n";
    let errors = fatal(text);
    assert_eq!(errors.len(), 1);
    assert!(!errors[0].contains("hunter2"), "{errors:?}");
}
