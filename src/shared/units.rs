//! Quantities as text, and back: one printed form per quantity for every
//! output (the plain tables, the full-screen view, the text and HTML
//! reports), and the parsers for what the command line takes.
//!
//! The printed form:
//!
//! - **Three significant digits, trailing zeros kept, no space before the
//!   unit**: `950pps`, `16.4kpps`, `1.20Mpps`, `196Mb/s`, `18.0kB`. The
//!   number is therefore at most four characters (`16.4`, `1.20`, `196`), so
//!   table columns and the view's cells keep their width, and a reader never
//!   sees precision the measurement does not have (an interval's rate moves
//!   in its third digit). The value is rounded before the prefix is chosen,
//!   so 999.7 kb/s prints as `1.00Mb/s`, never `1000kb/s`.
//! - **SI prefixes, powers of 1000**, for bytes as for bits and packets:
//!   traffic is counted and compared with link and allowance rates, which
//!   are decimal. `b` is bits, `B` bytes.
//! - **Durations** in `us`, `ms` and `s`, then `min` from 120 s and `h`
//!   from 120 min (`90.0s` reads better than `1.50min`). `us` rather than
//!   `µs` keeps terminal text ASCII and is what [`parse_duration`] takes:
//!   every printed duration parses back (to within the rounding).
//! - **Percentages** keep three significant digits however small: 0.0038%
//!   retransmits prints `0.00380%`, not `0%`.
//! - Zero is `0` with the unit (`0B`, `0%`), and bytes below 1 kB are the
//!   whole count (`7B`). A value that is unknown (None, NaN or infinite) is
//!   [`UNKNOWN`]. Beyond the largest unit the number is printed whole
//!   (`1234%`).
//!
//! Sizes on the command line ([`parse_size`]) are binary (`64K` = 65536):
//! they size buffers and files, where powers of 1024 are what people give.
//! The printed [`bytes`] is decimal and does not parse back; nothing asks a
//! user to copy a traffic figure into a size option.

use std::time::Duration;

/// What stands for a value that is unknown or could not be computed.
pub(crate) const UNKNOWN: &str = "-";

/// A byte count: `7B`, `512B`, `18.0kB`, `3.20MB`, `1.25GB`.
pub(crate) fn bytes(n: u64) -> String {
    // Below a kilobyte the count is exact and whole; `7.00B` would claim
    // a precision of hundredths of a byte.
    if n < 1000 {
        return format!("{n}B");
    }
    scaled(n as f64, BYTES)
}

/// Bits per second: `950b/s`, `196Mb/s`, `16.0Gb/s`.
pub(crate) fn rate_bits(bps: f64) -> String {
    scaled(bps, BITS)
}

/// Packets per second: `950pps`, `16.4kpps`, `1.20Mpps`.
pub(crate) fn rate_pps(pps: f64) -> String {
    scaled(pps, PACKETS)
}

/// A percentage: `98.2%`, `2.50%`, `0.00380%`, `0%`.
pub(crate) fn pct(p: f64) -> String {
    scaled(p, PERCENT)
}

/// [`pct`], or [`UNKNOWN`] when it could not be computed (no packets, no
/// allowance counters).
pub(crate) fn opt_pct(p: Option<f64>) -> String {
    p.map_or_else(|| UNKNOWN.to_string(), pct)
}

/// A duration in seconds: `250us`, `1.10ms`, `42.0s`, `2.50min`, `1.50h`.
pub(crate) fn secs(s: f64) -> String {
    if !s.is_finite() {
        return UNKNOWN.to_string();
    }
    if s == 0.0 {
        return "0s".to_string();
    }
    // The unit is chosen on the value rounded in the unit below, as
    // `scaled` chooses prefixes: 119.8 s is `2.00min`, not `120s`.
    let a = s.abs();
    if round3(a / 60.0) >= 120.0 {
        scaled(s / 3600.0, HOURS)
    } else if round3(a) >= 120.0 {
        scaled(s / 60.0, MINUTES)
    } else {
        scaled(s, SECONDS)
    }
}

