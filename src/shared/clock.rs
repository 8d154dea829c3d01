//! UTC wall-clock times without a date library: `--since`/`--until`
//! parsing and the report's printed times. Civil dates use the proleptic
//! Gregorian calendar (days counted from 1970-01-01).

const MS_PER_DAY: i64 = 86_400_000;

/// Days since 1970-01-01 of a civil date.
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Years start in March, so the leap day is the last day of the year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (i64::from(month) + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The civil date (year, month, day) of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// The wall clock now, in ms since the Unix epoch (0 if the clock is set
/// before 1970).
pub(crate) fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns() and of a
/// snapshot's `mono_ns`.
pub fn monotonic_ns() -> u64 {
    ns(libc::CLOCK_MONOTONIC)
}

/// Clock `clock` in ns (0 for a clock this kernel does not have).
pub fn ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer; an unknown clock fails and leaves it 0.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A UTC instant split into its fields (year, month, day, hour, minute,
/// second, millisecond): what every printed form below is made of.
pub(crate) struct UtcFields {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u64,
    pub minute: u64,
    pub second: u64,
    pub milli: u64,
}

pub(crate) fn utc_fields(unix_ms: u64) -> UtcFields {
    let ms = unix_ms as i64;
    let (year, month, day) = civil_from_days(ms.div_euclid(MS_PER_DAY));
    let in_day = ms.rem_euclid(MS_PER_DAY) as u64;
    let s = in_day / 1000;
    UtcFields {
        year,
        month,
        day,
        hour: s / 3600,
        minute: s / 60 % 60,
        second: s % 60,
        milli: in_day % 1000,
    }
}

/// `20261121T030405Z`: a UTC time for file names (sorts as it reads).
pub(crate) fn compact_utc(unix_ms: u64) -> String {
    let t = utc_fields(unix_ms);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// `2026-11-21 03:04:05 UTC` (ms dropped).
pub(crate) fn format_utc(unix_ms: u64) -> String {
    let t = utc_fields(unix_ms);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// `03:04:05` (UTC time of day).
pub(crate) fn format_time_of_day(unix_ms: u64) -> String {
    let s = (unix_ms as i64).rem_euclid(MS_PER_DAY) / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// `+HH:MM:SS` from seconds.
pub(crate) fn format_offset(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    format!("+{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// A `--since`/`--until` value before it is tied to a recording.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeSpec {
    /// Milliseconds from the recording's start (`90s`, `5m`).
    Offset(u64),
    /// A UTC instant, ms since the epoch (`2026-11-21T03:04:05Z`).
    Wall(u64),
    /// A UTC time of day on the recording's first day, ms (`03:04:05`).
    TimeOfDay(u64),
}

impl TimeSpec {
    /// Milliseconds since the epoch, for a recording that started at
    /// `start_unix_ms`.
    pub(crate) fn resolve(&self, start_unix_ms: u64) -> u64 {
        match *self {
            TimeSpec::Offset(ms) => start_unix_ms.saturating_add(ms),
            TimeSpec::Wall(ms) => ms,
            TimeSpec::TimeOfDay(ms) => start_unix_ms - start_unix_ms % MS_PER_DAY as u64 + ms,
        }
    }
}

const TIME_HELP: &str = "give an offset from the recording's start (90s, 5m, 1h) or a UTC \
time (2026-11-21T03:04:05Z, or 03:04:05 on the recording's first day)";

/// Parses `HH:MM:SS[.fff]` into ms of the day.
fn time_of_day(s: &str) -> Option<u64> {
    let (hms, frac) = match s.split_once('.') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let parts: Vec<&str> = hms.split(':').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.len() != 2) {
        return None;
    }
    let num = |p: &str| -> Option<u64> {
        p.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| p.parse().ok())
            .flatten()
    };
    let (h, m, sec) = (num(parts[0])?, num(parts[1])?, num(parts[2])?);
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    let ms = match frac {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            // Digits past the millisecond are dropped.
            let mut digits = f.to_string();
            digits.truncate(3);
            while digits.len() < 3 {
                digits.push('0');
            }
            digits.parse().ok()?
        }
        Some(_) => return None,
    };
    Some(((h * 60 + m) * 60 + sec) * 1000 + ms)
}

/// Parses `YYYY-MM-DD` into days since the epoch.
fn date(s: &str) -> Option<i64> {
    let parts: Vec<&str> = s.split('-').collect();
    if parts.len() != 3
        || parts[0].len() != 4
        || parts[1].len() != 2
        || parts[2].len() != 2
        || !parts.iter().all(|p| p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let y: i64 = parts[0].parse().ok()?;
    let m: u32 = parts[1].parse().ok()?;
    let d: u32 = parts[2].parse().ok()?;
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) || y < 1970 {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

/// Parses a `--since`/`--until` value; `what` names the option in errors.
pub(crate) fn parse_time(what: &str, s: &str) -> Result<TimeSpec, String> {
    let t = s.trim();
    let bad = || format!("{what} {s:?}: not a time: {TIME_HELP}");
    if t.is_empty() {
        return Err(bad());
    }
    // An instant: date, `T` (or a space), time, optional `Z`.
    if t.len() >= 10 && t.as_bytes().get(4) == Some(&b'-') {
        let body = t
            .strip_suffix('Z')
            .or_else(|| t.strip_suffix('z'))
            .unwrap_or(t);
        let (d, tod) = body
            .split_once(['T', 't', ' '])
            .ok_or_else(|| format!("{what} {s:?}: a date needs a time too: {TIME_HELP}"))?;
        if tod.contains(['+', '-']) {
            return Err(format!(
                "{what} {s:?}: only UTC times are understood (end with Z, no offset)"
            ));
        }
        let days = date(d).ok_or_else(bad)?;
        let ms = time_of_day(tod).ok_or_else(bad)?;
        return Ok(TimeSpec::Wall(days as u64 * MS_PER_DAY as u64 + ms));
    }
    if t.contains(':') {
        return time_of_day(t).map(TimeSpec::TimeOfDay).ok_or_else(bad);
    }
    // The recording's very start: parse_duration wants a positive length.
    let number = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &t[number.len()..];
    if !number.is_empty()
        && number.bytes().all(|b| b == b'0' || b == b'.')
        && number.starts_with('0')
        && matches!(unit, "" | "s" | "ms" | "m" | "h")
    {
        return Ok(TimeSpec::Offset(0));
    }
    crate::shared::units::parse_duration(t)
        .map(|d| TimeSpec::Offset(d.as_millis() as u64))
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_round_trip() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 11, 21), 20_778);
        for days in [-1, 0, 59, 60, 11_016, 11_017, 20_778, 47_540] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(20_778), (2026, 11, 21));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(format_utc(1_763_000_001_000), "2025-11-13 02:13:21 UTC");
    }

    #[test]
    fn offsets_and_wall_times() {
        assert_eq!(parse_time("--since", "90s"), Ok(TimeSpec::Offset(90_000)));
        assert_eq!(parse_time("--since", "5m"), Ok(TimeSpec::Offset(300_000)));
        assert_eq!(parse_time("--since", "1.5"), Ok(TimeSpec::Offset(1_500)));
        assert_eq!(parse_time("--since", "0"), Ok(TimeSpec::Offset(0)));
        assert_eq!(parse_time("--since", "0s"), Ok(TimeSpec::Offset(0)));
        // 2026-11-21 is day 20778.
        let day = 20_778u64 * 86_400_000;
        let at = day + (3 * 3600 + 4 * 60 + 5) * 1000;
        assert_eq!(
            parse_time("--until", "2026-11-21T03:04:05Z"),
            Ok(TimeSpec::Wall(at))
        );
        assert_eq!(
            parse_time("--until", "2026-11-21 03:04:05.25"),
            Ok(TimeSpec::Wall(at + 250))
        );
        assert_eq!(
            parse_time("--until", "03:04:05"),
            Ok(TimeSpec::TimeOfDay(at - day))
        );
        // A time of day lands on the recording's first (UTC) day.
        let start = day + 3_600_000 + 17;
        assert_eq!(TimeSpec::TimeOfDay(at - day).resolve(start), at);
        assert_eq!(TimeSpec::Offset(90_000).resolve(start), start + 90_000);
        assert_eq!(TimeSpec::Wall(at).resolve(start), at);
    }

    #[test]
    fn nonsense_is_refused_with_the_option_named() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-11-21",
            "2026-11-21T25:00:00Z",
            "2026-11-21T03:04:05+02:00",
            "3:4:5",
            "03:04",
            "03:60:00",
            "-5s",
            "5 parsecs",
            "0abc",
        ] {
            let err = parse_time("--since", bad).unwrap_err();
            assert!(err.starts_with("--since "), "{bad}: {err}");
        }
        assert!(parse_time("--until", "2026-11-21T03:04:05+02:00")
            .unwrap_err()
            .contains("only UTC"));
    }
}
