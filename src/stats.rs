//! Small statistics helpers (pandas conventions: sample std with ddof=1), and change points.

pub mod changepoint;

/// Linear-interpolated quantile (pandas' default) of `sorted` (ascending, not empty).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Linear-interpolated quantile of `xs` (sorted here); NaN for an empty slice.
pub fn quantile(xs: &mut [f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    quantile_sorted(xs, q)
}

/// Mean, or None for an empty slice.
pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (ddof = 1), or None with fewer than two values.
pub fn std(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    Some((xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt())
}

/// Group row indices by a key, in key order: a sort, then a sweep.
pub fn group_by<K: Ord + Clone>(n: usize, key: impl Fn(usize) -> K) -> Vec<(K, Vec<usize>)> {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by_key(|&i| key(i));
    let mut out: Vec<(K, Vec<usize>)> = Vec::new();
    for i in idx {
        let k = key(i);
        match out.last_mut() {
            Some((last, rows)) if *last == k => rows.push(i),
            _ => out.push((k, vec![i])),
        }
    }
    out
}

/// Median (the mean of the middle two for an even count), or None for an empty slice.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v = xs.to_vec();
    median_in_place(&mut v)
}

fn median_in_place(v: &mut [f64]) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (_, hi, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    let hi = *hi;
    if n % 2 == 1 {
        return Some(hi);
    }
    let lo = v[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo + hi) / 2.0)
}

/// The two-sided p-value of the Mann–Whitney U test of `a` against `b`, or None when a side
/// is empty: exact (the distribution of U under the null) when there are no ties and neither
/// side has more than [`EXACT_MAX`] values, as CI comparisons of a few steps have; else the
/// normal approximation with tie and continuity corrections. A sort of the pooled values and
/// one sweep over it assign the (mid)ranks.
///
/// The approximation is not conservative at small sizes in the direction that matters: 5
/// steps against 5, completely separated, give p = 0.0122 by it and 0.0079 exactly, so a
/// 43 % slower step would pass a test at α = 0.01.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = pooled.len();
    let (mut rank_sum_a, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let mid = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_a += mid * pooled[i..=j].iter().filter(|p| p.1).count() as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    if ties == 0.0 && a.len() <= EXACT_MAX && b.len() <= EXACT_MAX {
        return Some(exact_u_p(a.len(), b.len(), u.round() as usize));
    }
    Some(asymptotic_u_p(n1, n2, u, ties))
}

/// The normal approximation's two-sided p-value of U = `u` for sides of `n1` and `n2`
/// values, `ties` the sum of t³ − t over groups of t equal values.
fn asymptotic_u_p(n1: f64, n2: f64, u: f64, ties: f64) -> f64 {
    let mu = n1 * n2 / 2.0;
    let nn = n1 + n2;
    let var = n1 * n2 / 12.0 * ((nn + 1.0) - ties / (nn * (nn - 1.0)));
    if var <= 0.0 {
        // Every value equal: no evidence of a difference.
        return 1.0;
    }
    let z = ((u - mu).abs() - 0.5).max(0.0) / var.sqrt();
    libm::erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// The largest side for which [`mann_whitney_p`] is exact (the counts of U then fit i128).
pub const EXACT_MAX: usize = 50;

/// The exact two-sided p-value of U = `u` for sides of `m` and `n` values without ties:
/// 2 × the smaller tail, at most 1. The counts of each U are the coefficients of the
/// Gaussian binomial [m+n choose m] in q, built as ∏ᵢ (1 − q^(n+i)) / (1 − q^i): after each
/// factor the polynomial is [n+i choose i], whose coefficients are counts of rank sums.
fn exact_u_p(m: usize, n: usize, u: usize) -> f64 {
    let top = m * n;
    let mut c = vec![0i128; top + 1];
    c[0] = 1;
    for i in 1..=m {
        // × (1 − q^(n+i)), from the top so that each term is read before it is changed.
        let k = n + i;
        for j in (k..=top).rev() {
            c[j] -= c[j - k];
        }
        // ÷ (1 − q^i): a running sum with stride i.
        for j in i..=top {
            c[j] += c[j - i];
        }
    }
    let total: i128 = c.iter().sum();
    let u = u.min(top);
    let below: i128 = c[..=u].iter().sum();
    let above: i128 = c[u..].iter().sum();
    let tail = below.min(above) as f64 / total as f64;
    (2.0 * tail).min(1.0)
}

/// A percentile bootstrap confidence interval (`level`, e.g. 0.95) of the relative change of
/// the median from `base` to `head` (`median(head) / median(base) - 1`), from `resamples`
/// resamples of each side with a generator seeded by `seed` (the same inputs give the same
/// interval). None when a side is empty or a resampled base median is zero.
pub fn bootstrap_median_change(
    base: &[f64],
    head: &[f64],
    resamples: usize,
    level: f64,
    seed: u64,
) -> Option<(f64, f64)> {
    use rand::{RngExt, SeedableRng};
    if base.is_empty() || head.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let (mut bs, mut hs) = (vec![0.0; base.len()], vec![0.0; head.len()]);
    let mut changes = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for x in bs.iter_mut() {
            *x = base[rng.random_range(0..base.len())];
        }
        for x in hs.iter_mut() {
            *x = head[rng.random_range(0..head.len())];
        }
        let mb = median_in_place(&mut bs)?;
        let mh = median_in_place(&mut hs)?;
        if mb == 0.0 {
            return None;
        }
        changes.push(mh / mb - 1.0);
    }
    changes.sort_by(f64::total_cmp);
    let tail = (1.0 - level) / 2.0;
    let at = |q: f64| changes[((q * resamples as f64).floor() as usize).min(resamples - 1)];
    Some((at(tail), at(1.0 - tail)))
}

