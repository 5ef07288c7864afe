//! Learning-rate warm-up and decay, as the DLRM reference's scheduler does:
//! linear warm-up over `warmup_steps`, constant until `decay_start_step`,
//! then a quadratic fall to a floor over `decay_steps`, the floor after.

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
    /// The learning rate at `step` (counted from 0) for base rate `lr`.
    pub fn lr_at(&self, lr: f32, step: u64) -> f32 {
        if step < self.warmup_steps {
            let left = (self.warmup_steps - step) as f32 / self.warmup_steps as f32;
            return lr * (1.0 - left);
        }
        if self.decay_steps > 0 && step >= self.decay_start_step {
            let done = step - self.decay_start_step;
            if done < self.decay_steps {
                let f = (self.decay_steps - done) as f32 / self.decay_steps as f32;
                return (lr * f * f).max(MIN_LR);
            }
            return MIN_LR;
        }
        lr
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

    #[test]
    fn warmup_then_decay() {
        let s = LrSchedule {
            warmup_steps: 4,
            decay_start_step: 10,
            decay_steps: 4,
        };
        assert_eq!(s.lr_at(1.0, 0), 0.0);
        assert_eq!(s.lr_at(1.0, 2), 0.5);
        assert_eq!(s.lr_at(1.0, 4), 1.0);
        assert_eq!(s.lr_at(1.0, 9), 1.0);
        assert_eq!(s.lr_at(1.0, 10), 1.0);
        assert_eq!(s.lr_at(1.0, 12), 0.25);
        assert_eq!(s.lr_at(1.0, 14), MIN_LR);
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
