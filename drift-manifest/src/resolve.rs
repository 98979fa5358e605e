//! Scalars typed as Kubernetes types them.
//!
//! kubectl, Helm, Flux and Argo CD all read YAML through sigs.k8s.io/yaml: go-yaml v2 decodes
//! the document with the YAML 1.1 rules of its `resolve` function, and the result is written as
//! JSON with Go's `encoding/json`, which the API machinery reads back (an integer when the text is
//! one that fits in 64 bits, a float otherwise). This module is that chain for one scalar, written
//! from the behaviour of those libraries (docs/sources.md, "How YAML is read", lists each case
//! where it differs from YAML 1.2):
//!
//! - integers in Go's base-0 syntax once every `_` is removed: `0644` and `0o644` are octal,
//!   `0x`/`0X` hexadecimal, `0b`/`0B` binary, with a sign; `08` is not octal and falls through to
//!   a float;
//! - floats in YAML's decimal spelling, and any Go float spelling after a leading `.`; a float
//!   out of range is a string; a float with an integral value is the integer Go prints (`1.0`,
//!   `1e3`);
//! - the 22 booleans and 5 nulls of go-yaml's table, in exactly those cases (`yES` is a string);
//!   timestamps and sexagesimal numbers are strings;
//! - tags: `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!timestamp` resolve or fail as
//!   go-yaml does, `!!binary` is decoded, any other tag is ignored (the value is its text);
//! - map keys become the strings sigs.k8s.io/yaml makes of them: `yes` is `"true"`, `0644` is
//!   `"420"`, a float is written with float32 precision (`1.2345679e+08`).
//!
//! Where kubectl would send something that loses what the file says, the reader refuses it with
//! a message: an integer that does not fit in a signed 64-bit integer (kubectl sends an inexact
//! float), an infinite or NaN value (Go's JSON cannot hold it), a null or collection map key.

use serde_json::Value;

const CORE: &str = "tag:yaml.org,2002:";

/// A scalar as go-yaml v2 resolves it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A string, a timestamp, a value whose tag is ignored.
    Str(String),
    /// `!!binary`, decoded.
    Bytes(Vec<u8>),
    /// An integer beyond a signed 64-bit integer, as written, and the float go-yaml reads when
    /// it reads one (a decimal), or `None` (an unsigned 64-bit integer).
    TooBig(String, Option<f64>),
}

/// The scalar `text`, with its tag (the full tag, `tag:yaml.org,2002:int`) and whether it was
/// written plain. An error is the message go-yaml would give.
pub(crate) fn resolve(tag: Option<&str>, text: &str, plain: bool) -> Result<Scalar, String> {
    let tag = match tag {
        None if !plain => return Ok(Scalar::Str(text.to_owned())),
        None => "",
        Some(t) => t,
    };
    let core = tag.strip_prefix(CORE);
    match core {
        Some("binary") => return binary(text),
        Some("str") => return Ok(Scalar::Str(text.to_owned())),
        Some("bool" | "int" | "float" | "null" | "timestamp") => {}
        // A tag go-yaml does not resolve (a local tag, `!`, `!!map` on a scalar): the text.
        _ if !tag.is_empty() => return Ok(Scalar::Str(text.to_owned())),
        _ => {}
    }
    let (kind, value) = untagged(text, tag.is_empty() || core == Some("timestamp"));
    let Some(wanted) = core else { return Ok(value) };
    if wanted == kind {
        return Ok(value);
    }
    match (wanted, value) {
        ("float", Scalar::Int(i)) => Ok(Scalar::Float(i as f64)),
        // A timestamp is kept as its text; asked for explicitly, the text must be one.
        (_, _) => Err(format!("cannot decode !!{kind} `{text}` as a !!{wanted}")),
    }
}