/// Count, mean and sum of squared deviations of a sample, mergeable across processes.
#[derive(serde::Serialize, serde::Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct Moments {
    pub n: u64,
    /// Exact sum [ns].
    pub sum: i64,
    pub mean: f64,
    pub m2: f64,
}

impl Moments {
    pub fn of(xs: impl IntoIterator<Item = i64>) -> Moments {
        let mut m = Moments::default();
        for x in xs {
            m.n += 1;
            m.sum += x;
            let d = x as f64 - m.mean;
            m.mean += d / m.n as f64;
            m.m2 += d * (x as f64 - m.mean);
        }
        m
    }

    /// The moments of both samples together (Chan et al.).
    pub fn merge(self, o: Moments) -> Moments {
        if self.n == 0 {
            return o;
        }
        if o.n == 0 {
            return self;
        }
        let n = self.n + o.n;
        let d = o.mean - self.mean;
        Moments {
            n,
            sum: self.sum + o.sum,
            mean: (self.sum + o.sum) as f64 / n as f64,
            m2: self.m2 + o.m2 + d * d * (self.n as f64 * o.n as f64) / n as f64,
        }
    }

    /// Sample standard deviation (None below two values).
    pub fn std(&self) -> Option<f64> {
        (self.n > 1).then(|| (self.m2.max(0.0) / (self.n - 1) as f64).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn mann_whitney_exact_at_small_sizes() {
        // Complete separation of 5 vs 5: 2 / C(10, 5) = 2 / 252 (scipy's method="exact").
        let base = [30.0, 30.1, 29.9, 30.2, 30.05];
        let head = [43.0, 43.2, 42.9, 43.1, 43.05];
        let p = mann_whitney_p(&base, &head).unwrap();
        assert!((p - 2.0 / 252.0).abs() < 1e-15, "{p}");
        assert!(p < 0.01);
        // U = 13 of 8 vs 8: 321 of the C(16, 8) = 12870 orderings have U ≤ 13 (counted by
        // enumerating them), p = 642 / 12870.
        let a = [1.1, 2.3, 3.0, 4.2, 5.5, 6.1, 7.7, 8.0];
        let b = [3.5, 5.2, 6.8, 7.1, 8.4, 9.9, 10.5, 11.0];
        let p = mann_whitney_p(&a, &b).unwrap();
        assert!((p - 642.0 / 12870.0).abs() < 1e-15, "{p}");
        // Interleaved samples: p = 1 (U at the centre, both tails above one half).
        assert_eq!(mann_whitney_p(&[1.0, 4.0], &[2.0, 3.0]), Some(1.0));
        // 1 vs 1: the smallest p is 1 (two orderings, one each way).
        assert_eq!(mann_whitney_p(&[1.0], &[2.0]), Some(1.0));
        // The counts of U sum to C(m + n, m) for the largest exact sizes.
        let p = mann_whitney_p(
            &(0..EXACT_MAX).map(|i| i as f64).collect::<Vec<_>>(),
            &(0..EXACT_MAX)
                .map(|i| 1000.0 + i as f64)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert!(p > 0.0 && p < 1e-28, "{p}");
    }

    #[test]
    fn mann_whitney_against_known_values() {
        // scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic"), with
        // a tie so that the approximation is used.
        let a = [1.1, 2.3, 3.0, 4.2, 5.5, 6.1, 7.7, 8.0];
        let b = [3.5, 5.2, 6.8, 7.1, 8.4, 9.9, 10.5, 11.0];
        let tie = [1.1, 3.0];
        assert!(mann_whitney_p(&tie, &[3.0, 4.0]).unwrap() > 0.1);
        let big_a = a.repeat(7);
        let big_b = b.repeat(7);
        assert!(big_a.len() > EXACT_MAX);
        assert!(mann_whitney_p(&big_a, &big_b).unwrap() < 1e-6);
        let p = asymptotic_u_p(8.0, 8.0, 13.0, 0.0);
        // U = 13, mu = 32, sigma = sqrt(8*8*17/12) = 9.5219; z = (19 - 0.5) / 9.5219.
        let z: f64 = 18.5 / (8.0f64 * 8.0 * 17.0 / 12.0).sqrt();
        assert!(
            (p - libm::erfc(z / std::f64::consts::SQRT_2)).abs() < 1e-12,
            "{p}"
        );
        assert!((p - 0.0522).abs() < 1e-3, "{p}");
        // Symmetric, and 1 for identical samples.
        let p = mann_whitney_p(&a, &b).unwrap();
        assert!((mann_whitney_p(&b, &a).unwrap() - p).abs() < 1e-12);
        assert_eq!(mann_whitney_p(&[2.0, 2.0], &[2.0, 2.0]), Some(1.0));
        // Complete separation of 10 vs 10: p well below 0.001.
        let lo: Vec<f64> = (0..10).map(|i| i as f64).collect();
        let hi: Vec<f64> = (0..10).map(|i| 100.0 + i as f64).collect();
        assert!(mann_whitney_p(&lo, &hi).unwrap() < 0.001);
        assert_eq!(mann_whitney_p(&[], &hi), None);
    }

    proptest::proptest! {
        #[test]
        fn mann_whitney_is_a_symmetric_probability(
            a in proptest::collection::vec(0.0f64..100.0, 1..40),
            b in proptest::collection::vec(0.0f64..100.0, 1..40),
        ) {
            let p = mann_whitney_p(&a, &b).unwrap();
            proptest::prop_assert!((0.0..=1.0).contains(&p));
            let q = mann_whitney_p(&b, &a).unwrap();
            proptest::prop_assert!((p - q).abs() < 1e-12);
            // Shifting both samples together changes nothing.
            let a2: Vec<f64> = a.iter().map(|x| x + 1000.0).collect();
            let b2: Vec<f64> = b.iter().map(|x| x + 1000.0).collect();
            proptest::prop_assert!((mann_whitney_p(&a2, &b2).unwrap() - p).abs() < 1e-9);
        }

        #[test]
        fn the_bootstrap_interval_is_ordered(
            a in proptest::collection::vec(1.0f64..100.0, 2..30),
            b in proptest::collection::vec(1.0f64..100.0, 2..30),
        ) {
            let (lo, hi) = bootstrap_median_change(&a, &b, 200, 0.95, 3).unwrap();
            proptest::prop_assert!(lo <= hi);
            let (min_a, max_a) = (a.iter().copied().fold(f64::MAX, f64::min), a.iter().copied().fold(0.0, f64::max));
            let (min_b, max_b) = (b.iter().copied().fold(f64::MAX, f64::min), b.iter().copied().fold(0.0, f64::max));
            proptest::prop_assert!(lo >= min_b / max_a - 1.0 - 1e-12 && hi <= max_b / min_a - 1.0 + 1e-12);
        }
    }

    #[test]
    fn bootstrap_covers_the_true_change() {
        let base: Vec<f64> = (0..200).map(|i| 100.0 + (i % 7) as f64).collect();
        let head: Vec<f64> = base.iter().map(|x| x * 1.10).collect();
        let (lo, hi) = bootstrap_median_change(&base, &head, 1000, 0.95, 7).unwrap();
        assert!(lo <= 0.10 + 1e-9 && 0.10 - 1e-9 <= hi, "{lo} {hi}");
        assert!(hi - lo < 0.05, "{lo} {hi}");
        // Deterministic for a seed.
        assert_eq!(
            bootstrap_median_change(&base, &head, 1000, 0.95, 7),
            Some((lo, hi))
        );
        assert_eq!(bootstrap_median_change(&[], &head, 10, 0.95, 1), None);
    }

    #[test]
    fn basics() {
        assert_eq!(mean(&[1.0, 2.0, 3.0]), Some(2.0));
        assert_eq!(std(&[1.0, 2.0, 3.0]), Some(1.0));
        assert_eq!(std(&[1.0]), None);
        let g = group_by(5, |i| i % 2);
        assert_eq!(g, vec![(0, vec![0, 2, 4]), (1, vec![1, 3])]);
    }
}
