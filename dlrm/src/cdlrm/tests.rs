use nmpsim_kernels::{
    EmbeddingTable, Optimizer, OptimizerKind, OptimizerState, Pooling, coalesce, expand,
    gather_reduce, scatter_update,
};
use nmpsim_traces::{Batch, Distribution, GenSpec, Generator, Rng, TableSpec};

use super::*;

#[test]
fn next_prime_is_the_least_prime_at_least_its_argument() {
    for (x, p) in [
        (0, 2),
        (1, 2),
        (2, 2),
        (3, 3),
        (4, 5),
        (24, 29),
        (97, 97),
        (50_000, 50_021),
        (150_000, 150_001),
        (1_000_000, 1_000_003),
    ] {
        assert_eq!(next_prime(x), p, "NextPrime({x})");
    }
}

#[test]
fn a_small_table_is_held_whole_and_a_large_one_gets_next_prime_sets() {
    let g = Geometry::for_table(40_000, DEFAULT_SETS, DEFAULT_WAYS).unwrap();
    assert_eq!((g.sets, g.ways), (40_000, 1));
    assert_eq!(g.set_of(39_999), 39_999);
    let g = Geometry::for_table(1_000_000, DEFAULT_SETS, DEFAULT_WAYS).unwrap();
    assert_eq!((g.sets, g.ways), (50_021, 16));
    assert_eq!(g.set_of(50_021 + 7), 7);
    assert_eq!(g.slots(), 50_021 * 16);
    assert_eq!(g.bytes(64, 0), 50_021 * 16 * 64 * 4);
    let e = Geometry::for_table(10, 5, 0).unwrap_err().to_string();
    assert!(e.contains("--ways 0"), "{e}");
    let e = Geometry::for_table(10, 0, 4).unwrap_err().to_string();
    assert!(e.contains("--cache-sets 0"), "{e}");
}

/// One row's values: its id in every value, so a test sees whose values a
/// slot holds.
fn rows_of(rows: &[u32], dim: usize) -> Vec<f32> {
    rows.iter().flat_map(|&r| vec![r as f32; dim]).collect()
}

#[test]
fn pinned_rows_stay_and_colliding_misses_lose_to_one_winner() {
    // One set of two ways.
    let g = Geometry { sets: 1, ways: 2 };
    let mut c = TableCache::new(g, 2, 0, 7).unwrap();
    let mut wb = WriteBack::default();
    let i = c.install(&[1, 2], &rows_of(&[1, 2], 2), &[], &mut wb);
    // Both drew a way at once: they took both, or one lost a collision.
    assert_eq!(i.hits, 0);
    assert_eq!(i.installed + i.victims.len() as u64, 2);
    let before: Vec<_> = [1, 2].iter().map(|&r| c.slot_of(r)).collect();
    // Row 1 (or 2) is held and needed again: pinned, it stays; the two new
    // rows draw the one way left unpinned, and one of them loses.
    let held = if before[0].is_some() { 1 } else { 2 };
    let rows = if held == 1 { [1, 5, 6] } else { [2, 5, 6] };
    let j = c.install(&rows, &rows_of(&rows, 2), &[], &mut wb);
    assert_eq!(j.hits, 1);
    assert_eq!(
        c.slot_of(held),
        before[(held - 1) as usize],
        "a pinned row moved"
    );
    assert!(c.is_pinned(c.slot_of(held).unwrap()));
    assert_eq!(j.installed + j.victims.len() as u64, 2);
    let placed: Vec<u32> = [5, 6]
        .into_iter()
        .filter(|&r| c.slot_of(r).is_some())
        .collect();
    assert_eq!(placed.len(), 1, "one way for two misses");
    assert_eq!(
        c.slot(c.slot_of(placed[0]).unwrap()).0,
        &[placed[0] as f32; 2]
    );
    // Whatever the unpinned way held went to the write-back queue.
    assert_eq!(wb.rows.len() as u64, j.evicted);
    assert!(!wb.rows.contains(&held));
}