/// `value` with at most `digits` significant digits and no trailing zeros
/// after the point (`0.000123`, `12.3`, `26900` for 26,949.8 at 3): a
/// printed figure claims no more precision than it has.
pub(crate) fn significant(value: f64, digits: usize) -> String {
    if value == 0.0 {
        return "0".to_string();
    }
    if !value.is_finite() {
        return UNKNOWN.to_string();
    }
    let magnitude = value.abs().log10().floor() as i64;
    let digits = digits.max(1) as i64;
    if magnitude >= digits {
        let step = 10f64.powi((magnitude - digits + 1) as i32);
        return format!("{:.0}", (value / step).round() * step);
    }
    let decimals = (digits - 1 - magnitude).clamp(0, 12) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// srtt against min_rtt, as `12.3x`: three significant digits at most
/// (on a path whose base RTT is microseconds the ratio runs to thousands,
/// and its digits past the third say nothing).
pub(crate) fn ratio(x: f64) -> String {
    format!("{}x", significant(x, 3))
}

/// The queuing delay a flow's RTT carries over its base (srtt over its
/// peer's base RTT, `analysis::attribution::BaseRtts::added_delay_us`) as
/// `+3.2ms`: what a ratio means in time, the same at any base RTT.
/// Unknown when not measured.
pub(crate) fn added_delay(added_us: Option<u32>) -> String {
    match added_us {
        Some(us) => format!("+{}", secs(us as f64 / 1e6)),
        None => UNKNOWN.to_string(),
    }
}

/// A flow's retransmits as the views show them: `12`, `12+3f` with 3
/// attempts that failed in the host, `12/9s` when 9 of the 12 are known
/// spurious (nothing was lost: the receiver reported them as duplicates with
/// a D-SACK, or the kernel undid their loss episode).
pub(crate) fn retransmits(total: u64, spurious: u64, failed: u64) -> String {
    let mut s = total.to_string();
    if spurious > 0 {
        s.push_str(&format!("/{spurious}s"));
    }
    if failed > 0 {
        s.push_str(&format!("+{failed}f"));
    }
    s
}

/// After a flow's [`retransmits`]: `,2p` when 2 of them were tail loss
/// probes (sent on a timer, not on evidence of loss).
pub(crate) fn probes_note(probes: u64) -> String {
    if probes > 0 {
        format!(",{probes}p")
    } else {
        String::new()
    }
}

/// After the retransmit rate (which leaves them out): the retransmits the
/// receivers reported as duplicates, when there were any.
pub(crate) fn spurious_note(spurious: u64) -> String {
    if spurious > 0 {
        format!(" (+{spurious} spurious)")
    } else {
        String::new()
    }
}

/// A duration the kernel gives in microseconds (srtt, min_rtt), where 0
/// means not measured yet: [`UNKNOWN`] then, else as [`secs`] (`250us`,
/// `1.10ms`, `25.0ms`).
pub(crate) fn micros(us: u32) -> String {
    if us == 0 {
        UNKNOWN.to_string()
    } else {
        secs(us as f64 / 1e6)
    }
}

/// Units by the power of ten where each starts, smallest first.
type Units = &'static [(i32, &'static str)];
const BYTES: Units = &[
    (0, "B"),
    (3, "kB"),
    (6, "MB"),
    (9, "GB"),
    (12, "TB"),
    (15, "PB"),
    (18, "EB"),
];
const BITS: Units = &[
    (0, "b/s"),
    (3, "kb/s"),
    (6, "Mb/s"),
    (9, "Gb/s"),
    (12, "Tb/s"),
];
const PACKETS: Units = &[(0, "pps"), (3, "kpps"), (6, "Mpps"), (9, "Gpps")];
const PERCENT: Units = &[(0, "%")];
const SECONDS: Units = &[(-6, "us"), (-3, "ms"), (0, "s")];
const MINUTES: Units = &[(0, "min")];
const HOURS: Units = &[(0, "h")];

/// Past this many decimals a value is printed as 0 of its smallest unit
/// (1e-12 %): only a mistake produces one, and the text stays bounded.
const MAX_DECIMALS: i32 = 12;

/// `value` in the largest of `units` it reaches, with three significant
/// digits.
fn scaled(value: f64, units: Units) -> String {
    if !value.is_finite() {
        return UNKNOWN.to_string();
    }
    let (smallest, unit0) = units[0];
    if value == 0.0 {
        return format!("0{unit0}");
    }
    let sign = if value < 0.0 { "-" } else { "" };
    let x = value.abs();
    // The exponent of the value as rounded to three digits, read from
    // Rust's own rounding so that the carry (9.996 -> 10.0) is accounted
    // for exactly as the digits printed below will have it.
    let exp = exponent3(x);
    let &(power, unit) = units
        .iter()
        .rev()
        .find(|(p, _)| exp >= *p)
        .unwrap_or(&(smallest, unit0));
    let decimals = (2 - (exp - power)).clamp(0, MAX_DECIMALS) as usize;
    let mantissa = x / 10f64.powi(power);
    format!("{sign}{mantissa:.decimals$}{unit}")
}

