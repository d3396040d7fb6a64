//! Small statistics helpers (pandas conventions: sample std with ddof=1).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics() {
        assert_eq!(mean(&[1.0, 2.0, 3.0]), Some(2.0));
        assert_eq!(std(&[1.0, 2.0, 3.0]), Some(1.0));
        assert_eq!(std(&[1.0]), None);
        let g = group_by(5, |i| i % 2);
        assert_eq!(g, vec![(0, vec![0, 2, 4]), (1, vec![1, 3])]);
    }
}