/// The resolution of a plain scalar without tag: its go-yaml kind and value.
fn untagged(text: &str, try_timestamp: bool) -> (&'static str, Scalar) {
    let str = || ("str", Scalar::Str(text.to_owned()));
    let Some(&first) = text.as_bytes().first() else { return ("null", Scalar::Null) };
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return ("bool", Scalar::Bool(true));
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return ("bool", Scalar::Bool(false));
        }
        "~" | "null" | "Null" | "NULL" => return ("null", Scalar::Null),
        ".nan" | ".NaN" | ".NAN" => return ("float", Scalar::Float(f64::NAN)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return ("float", Scalar::Float(f64::INFINITY)),
        "-.inf" | "-.Inf" | "-.INF" => return ("float", Scalar::Float(f64::NEG_INFINITY)),
        "<<" => return ("merge", Scalar::Str(text.to_owned())),
        _ => {}
    }
    match first {
        b'.' => match go_parse_float(text) {
            Some(f) => ("float", Scalar::Float(f)),
            None => str(),
        },
        b'0'..=b'9' | b'+' | b'-' => {
            // Only untagged text, or text tagged `!!timestamp`, is tried as a timestamp; a
            // timestamp stays its text.
            if try_timestamp && is_timestamp(text) {
                return ("timestamp", Scalar::Str(text.to_owned()));
            }
            let plain: String = text.chars().filter(|&c| c != '_').collect();
            let int = go_parse_int(&plain);
            if let Ok(i) = int {
                return ("int", Scalar::Int(i));
            }
            let uint = go_parse_uint(&plain);
            let float = yaml_style_float(&plain).then(|| plain.parse::<f64>().ok().filter(|f| f.is_finite())).flatten();
            if uint.is_ok() || (int == Err(GoError::Range) && float.is_some()) {
                // kubectl would send a float that is not the integer written.
                let float = if uint.is_ok() { None } else { float };
                return ("int", Scalar::TooBig(text.to_owned(), float));
            }
            if let Some(f) = float {
                return ("float", Scalar::Float(f));
            }
            // go-yaml's own reading of binary after the prefix, which takes a sign there.
            if let Some(rest) = plain.strip_prefix("0b") {
                if let Ok(i) = go_parse_int_radix(rest, 2) {
                    return ("int", Scalar::Int(i));
                }
                if go_parse_uint_radix(rest, 2).is_ok() {
                    return ("int", Scalar::TooBig(text.to_owned(), None));
                }
            } else if let Some(rest) = plain.strip_prefix("-0b")
                && let Ok(i) = go_parse_int_radix(&format!("-{rest}"), 2)
            {
                return ("int", Scalar::Int(i));
            }
            str()
        }
        _ => str(),
    }
}

fn binary(text: &str) -> Result<Scalar, String> {
    use base64::Engine as _;
    // Go's StdEncoding: padded, line breaks skipped, trailing bits not checked.
    const GO_STD: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    let compact: String = text.chars().filter(|&c| c != '\n' && c != '\r').collect();
    GO_STD.decode(compact).map(Scalar::Bytes).map_err(|_| "!!binary value contains invalid base64 data".to_owned())
}

/// The JSON value Kubernetes ends up with for a scalar in a value's place. An error is one of
/// writing the JSON: it counts only if the value is still in the tree at the end (a later key
/// may replace it).
pub(crate) fn to_value(scalar: Scalar) -> Result<Value, String> {
    Ok(match scalar {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::from(i),
        Scalar::Float(f) => go_json_number(f)?,
        Scalar::Str(s) => Value::String(s),
        Scalar::Bytes(b) => Value::String(go_string(&b)),
        Scalar::TooBig(text, _) => return Err(too_big(&text)),
    })
}

pub(crate) fn too_big(text: &str) -> String {
    format!(
        "the integer {text} does not fit in 64 bits (Kubernetes integers are signed 64-bit; kubectl would send an inexact float)"
    )
}

/// The string sigs.k8s.io/yaml makes of a scalar in a map key's place. An error is one of
/// writing the JSON, as for [`to_value`].
pub(crate) fn to_key(scalar: Scalar) -> Result<String, String> {
    Ok(match scalar {
        Scalar::Str(s) => s,
        Scalar::Bytes(b) => go_string(&b),
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(i) => i.to_string(),
        Scalar::Float(f) => go_format_g32(f),
        Scalar::Null => return Err("a map key is null, which Kubernetes' YAML reader refuses".to_owned()),
        Scalar::TooBig(_, Some(f)) => go_format_g32(f),
        Scalar::TooBig(text, None) => {
            return Err(format!("the map key {text} is an unsigned integer, which Kubernetes' YAML reader refuses"));
        }
    })
}

