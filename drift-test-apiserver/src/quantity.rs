//! Canonical form of Kubernetes resource quantities.
//!
//! The API server stores every `resource.Quantity` in its canonical form: the number is kept
//! exactly (rounded up to a precision of 10^-9), and printed in the format it was given in
//! (binary SI such as `Ki`, decimal SI such as `m`/`k`, or a decimal exponent such as `e3`)
//! with the largest suffix for which the number stays an integer. Binary SI values that are
//! below 1024 or not integers are printed in decimal SI. So `1000m` becomes `1`, `0.5` becomes
//! `500m`, `1024Mi` becomes `1Gi`, `1.5Gi` becomes `1536Mi`.

use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    BinarySi,
    DecimalSi,
    DecimalExponent,
}

/// A parsed quantity: `mantissa * 10^exp10 * 1024^exp1024`, before normalisation.
#[derive(Debug, Clone, Copy)]
struct Parsed {
    negative: bool,
    mantissa: i128,
    exp10: i32,
    exp1024: u32,
    format: Format,
}

/// Error for text that is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}")]
pub struct QuantityError(pub String);

fn parse(text: &str) -> Result<Parsed, QuantityError> {
    let err = || QuantityError(text.to_owned());
    let s = text.trim();
    if s.is_empty() {
        return Err(err());
    }
    let (negative, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(num_end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return Err(err());
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    let mut mantissa: i128 = 0;
    for c in int_part.chars().chain(frac_part.chars()) {
        let d = i128::from(c.to_digit(10).ok_or_else(err)?);
        mantissa = mantissa.checked_mul(10).and_then(|m| m.checked_add(d)).ok_or_else(err)?;
    }
    let mut exp10 = -i32::try_from(frac_part.len()).map_err(|_| err())?;
    let (format, extra10, exp1024) = match suffix {
        "" => (Format::DecimalSi, 0, 0),
        "n" => (Format::DecimalSi, -9, 0),
        "u" => (Format::DecimalSi, -6, 0),
        "m" => (Format::DecimalSi, -3, 0),
        "k" => (Format::DecimalSi, 3, 0),
        "M" => (Format::DecimalSi, 6, 0),
        "G" => (Format::DecimalSi, 9, 0),
        "T" => (Format::DecimalSi, 12, 0),
        "P" => (Format::DecimalSi, 15, 0),
        "E" => (Format::DecimalSi, 18, 0),
        "Ki" => (Format::BinarySi, 0, 1),
        "Mi" => (Format::BinarySi, 0, 2),
        "Gi" => (Format::BinarySi, 0, 3),
        "Ti" => (Format::BinarySi, 0, 4),
        "Pi" => (Format::BinarySi, 0, 5),
        "Ei" => (Format::BinarySi, 0, 6),
        other if other.starts_with(['e', 'E']) => {
            let e: i32 = other[1..].parse().map_err(|_| err())?;
            (Format::DecimalExponent, e, 0)
        }
        _ => return Err(err()),
    };
    exp10 += extra10;
    Ok(Parsed { negative, mantissa, exp10, exp1024, format })
}

fn pow10(e: u32) -> Option<i128> {
    10i128.checked_pow(e)
}

/// Canonicalise a quantity given as text.
pub fn canonicalize(text: &str) -> Result<String, QuantityError> {
    let p = parse(text)?;
    let err = || QuantityError(text.to_owned());
    // value = mantissa * 10^exp10, with the binary factor folded into the mantissa.
    let mut mantissa = p.mantissa;
    for _ in 0..p.exp1024 {
        mantissa = mantissa.checked_mul(1024).ok_or_else(err)?;
    }
    let mut exp10 = p.exp10;
    if mantissa == 0 {
        return Ok("0".to_owned());
    }
    // Strip trailing zeros so the exponent is as large as possible.
    while mantissa % 10 == 0 {
        mantissa /= 10;
        exp10 += 1;
    }
    // Round up to nano precision, as the API server does.
    if exp10 < -9 {
        let shift = u32::try_from(-9 - exp10).map_err(|_| err())?;
        let div = pow10(shift).ok_or_else(err)?;
        let rounded = (mantissa + div - 1) / div;
        mantissa = rounded;
        exp10 = -9;
        while mantissa % 10 == 0 {
            mantissa /= 10;
            exp10 += 1;
        }
    }
    let sign = if p.negative { "-" } else { "" };
    let mut format = p.format;
    if format == Format::BinarySi {
        // Integer value needed; small or fractional values fall back to decimal SI.
        if exp10 < 0 {
            format = Format::DecimalSi;
        } else {
            let value = mantissa
                .checked_mul(pow10(u32::try_from(exp10).map_err(|_| err())?).ok_or_else(err)?)
                .ok_or_else(err)?;
            if value < 1024 {
                format = Format::DecimalSi;
            } else {
                let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
                let mut v = value;
                let mut i = 0;
                while i < 6 && v % 1024 == 0 {
                    v /= 1024;
                    i += 1;
                }
                return Ok(format!("{sign}{v}{}", suffixes[i]));
            }
        }
    }
    // Decimal: exponent the largest multiple of three not above exp10, within n..E.
    let mut e = exp10.div_euclid(3) * 3;
    e = e.clamp(-9, 18);
    let shift = u32::try_from(exp10 - e).map_err(|_| err())?;
    let m = mantissa.checked_mul(pow10(shift).ok_or_else(err)?).ok_or_else(err)?;
    let suffix = match format {
        Format::DecimalExponent => {
            if e == 0 {
                String::new()
            } else {
                format!("e{e}")
            }
        }
        _ => match e {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            _ => "E",
        }
        .to_owned(),
    };
    Ok(format!("{sign}{m}{suffix}"))
}

/// The value of a quantity (a string or a number) in units of 10^-9, rounded up as the API
/// server rounds; `None` for what is not a quantity or does not fit.
pub fn nanos(v: &Value) -> Option<i128> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let p = parse(&text).ok()?;
    let mut m = p.mantissa;
    for _ in 0..p.exp1024 {
        m = m.checked_mul(1024)?;
    }
    let e = p.exp10 + 9;
    let n = if e >= 0 {
        m.checked_mul(pow10(u32::try_from(e).ok()?)?)?
    } else {
        let div = pow10(u32::try_from(-e).ok()?)?;
        (m + div - 1) / div
    };
    Some(if p.negative { -n } else { n })
}

/// Canonicalise a JSON value holding a quantity (a string or a number), in place.
/// Values that are not quantities are left as they are (validation is not this module's job).
pub fn canonicalize_value(v: &mut Value) {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return,
    };
    if let Ok(c) = canonicalize(&text) {
        *v = Value::String(c);
    }
}

