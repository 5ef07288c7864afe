//! Binary cross-entropy from logits, and the metrics: accuracy and exact AUC.

/// Mean BCE over the batch, computed stably from logits, and its gradient
/// with respect to each logit (already divided by the batch size).
pub fn bce_with_logits(z: &[f32], y: &[f32]) -> (f64, Vec<f32>) {
    assert_eq!(z.len(), y.len());
    let n = z.len().max(1) as f64;
    let mut loss = 0.0f64;
    let mut grad = Vec::with_capacity(z.len());
    for (&z, &y) in z.iter().zip(y) {
        let (zd, yd) = (z as f64, y as f64);
        loss += zd.max(0.0) - zd * yd + (-zd.abs()).exp().ln_1p();
        grad.push(((sigmoid(zd) - yd) / n) as f32);
    }
    (loss / n, grad)
}

pub fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Share of predictions on the right side of 0.5.
pub fn accuracy(scores: &[f32], labels: &[f32]) -> f64 {
    if scores.is_empty() {
        return 0.0;
    }
    let right = scores
        .iter()
        .zip(labels)
        // (A score that is not a number predicts nothing: never right.)
        .filter(|(s, l)| !s.is_nan() && (**s >= 0.0) == (**l >= 0.5))
        .count();
    right as f64 / scores.len() as f64
}

/// Exact ROC AUC by rank sums, ties sharing their average rank. `None` when
/// only one class is present.
pub fn auc(scores: &[f32], labels: &[f32]) -> Option<f64> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let pos = labels.iter().filter(|l| **l >= 0.5).count() as f64;
    let neg = labels.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        return None;
    }
    let mut rank_sum = 0.0f64;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && scores[idx[j + 1]] == scores[idx[i]] {
            j += 1;
        }
        // Ranks i+1 ..= j+1 share their average.
        let avg = (i + j + 2) as f64 / 2.0;
        for &k in &idx[i..=j] {
            if labels[k] >= 0.5 {
                rank_sum += avg;
            }
        }
        i = j + 1;
    }
    Some((rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bce_is_stable_and_correct() {
        let (l, g) = bce_with_logits(&[0.0, 100.0, -100.0], &[1.0, 1.0, 0.0]);
        assert!((l - (2f64.ln() / 3.0)).abs() < 1e-9, "{l}");
        assert!((g[0] + 0.5 / 3.0).abs() < 1e-7);
        assert!(g[1].abs() < 1e-7 && g[2].abs() < 1e-7);
        let (l, _) = bce_with_logits(&[-100.0], &[1.0]);
        assert!((l - 100.0).abs() < 1e-6);
    }

    #[test]
    fn auc_by_hand() {
        assert_eq!(
            auc(&[0.1, 0.4, 0.35, 0.8], &[0.0, 0.0, 1.0, 1.0]),
            Some(0.75)
        );
        assert_eq!(auc(&[1.0, 2.0], &[0.0, 1.0]), Some(1.0));
        assert_eq!(auc(&[2.0, 1.0], &[0.0, 1.0]), Some(0.0));
        // All tied: 0.5.
        assert_eq!(auc(&[0.3; 4], &[0.0, 1.0, 0.0, 1.0]), Some(0.5));
        assert_eq!(auc(&[0.3, 0.2], &[1.0, 1.0]), None);
        assert_eq!(accuracy(&[1.0, -1.0, 2.0], &[1.0, 0.0, 0.0]), 2.0 / 3.0);
        // A NaN score is wrong whatever the label.
        assert_eq!(
            accuracy(&[f32::NAN, f32::NAN, 1.0], &[0.0, 1.0, 1.0]),
            1.0 / 3.0
        );
    }
}
