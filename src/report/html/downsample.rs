//! Min/max-preserving downsampling for the report's charts.
//!
//! An hour at one-second intervals is 3,600 points per series; a browser
//! draws that fine, but a dozen series of it make the file heavy and the
//! lines a solid smear. Each bucket of consecutive samples keeps its
//! smallest and its largest value (in time order), so a one-interval spike
//! or dip is never averaged away. A gap (`None`) inside a bucket stays a
//! gap: the bucket's samples before and after it are reduced separately.

/// One sample of a series: a point, or a gap (a missing value or missing
/// intervals) that breaks the line.
pub(crate) type Sample = Option<(f64, f64)>;

/// Reduce `samples` to at most `max_points` points (gaps are not counted:
/// they draw nothing). Returns the samples unchanged when they already fit.
pub(crate) fn min_max(samples: &[Sample], max_points: usize) -> Vec<Sample> {
    let max_points = max_points.max(4);
    if points(samples) <= max_points {
        return samples.to_vec();
    }
    // A bucket without a gap yields at most 2 points, one with gaps at most
    // 4 (2 before the first gap, 2 after the last). Start with buckets of 2
    // and halve their number until the result fits: strict, and normally
    // the first try.
    let mut buckets = max_points / 2;
    loop {
        let reduced = reduce(samples, buckets);
        if points(&reduced) <= max_points || buckets <= 1 {
            return reduced;
        }
        buckets /= 2;
    }
}

/// How many drawn points (not gaps) `samples` holds.
pub(crate) fn points(samples: &[Sample]) -> usize {
    samples.iter().filter(|s| s.is_some()).count()
}

fn reduce(samples: &[Sample], buckets: usize) -> Vec<Sample> {
    let size = samples.len().div_ceil(buckets.max(1));
    let mut out = Vec::with_capacity(buckets * 2 + 8);
    for bucket in samples.chunks(size.max(1)) {
        let first_gap = bucket.iter().position(|s| s.is_none());
        let last_gap = bucket.iter().rposition(|s| s.is_none());
        match (first_gap, last_gap) {
            (Some(first), Some(last)) => {
                push_extremes(&mut out, &bucket[..first]);
                // Consecutive gaps draw the same as one.
                if out.last().is_none_or(|s: &Sample| s.is_some()) {
                    out.push(None);
                }
                push_extremes(&mut out, &bucket[last + 1..]);
            }
            _ => push_extremes(&mut out, bucket),
        }
    }
    out
}

/// Push the smallest and largest point of a run without gaps, in time
/// order (one point when they are the same sample).
fn push_extremes(out: &mut Vec<Sample>, run: &[Sample]) {
    let mut min: Option<(usize, f64)> = None;
    let mut max: Option<(usize, f64)> = None;
    for (i, (_, v)) in run
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.map(|p| (i, p)))
    {
        if min.is_none_or(|(_, m)| v < m) {
            min = Some((i, v));
        }
        if max.is_none_or(|(_, m)| v > m) {
            max = Some((i, v));
        }
    }
    let (Some((lo, _)), Some((hi, _))) = (min, max) else {
        return;
    };
    let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    out.push(run[a]);
    if b != a {
        out.push(run[b]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(n: usize) -> Vec<Sample> {
        (0..n).map(|i| Some((i as f64, (i % 7) as f64))).collect()
    }

    #[test]
    fn small_series_unchanged() {
        let s = series(100);
        assert_eq!(min_max(&s, 1500), s);
    }

    #[test]
    fn large_series_capped_and_extremes_kept() {
        let mut s = series(3600);
        s[1234] = Some((1234.0, 1000.0));
        s[2345] = Some((2345.0, -50.0));
        let d = min_max(&s, 1500);
        assert!(points(&d) <= 1500, "{} points", points(&d));
        assert!(points(&d) >= 1000, "{} points: too coarse", points(&d));
        assert!(d.contains(&Some((1234.0, 1000.0))), "spike lost");
        assert!(d.contains(&Some((2345.0, -50.0))), "dip lost");
        let ts: Vec<f64> = d.iter().flatten().map(|p| p.0).collect();
        assert!(ts.windows(2).all(|w| w[0] < w[1]), "not in time order");
    }

    #[test]
    fn gaps_survive_downsampling() {
        let mut s = series(3600);
        for gap in &mut s[2000..2010] {
            *gap = None;
        }
        // Every bucket with a gap: the worst case for the point budget.
        for i in (0..3600).step_by(3) {
            if i < 1000 {
                s[i] = None;
            }
        }
        let d = min_max(&s, 1500);
        assert!(points(&d) <= 1500, "{} points", points(&d));
        // The ten missing intervals are still a break between 1999 and 2010.
        let pos = d
            .iter()
            .position(|p| p.is_some_and(|(t, _)| t >= 2010.0))
            .unwrap();
        assert!(d[pos - 1].is_none(), "gap at 2000..2010 was bridged");
        assert!(d
            .iter()
            .flatten()
            .all(|(t, _)| !(2000.0..2010.0).contains(t)));
    }
}
