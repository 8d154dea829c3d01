//! Short, fixed-unit texts for the live view's cells (a cell is a few
//! characters wide, so every number carries its unit and little else).

pub use crate::sinks::table::rate_bits;

/// Packets per second with a unit: `950pps`, `16.4kpps`, `1.20Mpps`.
pub fn rate_pps(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.2}Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.1}kpps", pps / 1e3)
    } else {
        format!("{pps:.0}pps")
    }
}

/// A duration in microseconds: `-` when unknown (0), `250us`, `25.0ms`.
pub fn micros(us: u32) -> String {
    if us == 0 {
        "-".into()
    } else if us >= 10_000 {
        format!("{:.1}ms", us as f64 / 1000.0)
    } else if us >= 1_000 {
        format!("{:.2}ms", us as f64 / 1000.0)
    } else {
        format!("{us}us")
    }
}

/// A byte count: `512B`, `18.0kB`, `3.2MB`.
pub fn bytes(n: u64) -> String {
    let v = n as f64;
    if v >= 1e9 {
        format!("{:.1}GB", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1}MB", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}kB", v / 1e3)
    } else {
        format!("{n}B")
    }
}

/// A percentage, `-` when it could not be computed. Small values keep
/// their digits: 0.0038% retransmits is not 0%.
pub fn pct(p: Option<f64>) -> String {
    match p {
        None => "-".into(),
        Some(p) if p != 0.0 && p.abs() < 0.1 => format!("{p:.3}%"),
        Some(p) => format!("{p:.1}%"),
    }
}

/// srtt against min_rtt: `12.0ms/1.10ms 10.9x`; the ratio is left out
/// when either is unknown.
pub fn rtt_pair(srtt_us: u32, min_rtt_us: u32) -> String {
    let base = format!("{}/{}", micros(srtt_us), micros(min_rtt_us));
    if srtt_us > 0 && min_rtt_us > 0 {
        format!("{base} {:.1}x", srtt_us as f64 / min_rtt_us as f64)
    } else {
        base
    }
}

/// `s` cut to at most `width` characters, with `~` marking the cut.
pub fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(width - 1).collect();
    out.push('~');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(rate_pps(950.0), "950pps");
        assert_eq!(rate_pps(16_400.0), "16.4kpps");
        assert_eq!(rate_pps(1_200_000.0), "1.20Mpps");
        assert_eq!(micros(0), "-");
        assert_eq!(micros(250), "250us");
        assert_eq!(micros(1_100), "1.10ms");
        assert_eq!(micros(25_000), "25.0ms");
        assert_eq!(bytes(512), "512B");
        assert_eq!(bytes(18_000), "18.0kB");
        assert_eq!(pct(None), "-");
        assert_eq!(pct(Some(0.0)), "0.0%");
        assert_eq!(pct(Some(0.0038)), "0.004%");
        assert_eq!(pct(Some(98.25)), "98.2%");
        assert_eq!(rtt_pair(12_000, 1_100), "12.0ms/1.10ms 10.9x");
        assert_eq!(rtt_pair(12_000, 0), "12.0ms/-");
    }

    #[test]
    fn clip_marks_the_cut() {
        assert_eq!(clip("hypervisor", 20), "hypervisor");
        assert_eq!(clip("hypervisor", 5), "hype~");
        assert_eq!(clip("hypervisor", 0), "");
    }
}