/// A float as Go's `encoding/json` writes it and the API machinery reads it back: an integer
/// when the text Go writes is one that fits in 64 bits.
pub(crate) fn go_json_number(f: f64) -> Result<Value, String> {
    if !f.is_finite() {
        let go = if f.is_nan() {
            "NaN"
        } else if f > 0.0 {
            "+Inf"
        } else {
            "-Inf"
        };
        return Err(format!("the value {go} cannot be written as JSON (kubectl refuses it: json: unsupported value)"));
    }
    let abs = f.abs();
    let two_63 = (1u64 << 63) as f64;
    // Go writes `%f` (no exponent, no fraction for an integral value) between 1e-6 and 1e21.
    if f.fract() == 0.0 && (abs == 0.0 || (1e-6..1e21).contains(&abs)) && abs < two_63 {
        return Ok(Value::from(f as i64));
    }
    if f == -two_63 {
        return Ok(Value::from(i64::MIN));
    }
    Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number))
}

/// Bytes as Go turns them into a JSON string: each byte that does not start valid UTF-8 is one
/// U+FFFD.
fn go_string(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push('\u{fffd}');
                rest = &bad[1..];
            }
        }
    }
    out
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` (the value rounded to float32, its shortest digits, an
/// exponent below 1e-4 and from 1e6 on), with go-yaml's spellings of the infinities and NaN.
fn go_format_g32(f: f64) -> String {
    let x = f as f32;
    if x.is_nan() {
        return ".nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { ".inf" } else { "-.inf" }.to_owned();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0");
    }
    // Rust's `{:e}` gives the shortest digits that read back as the same f32: `d.ddde±x`.
    let e = format!("{:e}", x.abs());
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{point}e{esign}{:02}", exp.abs());
    }
    if exp < 0 {
        return format!("{sign}0.{}{digits}", "0".repeat((-exp - 1) as usize));
    }
    let point = (exp + 1) as usize;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

/// Why Go's `strconv` refused a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoError {
    Syntax,
    Range,
}

/// `strconv.ParseUint(s, 0, 64)` on a text without underscores.
fn go_parse_uint(s: &str) -> Result<u64, GoError> {
    if s.is_empty() {
        return Err(GoError::Syntax);
    }
    let b = s.as_bytes();
    let (radix, digits) = if b[0] == b'0' {
        match b.get(1).map(u8::to_ascii_lowercase) {
            Some(b'b') if b.len() >= 3 => (2, &s[2..]),
            Some(b'o') if b.len() >= 3 => (8, &s[2..]),
            Some(b'x') if b.len() >= 3 => (16, &s[2..]),
            _ => (8, &s[1..]),
        }
    } else {
        (10, s)
    };
    if digits.is_empty() && radix != 8 {
        return Err(GoError::Syntax);
    }
    go_parse_uint_radix(digits, radix)
}

fn go_parse_uint_radix(digits: &str, radix: u32) -> Result<u64, GoError> {
    if digits.is_empty() && radix != 8 {
        return Err(GoError::Syntax);
    }
    // Go stops at the first error, a digit out of the base or an overflow, whichever comes first.
    let mut n: u64 = 0;
    for c in digits.chars() {
        let d = c.to_digit(radix).ok_or(GoError::Syntax)?;
        n = n.checked_mul(u64::from(radix)).and_then(|m| m.checked_add(u64::from(d))).ok_or(GoError::Range)?;
    }
    Ok(n)
}

/// `strconv.ParseInt(s, 0, 64)` on a text without underscores.
fn go_parse_int(s: &str) -> Result<i64, GoError> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    signed(neg, go_parse_uint(body))
}

fn go_parse_int_radix(s: &str, radix: u32) -> Result<i64, GoError> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if body.is_empty() {
        return Err(GoError::Syntax);
    }
    signed(neg, go_parse_uint_radix(body, radix))
}

fn signed(neg: bool, magnitude: Result<u64, GoError>) -> Result<i64, GoError> {
    let u = magnitude?;
    match (neg, i64::try_from(u)) {
        (false, Ok(i)) => Ok(i),
        (true, Ok(i)) => Ok(-i),
        (true, Err(_)) if u == 1 << 63 => Ok(i64::MIN),
        _ => Err(GoError::Range),
    }
}

/// go-yaml's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// `strconv.ParseFloat(s, 64)` for a text that starts with `.` (go-yaml's other path): decimal
/// digits with Go's underscores, one point, an exponent; `None` for a syntax error or an
/// overflow (Go's range error), a value for an underflow (Go gives 0 without error).
fn go_parse_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    let (mut saw_digit, mut saw_dot) = (false, false);
    while i < b.len() {
        match b[i] {
            b'_' => {}
            b'.' if saw_dot => break,
            b'.' => saw_dot = true,
            c if c.is_ascii_digit() => saw_digit = true,
            _ => break,
        }
        i += 1;
    }
    if !saw_digit {
        return None;
    }
    if i < b.len() && b[i].eq_ignore_ascii_case(&b'e') {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        while b.get(i).is_some_and(|c| c.is_ascii_digit() || *c == b'_') {
            i += 1;
        }
    }
    if i != b.len() || (s.contains('_') && !underscore_ok(s)) {
        return None;
    }
    let plain: String = s.chars().filter(|&c| c != '_').collect();
    plain.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Go's `underscoreOK` for a decimal number: each `_` between two digits.
fn underscore_ok(s: &str) -> bool {
    let mut saw = b'^';
    for &c in s.as_bytes() {
        if c.is_ascii_digit() {
            saw = b'0';
            continue;
        }
        if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
            continue;
        }
        if saw == b'_' {
            return false;
        }
        saw = b'!';
    }
    saw != b'_'
}

/// go-yaml's `parseTimestamp`: four digits and a dash, then one of its layouts, as Go's
/// `time.Parse` reads them (`2006-1-2T15:4:5.999999999Z07:00` with `T` or `t`, `2006-1-2
/// 15:4:5.999999999`, `2006-1-2`).
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let mut p = Cursor { b, i: 5 };
    let year: u32 = s[..4].parse().unwrap_or(0);
    let (Some(month), true, Some(day)) = (p.num(1, 2), p.eat(b'-'), p.num(1, 2)) else { return false };
    if !(1..=12).contains(&month) || day < 1 || day > days_in(year, month) {
        return false;
    }
    if p.done() {
        return true;
    }
    let t = match p.next() {
        Some(b'T' | b't') => true,
        Some(b' ') => false,
        _ => return false,
    };
    let (Some(h), true, Some(m), true, Some(sec)) = (p.num(1, 2), p.eat(b':'), p.num(1, 2), p.eat(b':'), p.num(1, 2))
    else {
        return false;
    };
    if h > 23 || m > 59 || sec > 59 {
        return false;
    }
    if p.peek() == Some(b'.') {
        p.i += 1;
        if p.num(1, 9).is_none() {
            return false;
        }
    }
    if !t {
        return p.done();
    }
    match p.next() {
        Some(b'Z') => p.done(),
        Some(b'+' | b'-') => {
            let (Some(zh), true, Some(zm)) = (p.num(2, 2), p.eat(b':'), p.num(2, 2)) else { return false };
            zh <= 24 && zm <= 59 && p.done()
        }
        _ => false,
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn next(&mut self) -> Option<u8> {
        let c = self.peek();
        self.i += 1;
        c
    }
    fn eat(&mut self, c: u8) -> bool {
        let ok = self.peek() == Some(c);
        self.i += usize::from(ok);
        ok
    }
    fn done(&self) -> bool {
        self.i == self.b.len()
    }
    /// Between `min` and `max` digits.
    fn num(&mut self, min: usize, max: usize) -> Option<u32> {
        let start = self.i;
        while self.i - start < max && self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        let n = self.i - start;
        (n >= min).then(|| std::str::from_utf8(&self.b[start..self.i]).ok()?.parse().ok()).flatten()
    }
}

