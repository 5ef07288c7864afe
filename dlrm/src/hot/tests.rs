use std::sync::{Arc, Mutex};

use nmpsim_kernels::{EmbeddingTable, Optimizer};
use nmpsim_traces::{BagSize, Batch, Distribution, GenSpec, TableSpec};

use super::fae::Fae;
use super::*;
use crate::embedding::{EmbeddingStrategy, HostTimes, StepCtx, SystemMode, SystemModes, TimingEnv};
use crate::gpu::GpuPreset;
use crate::strategy::{self, BuildCtx};
use crate::timeline::StepTimeline;
use crate::trainer::{DataSource, Quiet, TrainConfig};
use crate::{CpuDense, DenseOptimizer, DlrmConfig, Interaction, NmpSetup, PoolTimer, TeacherData};

const BATCH: usize = 64;

/// Two skewed tables past 1 MiB at SGD's 32-byte rows and a small one.
fn spec() -> GenSpec {
    let t = |rows, alpha: Option<f64>, bag| TableSpec {
        rows,
        distribution: match alpha {
            Some(alpha) => Distribution::Zipf {
                alpha,
                scatter: true,
            },
            None => Distribution::Uniform,
        },
        bag_size: BagSize::Fixed { size: bag },
        weighted: false,
    };
    GenSpec {
        tables: vec![
            t(50_000, Some(1.1), 1),
            t(40_000, Some(1.05), 2),
            t(100, None, 1),
        ],
        batch_size: BATCH,
        seed: 3,
    }
}

pub(super) fn config(iters: u64, optimizer: Optimizer) -> TrainConfig {
    let s = spec();
    let model = DlrmConfig {
        bottom: vec![4, 8, 8],
        top: vec![8, 1],
        top_input: None,
        dim: 8,
        table_rows: s.tables.iter().map(|t| t.rows).collect(),
        interaction: Interaction::Dot,
        pooling: nmpsim_kernels::Pooling::Sum,
    };
    let mut c = TrainConfig::sgd(model, BATCH, iters, 0.1);
    c.embedding_optimizer = optimizer;
    c
}

fn teacher(seed: u64, batch: usize) -> TeacherData {
    let mut s = spec();
    s.batch_size = batch;
    s.seed = seed;
    TeacherData::new(s, 4, 7).unwrap()
}

pub(super) fn options(schedule: Schedule) -> HotOptions {
    HotOptions {
        // (Under the rows the profiled samples touch: some samples are cold.)
        budget_bytes: 48 << 10,
        schedule,
        scars_schedule: schedule,
        ..HotOptions::default()
    }
}

pub(super) fn context(c: &TrainConfig, o: HotOptions) -> Arc<HotContext> {
    let mut d = teacher(1, c.batch);
    let samples = c.iters * c.batch as u64;
    Arc::new(HotContext::profile(&mut d, &c.model.table_rows, samples, o).unwrap())
}

pub(super) fn adagrad() -> Optimizer {
    Optimizer::Adagrad {
        lr: 0.1,
        eps: 1e-8,
        initial_accumulator: 0.0,
    }
}

#[test]
fn the_split_is_a_partition_and_hot_batches_touch_hot_rows_only() {
    let c = config(40, Optimizer::Sgd { lr: 0.1 });
    let h = context(&c, options(Schedule::fixed(10.0)));
    let plan = HotPlan::fae(&h, &c).unwrap();
    // The hot rows of each table and the rest partition it.
    for (t, &rows) in c.model.table_rows.iter().enumerate() {
        let hot = &plan.rows[t];
        let n = (0..rows as u32).filter(|&r| plan.set.is_hot(t, r)).count();
        assert_eq!(n, hot.len(), "table {t}");
        assert!(hot.iter().all(|&r| plan.set.is_hot(t, r)));
    }
    assert!(plan.set.all_hot(2) && !plan.set.all_hot(0) && !plan.set.all_hot(1));
    assert!(plan.hot_rows() * plan.row_bytes <= 48 << 10);
    let mut input = HotColdInput::new(
        Box::new(teacher(1, BATCH)),
        plan.clone(),
        Schedule::fixed(10.0),
        BATCH,
        40,
    )
    .unwrap();
    let (mut hot, mut cold, mut samples) = (0, 0, 0);
    let mut kinds = Vec::new();
    for _ in 0..40 {
        let b = input.next_batch().unwrap().unwrap();
        samples += b.batch_size();
        let is_hot = plan.batch_is_hot(&b);
        if is_hot {
            hot += 1;
        } else {
            // Every sample of a cold mini-batch looks up a cold row.
            for s in 0..b.batch_size() {
                assert!(!plan.set.sample_is_hot(&b, s));
            }
            cold += 1;
        }
        kinds.push(is_hot);
    }
    assert!(hot > 3 && cold > 3, "{hot} hot, {cold} cold mini-batches");
    assert_eq!(samples, 40 * BATCH);
    // Cold first; the kinds alternate in phases.
    assert!(!kinds[0]);
    let switches = kinds.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches >= 4, "{kinds:?}");
    let s = &input.stats;
    assert_eq!(s.hot_batches + s.cold_batches, 40);
}