/// Canonicalise every value of a map of quantities (such as `resources.limits`).
pub fn canonicalize_map(v: Option<&mut Value>) {
    if let Some(Value::Object(map)) = v {
        for q in map.values_mut() {
            canonicalize_value(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::canonicalize;

    #[test]
    fn documented_examples() {
        let cases = [
            ("1000m", "1"),
            ("1024Mi", "1Gi"),
            ("0.5", "500m"),
            ("1.5Gi", "1536Mi"),
            ("1500m", "1500m"),
            ("1000", "1k"),
            ("1.5", "1500m"),
            ("100m", "100m"),
            ("0.1", "100m"),
            ("128Mi", "128Mi"),
            ("512Ki", "512Ki"),
            ("1Ki", "1Ki"),
            ("1000Ki", "1000Ki"),
            ("0.5Gi", "512Mi"),
            ("0.5Ki", "512"),
            ("1M", "1M"),
            ("1000000", "1M"),
            ("1e3", "1e3"),
            ("1000e0", "1e3"),
            ("0", "0"),
            ("0m", "0"),
            ("2", "2"),
            ("1G", "1G"),
            ("1000M", "1G"),
            ("1n", "1n"),
            ("0.0000000001", "1n"),
            ("-1500m", "-1500m"),
            ("250m", "250m"),
            ("1.1", "1100m"),
            ("2Gi", "2Gi"),
            ("2048Mi", "2Gi"),
            ("1536Mi", "1536Mi"),
        ];
        for (input, want) in cases {
            assert_eq!(canonicalize(input).unwrap(), want, "input {input}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "abc", "1.2.3", "1Q", "m", "1e"] {
            assert!(canonicalize(bad).is_err(), "{bad} accepted");
        }
    }
}

/// Canonicalise, anywhere in a built-in object, the fields that are quantities: the maps under
/// `limits` and `requests` (container and PVC resources), `sizeLimit`, and the `value` and
/// `averageValue` of HPA metric targets. The server decodes an applied configuration into the
/// typed object before comparing it, so `1000m` in a configuration is `1` there too.
pub fn canonicalize_known_fields(v: &mut Value) {
    walk(v, None);
}

fn walk(v: &mut Value, key: Option<&str>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                match (key, k.as_str()) {
                    (Some("resources"), "limits" | "requests") => canonicalize_map(Some(child)),
                    (_, "sizeLimit") => canonicalize_value(child),
                    (Some("target"), "value" | "averageValue") => canonicalize_value(child),
                    _ => walk(child, Some(k)),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                walk(item, key);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod known_field_tests {
    use super::canonicalize_known_fields;
    use serde_json::json;

    #[test]
    fn canonicalises_resources_anywhere() {
        let mut v = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1000m", "memory": "1024Mi"}}}]}},
            "resources": {"requests": {"storage": "2048Mi"}}, "note": {"limits": "1000m"}}});
        canonicalize_known_fields(&mut v);
        assert_eq!(
            v,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}},
                "resources": {"requests": {"storage": "2Gi"}}, "note": {"limits": "1000m"}}})
        );
    }
}
