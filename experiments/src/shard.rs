//! Deterministic slices of a sweep: shard `i/N` holds the runs whose index is
//! `i - 1` modulo `N`. Round-robin (rather than contiguous blocks) spreads
//! the expensive corner of a grid (large ranks, large batches, usually the
//! last values of an axis) over all shards.

use std::fmt;
use std::str::FromStr;

/// Shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The whole sweep.
    pub const ALL: Shard = Shard { index: 1, count: 1 };

    /// Whether run `run_index` (0-based) belongs to this shard.
    pub fn selects(&self, run_index: usize) -> bool {
        run_index % self.count == self.index - 1
    }

    pub fn is_all(&self) -> bool {
        self.count == 1
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("invalid shard '{s}': expected i/N with 1 <= i <= N, e.g. 2/8");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        for bad in ["0/3", "4/3", "1/0", "3", "a/b", "1/3/4", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(Shard { index: 2, count: 3 }.to_string(), "2/3");
    }

    #[test]
    fn shards_partition_the_runs() {
        for total in [0usize, 1, 5, 64, 100] {
            for count in 1..=7 {
                let mut owner = vec![0usize; total];
                for index in 1..=count {
                    let s = Shard { index, count };
                    for (r, o) in owner.iter_mut().enumerate() {
                        if s.selects(r) {
                            *o += 1;
                        }
                    }
                }
                // union = all runs, and no run is in two shards
                assert!(owner.iter().all(|&o| o == 1), "total {total} count {count}");
            }
        }
        assert!((0..10).all(|r| Shard::ALL.selects(r)));
    }
}