/// A mini-batch sequence with hot and cold mini-batches (FAE's split).
pub(super) fn split_sequence(c: &TrainConfig, h: &HotContext) -> Vec<Batch> {
    let plan = HotPlan::fae(h, c).unwrap();
    let mut input = HotColdInput::new(
        Box::new(teacher(1, c.batch)),
        plan,
        Schedule::fixed(10.0),
        c.batch,
        c.iters,
    )
    .unwrap();
    (0..c.iters)
        .map(|_| input.next_batch().unwrap().unwrap())
        .collect()
}

fn train(
    name: &str,
    c: &TrainConfig,
    h: &Arc<HotContext>,
    batches: &[Batch],
    pool: Option<Arc<Mutex<PoolTimer>>>,
) -> (crate::Trainer, Vec<(String, String)>) {
    let gpu = GpuPreset::named("v100").unwrap();
    let entry = strategy::find(name).unwrap();
    let mut ctx = BuildCtx::new(c, gpu, pool.filter(|_| entry.uses_nmp));
    ctx.hot = Some(h.clone());
    let dense = CpuDense::new(&c.model, DenseOptimizer::Sgd, c.seed).unwrap();
    let mut tr = strategy::trainer(entry, &ctx, Box::new(dense)).unwrap();
    let mut data = batches.iter().cloned().map(Ok).peekable();
    let out = tr.train(&mut data, &[], &mut Quiet).unwrap();
    assert_eq!(out.iterations, c.iters, "{name}");
    let notes = tr.embedding.notes();
    (tr, notes)
}

pub(super) fn note<'a>(notes: &'a [(String, String)], k: &str) -> &'a str {
    &notes
        .iter()
        .find(|(n, _)| n == k)
        .unwrap_or_else(|| panic!("no note {k}: {notes:?}"))
        .1
}

pub(super) fn same_bits(a: &[EmbeddingTable], b: &[EmbeddingTable]) -> bool {
    a.iter().zip(b).all(|(x, y)| {
        x.data
            .iter()
            .map(|v| v.to_bits())
            .eq(y.data.iter().map(|v| v.to_bits()))
    })
}

#[test]
fn fae_and_scars_train_bit_for_bit_as_the_baseline_on_the_same_batches() {
    for opt in [Optimizer::Sgd { lr: 0.1 }, adagrad()] {
        let c = config(30, opt);
        let h = context(&c, options(Schedule::off()));
        let batches = split_sequence(&c, &h);
        let (base, _) = train("baseline-cpu", &c, &h, &batches, None);
        for name in ["fae", "scars"] {
            let (tr, notes) = train(name, &c, &h, &batches, None);
            let hot: u64 = note(&notes, "hot steps").parse().unwrap();
            assert!(hot > 3 && hot < 27, "{name}: {hot} hot steps of 30");
            if name == "fae" {
                let syncs: u64 = note(&notes, "hot-row syncs").parse().unwrap();
                assert!(syncs >= 3, "{syncs} syncs");
            }
            assert!(
                same_bits(tr.tables(), base.tables()),
                "{name} {}: tables differ",
                opt.name()
            );
            assert_eq!(
                tr.dense_params(),
                base.dense_params(),
                "{name} {}: dense differs",
                opt.name()
            );
        }
        // Training moved the tables (the comparison is not of untouched ones).
        let init = SystemModes::new(
            SystemMode::BaselineCpu,
            &c.model.table_rows,
            8,
            c.model.pooling,
            &opt,
            c.seed,
            env(None),
        )
        .unwrap();
        assert!(!same_bits(init.tables(), base.tables()));
    }
}

