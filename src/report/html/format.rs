//! Numbers as a reader wants them on the page: SI prefixes for rates and
//! sizes, few significant digits, a dash for unknown values, UTC dates.

/// `value` with an SI prefix and `unit`: `1.25 Gbit/s`, `640 kB`.
pub fn si(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return "–".to_string();
    }
    const PREFIXES: [(f64, &str); 5] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")];
    let magnitude = value.abs();
    let (scale, prefix) = PREFIXES
        .iter()
        .copied()
        .find(|(scale, _)| magnitude >= *scale)
        .unwrap_or((1.0, ""));
    format!("{} {prefix}{unit}", significant(value / scale, 3))
}

pub fn bps(value: f64) -> String {
    si(value, "bit/s")
}

pub fn bytes(value: u64) -> String {
    si(value as f64, "B")
}

pub fn opt_bps(value: Option<f64>) -> String {
    value.map(bps).unwrap_or_else(|| "–".to_string())
}

/// A count with thousands separated: `90,000,000`.
pub fn count(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn pct(value: f64) -> String {
    if !value.is_finite() {
        return "–".to_string();
    }
    format!("{} %", significant(value, 3))
}

pub fn opt_pct(value: Option<f64>) -> String {
    value.map(pct).unwrap_or_else(|| "–".to_string())
}

pub fn ratio(value: f64) -> String {
    if !value.is_finite() {
        return "–".to_string();
    }
    format!("{}×", significant(value, 3))
}

pub fn opt_ratio(value: Option<f64>) -> String {
    value.map(ratio).unwrap_or_else(|| "–".to_string())
}

pub fn secs(value: f64) -> String {
    if !value.is_finite() {
        return "–".to_string();
    }
    format!("{value:.1} s")
}

/// `value` with about `digits` significant digits and no trailing zeros
/// (`0.000123`, `12.3`, `1230`).
pub fn significant(value: f64, digits: usize) -> String {
    if value == 0.0 || !value.is_finite() {
        return if value == 0.0 {
            "0".to_string()
        } else {
            "–".to_string()
        };
    }
    let magnitude = value.abs().log10().floor() as i64;
    let decimals = (digits as i64 - 1 - magnitude).clamp(0, 12) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC`.
pub fn utc(unix_ms: u64) -> String {
    let t = crate::shared::clock::utc_fields(unix_ms);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03} UTC",
        t.year, t.month, t.day, t.hour, t.minute, t.second, t.milli
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_prefixes() {
        assert_eq!(bps(1.25e9), "1.25 Gbit/s");
        assert_eq!(bps(999.0), "999 bit/s");
        assert_eq!(bps(0.0), "0 bit/s");
        assert_eq!(bytes(640_000), "640 kB");
        assert_eq!(pct(0.01234), "0.0123 %");
        assert_eq!(ratio(1.5), "1.5×");
        assert_eq!(opt_pct(None), "–");
        assert_eq!(bps(f64::NAN), "–");
        assert_eq!(count(90_000_000), "90,000,000");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00.000 UTC");
        // 2024-02-29 12:34:56.789 UTC, a leap day.
        assert_eq!(utc(1_709_210_096_789), "2024-02-29 12:34:56.789 UTC");
        assert_eq!(utc(1_735_689_599_000), "2024-12-31 23:59:59.000 UTC");
    }
}