fn days_in(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn value(text: &str) -> Result<Value, String> {
        resolve(None, text, true).and_then(to_value)
    }

    fn key(text: &str) -> Result<String, String> {
        resolve(None, text, true).and_then(to_key)
    }

    /// What kubectl 1.32 sends for each plain scalar (its client-side reading, `kubectl create
    /// --dry-run=client -o json`), as go-yaml v2 and Go's JSON define it.
    #[test]
    fn plain_scalars_are_typed_as_kubectl_types_them() {
        #[rustfmt::skip]
        let cases: &[(&str, Value)] = &[
            ("0644", json!(420)), ("0o644", json!(420)), ("0O644", json!(420)), ("-0644", json!(-420)),
            ("0x1f", json!(31)), ("0X1F", json!(31)), ("-0x1f", json!(-31)), ("+0x1f", json!(31)),
            ("0b101", json!(5)), ("0B101", json!(5)), ("-0b101", json!(-5)), ("0b+1", json!(1)),
            ("0_644", json!(420)), ("1__0", json!(10)), ("1_000", json!(1000)), ("1_", json!(1)),
            ("08", json!(8)), ("09.5", json!(9.5)), ("00", json!(0)), ("-0", json!(0)), ("+12", json!(12)),
            ("1.0", json!(1)), ("1e3", json!(1000)), ("1.", json!(1)), ("-1.0", json!(-1)), ("-0.0", json!(0)),
            ("1.5", json!(1.5)), (".5", json!(0.5)), ("+.5", json!(0.5)), ("1e21", json!(1e21)),
            ("1e20", json!(1e20)), ("1e-7", json!(1e-7)), ("1e-400", json!(0)), (".1_0", json!(0.1)),
            ("1e400", json!("1e400")), ("1.0e400", json!("1e400".replace("1e", "1.0e"))), ("0x", json!("0x")),
            ("0x1p3", json!("0x1p3")), ("._1", json!("._1")), (".", json!(".")), ("-", json!("-")),
            ("1:30", json!("1:30")), ("10.0.0.1", json!("10.0.0.1")), ("500m", json!("500m")),
            ("0x1ffffffffffffffff", json!("0x1ffffffffffffffff")), ("1_000.5", json!(1000.5)),
            ("y", json!(true)), ("Y", json!(true)), ("yes", json!(true)), ("YES", json!(true)), ("on", json!(true)),
            ("ON", json!(true)), ("n", json!(false)), ("No", json!(false)), ("off", json!(false)),
            ("yES", json!("yES")), ("oN", json!("oN")), ("tRUE", json!("tRUE")), ("nULL", json!("nULL")),
            ("~", Value::Null), ("", Value::Null), ("NULL", Value::Null), ("<<", json!("<<")),
            ("2001-12-14", json!("2001-12-14")), ("2001-12-14t21:59:43.10-05:00", json!("2001-12-14t21:59:43.10-05:00")),
            ("inf", json!("inf")), ("nan", json!("nan")), (".iNf", json!(".iNf")),
            ("9223372036854775807", json!(i64::MAX)), ("-9223372036854775808", json!(i64::MIN)),
        ];
        for (text, want) in cases {
            assert_eq!(value(text).as_ref(), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn integers_beyond_64_bits_and_non_finite_values_are_refused_with_a_reason() {
        for text in [
            "9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "99999999999999999999",
            "0x8000000000000000",
            "1_000_000_000_000_000_000_000",
        ] {
            assert!(value(text).is_err_and(|e| e.contains("does not fit in 64 bits")), "{text}");
        }
        for text in [".inf", "-.Inf", ".NaN", "+.INF"] {
            assert!(value(text).is_err_and(|e| e.contains("cannot be written as JSON")), "{text}");
        }
        // A digit out of the base before the overflow: a float, as kubectl reads it.
        assert_eq!(value("09999999999999999999999"), Ok(json!(1e22)));
    }

    #[test]
    fn map_keys_are_the_strings_sigs_k8s_io_yaml_makes() {
        #[rustfmt::skip]
        let cases = [
            ("yes", "true"), ("off", "false"), ("0644", "420"), ("0x1F", "31"), ("1.5", "1.5"), ("1.0", "1"),
            ("123456789.0", "1.2345679e+08"), ("1e6", "1e+06"), ("123456", "123456"), ("0.0001", "0.0001"),
            ("0.00001", "1e-05"), (".inf", ".inf"), ("-.inf", "-.inf"), (".nan", ".nan"), ("-0.0", "-0"),
            ("0.1", "0.1"), ("1e300", ".inf"), ("2001-12-14", "2001-12-14"), ("a", "a"), ("yES", "yES"),
        ];
        for (text, want) in cases {
            assert_eq!(key(text).as_deref(), Ok(want), "{text:?}");
        }
        assert!(key("~").is_err() && key("").is_err() && key("18446744073709551615").is_err());
        assert_eq!(key("99999999999999999999").as_deref(), Ok("1e+20"));
    }

    #[test]
    fn tags_resolve_or_fail_as_go_yaml_does_and_other_tags_are_ignored() {
        let tagged =
            |tag: &str, text: &str, plain| resolve(Some(&format!("{CORE}{tag}")), text, plain).and_then(to_value);
        assert_eq!(tagged("int", "0644", false), Ok(json!(420)));
        assert_eq!(tagged("str", "0644", true), Ok(json!("0644")));
        assert_eq!(tagged("float", "1", true), Ok(json!(1)));
        assert_eq!(tagged("bool", "yes", false), Ok(json!(true)));
        assert_eq!(tagged("timestamp", "2001-12-14", true), Ok(json!("2001-12-14")));
        assert_eq!(tagged("null", "", true), Ok(Value::Null));
        assert_eq!(tagged("binary", "aGVs\nbG8=", false), Ok(json!("hello")));
        assert_eq!(tagged("binary", "/w==", true), Ok(json!("\u{fffd}")));
        assert!(tagged("binary", "not base64!", true).is_err_and(|e| e.contains("invalid base64")));
        assert!(tagged("int", "1.5", true).is_err_and(|e| e == "cannot decode !!float `1.5` as a !!int"));
        assert!(tagged("timestamp", "2001-02-30", true).is_err());
        assert!(tagged("null", "x", true).is_err());
        assert_eq!(resolve(Some("!custom"), "0644", true).and_then(to_value), Ok(json!("0644")));
        assert_eq!(resolve(Some("!"), "12", true).and_then(to_value), Ok(json!("12")));
        assert_eq!(resolve(None, "12", false).and_then(to_value), Ok(json!("12")), "quoted");
    }

    #[test]
    fn go_parses_integers_in_its_base_zero_syntax() {
        assert_eq!(go_parse_int("0"), Ok(0));
        assert_eq!(go_parse_int("-0x8000000000000000"), Ok(i64::MIN));
        assert_eq!(go_parse_int("0x8000000000000000"), Err(GoError::Range));
        assert_eq!(go_parse_uint("0x8000000000000000"), Ok(1 << 63));
        assert_eq!(go_parse_uint("+1"), Err(GoError::Syntax));
        assert_eq!(go_parse_int("0b"), Err(GoError::Syntax));
        assert_eq!(go_parse_int("08"), Err(GoError::Syntax));
        assert_eq!(go_parse_int("0o"), Err(GoError::Syntax));
        assert_eq!(go_parse_int("-"), Err(GoError::Syntax));
    }

    #[test]
    fn timestamps_follow_go_yamls_layouts() {
        for ok in [
            "2001-12-14",
            "2001-1-2",
            "2001-12-14T21:59:43.10-05:00",
            "2001-12-14t21:59:43Z",
            "2001-12-14 21:59:43.1",
            "2000-02-29",
        ] {
            assert!(is_timestamp(ok), "{ok}");
        }
        for not in [
            "2001-12-14 21:59:43.10 -5",
            "2001-13-01",
            "2001-02-29",
            "200-12-14",
            "2001-12-14T25:00:00Z",
            "2001-12-14x",
            "2001-12-14T1:2:3",
        ] {
            assert!(!is_timestamp(not), "{not}");
        }
    }
}