#[test]
fn every_miss_is_placed_or_a_victim_and_every_placed_row_leaves_once() {
    let g = Geometry { sets: 13, ways: 3 };
    let mut c = TableCache::new(g, 1, 1, 3).unwrap();
    let mut rng = Rng::new(11);
    let mut wb = WriteBack::default();
    let mut installed = std::collections::BTreeMap::<u32, u64>::new();
    for _ in 0..200 {
        let mut rows: Vec<u32> = (0..30).map(|_| rng.below(400) as u32).collect();
        rows.sort_unstable();
        rows.dedup();
        let held: Vec<bool> = rows.iter().map(|&r| c.slot_of(r).is_some()).collect();
        let i = c.install(&rows, &rows_of(&rows, 1), &rows_of(&rows, 1), &mut wb);
        assert_eq!(
            i.hits + i.installed + i.victims.len() as u64,
            rows.len() as u64
        );
        for (k, &r) in rows.iter().enumerate() {
            let victim = i.victims.binary_search(&k).is_ok();
            // A victim is not held, every other row of the window is, pinned.
            assert_eq!(c.slot_of(r).is_none(), victim, "row {r}");
            if let Some(s) = c.slot_of(r) {
                assert!(c.is_pinned(s));
            }
            if !held[k] && !victim {
                *installed.entry(r).or_default() += 1;
            }
        }
        assert!(c.occupied() <= g.slots() as usize);
    }
    c.flush(&mut wb);
    assert_eq!(c.occupied(), 0);
    let mut left = std::collections::BTreeMap::<u32, u64>::new();
    for &r in &wb.rows {
        *left.entry(r).or_default() += 1;
    }
    assert_eq!(left, installed, "each placed row is written back once");
}

/// Zipf batches of `tables` tables of `rows` rows.
fn batches(tables: usize, rows: u64, count: usize, seed: u64) -> Vec<Batch> {
    let spec = GenSpec {
        batch_size: 16,
        tables: (0..tables)
            .map(|_| TableSpec {
                rows,
                bag_size: nmpsim_traces::BagSize::Fixed { size: 4 },
                distribution: Distribution::Zipf {
                    alpha: 0.8,
                    scatter: true,
                },
                weighted: false,
            })
            .collect(),
        seed,
    };
    let mut g = Generator::new(spec).unwrap();
    (0..count).map(|_| g.next_batch()).collect()
}

/// The upstream gradient of a batch's pooled output: a function of the
/// batch number and the pooled values only.
fn grad_out(pooled: &[f32], k: usize) -> Vec<f32> {
    pooled
        .iter()
        .enumerate()
        .map(|(i, p)| 0.01 * p + ((i + k) % 7) as f32 * 1e-3)
        .collect()
}

/// One step of one table: forward, expand, coalesce, scatter.
fn step(
    table: &mut EmbeddingTable,
    state: &mut OptimizerState,
    b: &nmpsim_traces::TableBatch,
    o: &Optimizer,
    k: usize,
) -> Vec<f32> {
    let (pooled, _) = gather_reduce(table, b, Pooling::Sum).unwrap();
    let g = grad_out(&pooled, k);
    let (e, _) = expand(&g, table.dim, b, Pooling::Sum).unwrap();
    let (c, _) = coalesce(&e, table.rows).unwrap();
    scatter_update(table, state, &c, o).unwrap();
    pooled
}

/// Trains `batches` on the host tables directly and through the caches;
/// returns the pooled outputs of both, the final tables and states of
/// both, and the caches' counts.
#[allow(clippy::type_complexity)]
fn train_both(
    kind: OptimizerKind,
    options: CdlrmOptions,
    rows: u64,
    batches: &[Batch],
) -> (
    Vec<Vec<f32>>,
    Vec<Vec<f32>>,
    (Vec<EmbeddingTable>, Vec<OptimizerState>),
    CachedTables,
) {
    let o = kind.with_lr(0.05);
    let tables = batches[0].tables.len();
    let init: Vec<EmbeddingTable> = (0..tables)
        .map(|t| EmbeddingTable::seeded(rows, 8, 100 + t as u64).unwrap())
        .collect();
    let states: Vec<OptimizerState> = (0..tables)
        .map(|_| OptimizerState::new(&o, rows, 8).unwrap())
        .collect();
    let (mut direct, mut direct_state) = (init.clone(), states.clone());
    let mut ours = Vec::new();
    for (k, b) in batches.iter().enumerate() {
        for t in 0..tables {
            ours.push(step(
                &mut direct[t],
                &mut direct_state[t],
                &b.tables[t],
                &o,
                k,
            ));
        }
    }
    let mut cached = CachedTables::new(init, states, options).unwrap();
    let windows: Vec<&[Batch]> = batches.chunks(options.lookahead).collect();
    cached.prefetch(windows[0]);
    let mut theirs = Vec::new();
    for (w, window) in windows.iter().enumerate() {
        cached.begin_window(windows.get(w + 1).copied()).unwrap();
        for (i, b) in window.iter().enumerate() {
            let k = w * options.lookahead + i;
            for t in 0..tables {
                let mut work = cached.working(t, &b.tables[t]).unwrap();
                theirs.push(step(&mut work.table, &mut work.state, &work.batch, &o, k));
                cached.finish(t, work);
            }
        }
    }
    cached.flush();
    (ours, theirs, (direct, direct_state), cached)
}

