//! Human quantities for the command line: durations (`500ms`, `1s`, `1.5s`,
//! `2m`, `1h`) and sizes (`64K`, `100M`, `1G`).

use std::time::Duration;

/// Parses a duration; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (try 500ms, 1s, 2m, 1h)"))?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {s:?} (use ms, s, m or h)"
            ))
        }
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("{s:?}: a duration must be positive"));
    }
    if secs > MAX_SECS {
        return Err(format!("{s:?}: too long (at most 100 years)"));
    }
    let d = Duration::from_secs_f64(secs);
    if d.is_zero() {
        return Err(format!("{s:?}: shorter than a nanosecond"));
    }
    Ok(d)
}

/// Longer than anything a person means; Duration and the clocks' i64/u64
/// nanoseconds overflow not far beyond (584 years).
const MAX_SECS: f64 = 100.0 * 365.25 * 86400.0;

/// The shortest and longest interval: below 10 ms the collection itself
/// (one pass over every socket) is most of the interval, and an interval
/// longer than an hour averages away anything worth seeing.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// Parses `--interval`: a duration from 10ms to 1h.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&d) {
        return Err(format!("{s:?}: an interval must be from 10ms to 1h"));
    }
    Ok(d)
}

/// Parses a byte size; suffixes K, M, G (powers of 1024), a bare number is bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (try 64K, 100M, 1G)"))?;
    let mult: u64 = match unit.trim().to_ascii_uppercase().trim_end_matches('B') {
        "" => 1,
        "K" | "KI" => 1 << 10,
        "M" | "MI" => 1 << 20,
        "G" | "GI" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {s:?} (use K, M or G)"
            ))
        }
    };
    match value.checked_mul(mult) {
        Some(0) => Err(format!("{s:?}: a size must be above 0")),
        Some(v) => Ok(v),
        None => Err(format!("{s:?}: too large")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_nonsense() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 days").is_err());
    }

    #[test]
    fn parses_sizes_and_rejects_nonsense() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("100M").unwrap(), 100 << 20);
        assert_eq!(parse_size("1GB").unwrap(), 1 << 30);
        assert!(parse_size("0").is_err());
        assert!(parse_size("big").is_err());
        assert!(parse_size("1T").is_err());
        assert!(parse_size("-5M").is_err());
    }

    #[test]
    fn absurd_durations_and_intervals_are_errors_not_panics() {
        assert!(parse_duration("18446744073709551615s")
            .unwrap_err()
            .contains("too long"));
        assert!(parse_duration("5000000000000000h")
            .unwrap_err()
            .contains("too long"));
        assert!(parse_duration("0.0000000001")
            .unwrap_err()
            .contains("nanosecond"));
        assert_eq!(
            parse_duration("876000h"),
            Ok(Duration::from_secs(876_000 * 3600))
        );
        assert!(parse_interval("0.0000000001").is_err());
        assert!(parse_interval("5ms")
            .unwrap_err()
            .contains("from 10ms to 1h"));
        assert!(parse_interval("2h")
            .unwrap_err()
            .contains("from 10ms to 1h"));
        assert_eq!(parse_interval("10ms"), Ok(MIN_INTERVAL));
        assert_eq!(parse_interval("1h"), Ok(MAX_INTERVAL));
    }
}
