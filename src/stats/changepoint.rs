//! Change points of a series (docs/compare.md, "History"): E-Divisive means (Matteson and
//! James 2014: the split that maximises the energy statistic between the two sides) applied
//! recursively down to segments of `2 · min_size` points gives the candidates, each placed
//! where least squares puts a shift of the mean (within two points of E-Divisive's). A
//! candidate is kept when Welch's t-test between the points on either side, up to the
//! neighbouring candidates, is significant — its p-value multiplied by the number of splits
//! that window offers, the candidate being the best of them — and the means differ by at least
//! a minimum relative change; the weakest failing candidate is dropped and the others tested
//! again against their new neighbours, until all pass. A t-test in place of E-Divisive's
//! permutation test, as in Hunter (Apache Otava): the result is deterministic.

use serde::{Deserialize, Serialize};

/// How change points are found (part of what a history reports).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Params {
    /// Points each side of a change point needs, at least.
    pub min_size: usize,
    /// Largest p-value (Welch's t-test, times the number of splits the segment offered) of an
    /// accepted change point.
    pub max_p: f64,
    /// Smallest relative change of the mean (0.01 = 1 %) of an accepted change point.
    pub min_change: f64,
    /// Smallest change of the mean of an accepted change point in units of the series' own
    /// run-to-run noise (the spread of successive differences away from the candidates, over
    /// √2): a series whose points jump between levels from run to run needs steps above that.
    #[serde(default = "default_min_effect")]
    pub min_effect: f64,
}

fn default_min_effect() -> f64 {
    2.0
}

impl Default for Params {
    fn default() -> Self {
        Params {
            min_size: 5,
            max_p: 1e-4,
            min_change: 0.01,
            min_effect: default_min_effect(),
        }
    }
}

/// A change point: the series steps between `index - 1` and `index`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ChangePoint {
    pub index: usize,
    /// Means of the points from the previous change point to this one, and from this one to
    /// the next.
    pub mean_before: f64,
    pub mean_after: f64,
    /// `mean_after / mean_before - 1` (0 when the mean before is 0).
    pub change: f64,
    pub p_value: f64,
}

/// Sums of |x_i - x_j| over pairs inside ranges, in O(1) from a prefix table.
struct Pairs {
    n: usize,
    /// prefix[i][j] = Σ_{k<i, l<j} |x_k - x_l| (row-major, (n+1)²).
    prefix: Vec<f64>,
}

impl Pairs {
    fn new(x: &[f64]) -> Pairs {
        let n = x.len();
        let w = n + 1;
        let mut prefix = vec![0.0; w * w];
        for i in 0..n {
            let mut row = 0.0;
            for j in 0..n {
                row += (x[i] - x[j]).abs();
                prefix[(i + 1) * w + j + 1] = prefix[i * w + j + 1] + row;
            }
        }
        Pairs { n, prefix }
    }

    /// Σ |x_k - x_l| over k in a..b, l in c..d.
    fn block(&self, (a, b): (usize, usize), (c, d): (usize, usize)) -> f64 {
        let w = self.n + 1;
        let p = |i: usize, j: usize| self.prefix[i * w + j];
        p(b, d) - p(a, d) - p(b, c) + p(a, c)
    }

    /// Σ over unordered pairs inside a..b.
    fn within(&self, a: usize, b: usize) -> f64 {
        self.block((a, b), (a, b)) / 2.0
    }
}

/// The split of `a..b` that maximises the energy statistic, with both sides at least
/// `min_size` long.
fn best_split(pairs: &Pairs, a: usize, b: usize, min_size: usize) -> Option<usize> {
    let mut best: Option<(f64, usize)> = None;
    for t in (a + min_size)..=(b.saturating_sub(min_size)) {
        let (m, n) = ((t - a) as f64, (b - t) as f64);
        let between = pairs.block((a, t), (t, b)) * 2.0 / (m * n);
        let wx = if m > 1.0 {
            pairs.within(a, t) / (m * (m - 1.0) / 2.0)
        } else {
            0.0
        };
        let wy = if n > 1.0 {
            pairs.within(t, b) / (n * (n - 1.0) / 2.0)
        } else {
            0.0
        };
        let q = m * n / (m + n) * (between - wx - wy);
        if best.is_none_or(|(bq, _)| q > bq) {
            best = Some((q, t));
        }
    }
    best.map(|(_, t)| t)
}

