use super::*;
use crate::counts::RowCounts;
use crate::{Distribution, GenSpec, Generator, TableBatch, TableSpec};

/// A batch of `tables` (rows, bags) with the bags given.
fn batch(tables: &[(u64, &[&[u32]])]) -> Batch {
    Batch {
        tables: tables
            .iter()
            .map(|&(rows, bags)| {
                let mut offsets = vec![0u32];
                let mut idx = Vec::new();
                for bag in bags {
                    idx.extend_from_slice(bag);
                    offsets.push(idx.len() as u32);
                }
                TableBatch::new(rows, offsets, idx, None).unwrap()
            })
            .collect(),
        dense: None,
        num_dense: 0,
        labels: None,
    }
}

/// Batches of a skewed generated workload: a large table (Zipf 1.05) and a
/// small one, bags of 3 and 1.
fn skewed(batches: usize, batch_size: usize) -> (Vec<u64>, Vec<Batch>) {
    let spec = GenSpec {
        tables: vec![
            TableSpec {
                rows: 50_000,
                distribution: Distribution::Zipf {
                    alpha: 1.05,
                    scatter: true,
                },
                bag_size: crate::BagSize::Fixed { size: 3 },
                weighted: false,
            },
            TableSpec {
                rows: 100,
                distribution: Distribution::Uniform,
                bag_size: crate::BagSize::Fixed { size: 1 },
                weighted: false,
            },
        ],
        batch_size,
        seed: 3,
    };
    let rows = spec.tables.iter().map(|t| t.rows).collect();
    (rows, Generator::new(spec).unwrap().take(batches).collect())
}

/// Samples at `rate` past the first `min_samples`.
fn sampling(rate: f64, min_samples: u64, seed: u64) -> Sampling {
    Sampling {
        rate,
        min_samples,
        seed,
    }
}

fn profile_of(rows: &[u64], batches: &[Batch], sampling: Sampling) -> AccessProfile {
    let mut pb = ProfileBuilder::new(rows, sampling).unwrap();
    for b in batches {
        pb.add(b).unwrap();
    }
    pb.finish().unwrap()
}

#[test]
fn sampling_takes_the_first_samples_then_the_rate() {
    let s = sampling(0.05, 1000, 9);
    assert!((0..1000).all(|i| s.takes(i)));
    let n = 400_000u64;
    let taken = (1000..1000 + n).filter(|&i| s.takes(i)).count() as f64;
    let share = taken / n as f64;
    assert!((share - 0.05).abs() < 0.002, "{share}");
    // The same draws every time, others with another seed.
    let again = (1000..1000 + n).filter(|&i| s.takes(i)).count() as f64;
    assert_eq!(taken, again);
    let other = Sampling { seed: 10, ..s };
    assert!((1000..3000).any(|i| s.takes(i) != other.takes(i)));
    assert!(Sampling::all().takes(u64::MAX));
}

#[test]
fn a_sample_rate_outside_zero_to_one_is_refused() {
    for rate in [0.0, -0.1, 1.5, f64::NAN, f64::INFINITY] {
        let e = Sampling {
            rate,
            ..Sampling::fae(0)
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("sample rate") && e.contains("(0, 1]"), "{e}");
        assert!(
            ProfileBuilder::new(
                &[10],
                Sampling {
                    rate,
                    ..Sampling::fae(0)
                }
            )
            .is_err()
        );
    }
    Sampling {
        rate: 1.0,
        ..Sampling::fae(0)
    }
    .validate()
    .unwrap();
}

#[test]
fn the_profile_counts_exactly_the_sampled_lookups() {
    let (rows, batches) = skewed(6, 512);
    let sampling = sampling(0.3, 700, 4);
    let p = profile_of(&rows, &batches, sampling);
    let mut want = RowCounts::new_for_tables(&rows);
    let (mut lookups, mut profiled, mut i) = (vec![0u64; 2], 0u64, 0u64);
    for b in &batches {
        for s in 0..b.batch_size() {
            if sampling.takes(i) {
                profiled += 1;
                for (t, tb) in b.tables.iter().enumerate() {
                    want[t].add(t, tb.bag(s)).unwrap();
                    lookups[t] += tb.bag(s).len() as u64;
                }
            }
            i += 1;
        }
    }
    assert_eq!(p.samples_seen, 6 * 512);
    assert_eq!(p.samples_profiled, profiled);
    assert!(profiled > 700 && profiled < 6 * 512);
    assert_eq!(p.lookups, lookups);
    for t in 0..2 {
        for r in 0..rows[t] as u32 {
            assert_eq!(p.counts[t].get(r), want[t].get(r), "table {t} row {r}");
        }
    }
}