/// The decimal exponent of `x` (> 0) once rounded to three significant
/// digits: 999.7 -> 3, 999.4 -> 2.
fn exponent3(x: f64) -> i32 {
    let sci = format!("{x:.2e}");
    sci.rsplit_once('e')
        .and_then(|(_, e)| e.parse().ok())
        .unwrap_or(0)
}

/// `x` rounded to three significant digits.
fn round3(x: f64) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    format!("{x:.2e}").parse().unwrap_or(x)
}

/// Parses a duration; a bare number is seconds. Takes every form [`secs`]
/// prints, and `m` for minutes.
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
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(10);
pub(crate) const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// Parses `--interval`: a duration from 10ms to 1h.
pub(crate) fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&d) {
        return Err(format!("{s:?}: an interval must be from 10ms to 1h"));
    }
    Ok(d)
}

/// Parses a byte size; suffixes K, M, G (powers of 1024), a bare number is bytes.
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
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
    fn ratios_have_at_most_three_significant_digits() {
        assert_eq!(significant(26949.8, 3), "26900");
        assert_eq!(ratio(12527.97), "12500x");
        assert_eq!(ratio(1362.0), "1360x");
        assert_eq!(ratio(1.2345), "1.23x");
        assert_eq!(ratio(10.96), "11x");
        assert_eq!(ratio(123.4), "123x");
        assert_eq!(significant(0.000123456, 3), "0.000123");
        assert_eq!(added_delay(Some(3200)), "+3.20ms");
        assert_eq!(added_delay(None), UNKNOWN);
    }

    #[test]
    fn bytes_at_each_boundary() {
        assert_eq!(bytes(0), "0B");
        assert_eq!(bytes(1), "1B");
        assert_eq!(bytes(512), "512B");
        assert_eq!(bytes(999), "999B");
        assert_eq!(bytes(1000), "1.00kB");
        assert_eq!(bytes(1006), "1.01kB");
        assert_eq!(bytes(9_994), "9.99kB");
        assert_eq!(bytes(9_995), "10.0kB");
        assert_eq!(bytes(18_000), "18.0kB");
        assert_eq!(bytes(999_499), "999kB");
        // Rounds up into the next prefix rather than printing 1000kB.
        assert_eq!(bytes(999_500), "1.00MB");
        assert_eq!(bytes(3_200_000), "3.20MB");
        assert_eq!(bytes(1_250_000_000), "1.25GB");
        assert_eq!(bytes(u64::MAX), "18.4EB");
    }

    #[test]
    fn bit_rates_at_each_boundary() {
        assert_eq!(rate_bits(0.0), "0b/s");
        assert_eq!(rate_bits(0.5), "0.500b/s");
        assert_eq!(rate_bits(999.0), "999b/s");
        assert_eq!(rate_bits(999.6), "1.00kb/s");
        assert_eq!(rate_bits(1_500.0), "1.50kb/s");
        assert_eq!(rate_bits(196e6), "196Mb/s");
        assert_eq!(rate_bits(193.84e6), "194Mb/s");
        assert_eq!(rate_bits(999.7e6), "1.00Gb/s");
        assert_eq!(rate_bits(16e9), "16.0Gb/s");
        assert_eq!(rate_bits(4.8e9), "4.80Gb/s");
        assert_eq!(rate_bits(1e12), "1.00Tb/s");
        // Past the largest prefix the number grows instead.
        assert_eq!(rate_bits(2.5e15), "2500Tb/s");
        assert_eq!(rate_bits(f64::NAN), UNKNOWN);
        assert_eq!(rate_bits(f64::INFINITY), UNKNOWN);
        assert_eq!(rate_bits(f64::NEG_INFINITY), UNKNOWN);
        assert_eq!(rate_bits(-2e6), "-2.00Mb/s");
    }

    #[test]
    fn packet_rates_at_each_boundary() {
        assert_eq!(rate_pps(0.0), "0pps");
        assert_eq!(rate_pps(0.1), "0.100pps");
        assert_eq!(rate_pps(950.0), "950pps");
        assert_eq!(rate_pps(999.4), "999pps");
        assert_eq!(rate_pps(999.5), "1.00kpps");
        assert_eq!(rate_pps(16_000.0), "16.0kpps");
        assert_eq!(rate_pps(16_400.0), "16.4kpps");
        assert_eq!(rate_pps(1_200_000.0), "1.20Mpps");
        assert_eq!(rate_pps(f64::NAN), UNKNOWN);
        assert_eq!(rate_pps(2.5e12), "2500Gpps");
    }

    #[test]
    fn percentages_keep_small_values() {
        assert_eq!(pct(0.0), "0%");
        assert_eq!(pct(0.0038), "0.00380%");
        assert_eq!(pct(0.01234), "0.0123%");
        assert_eq!(pct(0.0999), "0.0999%");
        assert_eq!(pct(0.09996), "0.100%");
        assert_eq!(pct(2.5), "2.50%");
        assert_eq!(pct(9.996), "10.0%");
        assert_eq!(pct(98.25), "98.2%");
        assert_eq!(pct(99.96), "100%");
        assert_eq!(pct(100.0), "100%");
        assert_eq!(pct(1234.0), "1234%");
        assert_eq!(pct(1e-13), "0.000000000000%");
        assert_eq!(pct(f64::NAN), UNKNOWN);
        assert_eq!(pct(f64::INFINITY), UNKNOWN);
        assert_eq!(opt_pct(None), UNKNOWN);
        assert_eq!(opt_pct(Some(12.345)), "12.3%");
    }

    #[test]
    fn durations_at_each_boundary() {
        assert_eq!(secs(0.0), "0s");
        assert_eq!(secs(5e-7), "0.500us");
        assert_eq!(secs(250e-6), "250us");
        assert_eq!(secs(999e-6), "999us");
        assert_eq!(secs(999.6e-6), "1.00ms");
        assert_eq!(secs(1.1e-3), "1.10ms");
        assert_eq!(secs(0.9996), "1.00s");
        assert_eq!(secs(1.0), "1.00s");
        assert_eq!(secs(42.0), "42.0s");
        assert_eq!(secs(90.0), "90.0s");
        assert_eq!(secs(119.4), "119s");
        assert_eq!(secs(119.8), "2.00min");
        assert_eq!(secs(150.0), "2.50min");
        assert_eq!(secs(299.0), "4.98min");
        assert_eq!(secs(7140.0), "119min");
        assert_eq!(secs(7190.0), "2.00h");
        assert_eq!(secs(7200.0), "2.00h");
        assert_eq!(secs(876_000.0 * 3600.0), "876000h");
        assert_eq!(secs(f64::NAN), UNKNOWN);
        assert_eq!(secs(f64::INFINITY), UNKNOWN);
    }

    #[test]
    fn micros_zero_is_unknown() {
        assert_eq!(micros(0), UNKNOWN);
        assert_eq!(micros(1), "1.00us");
        assert_eq!(micros(250), "250us");
        assert_eq!(micros(999), "999us");
        assert_eq!(micros(1_000), "1.00ms");
        assert_eq!(micros(1_100), "1.10ms");
        assert_eq!(micros(9_999), "10.0ms");
        assert_eq!(micros(25_000), "25.0ms");
        assert_eq!(micros(250_000), "250ms");
        assert_eq!(micros(1_500_000), "1.50s");
        assert_eq!(micros(u32::MAX), "71.6min");
    }

    #[test]
    fn printed_durations_parse_back() {
        let mut s = 1e-6;
        while s < 1e7 {
            for x in [s, s * 1.234, s * 2.5, s * 9.996] {
                let text = secs(x);
                let back = parse_duration(&text)
                    .unwrap_or_else(|e| panic!("{x} s printed as {text}: {e}"))
                    .as_secs_f64();
                // Three digits: within half a unit of the third.
                assert!((back - x).abs() <= x * 0.005, "{x} -> {text} -> {back}");
            }
            s *= 10.0;
        }
        let rtt = parse_duration(&micros(1_100)).unwrap().as_secs_f64();
        assert!((rtt - 1.1e-3).abs() < 1e-9, "{rtt}");
        assert_eq!(parse_interval(&secs(1.0)), Ok(Duration::from_secs(1)));
    }

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
        // Whole byte counts are the one printed size that parses back.
        assert_eq!(parse_size(&bytes(512)), Ok(512));
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
