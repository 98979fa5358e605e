//! Kubernetes resource quantities (`500m`, `1Gi`, `1e3`), compared by value.
//!
//! The API server rewrites quantities into a canonical form, so textual comparison is wrong:
//! `1` = `1000m`, `0.5` = `500m`, `1Gi` = `1024Mi`, `1e3` = `1k`. [`canonical`] gives one text
//! per value, so that two quantities are equal exactly when their canonical texts are.

/// A quantity's exact value in nano-units (10^-9), rounded up as Kubernetes does below that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    nanos: i128,
}

const BINARY: [(&str, u32); 6] = [("Ki", 10), ("Mi", 20), ("Gi", 30), ("Ti", 40), ("Pi", 50), ("Ei", 60)];
const DECIMAL: [(&str, i32); 10] =
    [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];

impl Quantity {
    /// Parses a quantity; `None` when the text is not one.
    ///
    /// ```
    /// use drift_engine::quantity::Quantity;
    /// assert_eq!(Quantity::parse("1"), Quantity::parse("1000m"));
    /// assert_eq!(Quantity::parse("1Gi"), Quantity::parse("1024Mi"));
    /// assert_eq!(Quantity::parse("1e3"), Quantity::parse("1k"));
    /// assert_eq!(Quantity::parse("0.5"), Quantity::parse("500m"));
    /// assert!(Quantity::parse("1.10.2").is_none());
    /// ```
    pub fn parse(text: &str) -> Option<Quantity> {
        let s = text.trim();
        if s.is_empty() || s.len() > 64 {
            return None;
        }
        let (negative, s) = match s.as_bytes()[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let num_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (number, suffix) = s.split_at(num_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        // Any 38 digits fit an i128; the value's own bound (2^100 nano-units) is checked below.
        // (A bound of 30 digits refused canonical texts of 31 digits of nano-units.)
        if digits.len() > 38 {
            return None;
        }
        let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
        // value = mantissa * 10^(-frac_len) * multiplier
        let mut exp10: i32 = -(frac_part.len() as i32);
        let mut binary_shift: u32 = 0;
        if let Some((_, shift)) = BINARY.iter().find(|(sfx, _)| *sfx == suffix) {
            binary_shift = *shift;
        } else if let Some((_, e)) = DECIMAL.iter().find(|(sfx, _)| *sfx == suffix) {
            exp10 += e;
        } else if let Some(e) = suffix.strip_prefix(['e', 'E']) {
            let e: i32 = e.parse().ok()?;
            if !(-30..=30).contains(&e) {
                return None;
            }
            exp10 += e;
        } else {
            return None;
        }
        // Into nano-units, rounding up like the API server.
        let scale = exp10 + 9;
        let mut nanos = if scale >= 0 {
            mantissa.checked_mul(10i128.checked_pow(scale as u32)?)?
        } else {
            let div = 10i128.checked_pow((-scale) as u32)?;
            let q = mantissa / div;
            if mantissa % div != 0 { q + 1 } else { q }
        };
        nanos = nanos.checked_mul(1i128.checked_shl(binary_shift)?)?;
        if nanos.unsigned_abs() > (1u128 << 100) {
            return None;
        }
        Some(Quantity { nanos: if negative { -nanos } else { nanos } })
    }

    /// One text per value: a binary suffix when the value is a whole multiple of 1024 (`1Gi`,
    /// `1000Mi`), else the largest decimal suffix that keeps it whole (`500m`, `2`, `1k`).
    ///
    /// ```
    /// use drift_engine::quantity::canonical;
    /// assert_eq!(canonical("1000m").as_deref(), Some("1"));
    /// assert_eq!(canonical("1024Mi").as_deref(), Some("1Gi"));
    /// assert_eq!(canonical("0.5").as_deref(), Some("500m"));
    /// assert_eq!(canonical("1e3").as_deref(), Some("1k"));
    /// assert_eq!(canonical("1073741824").as_deref(), Some("1Gi"));
    /// assert_eq!(canonical("128974848").as_deref(), Some("123Mi"));
    /// ```
    pub fn to_canonical(self) -> String {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let n = self.nanos.unsigned_abs();
        if n == 0 {
            return "0".to_owned();
        }
        const NANO: u128 = 1_000_000_000;
        if n.is_multiple_of(NANO) {
            let whole = n / NANO;
            if let Some((sfx, shift)) = BINARY.iter().rev().find(|(_, shift)| whole.is_multiple_of(1u128 << shift)) {
                return format!("{sign}{}{sfx}", whole >> shift);
            }
        }
        for (sfx, e) in DECIMAL.iter().rev() {
            let unit = 10u128.pow((e + 9) as u32);
            if n.is_multiple_of(unit) {
                return format!("{sign}{}{sfx}", n / unit);
            }
        }
        format!("{sign}{n}n")
    }
}

/// The canonical text of a quantity, `None` when the text is not one.
pub fn canonical(text: &str) -> Option<String> {
    Quantity::parse(text).map(Quantity::to_canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn api_server_rewrites_are_equal() {
        for (a, b) in
            [("1", "1000m"), ("0.5", "500m"), ("1Gi", "1024Mi"), ("1e3", "1k"), ("100m", "0.1"), ("2E", "2e18")]
        {
            assert_eq!(canonical(a), canonical(b), "{a} vs {b}");
        }
        for (a, b) in [("1", "1001m"), ("1G", "1Gi"), ("1M", "1Mi")] {
            assert_ne!(canonical(a), canonical(b), "{a} vs {b}");
        }
        assert_eq!(canonical("0.0000000001").as_deref(), Some("1n"), "rounded up to a nano");
        assert_eq!(canonical("abc"), None);
        assert_eq!(canonical("1.5.5"), None);
        assert_eq!(canonical("12Qi"), None);
    }

    #[test]
    fn a_canonical_text_of_31_digits_of_nano_units_parses_back() {
        // Found by the `quantity` fuzz target: the value is not a whole number of units and has
        // 31 digits in nano-units, which the parser refused while its bound is 2^100 nano-units.
        let q = Quantity::parse("1111111111111.01011111110Gi").unwrap();
        let c = q.to_canonical();
        assert_eq!(c, "1193046471111002663187841548288n");
        assert_eq!(Quantity::parse(&c), Some(q));
        assert_eq!(canonical(&c), Some(c.clone()));
        assert_eq!(canonical("1.0000000000000000000000000000000"), Some("1".to_owned()), "trailing zeros");
        assert_eq!(Quantity::parse("1267650600228229401496703205377n"), None, "over 2^100 nano-units");
    }

    proptest! {
        #[test]
        fn canonical_text_parses_back_to_the_same_value(m in 0u64..10_000_000, sfx in prop::sample::select(vec!["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "n", "u"])) {
            let text = format!("{m}{sfx}");
            let q = Quantity::parse(&text).unwrap();
            let c = q.to_canonical();
            prop_assert_eq!(Quantity::parse(&c), Some(q));
            prop_assert_eq!(canonical(&c), Some(c.clone()));
        }
    }
}