#[test]
fn the_threshold_equals_an_exhaustive_scan() {
    let (rows, batches) = skewed(4, 1024);
    let p = profile_of(&rows, &batches, Sampling::all());
    let row_bytes = 64;
    let c = Calibration::new(&p, row_bytes).unwrap();
    assert_eq!(c.small, vec![false, true]);
    let max = p.counts[0].touched_counts().into_iter().max().unwrap();
    let bytes_at = |h: u64| {
        let hot = (0..rows[0] as u32)
            .filter(|&r| p.counts[0].get(r) >= h)
            .count() as u64;
        (hot + rows[1]) * row_bytes
    };
    for budget in [7_000u64, 20_000, 64_000, 150_000, 400_000, 3_000_000] {
        let want = (1..=max + 1).find(|&h| bytes_at(h) <= budget).unwrap();
        assert_eq!(c.threshold(budget).unwrap(), want, "budget {budget}");
        let r = c.budget(&p, budget).unwrap();
        assert!(r.hot_bytes <= budget);
        assert_eq!(r.hot_bytes, bytes_at(want));
        // One row more would not have fitted (unless every touched row is in).
        if want > 1 {
            assert!(bytes_at(want - 1) > budget);
        }
        // The lookup share, counted directly.
        let hot_lookups: u64 = (0..rows[0] as u32)
            .map(|r| p.counts[0].get(r))
            .filter(|&c| c >= want)
            .sum::<u64>()
            + p.lookups[1];
        let share = hot_lookups as f64 / p.total_lookups() as f64;
        assert!((r.lookup_share - share).abs() < 1e-12);
    }
    // A larger budget never has a higher threshold.
    let ts: Vec<u64> = [10_000u64, 50_000, 500_000]
        .iter()
        .map(|&b| c.threshold(b).unwrap())
        .collect();
    assert!(ts.windows(2).all(|w| w[0] >= w[1]), "{ts:?}");
}

#[test]
fn bad_budgets_and_empty_inputs_are_errors() {
    let (rows, batches) = skewed(2, 256);
    let p = profile_of(&rows, &batches, Sampling::all());
    let c = Calibration::new(&p, 64).unwrap();
    let e = c.threshold(0).unwrap_err().to_string();
    assert!(e.contains("budget") && e.contains("0 bytes"), "{e}");
    let all = (rows[0] + rows[1]) * 64;
    let e = c.threshold(all).unwrap_err().to_string();
    assert!(e.contains("holds every table whole"), "{e}");
    let e = c.threshold(100).unwrap_err().to_string();
    assert!(e.contains("tables under 1 MiB"), "{e}");
    let e = ProfileBuilder::new(&rows, Sampling::all())
        .unwrap()
        .finish()
        .unwrap_err()
        .to_string();
    assert!(e.contains("no samples"), "{e}");
    // A batch of other tables than the profile's.
    let mut pb = ProfileBuilder::new(&[10, 10], Sampling::all()).unwrap();
    let e = pb.add(&batch(&[(10, &[&[1]])])).unwrap_err().to_string();
    assert!(e.contains("1 tables") && e.contains("set up for 2"), "{e}");
    assert!(Calibration::new(&p, 0).is_err());
}