/// Welch's t-test of `x[a..t]` against `x[t..b]`, its p-value multiplied by the number of
/// splits `a..b` offers with `min_size` points a side (the split tested was chosen among them:
/// Bonferroni), at most 1: (p-value, mean before, mean after).
fn test(x: &[f64], a: usize, t: usize, b: usize, min_size: usize) -> (f64, f64, f64) {
    let (p, ml, mr) = welch(x, a, t, b);
    let splits = (b - a + 1).saturating_sub(2 * min_size).max(1) as f64;
    ((p * splits).min(1.0), ml, mr)
}

/// The split near `t` (within two points, `min_size` a side) with the least squared error
/// about the two sides' means: E-Divisive finds where the distributions differ; a shift of
/// the mean is located most precisely by least squares.
fn refine(x: &[f64], a: usize, t: usize, b: usize, min_size: usize) -> usize {
    let sse = |lo: usize, hi: usize| {
        let v = &x[lo..hi];
        let m = v.iter().sum::<f64>() / v.len() as f64;
        v.iter().map(|y| (y - m).powi(2)).sum::<f64>()
    };
    let (lo, hi) = (
        t.saturating_sub(2).max(a + min_size),
        (t + 2).min(b - min_size),
    );
    (lo..=hi)
        .map(|c| (sse(a, c) + sse(c, b), c))
        .min_by(|p, q| p.0.total_cmp(&q.0).then(p.1.cmp(&q.1)))
        .map(|(_, c)| c)
        .unwrap_or(t)
}

