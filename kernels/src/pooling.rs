//! How the rows of one bag are combined into one output row.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Bag pooling, as PyTorch's `EmbeddingBag` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Pooling {
    /// Sum of the bag's rows. Per-index weights, if present, are ignored.
    #[default]
    Sum,
    /// Sum divided by the bag length (an empty bag gives zeros).
    Mean,
    /// Sum of `weight[i] * row[i]`; the batch must carry weights.
    WeightedSum,
}

impl Pooling {
    pub const ALL: [Pooling; 3] = [Pooling::Sum, Pooling::Mean, Pooling::WeightedSum];

    /// Whether backward needs a per-lookup scale (mean and weighted sum).
    pub fn scaled(self) -> bool {
        self != Pooling::Sum
    }
}

impl fmt::Display for Pooling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pooling::Sum => "sum",
            Pooling::Mean => "mean",
            Pooling::WeightedSum => "weighted-sum",
        })
    }
}

impl FromStr for Pooling {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sum" => Ok(Pooling::Sum),
            "mean" => Ok(Pooling::Mean),
            "weighted-sum" | "weighted" => Ok(Pooling::WeightedSum),
            _ => Err(format!(
                "unknown pooling `{s}`; expected sum, mean or weighted-sum"
            )),
        }
    }
}

/// The factor by which lookup `i` of a bag of `bag_len` lookups is scaled, in
/// both forward (weighted) and backward (mean, weighted). Every kernel uses this
/// one function so that the expand + coalesce and casted paths multiply by the
/// same f32 and stay bit-identical.
#[inline]
pub fn lookup_scale(pooling: Pooling, bag_len: u32, weight: Option<f32>) -> f32 {
    match pooling {
        Pooling::Sum => 1.0,
        Pooling::Mean => 1.0 / bag_len.max(1) as f32,
        Pooling::WeightedSum => weight.unwrap_or(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for p in Pooling::ALL {
            assert_eq!(p.to_string().parse::<Pooling>().unwrap(), p);
        }
        assert!(
            "max"
                .parse::<Pooling>()
                .unwrap_err()
                .contains("expected sum")
        );
    }
}