#[test]
fn the_hot_set_partitions_each_table_and_hot_samples_touch_only_hot_rows() {
    let (rows, batches) = skewed(4, 1024);
    let sampling = sampling(0.5, 1000, 2);
    let p = profile_of(&rows, &batches, sampling);
    let c = Calibration::new(&p, 64).unwrap();
    let mut mins = SampleMins::new(&p, &c);
    for b in &batches {
        mins.add(b).unwrap();
    }
    let samples = mins.finish().unwrap();
    for budget in [10_000u64, 80_000, 1_000_000] {
        let mut r = c.budget(&p, budget).unwrap();
        samples.fill(&mut r);
        let hs = HotSet::new(&p, &c, r.threshold);
        // A partition: every row is hot or cold, the hot ones exactly those
        // at the threshold.
        for (t, &n) in rows.iter().enumerate() {
            let hot = hs.hot_rows(t, n);
            assert!(hot.windows(2).all(|w| w[0] < w[1]));
            for row in 0..n as u32 {
                let want = c.small[t] || p.counts[t].get(row) >= r.threshold;
                assert_eq!(hs.is_hot(t, row), want);
                assert_eq!(hot.binary_search(&row).is_ok(), want);
            }
        }
        assert_eq!(hs.hot_rows(0, rows[0]).len() as u64, r.hot_rows);
        // The sample share, classified sample by sample.
        let (mut hot, mut n, mut i) = (0u64, 0u64, 0u64);
        for b in &batches {
            for s in 0..b.batch_size() {
                if sampling.takes(i) {
                    n += 1;
                    if hs.sample_is_hot(b, s) {
                        hot += 1;
                        for (t, tb) in b.tables.iter().enumerate() {
                            assert!(tb.bag(s).iter().all(|&row| hs.is_hot(t, row)));
                        }
                    }
                }
                i += 1;
            }
        }
        assert_eq!(
            r.sample_share,
            Some(hot as f64 / n as f64),
            "budget {budget}"
        );
    }
    // A second pass over another input is refused.
    let mut mins = SampleMins::new(&p, &c);
    mins.add(&batches[0]).unwrap();
    assert!(
        mins.finish()
            .unwrap_err()
            .to_string()
            .contains("the input changed")
    );
}

#[test]
fn rand_em_box_brackets_the_exact_count() {
    // 200K rows, a tenth of them hot (count 5), the rest at 1, at random.
    let rows = 200_000u64;
    let mut counts = RowCounts::new_for_tables(&[rows]).remove(0);
    let mut s = 7u64;
    let mut exact = 0u64;
    for r in 0..rows as u32 {
        let hot = splitmix64(&mut s) % 10 == 0;
        exact += u64::from(hot);
        let n = if hot { 5 } else { 1 };
        counts.add(0, &vec![r; n]).unwrap();
    }
    for seed in 0..10 {
        let (mean, low, high, is_exact) = rand_em_box(&counts, 5, seed);
        assert!(!is_exact);
        assert!(
            low <= exact as f64 && exact as f64 <= high,
            "{low} {exact} {high}"
        );
        assert!(
            (mean - exact as f64).abs() / (exact as f64) < 0.1,
            "{mean} {exact}"
        );
    }
    // A table smaller than the 35 chunks is counted exactly.
    let small = RowCounts::new_for_tables(&[1000]).remove(0);
    assert_eq!(rand_em_box(&small, 1, 0), (0.0, 0.0, 0.0, true));
}

#[test]
fn retained_lookups_give_the_second_pass_s_hot_samples() {
    use crate::{BagSize, Distribution, GenSpec, Generator, TableSpec};
    let spec = GenSpec {
        tables: (0..3)
            .map(|t| TableSpec {
                rows: 20_000 + 1000 * t,
                distribution: Distribution::Zipf {
                    alpha: 1.05,
                    scatter: true,
                },
                bag_size: BagSize::Uniform { min: 1, max: 3 },
                weighted: false,
            })
            .collect(),
        batch_size: 100,
        seed: 9,
    };
    let batches: Vec<Batch> = Generator::new(spec.clone()).unwrap().take(40).collect();
    let rows: Vec<u64> = spec.tables.iter().map(|t| t.rows).collect();
    // Sampled past the first 1000 samples, so the kept batches are a subset.
    let sampling = sampling(0.3, 1000, 4);
    let mut pb = ProfileBuilder::new(&rows, sampling)
        .unwrap()
        .retaining(1 << 30);
    for b in &batches {
        pb.add(b).unwrap();
    }
    let (profile, kept) = pb.finish_retained().unwrap();
    let kept = kept.expect("under the limit");
    let cal = Calibration::new(&profile, 64).unwrap();
    let from_kept = HotSamples::of_retained(&profile, &cal, &kept).unwrap();
    let mut mins = SampleMins::new(&profile, &cal);
    for b in &batches {
        mins.add(b).unwrap();
    }
    let second = mins.finish().unwrap();
    for th in 1..20 {
        assert_eq!(
            from_kept.share_at(th),
            second.share_at(th),
            "threshold {th}"
        );
    }
    assert!(second.share_at(2) > 0.0 && second.share_at(2) < 1.0);
    // Past the limit nothing is kept.
    let mut pb = ProfileBuilder::new(&rows, sampling)
        .unwrap()
        .retaining(1000);
    for b in &batches {
        pb.add(b).unwrap();
    }
    assert!(pb.finish_retained().unwrap().1.is_none());
}