/// Welch's t-test of `x[a..t]` against `x[t..b]`: (p-value, mean before, mean after).
fn welch(x: &[f64], a: usize, t: usize, b: usize) -> (f64, f64, f64) {
    let (l, r) = (&x[a..t], &x[t..b]);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var = |v: &[f64], m: f64| {
        if v.len() < 2 {
            0.0
        } else {
            v.iter().map(|y| (y - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64
        }
    };
    let (ml, mr) = (mean(l), mean(r));
    let (sl, sr) = (var(l, ml) / l.len() as f64, var(r, mr) / r.len() as f64);
    let se2 = sl + sr;
    if se2 <= 0.0 {
        // No spread on either side: any difference is certain, none is nothing.
        return (if ml == mr { 1.0 } else { 0.0 }, ml, mr);
    }
    let t_stat = (mr - ml) / se2.sqrt();
    let df_den = sl * sl / (l.len().max(2) - 1) as f64 + sr * sr / (r.len().max(2) - 1) as f64;
    let df = if df_den > 0.0 {
        se2 * se2 / df_den
    } else {
        (l.len() + r.len() - 2) as f64
    };
    (student_t_two_sided(t_stat, df.max(1.0)), ml, mr)
}

fn accepted(p: &Params, noise: f64, pv: f64, before: f64, after: f64) -> bool {
    let change = if before != 0.0 {
        (after / before - 1.0).abs()
    } else {
        f64::INFINITY
    };
    pv <= p.max_p && change >= p.min_change && (after - before).abs() >= p.min_effect * noise
}

/// The run-to-run noise of `x`: the root mean square of its successive differences, leaving
/// out those across a candidate (where the steps are), over √2.
fn noise(x: &[f64], cuts: &[usize]) -> f64 {
    let d: Vec<f64> = (1..x.len())
        .filter(|i| !cuts.contains(i))
        .map(|i| x[i] - x[i - 1])
        .collect();
    if d.is_empty() {
        return 0.0;
    }
    (d.iter().map(|v| v * v).sum::<f64>() / d.len() as f64 / 2.0).sqrt()
}

/// The change points of `x`, in order.
pub fn change_points(x: &[f64], p: &Params) -> Vec<ChangePoint> {
    let min_size = p.min_size.max(2);
    if x.len() < min_size.saturating_mul(2) || x.iter().any(|v| !v.is_finite()) {
        return Vec::new();
    }
    let pairs = Pairs::new(x);
    // Top down: every segment long enough is split where the statistic is largest, whether or
    // not that split is significant (two steps that cancel hide each other from one test;
    // their halves show them). The candidates are then tested below.
    let mut cuts: Vec<usize> = Vec::new();
    let mut todo = vec![(0usize, x.len())];
    while let Some((a, b)) = todo.pop() {
        if b - a < min_size.saturating_mul(2) {
            continue;
        }
        let Some(t) = best_split(&pairs, a, b, min_size) else {
            continue;
        };
        let t = refine(x, a, t, b, min_size);
        cuts.push(t);
        todo.push((a, t));
        todo.push((t, b));
    }
    cuts.sort_unstable();
    let sigma = noise(x, &cuts);
    // Each against its final neighbours; the weakest that fails goes, until none fails.
    loop {
        let bounds = |i: usize, cuts: &[usize]| {
            let a = if i == 0 { 0 } else { cuts[i - 1] };
            let b = cuts.get(i + 1).copied().unwrap_or(x.len());
            (a, b)
        };
        let tested: Vec<(f64, f64, f64)> = (0..cuts.len())
            .map(|i| {
                let (a, b) = bounds(i, &cuts);
                test(x, a, cuts[i], b, min_size)
            })
            .collect();
        let weakest = tested
            .iter()
            .enumerate()
            .filter(|(_, (pv, bf, af))| !accepted(p, sigma, *pv, *bf, *af))
            .max_by(|a, b| a.1.0.total_cmp(&b.1.0))
            .map(|(i, _)| i);
        match weakest {
            Some(i) => {
                cuts.remove(i);
            }
            None => {
                return cuts
                    .iter()
                    .zip(tested)
                    .map(|(&index, (p_value, mean_before, mean_after))| ChangePoint {
                        index,
                        mean_before,
                        mean_after,
                        change: if mean_before != 0.0 {
                            mean_after / mean_before - 1.0
                        } else {
                            0.0
                        },
                        p_value,
                    })
                    .collect();
            }
        }
    }
}

// ---------------------------------------------------------------- the newest runs

/// The fewest runs after a step that confirm it without `min_size` of them.
pub const CONFIRM_RUNS: usize = 3;
/// A step of the newest runs is confirmed when their mean moved by at least this many times
/// the series' run-to-run noise, each of them by at least [`EACH_SIGMA`] the same way.
pub const CONFIRM_SIGMA: f64 = 3.0;
pub const EACH_SIGMA: f64 = 1.5;
/// ... and Student's t-test between them and the runs before (pooled variance: a step moves
/// the level, not the noise; Welch's would give three runs two degrees of freedom) gives at
/// most this p-value.
pub const CONFIRM_P: f64 = 0.001;

/// Student's two-sample t-test of `l` against `r` with pooled variance: the p-value.
fn pooled_t(l: &[f64], r: &[f64]) -> f64 {
    let (nl, nr) = (l.len() as f64, r.len() as f64);
    if nl < 2.0 || nr < 1.0 {
        return 1.0;
    }
    let (ml, mr) = (l.iter().sum::<f64>() / nl, r.iter().sum::<f64>() / nr);
    let ss: f64 = l.iter().map(|v| (v - ml).powi(2)).sum::<f64>()
        + r.iter().map(|v| (v - mr).powi(2)).sum::<f64>();
    let df = nl + nr - 2.0;
    let se = (ss / df * (1.0 / nl + 1.0 / nr)).sqrt();
    if se <= 0.0 {
        return if ml == mr { 1.0 } else { 0.0 };
    }
    student_t_two_sided((mr - ml) / se, df)
}
/// The newest one or two runs are flagged when each moved by at least this many times the
/// noise, the same way.
pub const POSSIBLE_SIGMA: f64 = 3.0;

/// A step in the newest runs that the regular search cannot see yet (fewer than `min_size`
/// runs after it).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub enum Recent {
    /// At least [`CONFIRM_RUNS`] runs after it, all moved: a change point.
    Confirmed(ChangePoint),
    /// The newest one or two runs moved: `more` runs are needed to confirm it.
    Possible { point: ChangePoint, more: usize },
}

/// The newest runs of `x` against the runs before them back to the last change point of
/// `cuts` (sorted) at least `p.min_size` runs before them (at least `p.min_size` runs): a
/// step of
/// [`CONFIRM_RUNS`] to `min_size - 1` runs is confirmed when their mean moved by at least
/// [`CONFIRM_SIGMA`] × the noise of the runs before them (successive differences, over √2),
/// each run by at least [`EACH_SIGMA`] × the noise the same way, by at least
/// `p.min_change`, with Student's p at most [`CONFIRM_P`] (of the tails that qualify, the
/// split with the least squared error); a step of the newest one or two runs, each beyond
/// [`POSSIBLE_SIGMA`] × the noise, is possible.
pub fn recent(x: &[f64], cuts: &[usize], p: &Params) -> Option<Recent> {
    let min_size = p.min_size.max(2);
    if x.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let n = x.len();
    // The runs before a tail of k: back to the last change point at least `min_size` runs
    // before it (one nearer is the search placing this same step where it could: it cannot
    // cut closer than `min_size` to the end).
    let start_for = |t: usize| {
        cuts.iter()
            .copied()
            .filter(|&c| c + min_size <= t)
            .max()
            .unwrap_or(0)
    };
    let longest = min_size.saturating_sub(1).min(n.saturating_sub(min_size));
    let sse = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        v.iter().map(|y| (y - m).powi(2)).sum::<f64>()
    };
    let point = |start: usize, t: usize| {
        let (p_value, mb, ma) = welch(x, start, t, n);
        ChangePoint {
            index: t,
            mean_before: mb,
            mean_after: ma,
            change: if mb != 0.0 { ma / mb - 1.0 } else { 0.0 },
            p_value,
        }
    };
    // Of the tails that qualify, the split least squares prefers; a possible step only when
    // none is confirmed.
    let mut confirmed: Option<(f64, ChangePoint)> = None;
    let mut possible = None;
    for k in (1..=longest).rev() {
        let t = n - k;
        let start = start_for(t);
        if t - start < min_size {
            continue;
        }
        let before = &x[start..t];
        let mean = before.iter().sum::<f64>() / before.len() as f64;
        let sigma = noise(before, &[]);
        let tail = &x[t..];
        let shift = tail.iter().sum::<f64>() / k as f64 - mean;
        let relative = if mean != 0.0 {
            (shift / mean).abs()
        } else {
            f64::INFINITY
        };
        if relative < p.min_change || shift == 0.0 {
            continue;
        }
        let same_way = |each: f64| {
            tail.iter()
                .all(|v| (v - mean) * shift.signum() >= each * sigma)
        };
        if k >= CONFIRM_RUNS && shift.abs() >= CONFIRM_SIGMA * sigma && same_way(EACH_SIGMA) {
            let mut c = point(start, t);
            c.p_value = pooled_t(before, tail);
            let err = sse(before) + sse(tail);
            if c.p_value <= CONFIRM_P && confirmed.as_ref().is_none_or(|(e, _)| err < *e) {
                confirmed = Some((err, c));
            }
        } else if k < CONFIRM_RUNS && possible.is_none() && same_way(POSSIBLE_SIGMA) {
            possible = Some(Recent::Possible {
                point: point(start, t),
                more: CONFIRM_RUNS - k,
            });
        }
    }
    confirmed.map(|(_, c)| Recent::Confirmed(c)).or(possible)
}