fn env(pool: Option<Arc<Mutex<PoolTimer>>>) -> TimingEnv {
    TimingEnv {
        gpu: GpuPreset::named("v100").unwrap(),
        pool,
        host: None,
    }
}

#[test]
fn fae_nmp_trains_as_tcast_nmp_does() {
    let c = config(20, Optimizer::Sgd { lr: 0.1 });
    let h = context(&c, options(Schedule::off()));
    let batches = split_sequence(&c, &h);
    let setup = NmpSetup {
        fixed_bandwidth_gbps: Some(100.0),
        ..NmpSetup::default()
    };
    let shapes: Vec<(u64, usize)> = c.model.table_rows.iter().map(|&r| (r, 8)).collect();
    let pool = Arc::new(Mutex::new(
        PoolTimer::new(
            setup,
            &shapes,
            BATCH,
            (BATCH * 4) as u64,
            &c.embedding_optimizer,
        )
        .unwrap(),
    ));
    let (base, _) = train("tcast-nmp", &c, &h, &batches, Some(pool.clone()));
    let (tr, notes) = train("fae-nmp", &c, &h, &batches, Some(pool));
    assert!(note(&notes, "hot steps").parse::<u64>().unwrap() > 0);
    // (Its hot mini-batches coalesce by sorting, tcast-nmp's by casting:
    // the sums are the same up to their order.)
    for (a, b) in tr.tables().iter().zip(base.tables()) {
        for (x, y) in a.data.iter().zip(&b.data) {
            assert!((x - y).abs() <= 1e-6 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }
}

#[test]
fn the_replica_equals_the_host_rows_after_every_sync() {
    let c = config(30, adagrad());
    let h = context(&c, options(Schedule::off()));
    let batches = split_sequence(&c, &h);
    let plan = HotPlan::fae(&h, &c).unwrap();
    let cold = SystemModes::new(
        SystemMode::BaselineCpu,
        &c.model.table_rows,
        8,
        c.model.pooling,
        &c.embedding_optimizer,
        c.seed,
        env(None),
    )
    .unwrap();
    let mut fae = Fae::new(
        "fae",
        cold,
        plan,
        GpuPreset::named("v100").unwrap(),
        Schedule::off(),
        &c,
    )
    .unwrap();
    let mut syncs = 0;
    for (i, b) in batches.iter().enumerate() {
        let mut timeline = StepTimeline::default();
        let mut host = HostTimes::default();
        let mut ctx = StepCtx {
            iteration: i as u64,
            previous_ns: 0.0,
            optimizer: c.embedding_optimizer,
            timeline: &mut timeline,
            host: &mut host,
        };
        let pooled = fae.forward(b, &mut ctx).unwrap();
        if fae.counts.syncs > syncs {
            syncs = fae.counts.syncs;
            let (t, s) = fae.host();
            assert!(
                fae.replica().equals_host(t, s),
                "step {i}: replica differs after its sync"
            );
            assert!(
                ctx.timeline
                    .events
                    .iter()
                    .any(|e| e.detail.starts_with("hot rows"))
            );
        }
        let grads: Vec<Vec<f32>> = pooled
            .iter()
            .map(|p| p.iter().map(|x| 0.5 - x).collect())
            .collect();
        fae.backward(b, &grads, &mut ctx).unwrap();
    }
    assert!(syncs >= 3, "{syncs}");
    // After a hot mini-batch the GPU's rows are ahead; sync brings them home.
    let last_hot = fae.counts.hot_steps > 0 && {
        let plan = HotPlan::fae(&h, &c).unwrap();
        plan.batch_is_hot(batches.last().unwrap())
    };
    fae.sync().unwrap();
    if last_hot {
        let (t, s) = fae.host();
        assert!(fae.replica().equals_host(t, s));
    }
}

#[test]
fn with_the_scheduler_on_fae_learns_as_the_baseline_does() {
    let mut c = config(300, adagrad());
    c.batch = 128;
    c.dense_optimizer = DenseOptimizer::parse("adagrad").unwrap();
    let o = HotOptions {
        budget_bytes: 256 << 10,
        ..HotOptions::default()
    };
    let h = context(&c, o);
    let test: Vec<Batch> = {
        let mut d = teacher(999, 256);
        (0..8).map(|_| d.next_batch()).collect()
    };
    let gpu = GpuPreset::named("v100").unwrap();
    let mut aucs = Vec::new();
    for name in ["baseline-cpu", "fae", "scars"] {
        let entry = strategy::find(name).unwrap();
        let mut ctx = BuildCtx::new(&c, gpu.clone(), None);
        ctx.hot = Some(h.clone());
        let dense = CpuDense::new(&c.model, c.dense_optimizer, c.seed).unwrap();
        let mut tr = strategy::trainer(entry, &ctx, Box::new(dense)).unwrap();
        let mut data = tr.embedding.input(Box::new(teacher(1, c.batch))).unwrap();
        let out = tr.train(data.as_mut(), &test, &mut Quiet).unwrap();
        let auc = out.last_eval.unwrap().auc.unwrap();
        eprintln!("{name}: AUC {auc:.4} {:?}", tr.embedding.notes());
        aucs.push(auc);
    }
    assert!(aucs[0] > 0.7, "the baseline learns: {aucs:?}");
    for a in &aucs[1..] {
        assert!((a - aucs[0]).abs() <= 0.005, "{aucs:?}");
    }
}

#[test]
fn bad_options_and_inputs_are_refused_by_name() {
    let c = config(10, Optimizer::Sgd { lr: 0.1 });
    let mut d = teacher(1, BATCH);
    let rows = c.model.table_rows.clone();
    let e = |o: HotOptions, d: &mut dyn DataSource| {
        HotContext::profile(d, &rows, 640, o)
            .unwrap_err()
            .to_string()
    };
    assert!(
        e(
            HotOptions {
                budget_bytes: 0,
                ..HotOptions::default()
            },
            &mut d
        )
        .contains("hot budget: 0 bytes")
    );
    let mut o = HotOptions::default();
    o.sampling.rate = 1.5;
    assert!(e(o.clone(), &mut d).contains("(0, 1]"));
    o.sampling.rate = 0.0;
    assert!(e(o, &mut d).contains("(0, 1]"));
    let mut empty = std::iter::empty::<Result<Batch, crate::DlrmError>>().peekable();
    assert!(e(HotOptions::default(), &mut empty).contains("input is empty"));
    let bad = Schedule {
        rate: 0.0,
        ..Schedule::fae()
    };
    assert!(
        bad.validate("FAE schedule")
            .unwrap_err()
            .to_string()
            .contains("(0, 100]")
    );
    // A budget that holds every table whole.
    let h = context(&c, HotOptions::default());
    let err = HotPlan::fae(&h, &c).unwrap_err().to_string();
    assert!(err.contains("every table whole"), "{err}");
}

#[test]
fn the_extra_memory_counts_the_profile_the_copies_and_the_look_ahead() {
    let c = config(10, Optimizer::Sgd { lr: 0.1 });
    let rows: u128 = c.model.table_rows.iter().map(|&r| r as u128).sum();
    let small = HotOptions {
        budget_bytes: 64 << 10,
        ..HotOptions::default()
    };
    let e = super::extra_memory_bytes(&c, &small, 2);
    // Profile and row maps: 4 bytes a row each; the budget; 130 batches.
    let per_sample = (3 * (2 * 2 + 1) + 4 + 1) * 4;
    assert_eq!(e, 8 * rows + (64 << 10) + 130 * BATCH as u128 * per_sample);
    // A budget past the tables counts the tables.
    let huge = HotOptions {
        budget_bytes: 1 << 40,
        ..HotOptions::default()
    };
    assert_eq!(
        super::extra_memory_bytes(&c, &huge, 2) - e,
        rows * super::row_bytes(&c) as u128 - (64 << 10)
    );
}
