//! The values a threshold may take. A value outside its range does not fail
//! loudly where it is used: `hold_window = 0` or an onset count above the
//! window silently never holds a verdict, a percentage of 0 calls every
//! interval enforced. So every threshold names its range in the table of
//! `thresholds.rs`, and a set of thresholds is checked as a whole before any
//! judge uses it (`Thresholds::validate`).

use std::fmt;

/// A closed or half-open interval of `f64`, optionally whole numbers only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidRange {
    pub min: f64,
    /// `min` itself is outside the range (`> min`, not `>= min`).
    pub min_excluded: bool,
    /// Inclusive upper bound; none for a rate, a count or a time that may
    /// grow without limit.
    pub max: Option<f64>,
    /// A count of intervals or segments: fractions make no sense.
    pub whole: bool,
}

/// `>= min`.
pub(crate) const fn at_least(min: f64) -> ValidRange {
    ValidRange {
        min,
        min_excluded: false,
        max: None,
        whole: false,
    }
}

/// `> min`: a threshold a signal is divided by, or at which 0 would make
/// every interval past it.
pub(crate) const fn above(min: f64) -> ValidRange {
    ValidRange {
        min,
        min_excluded: true,
        max: None,
        whole: false,
    }
}

/// `> min` and `<= max`: a share (a percentage of a whole that cannot be
/// passed, a fraction) where 0 would make every interval past it.
pub(crate) const fn above_up_to(min: f64, max: f64) -> ValidRange {
    ValidRange {
        min,
        min_excluded: true,
        max: Some(max),
        whole: false,
    }
}

/// `min..=max`.
pub(crate) const fn within(min: f64, max: f64) -> ValidRange {
    ValidRange {
        min,
        min_excluded: false,
        max: Some(max),
        whole: false,
    }
}

/// A whole number `>= min`.
pub(crate) const fn count_from(min: f64) -> ValidRange {
    ValidRange {
        min,
        min_excluded: false,
        max: None,
        whole: true,
    }
}

/// A whole number in `min..=max`.
pub(crate) const fn count_within(min: f64, max: f64) -> ValidRange {
    ValidRange {
        min,
        min_excluded: false,
        max: Some(max),
        whole: true,
    }
}

impl ValidRange {
    pub(crate) fn contains(&self, v: f64) -> bool {
        v.is_finite()
            && (if self.min_excluded {
                v > self.min
            } else {
                v >= self.min
            })
            && self.max.is_none_or(|m| v <= m)
            && (!self.whole || v.fract() == 0.0)
    }
}

impl fmt::Display for ValidRange {
    /// `> 0`, `>= 1`, `0 to 100`, `> 0 and <= 100`, `a whole number >= 1`,
    /// `a whole number from 2 to 120`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.whole {
            f.write_str("a whole number ")?;
        }
        match (self.min_excluded, self.max) {
            (false, None) => write!(f, ">= {}", self.min),
            (true, None) => write!(f, "> {}", self.min),
            (false, Some(m)) if self.whole => write!(f, "from {} to {m}", self.min),
            (false, Some(m)) => write!(f, "{} to {m}", self.min),
            (true, Some(m)) => write!(f, "> {} and <= {m}", self.min),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_whole_numbers() {
        assert!(at_least(0.0).contains(0.0));
        assert!(!at_least(0.0).contains(-0.1));
        assert!(!above(0.0).contains(0.0));
        assert!(above(0.0).contains(1e-9));
        assert!(above_up_to(0.0, 100.0).contains(100.0));
        assert!(!above_up_to(0.0, 100.0).contains(100.1));
        assert!(within(0.0, 1.0).contains(0.0));
        assert!(count_from(1.0).contains(5.0));
        assert!(!count_from(1.0).contains(2.5));
        assert!(!count_from(1.0).contains(0.0));
        assert!(!count_within(2.0, 120.0).contains(121.0));
        assert!(!at_least(0.0).contains(f64::NAN));
        assert!(!at_least(0.0).contains(f64::INFINITY));
    }

    #[test]
    fn shown_as_people_write_ranges() {
        assert_eq!(at_least(0.0).to_string(), ">= 0");
        assert_eq!(above(0.0).to_string(), "> 0");
        assert_eq!(within(0.0, 100.0).to_string(), "0 to 100");
        assert_eq!(above_up_to(0.0, 1.0).to_string(), "> 0 and <= 1");
        assert_eq!(count_from(1.0).to_string(), "a whole number >= 1");
        assert_eq!(
            count_within(2.0, 120.0).to_string(),
            "a whole number from 2 to 120"
        );
    }
}