// ---------------------------------------------------------------- Student's t

/// Two-sided p-value of Student's t with `df` degrees of freedom.
pub fn student_t_two_sided(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    let x = df / (df + t * t);
    incomplete_beta(df / 2.0, 0.5, x).clamp(0.0, 1.0)
}

/// The regularised incomplete beta function I_x(a, b) (continued fraction, Lentz).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front =
        libm::lgamma(a + b) - libm::lgamma(a) - libm::lgamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * continued_fraction(a, b, x) / a
    } else {
        1.0 - front * continued_fraction(b, a, 1.0 - x) / b
    }
}

/// One step of Lentz's method: `(c, d)` after a term with numerator `aa`, and the factor it
/// multiplies the fraction by.
fn lentz(aa: f64, c: f64, d: f64) -> (f64, f64, f64) {
    const TINY: f64 = 1e-300;
    let keep = |v: f64| if v.abs() < TINY { TINY } else { v };
    let d = 1.0 / keep(1.0 + aa * d);
    let c = keep(1.0 + aa / c);
    (c, d, c * d)
}

fn continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    // The first term: c starts at 1 (1 + aa / ∞), d at 1 / (1 + aa).
    let (mut c, mut d, mut h) = lentz(-(a + b) * x / (a + 1.0), f64::INFINITY, 1.0);
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let (c1, d1, f) = lentz(m * (b - m) * x / ((a + m2 - 1.0) * (a + m2)), c, d);
        h *= f;
        let (c2, d2, del) = lentz(
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0)),
            c1,
            d1,
        );
        (c, d) = (c2, d2);
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic normal-ish noise (sum of uniforms from a linear congruential
    /// generator).
    fn noise(n: usize, seed: u64, sd: f64) -> Vec<f64> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                let mut u = 0.0;
                for _ in 0..12 {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    u += (s >> 11) as f64 / (1u64 << 53) as f64;
                }
                (u - 6.0) * sd
            })
            .collect()
    }

    #[test]
    fn student_t_matches_tables() {
        // Two-sided critical values: t(10) = 2.228 at 0.05, t(30) = 2.750 at 0.01.
        assert!((student_t_two_sided(2.228, 10.0) - 0.05).abs() < 5e-4);
        assert!((student_t_two_sided(2.750, 30.0) - 0.01).abs() < 2e-4);
        assert!((student_t_two_sided(0.0, 5.0) - 1.0).abs() < 1e-12);
        assert!(student_t_two_sided(40.0, 20.0) < 1e-15);
    }

    #[test]
    fn steps_are_found_where_they_are() {
        let mut x: Vec<f64> = noise(60, 7, 0.005).iter().map(|e| 1.0 + e).collect();
        for v in &mut x[20..] {
            *v *= 1.05;
        }
        for v in &mut x[40..] {
            *v *= 0.97;
        }
        let cps = change_points(&x, &Params::default());
        let at: Vec<usize> = cps.iter().map(|c| c.index).collect();
        assert_eq!(at, vec![20, 40], "{cps:?}");
        assert!((cps[0].change - 0.05).abs() < 0.01, "{cps:?}");
    }

    #[test]
    fn noise_alone_has_no_change_point() {
        for seed in 0..50 {
            let x: Vec<f64> = noise(50, seed, 0.01).iter().map(|e| 1.0 + e).collect();
            let cps = change_points(&x, &Params::default());
            assert!(cps.is_empty(), "seed {seed}: {cps:?}");
        }
    }

    #[test]
    fn short_or_broken_series_have_none() {
        assert!(change_points(&[1.0, 2.0, 3.0], &Params::default()).is_empty());
        assert!(
            change_points(
                &[1.0, f64::NAN, 1.0, 1.0, 2.0, 2.0, 2.0],
                &Params::default()
            )
            .is_empty()
        );
        // Flat then flat: a certain step.
        let x = [1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 2.0];
        let cps = change_points(&x, &Params::default());
        assert_eq!(cps.len(), 1);
        assert_eq!(cps[0].index, 5);
        // Too short for two sides of five.
        assert!(change_points(&x[1..], &Params::default()).is_empty());
    }

    #[test]
    fn a_step_in_the_newest_runs_is_confirmed_by_three_and_flagged_before() {
        let base: Vec<f64> = noise(10, 11, 0.003).iter().map(|e| 1.0 + e).collect();
        let sigma = noise_of(&base[..7]);
        let mut x = base.clone();
        for v in &mut x[7..] {
            *v += 8.0 * sigma;
        }
        let p = Params::default();
        assert!(
            change_points(&x, &p).is_empty(),
            "too few runs for the search"
        );
        match recent(&x, &[], &p) {
            Some(Recent::Confirmed(c)) => assert_eq!(c.index, 7, "{c:?}"),
            r => panic!("{r:?}"),
        }
        // One run after it: possible, two more to confirm.
        match recent(&x[..8], &[], &p) {
            Some(Recent::Possible { point, more }) => {
                assert_eq!((point.index, more), (7, 2), "{point:?}")
            }
            r => panic!("{r:?}"),
        }
        // No step: nothing.
        assert_eq!(recent(&base, &[], &p), None);
        // A single outlier among the newest three is no step.
        let mut y = base.clone();
        y[8] += 8.0 * sigma;
        assert!(!matches!(recent(&y, &[], &p), Some(Recent::Confirmed(_))));
    }

    fn noise_of(x: &[f64]) -> f64 {
        super::noise(x, &[])
    }

    /// The prefix table gives the same sums as the direct ones.
    #[test]
    fn pair_sums_agree() {
        let x = noise(17, 3, 1.0);
        let p = Pairs::new(&x);
        let direct = |a: usize, b: usize, c: usize, d: usize| -> f64 {
            let mut s = 0.0;
            for i in a..b {
                for j in c..d {
                    s += (x[i] - x[j]).abs();
                }
            }
            s
        };
        assert!((p.block((2, 9), (9, 15)) - direct(2, 9, 9, 15)).abs() < 1e-9);
        assert!((p.within(3, 12) - direct(3, 12, 3, 12) / 2.0).abs() < 1e-9);
    }
}