#[test]
fn coherent_training_through_the_caches_is_bit_identical_to_training_the_tables() {
    // 2000-row tables over 61 sets of 2 ways: evictions, victims and
    // re-installs in every window.
    let options = CdlrmOptions {
        sets: 60,
        ways: 2,
        lookahead: 3,
        consistency: Consistency::Coherent,
        seed: 5,
    };
    let bs = batches(2, 2000, 24, 9);
    for kind in [
        OptimizerKind::Sgd,
        OptimizerKind::Adagrad,
        OptimizerKind::RowWiseAdagrad,
    ] {
        let (ours, theirs, (tables, states), cached) = train_both(kind, options, 2000, &bs);
        let first = ours.iter().zip(&theirs).position(|(a, b)| a != b);
        assert_eq!(
            first, None,
            "{kind}: the pooled outputs differ from step (x table) {first:?}"
        );
        assert_eq!(ours.len(), theirs.len());
        for t in 0..2 {
            assert!(
                cached.host[t].data == tables[t].data,
                "{kind}: table {t} differs"
            );
            assert!(
                cached.host_state[t].values == states[t].values,
                "{kind}: state {t} differs"
            );
            let c = &cached.counts[t];
            assert!(
                c.evictions > 0 && c.victim_rows > 0 && c.conflict_victims > 0,
                "{c:?}"
            );
            assert_eq!(c.stale_installs, 0);
            assert_eq!(cached.occupied(t), 0, "flushed");
        }
    }
}

#[test]
fn the_async_race_of_section_5_3_installs_a_stale_row_and_is_counted() {
    // One way per set (L = 1 gives NextPrime(1) = 2 sets), rows 3 and 5 in
    // one set. Row 3 is needed in windows 0 and 2, row 5 in window 1:
    // window 1's install evicts 3, and window 2 (with 3) is fetched from the
    // host before the host has 3's update.
    let mk = |row: u32| Batch {
        tables: vec![nmpsim_traces::TableBatch {
            num_rows: 6,
            offsets: vec![0, 1],
            indices: vec![row],
            weights: None,
        }],
        dense: None,
        num_dense: 0,
        labels: None,
    };
    let bs = [mk(3), mk(5), mk(3)];
    let options = |consistency| CdlrmOptions {
        sets: 1,
        ways: 1,
        lookahead: 1,
        consistency,
        seed: 0,
    };
    let (ours, theirs, (tables, _), cached) =
        train_both(OptimizerKind::Sgd, options(Consistency::Async), 6, &bs);
    assert_eq!(cached.counts[0].stale_installs, 1);
    assert_ne!(ours, theirs, "window 2 read row 3 before its update");
    assert_ne!(cached.host[0].data, tables[0].data);
    let (ours, theirs, (tables, _), cached) =
        train_both(OptimizerKind::Sgd, options(Consistency::Coherent), 6, &bs);
    assert_eq!(cached.counts[0].stale_installs, 0);
    assert_eq!(ours, theirs);
    assert_eq!(cached.host[0].data, tables[0].data);
}

#[test]
fn bad_options_are_refused_naming_the_flag() {
    let bad = |o: CdlrmOptions| o.validate().unwrap_err().to_string();
    let d = CdlrmOptions::default();
    assert!(bad(CdlrmOptions { lookahead: 0, ..d }).contains("--lookahead 0"));
    assert!(bad(CdlrmOptions { ways: 0, ..d }).contains("--ways 0"));
    assert_eq!("async".parse(), Ok(Consistency::Async));
    assert!(
        "eventual"
            .parse::<Consistency>()
            .unwrap_err()
            .contains("coherent or async")
    );
}

#[test]
fn a_window_fetch_finds_each_looked_up_row_once_in_order_with_its_values() {
    // Dense (bit per row) and sparse (sorted lookups) windows alike.
    for rows in [300u64, 1_000_000] {
        let w = batches(1, rows, 3, 4);
        let table = EmbeddingTable::seeded(rows, 4, 2).unwrap();
        let o = OptimizerKind::Adagrad.with_lr(0.1);
        let mut state = OptimizerState::new(&o, rows, 4).unwrap();
        for (i, v) in state.values.iter_mut().enumerate() {
            *v = i as f32;
        }
        let (got, values, st) = fetch_window(&table, &state, &w, 0);
        let want: std::collections::BTreeSet<u32> = w
            .iter()
            .flat_map(|b| b.tables[0].indices.iter().copied())
            .collect();
        assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "{rows} rows");
        for (i, &r) in got.iter().enumerate() {
            let r = r as usize;
            assert_eq!(values[i * 4..(i + 1) * 4], table.data[r * 4..(r + 1) * 4]);
            assert_eq!(st[i * 4..(i + 1) * 4], state.values[r * 4..(r + 1) * 4]);
        }
    }
}
