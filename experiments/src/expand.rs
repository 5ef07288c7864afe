//! A spec as an ordered list of runs.
//!
//! The dimensions of the product are, in order: each `[axes]` key (in file
//! order), each `[[zip]]` group (in file order), then `[repeat] seeds`. The
//! first dimension varies slowest and the seeds fastest, like nested loops
//! written in file order, so the replicates of a point sit next to each other.

use crate::hash::{fnv1a64, hex};
use crate::spec::{Entry, Scalar, Spec};

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Position in the sweep (0-based); shards and the rows of `results.csv`
    /// follow it.
    pub index: usize,
    /// The command path (`["nmp", "run"]`).
    pub command: Vec<String>,
    /// Every flag of the run and its value: `[base]`, then the swept flags.
    pub config: Vec<(String, Scalar)>,
    /// The swept values as `results.csv` columns: (column, value).
    pub params: Vec<(String, String)>,
    /// [`config_hash`] of the command and config (16 hex digits).
    pub hash: String,
}

impl Run {
    /// `runs/<this>`: the index, zero-padded to the width of the largest index
    /// (at least 4 digits) so that directories list in run order, then the
    /// first 8 hex digits of the hash.
    pub fn dir_name(&self, total: usize) -> String {
        let width = total.saturating_sub(1).to_string().len().max(4);
        format!("{:0width$}-{}", self.index, &self.hash[..8])
    }

