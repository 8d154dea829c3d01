//! Texts for the live view's cells that are more than one quantity (a cell
//! is a few characters wide); single quantities are `shared::units`.

use crate::shared::units::{micros, ratio};

/// srtt against min_rtt: `12.0ms/1.10ms 10.9x` (the two times say the delay
/// added); the ratio is left out when either is unknown.
pub(crate) fn rtt_pair(srtt_us: u32, min_rtt_us: u32) -> String {
    let base = format!("{}/{}", micros(srtt_us), micros(min_rtt_us));
    if srtt_us > 0 && min_rtt_us > 0 {
        format!("{base} {}", ratio(srtt_us as f64 / min_rtt_us as f64))
    } else {
        base
    }
}

/// `s` cut to at most `width` characters, with `~` marking the cut.
pub(crate) fn clip(s: &str, width: usize) -> String {
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
    fn rtt_pair_and_ratio() {
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
