//! Numbers on the page: quantities (rates, sizes, percentages, durations)
//! in the one form every output uses (`shared::units`); here what only the
//! page needs: counts with separators, ratios, plain significant digits for
//! axis ticks and thresholds, an en dash for unknown values, UTC dates.

use crate::shared::units;

/// The page's mark for a value that is unknown: an en dash, where the
/// terminal outputs keep to ASCII.
const DASH: &str = "–";

pub(crate) fn opt_bps(value: Option<f64>) -> String {
    value.map_or_else(|| DASH.to_string(), units::rate_bits)
}

/// A count with thousands separated: `90,000,000`.
pub(crate) fn count(value: u64) -> String {
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

pub(crate) fn opt_pct(value: Option<f64>) -> String {
    value.map_or_else(|| DASH.to_string(), units::pct)
}

pub(crate) use crate::shared::units::significant;

pub(crate) fn ratio(value: f64) -> String {
    if !value.is_finite() {
        return DASH.to_string();
    }
    format!("{}×", units::significant(value, 3))
}

pub(crate) fn opt_ratio(value: Option<f64>) -> String {
    value.map(ratio).unwrap_or_else(|| DASH.to_string())
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC`.
pub(crate) fn utc(unix_ms: u64) -> String {
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
    fn page_forms() {
        assert_eq!(opt_bps(Some(1.25e9)), "1.25Gb/s");
        assert_eq!(opt_bps(None), "–");
        assert_eq!(opt_pct(Some(0.01234)), "0.0123%");
        assert_eq!(ratio(1.5), "1.5×");
        assert_eq!(opt_pct(None), "–");
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