    /// `key=value` pairs of the swept flags, for listings.
    pub fn describe(&self) -> String {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The hash of a resolved configuration. It depends on the command and on the
/// set of (flag, value) pairs, not on their order in the spec, and not on the
/// build: a sweep resumed with a rebuilt binary reuses finished runs.
pub fn config_hash(command: &[String], config: &[(String, Scalar)]) -> String {
    let mut pairs: Vec<(&str, String)> = config
        .iter()
        .map(|(k, v)| (k.as_str(), v.render()))
        .collect();
    pairs.sort();
    let cmd = command.join(" ");
    let mut parts: Vec<&[u8]> = vec![b"nmpsim-sweep-run-v1", cmd.as_bytes()];
    for (k, v) in &pairs {
        parts.push(k.as_bytes());
        parts.push(v.as_bytes());
    }
    hex(fnv1a64(parts))
}

/// A hash of the whole run list: shards of one sweep share it, and `merge`
/// refuses to join directories whose plans differ.
pub fn plan_hash(runs: &[Run]) -> String {
    let count = runs.len().to_string();
    let parts = std::iter::once(count.as_bytes()).chain(runs.iter().map(|r| r.hash.as_bytes()));
    hex(fnv1a64(parts))
}

/// The runs of `spec`, in index order.
/// The most runs a spec may expand to: a million runs of a few seconds each
/// are weeks of machine time, and their plan alone a gigabyte of memory.
pub const MAX_RUNS: u128 = 1_000_000;

/// How many runs `spec` expands to (the product of its dimensions' lengths),
/// computed without expanding it and without overflowing.
pub fn run_count(spec: &Spec) -> u128 {
    let lens = spec
        .axes
        .iter()
        .map(|a| a.values.len())
        .chain(spec.zips.iter().map(|z| z.len()))
        .chain(spec.seeds.iter().map(|s| s.values.len()));
    lens.fold(1u128, |n, l| n.saturating_mul(l as u128))
}

/// Expands `spec` into its runs; check [`run_count`] against [`MAX_RUNS`]
/// first.
pub fn expand(spec: &Spec) -> Vec<Run> {
    // A dimension is a list of points; a point sets one or more flags.
    let mut dims: Vec<Vec<Vec<(&Entry, usize)>>> = Vec::new();
    for a in &spec.axes {
        dims.push((0..a.values.len()).map(|j| vec![(a, j)]).collect());
    }
    for z in &spec.zips {
        dims.push(
            (0..z.len())
                .map(|j| z.entries.iter().map(|e| (e, j)).collect())
                .collect(),
        );
    }
    if let Some(s) = &spec.seeds {
        dims.push((0..s.values.len()).map(|j| vec![(s, j)]).collect());
    }
    let total: usize = dims.iter().map(Vec::len).product();
    let mut runs = Vec::with_capacity(total);
    for index in 0..total {
        let mut pick = vec![0usize; dims.len()];
        let mut rem = index;
        for (d, dim) in dims.iter().enumerate().rev() {
            pick[d] = rem % dim.len();
            rem /= dim.len();
        }
        let mut config: Vec<(String, Scalar)> = spec
            .base
            .iter()
            .filter_map(|e| e.values.first().map(|v| (e.flag.clone(), v.value.clone())))
            .collect();
        let mut params = Vec::new();
        for (dim, &p) in dims.iter().zip(&pick) {
            for &(e, j) in &dim[p] {
                let v = &e.values[j].value;
                config.push((e.flag.clone(), v.clone()));
                params.push((e.column(), v.render()));
            }
        }
        let hash = config_hash(&spec.command, &config);
        runs.push(Run {
            index,
            command: spec.command.clone(),
            config,
            params,
            hash,
        });
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> Spec {
        Spec::parse(text, "t.toml").expect("valid spec")
    }

    fn param_table(runs: &[Run]) -> Vec<String> {
        runs.iter().map(Run::describe).collect()
    }

    #[test]
    fn product_in_file_order_first_axis_slowest() {
        let runs = expand(&spec(
            "command = \"dram\"\n[axes]\npreset = [\"A\", \"B\"]\nstream = [\"r\", \"s\", \"t\"]\n",
        ));
        assert_eq!(
            param_table(&runs),
            vec![
                "preset=A stream=r",
                "preset=A stream=s",
                "preset=A stream=t",
                "preset=B stream=r",
                "preset=B stream=s",
                "preset=B stream=t",
            ]
        );
        assert!(runs.iter().enumerate().all(|(i, r)| r.index == i));
    }

    #[test]
    fn zip_moves_together_and_seeds_vary_fastest() {
        let runs = expand(&spec(
            "command = \"nmp run\"\n[base]\nbatch = 64\n[axes]\nplacement = [\"p\", \"q\"]\n[[zip]]\nranks = [1, 4]\nlink-gbps = [25, 100]\n[repeat]\nseeds = [7, 8]\n",
        ));
        assert_eq!(runs.len(), 8);
        assert_eq!(
            param_table(&runs)[..4],
            [
                "placement=p ranks=1 link_gbps=25 seed=7",
                "placement=p ranks=1 link_gbps=25 seed=8",
                "placement=p ranks=4 link_gbps=100 seed=7",
                "placement=p ranks=4 link_gbps=100 seed=8",
            ]
        );
        assert_eq!(runs[0].config[0], ("batch".to_string(), Scalar::Int(64)));
        assert_eq!(
            runs[7].config.last(),
            Some(&("seed".to_string(), Scalar::Int(8)))
        );
    }

    #[test]
    fn a_spec_without_axes_is_one_run() {
        let runs = expand(&spec("command = \"dram\"\n[base]\nrequests = 10\n"));
        assert_eq!(runs.len(), 1);
        assert!(runs[0].params.is_empty());
    }

    #[test]
    fn hash_is_stable_order_independent_and_discriminating() {
        let a = expand(&spec(
            "command = \"dram\"\n[base]\nrequests = 10\nengine = \"x\"\n",
        ));
        let b = expand(&spec(
            "command = \"dram\"\n[base]\nengine = \"x\"\nrequests = 10\n",
        ));
        let c = expand(&spec(
            "command = \"dram\"\n[base]\nengine = \"x\"\nrequests = 11\n",
        ));
        let d = expand(&spec(
            "command = \"train\"\n[base]\nengine = \"x\"\nrequests = 10\n",
        ));
        assert_eq!(a[0].hash, b[0].hash);
        assert_ne!(a[0].hash, c[0].hash);
        assert_ne!(a[0].hash, d[0].hash);
        // Pinned: a change here renames every run directory and defeats resume.
        assert_eq!(a[0].hash, config_hash(&["dram".into()], &a[0].config));
        assert_eq!(a[0].hash, "4d49817b9d14e37b");
        assert_eq!(a[0].hash.len(), 16);
    }

    #[test]
    fn dir_names_sort_in_run_order() {
        let runs = expand(&spec("command = \"dram\"\n[axes]\nrequests = [1, 2, 3]\n"));
        assert_eq!(runs[2].dir_name(3), format!("0002-{}", &runs[2].hash[..8]));
        assert!(runs[2].dir_name(123_456).starts_with("000002-"));
    }

    #[test]
    fn plan_hash_tracks_the_run_list() {
        let a = expand(&spec("command = \"dram\"\n[axes]\nrequests = [1, 2]\n"));
        let b = expand(&spec("command = \"dram\"\n[axes]\nrequests = [2, 1]\n"));
        assert_eq!(plan_hash(&a), plan_hash(&a.clone()));
        assert_ne!(plan_hash(&a), plan_hash(&b));
    }
}
