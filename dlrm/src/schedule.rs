//! Learning-rate warm-up and decay, as the DLRM reference's scheduler
//! (`LRPolicyScheduler`) sets them. Its step count is 1 for the first
//! iteration (PyTorch's schedulers step once when they are made), so
//! iteration `i` runs at step `s = i + 1`:
//!
//! - warm-up, `s < W`: `lr * s / W` (the first iteration already moves);
//! - decay, `S <= s < S + D`: `max(1e-7, lr * ((D - (s - S)) / D)^2)`;
//! - otherwise, with a decay (`D > 0`), the rate last set by either branch:
//!   the last warm-up rate between warm-up and decay, the last decayed rate
//!   after the decay (the plain `lr` where neither has run);
//! - otherwise, without a decay, `lr`.

use serde::{Deserialize, Serialize};

/// The smallest learning rate the decay reaches.
pub const MIN_LR: f32 = 1e-7;

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LrSchedule {
    pub warmup_steps: u64,
    pub decay_start_step: u64,
    pub decay_steps: u64,
}

impl LrSchedule {
    /// The learning rate of iteration `iteration` (counted from 0) for base
    /// rate `lr` (see the [module documentation](self)).
    pub fn lr_at(&self, lr: f32, iteration: u64) -> f32 {
        let s = iteration.saturating_add(1);
        if let Some(x) = self.branch(lr, s) {
            return x;
        }
        if self.decay_steps == 0 {
            return lr;
        }
        // The latest earlier step at which a branch set the rate: the decay's
        // last step if it is over, else the warm-up's last step if it is.
        let (w, start, end) = (
            self.warmup_steps,
            self.decay_start_step,
            self.decay_start_step.saturating_add(self.decay_steps),
        );
        let last_decay = end - 1;
        let earlier = if s > last_decay && last_decay >= start.max(1) {
            Some(last_decay)
        } else if w >= 2 {
            Some((w - 1).min(s - 1))
        } else {
            None
        };
        earlier.and_then(|t| self.branch(lr, t)).unwrap_or(lr)
    }

    /// The rate the warm-up or the decay branch sets at step `s` (from 1),
    /// if either applies.
    fn branch(&self, lr: f32, s: u64) -> Option<f32> {
        let w = self.warmup_steps;
        if s < w {
            let left = (w - s) as f64 / w as f64;
            return Some((lr as f64 * (1.0 - left)) as f32);
        }
        let (start, d) = (self.decay_start_step, self.decay_steps);
        if start <= s && s - start < d {
            let f = (d - (s - start)) as f64 / d as f64;
            return Some(((lr as f64 * f * f) as f32).max(MIN_LR));
        }
        None
    }

    pub fn validate(&self) -> Result<(), crate::DlrmError> {
        if self.decay_steps > 0 && self.decay_start_step < self.warmup_steps {
            return Err(crate::DlrmError::Config(format!(
                "learning-rate decay starts at step {} inside the {}-step warm-up",
                self.decay_start_step, self.warmup_steps
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference's scheduler, stepped as PyTorch steps it: once when
    /// made, then after every iteration; `last_lr` kept across steps.
    fn reference(lr: f32, s: &LrSchedule, iters: u64) -> Vec<f32> {
        let (w, start, d) = (
            s.warmup_steps as f64,
            s.decay_start_step as f64,
            s.decay_steps as f64,
        );
        let mut last: Option<f64> = None;
        (1..=iters)
            .map(|step| {
                let c = step as f64;
                let x = if c < w {
                    let v = lr as f64 * (1.0 - (w - c) / w);
                    last = Some(v);
                    v
                } else if start <= c && c < start + d {
                    let v = (lr as f64 * ((d - (c - start)) / d).powi(2)).max(MIN_LR as f64);
                    last = Some(v);
                    v
                } else if d > 0.0 {
                    last.unwrap_or(lr as f64)
                } else {
                    lr as f64
                };
                x as f32
            })
            .collect()
    }

    #[test]
    fn follows_the_reference_scheduler() {
        // A hand-worked case: W 3, S 5, D 4 at lr 0.1.
        let s = LrSchedule {
            warmup_steps: 3,
            decay_start_step: 5,
            decay_steps: 4,
        };
        let got: Vec<f32> = (0..12).map(|i| s.lr_at(0.1, i)).collect();
        let want = [
            0.1 / 3.0,
            0.2 / 3.0,
            0.2 / 3.0,
            0.2 / 3.0,
            0.1,
            0.1 * 0.5625,
            0.1 * 0.25,
            0.1 * 0.0625,
            0.1 * 0.0625,
            0.1 * 0.0625,
            0.1 * 0.0625,
            0.1 * 0.0625,
        ];
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= 1e-7, "iteration {i}: {g} against {w}");
        }
        // Every small schedule, step by step, against the stateful reference.
        for w in 0..5 {
            for start in 0..8 {
                for d in 0..5 {
                    let s = LrSchedule {
                        warmup_steps: w,
                        decay_start_step: start,
                        decay_steps: d,
                    };
                    if s.validate().is_err() {
                        continue;
                    }
                    let want = reference(0.3, &s, 20);
                    for (i, w) in want.iter().enumerate() {
                        let g = s.lr_at(0.3, i as u64);
                        assert!(
                            (g - w).abs() <= 1e-7 * w.abs().max(1.0),
                            "{s:?} iteration {i}: {g} against {w}"
                        );
                    }
                }
            }
        }
        // A floor the decay reaches: 1e-7, held after the decay.
        let tiny = LrSchedule {
            warmup_steps: 0,
            decay_start_step: 1,
            decay_steps: 1000,
        };
        assert_eq!(tiny.lr_at(1e-3, 998), MIN_LR);
        assert_eq!(tiny.lr_at(1e-3, 5000), MIN_LR);
        assert_eq!(LrSchedule::default().lr_at(0.3, 1000), 0.3);
        assert!(
            LrSchedule {
                warmup_steps: 5,
                decay_start_step: 2,
                decay_steps: 1
            }
            .validate()
            .is_err()
        );
    }
}
