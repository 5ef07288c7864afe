//! The trainer's must-hold properties: gradients, mode equivalence, learning
//! on planted-teacher data, timeline consistency, and input errors.

use std::sync::{Arc, Mutex};

use nmpsim_dlrm::{
    Coalescing, DenseOptimizer, Dlrm, DlrmConfig, GpuPreset, Interaction, LrSchedule, NmpSetup,
    PoolTimer, PresetOverrides, Quiet, SimBatches, Source, SystemMode, TeacherData, TrainConfig,
    loss, preset, trainer::system_mode_trainer,
};
use nmpsim_kernels::{Optimizer, Pooling};
use nmpsim_traces::{Batch, GenSpec};

fn tiny() -> (DlrmConfig, GenSpec) {
    let p = preset("tiny", &PresetOverrides::default()).unwrap();
    (p.config, p.data)
}

fn teacher(spec: &GenSpec, batch: usize, seed: u64, dense: usize) -> TeacherData {
    let mut s = spec.clone();
    s.batch_size = batch;
    s.seed = seed;
    TeacherData::new(s, dense, 7).unwrap()
}

fn loss_of(m: &Dlrm, batch: &Batch) -> f64 {
    let f = m.forward(batch).unwrap();
    loss::bce_with_logits(&f.logits, batch.labels.as_ref().unwrap()).0
}

/// Dense parameter `i` of layer `l` of the bottom (`which` 0) or top MLP:
/// its weights, then its biases.
fn dense_param(m: &mut Dlrm, which: usize, l: usize, i: usize) -> &mut f32 {
    let layer = if which == 0 {
        &mut m.bottom.layers[l]
    } else {
        &mut m.top.layers[l]
    };
    let nw = layer.w.len();
    if i < nw {
        &mut layer.w[i]
    } else {
        &mut layer.b[i - nw]
    }
}

/// Central finite differences against the analytic gradients of every
/// parameter of the tiny model: dense weights and biases, and every element
/// of every embedding row the batch touches (and zero for rows it misses).
#[test]
fn gradients_match_finite_differences() {
    for interaction in [Interaction::Dot, Interaction::Cat] {
        let (mut cfg, spec) = tiny();
        cfg.interaction = interaction;
        let mut m = Dlrm::new(cfg.clone(), 3).unwrap();
        let batch = teacher(&spec, 6, 11, cfg.bottom[0]).next_batch();
        let f = m.forward(&batch).unwrap();
        let g = m.backward(&f, batch.labels.as_ref().unwrap());
        let h = 2e-3f32;
        let mut worst = 0.0f64;
        let mut checked = 0;
        let mut kinks = 0;
        let close = |a: f64, b: f64| (a - b).abs() / (1e-3 + a.abs().max(b.abs())) < 2e-2;
        // `at(d)` is the loss with the parameter moved by d. A parameter whose
        // move crosses a ReLU kink gives different slopes at h and h/4; those
        // are counted and skipped, every other one must match.
        let mut check = |analytic: f64, at: &mut dyn FnMut(f32) -> f64, what: &str| {
            let n1 = (at(h) - at(-h)) / (2.0 * h as f64);
            let n2 = (at(h / 4.0) - at(-h / 4.0)) / (0.5 * h as f64);
            checked += 1;
            if close(analytic, n1) || close(analytic, n2) {
                let err = |n: f64| (analytic - n).abs() / (1e-3 + analytic.abs().max(n.abs()));
                worst = worst.max(err(n1).min(err(n2)));
            } else if !close(n1, n2) {
                kinks += 1;
            } else {
                panic!("{interaction:?} {what}: analytic {analytic}, numeric {n1} / {n2}");
            }
        };
        // Dense layers.
        for which in 0..2 {
            let layers = if which == 0 {
                m.bottom.layers.len()
            } else {
                m.top.layers.len()
            };
            for l in 0..layers {
                let (nw, nb) = {
                    let mlp = if which == 0 { &m.bottom } else { &m.top };
                    (mlp.layers[l].w.len(), mlp.layers[l].b.len())
                };
                for i in 0..nw + nb {
                    let grads = if which == 0 { &g.bottom } else { &g.top };
                    let analytic = if i < nw {
                        grads[l].w[i]
                    } else {
                        grads[l].b[i - nw]
                    } as f64;
                    let mut at = |delta: f32| {
                        let p = dense_param(&mut m, which, l, i);
                        let keep = *p;
                        *p += delta;
                        let v = loss_of(&m, &batch);
                        *dense_param(&mut m, which, l, i) = keep;
                        v
                    };
                    check(
                        analytic,
                        &mut at,
                        &format!("mlp {which} layer {l} param {i}"),
                    );
                }
            }
        }
        // Embedding rows, through both coalescing paths.
        for t in 0..cfg.table_rows.len() {
            let ec = m
                .coalesce(&batch, t, &g.pooled[t], Coalescing::ExpandCoalesce)
                .unwrap();
            let ca = m
                .coalesce(&batch, t, &g.pooled[t], Coalescing::Casted)
                .unwrap();
            assert_eq!(ec, ca, "casting changes only the summation order");
            let dim = cfg.dim;
            for row in 0..cfg.table_rows[t] as u32 {
                for k in 0..dim {
                    let analytic = match ec.rows.binary_search(&row) {
                        Ok(u) => ec.grads[u * dim + k] as f64,
                        Err(_) => 0.0,
                    };
                    let idx = row as usize * dim + k;
                    let mut at = |d: f32| {
                        let keep = m.tables[t].data[idx];
                        m.tables[t].data[idx] += d;
                        let v = loss_of(&m, &batch);
                        m.tables[t].data[idx] = keep;
                        v
                    };
                    check(analytic, &mut at, &format!("table {t} row {row} [{k}]"));
                }
            }
        }
        assert!(checked > 500, "{checked}");
        assert!(
            kinks * 50 <= checked,
            "{kinks} of {checked} parameters sit on a ReLU kink"
        );
        eprintln!(
            "{interaction:?}: {checked} parameters ({kinks} on a kink), worst relative error {worst:.2e}"
        );
    }
}

fn config(model: DlrmConfig, batch: usize, iters: u64, lr: f32) -> TrainConfig {
    TrainConfig {
        model,
        batch,
        iters,
        seed: 5,
        lr,
        dense_optimizer: DenseOptimizer::Sgd,
        embedding_optimizer: Optimizer::Sgd { lr },
        schedule: LrSchedule::default(),
        print_every: 10,
        test_every: 0,
    }
}

fn pool_for(cfg: &TrainConfig, setup: NmpSetup, lookups: u64) -> Arc<Mutex<PoolTimer>> {
    let shapes: Vec<(u64, usize)> = cfg
        .model
        .table_rows
        .iter()
        .map(|&r| (r, cfg.model.dim))
        .collect();
    Arc::new(Mutex::new(
        PoolTimer::new(setup, &shapes, cfg.batch, lookups, &cfg.embedding_optimizer).unwrap(),
    ))
}

/// All four modes compute the same function: after N steps on identical
/// data, every parameter agrees.
#[test]
fn the_four_modes_agree() {
    let adagrad = Optimizer::Adagrad {
        lr: 0.1,
        eps: 1e-8,
        initial_accumulator: 0.0,
    };
    for (opt_name, opt, weighted) in [
        ("sgd", Optimizer::Sgd { lr: 0.1 }, false),
        ("adagrad", adagrad, false),
        ("sgd", Optimizer::Sgd { lr: 0.1 }, true),
    ] {
        let p = preset(
            "tiny",
            &PresetOverrides {
                weighted,
                ..Default::default()
            },
        )
        .unwrap();
        let (model, spec) = (p.config, p.data);
        let mut cfg = config(model.clone(), 32, 12, 0.1);
        cfg.embedding_optimizer = opt;
        cfg.dense_optimizer = DenseOptimizer::parse(opt_name).unwrap();
        let gpu = GpuPreset::named("v100").unwrap();
        // A small simulated pool: 2 ranks, one cycle-level batch, then the proxy.
        let setup = NmpSetup {
            ranks: 2,
            sim_batches: SimBatches::First(1),
            ..NmpSetup::default()
        };
        let pool = pool_for(&cfg, setup, 32 * 2);
        let mut results = Vec::new();
        for mode in SystemMode::ALL {
            let p = mode.uses_nmp().then(|| pool.clone());
            let mut tr = system_mode_trainer(cfg.clone(), mode, gpu.clone(), p).unwrap();
            let mut data = teacher(&spec, 32, 1, model.bottom[0]);
            let out = tr.train(&mut data, &[], &mut Quiet).unwrap();
            assert_eq!(out.iterations, 12);
            results.push((mode, tr.dense_params(), tr.tables().to_vec()));
        }
        let (_, d0, t0) = &results[0];
        let init =
            system_mode_trainer(cfg.clone(), SystemMode::BaselineCpu, gpu.clone(), None).unwrap();
        assert_ne!(
            &init.dense_params(),
            d0,
            "training moved the dense parameters"
        );
        assert_ne!(init.tables(), &t0[..], "training moved the tables");
        for (mode, d, t) in &results[1..] {
            for (a, b) in d.values.iter().zip(&d0.values) {
                assert!(
                    (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                    "{opt_name} weighted={weighted} {mode}: dense {a} vs {b}"
                );
            }
            for (ta, tb) in t.iter().zip(t0) {
                for (a, b) in ta.data.iter().zip(&tb.data) {
                    assert!(
                        (a - b).abs() <= 1e-6 * (1.0 + b.abs()),
                        "{opt_name} weighted={weighted} {mode}: table {a} vs {b}"
                    );
                }
            }
        }
    }
}

fn test_set(spec: &GenSpec, dense: usize, n: usize) -> Vec<Batch> {
    let mut d = teacher(spec, 256, 999, dense);
    (0..n).map(|_| d.next_batch()).collect()
}

/// Learning is measurable on the planted teacher; frozen weights are not.
#[test]
fn learns_the_planted_teacher_and_frozen_stays_near_half() {
    let gpu = GpuPreset::named("v100").unwrap();
    let cases = [
        ("tiny", PresetOverrides::default(), 256, 300, 0.02),
        (
            "rm1",
            PresetOverrides {
                rows: Some(200),
                lookups: Some(4),
                ..Default::default()
            },
            128,
            300,
            0.02,
        ),
    ];
    for (name, o, batch, iters, lr) in cases {
        let p = preset(name, &o).unwrap();
        let test = test_set(&p.data, p.config.bottom[0], 8);
        for frozen in [false, true] {
            // Adagrad on both sides, as DLRM training commonly runs; plain SGD
            // also learns here but its test AUC swings from step to step.
            let lr = if frozen { 0.0 } else { lr };
            let mut cfg = config(p.config.clone(), batch, iters, lr);
            cfg.dense_optimizer = DenseOptimizer::parse("adagrad").unwrap();
            cfg.embedding_optimizer = Optimizer::Adagrad {
                lr,
                eps: 1e-8,
                initial_accumulator: 0.0,
            };
            cfg.schedule = LrSchedule {
                warmup_steps: 10,
                ..Default::default()
            };
            let mut tr = system_mode_trainer(cfg, SystemMode::TcastCpu, gpu.clone(), None).unwrap();
            let mut data = teacher(&p.data, batch, 3, p.config.bottom[0]);
            let out = tr.train(&mut data, &test, &mut Quiet).unwrap();
            let auc = out.last_eval.unwrap().auc.unwrap();
            eprintln!("{name} frozen={frozen}: test AUC {auc:.4}");
            if frozen {
                assert!((auc - 0.5).abs() < 0.08, "{name}: frozen model AUC {auc}");
            } else {
                assert!(auc > 0.75, "{name}: trained AUC {auc} after {iters} steps");
            }
        }
    }
}

/// Per-primitive times add up to the iteration once overlap is accounted
/// for; more NMP bandwidth never slows an NMP mode; labels are right.
#[test]
fn timeline_is_consistent() {
    let (model, spec) = tiny();
    let cfg = config(model.clone(), 64, 3, 0.05);
    let gpu = GpuPreset::named("a100").unwrap();
    for mode in SystemMode::ALL {
        let mut prev: Option<nmpsim_dlrm::StepTimeline> = None;
        for bw in [10.0, 50.0, 200.0, 1000.0] {
            let setup = NmpSetup {
                ranks: 2,
                fixed_bandwidth_gbps: Some(bw),
                ..NmpSetup::default()
            };
            let pool = mode.uses_nmp().then(|| pool_for(&cfg, setup, 128));
            let mut tr = system_mode_trainer(cfg.clone(), mode, gpu.clone(), pool).unwrap();
            let mut data = teacher(&spec, 64, 1, model.bottom[0]);
            let batch = data.next_batch();
            let rec = tr.step(0, &batch).unwrap();
            let t = &rec.timeline;
            let sum: f64 = t.events.iter().map(|e| e.time_ns).sum();
            assert!(
                (sum - t.hidden_ns() - rec.iteration_ns).abs() <= 1e-6 * sum,
                "{mode}"
            );
            assert!(rec.iteration_ns > 0.0 && rec.iteration_ns <= sum * (1.0 + 1e-12));
            // The dense stage is the modelled dense path, optimizer step included.
            let dense: f64 = t
                .events
                .iter()
                .filter(|e| e.stage == nmpsim_dlrm::Stage::Dense)
                .map(|e| e.time_ns)
                .sum();
            assert!(
                (dense - tr.dense_model.total_ns()).abs() <= 1e-9 * dense,
                "{mode}"
            );
            let step: Vec<_> = t
                .events
                .iter()
                .filter(|e| e.primitive == "mlp" && e.detail == "optimizer step")
                .collect();
            assert_eq!(step.len(), 1, "{mode}");
            assert_eq!(step[0].time_ns, tr.dense_model.times.step_ns);
            assert!(step[0].time_ns > gpu.launch_us * 1e3, "{mode}");
            if mode.plan().casting.is_some() {
                assert!(
                    t.events
                        .iter()
                        .any(|e| e.primitive == "casting" && e.source == Source::Modelled)
                );
                assert!(
                    t.hidden_ns() > 0.0,
                    "{mode}: casting overlaps the forward gather-reduce"
                );
            } else {
                assert_eq!(t.hidden_ns(), 0.0, "{mode}: nothing overlaps");
            }
            for e in &t.events {
                let want = if e.resource == nmpsim_dlrm::Resource::Cpu {
                    Source::Measured
                } else {
                    Source::Modelled
                };
                assert_eq!(e.source, want, "{mode}: {e:?}");
            }
            assert_eq!(
                t.events
                    .iter()
                    .any(|e| e.resource == nmpsim_dlrm::Resource::Nmp),
                mode.uses_nmp()
            );
            // More NMP bandwidth never slows the iteration. The CPU parts are
            // measured and vary from run to run, so they are held at the
            // previous run's values for the comparison.
            if let Some(p) = &prev {
                let mut held = t.clone();
                assert_eq!(held.events.len(), p.events.len());
                for (e, q) in held.events.iter_mut().zip(&p.events) {
                    assert_eq!((&e.primitive, e.resource), (&q.primitive, q.resource));
                    if e.source == Source::Measured {
                        e.time_ns = q.time_ns;
                    }
                }
                assert!(
                    held.iteration_ns() <= p.iteration_ns() + 1e-9,
                    "{mode} at {bw} GB/s"
                );
                if mode.uses_nmp() {
                    assert!(
                        held.iteration_ns() < p.iteration_ns(),
                        "{mode} at {bw} GB/s: faster NMP"
                    );
                }
            }
            prev = Some(t.clone());
        }
    }
}

/// A trainer of `mode` on a V100.
fn on_v100(
    cfg: TrainConfig,
    mode: SystemMode,
    pool: Option<Arc<Mutex<PoolTimer>>>,
) -> nmpsim_dlrm::Trainer {
    system_mode_trainer(cfg, mode, GpuPreset::named("v100").unwrap(), pool).unwrap()
}

/// A tcast-nmp trainer of the tiny model on a pool of `setup`, its pool
/// timer, and its data.
fn tcast_nmp_on(setup: NmpSetup) -> (nmpsim_dlrm::Trainer, Arc<Mutex<PoolTimer>>, TeacherData) {
    let (model, spec) = tiny();
    let cfg = config(model.clone(), 64, 3, 0.05);
    let pool = pool_for(&cfg, setup, 128);
    let tr = on_v100(cfg, SystemMode::TcastNmp, Some(pool.clone()));
    (tr, pool, teacher(&spec, 64, 1, model.bottom[0]))
}

/// The simulated pool labels its first batches simulated, later ones proxy.
#[test]
fn nmp_time_is_simulated_then_proxied() {
    let setup = NmpSetup {
        ranks: 2,
        sim_batches: SimBatches::First(1),
        ..NmpSetup::default()
    };
    let (mut tr, pool, mut data) = tcast_nmp_on(setup);
    let r0 = tr.step(0, &data.next_batch()).unwrap();
    let r1 = tr.step(1, &data.next_batch()).unwrap();
    let nmp = |r: &nmpsim_dlrm::IterRecord| -> Vec<Source> {
        r.timeline
            .events
            .iter()
            .filter(|e| e.resource == nmpsim_dlrm::Resource::Nmp)
            .map(|e| e.source)
            .collect()
    };
    assert_eq!(nmp(&r0), vec![Source::Simulated; 3]);
    assert_eq!(nmp(&r1), vec![Source::SimulatedProxy; 3]);
    let cal = pool.lock().unwrap().calibration.clone();
    for p in ["gather-reduce", "casted-gather-reduce", "scatter"] {
        assert!(cal[p].gbps() > 0.0, "{p}");
        assert!(cal[p].energy_pj > 0.0, "{p}");
    }
    // The pool's energy: simulated in iteration 0; in the proxy, the
    // simulated batch's energy per byte times this batch's bytes.
    for e in r0.timeline.events.iter().chain(&r1.timeline.events) {
        if e.resource == nmpsim_dlrm::Resource::Nmp {
            assert!(e.energy_pj > 0.0, "{e:?}");
        } else {
            assert_eq!(e.energy_pj, 0.0, "{e:?}");
        }
    }
    for e in r1
        .timeline
        .events
        .iter()
        .filter(|e| e.resource == nmpsim_dlrm::Resource::Nmp)
    {
        let c = &cal[e.primitive.as_str()];
        let want = c.energy_pj / c.bytes as f64 * e.bytes as f64;
        assert!((e.energy_pj - want).abs() <= 1e-9 * want, "{e:?} {want}");
    }
}

/// By default every iteration's pool time is simulated cycle by cycle (no
/// proxy), on the native engine.
#[test]
fn nmp_time_is_simulated_in_every_iteration_by_default() {
    let setup = NmpSetup {
        ranks: 2,
        ..NmpSetup::default()
    };
    assert_eq!(setup.engine, nmpsim_sim::EngineKind::Native);
    let (mut tr, pool, mut data) = tcast_nmp_on(setup);
    for i in 0..3 {
        let r = tr.step(i, &data.next_batch()).unwrap();
        assert!(
            r.timeline
                .events
                .iter()
                .filter(|e| e.resource == nmpsim_dlrm::Resource::Nmp)
                .all(|e| e.source == Source::Simulated),
            "iteration {i}"
        );
    }
    let cal = &pool.lock().unwrap().calibration;
    assert_eq!(cal["scatter"].batches, 3);
}

#[test]
fn bad_input_is_refused_before_training() {
    let (model, spec) = tiny();
    // Bottom MLP output must equal the embedding dimension.
    let mut m = model.clone();
    m.bottom = vec![4, 8, 5];
    let e = m.validate().unwrap_err().to_string();
    assert!(
        e.contains("bottom MLP output width 5") && e.contains("dimension 4"),
        "{e}"
    );
    // Top MLP input must match the interaction.
    let mut m = model.clone();
    m.top_input = Some(12);
    let e = m.validate().unwrap_err().to_string();
    assert!(
        e.contains("top MLP input width 12") && e.contains("10"),
        "{e}"
    );
    // Unknown preset, mode, GPU.
    assert!(
        preset("rm7", &PresetOverrides::default())
            .unwrap_err()
            .to_string()
            .contains("rm7")
    );
    assert!(
        SystemMode::parse("tcast-gpu")
            .unwrap_err()
            .to_string()
            .contains("baseline-cpu")
    );
    assert!(GpuPreset::named("k80").is_err());
    // Categorical values past the tables without hashing.
    let cfg = config(model.clone(), 8, 2, 0.1);
    let mut tr = on_v100(cfg, SystemMode::BaselineCpu, None);
    let mut batch = teacher(&spec, 8, 1, model.bottom[0]).next_batch();
    batch.tables[1].indices[3] = 40;
    let e = tr.step(0, &batch).unwrap_err().to_string();
    assert!(
        e.contains("table 1") && e.contains("40") && e.contains("--max-ind-range"),
        "{e}"
    );
    // Criteo TSV without --max-ind-range addresses 2^32 rows.
    let mut line = String::from("1");
    for i in 0..13 {
        line.push_str(&format!("\t{i}"));
    }
    for i in 0..26 {
        line.push_str(&format!("\t{:08x}", 0x1000_0000u32 + i));
    }
    line.push('\n');
    let reader = nmpsim_traces::CriteoReader::from_reader(
        std::io::Cursor::new(line.repeat(4)),
        "sample.tsv",
        Default::default(),
    )
    .unwrap();
    let b = nmpsim_traces::CriteoBatcher::new(reader, 4)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let k = preset("criteo-kaggle", &PresetOverrides::sized(None, Some(0.001))).unwrap();
    let cfg = config(k.config, 4, 1, 0.1);
    let mut tr = on_v100(cfg, SystemMode::BaselineCpu, None);
    let e = tr.step(0, &b).unwrap_err().to_string();
    assert!(
        e.contains("table 0") && e.contains("--max-ind-range"),
        "{e}"
    );
    // Pooling must be a sum.
    let mut m = model;
    m.pooling = Pooling::Mean;
    assert!(m.validate().is_err());
}

/// The CPU dense backend computes what the whole-model struct (the one the
/// gradient check covers) computes.
#[test]
fn cpu_dense_backend_matches_the_checked_model() {
    use nmpsim_dlrm::{CpuDense, DenseBackend};
    let (cfg, spec) = tiny();
    let batch = teacher(&spec, 16, 2, cfg.bottom[0]).next_batch();
    let labels = batch.labels.clone().unwrap();
    let mut m = Dlrm::new(cfg.clone(), 9).unwrap();
    let mut d = CpuDense::new(&cfg, DenseOptimizer::Sgd, 9).unwrap();
    for _ in 0..3 {
        let f = m.forward(&batch).unwrap();
        let g = m.backward(&f, &labels);
        let logits = d
            .forward(batch.dense.as_ref().unwrap(), &f.pooled, 16)
            .unwrap();
        assert_eq!(logits, f.logits);
        let back = d.backward(&labels).unwrap();
        assert_eq!(back.loss, g.loss);
        assert_eq!(back.dpooled, g.pooled);
        d.step(0.1);
        m.sgd_dense(&g, 0.1);
        let mut want = Vec::new();
        for mlp in [&m.bottom, &m.top] {
            for l in &mlp.layers {
                want.extend_from_slice(&l.w);
                want.extend_from_slice(&l.b);
            }
        }
        assert_eq!(d.params().values, want);
    }
}

/// The gather instructions' link bytes in the timeline equal the encoding's.
#[test]
fn gather_instruction_bytes_match_the_encoding() {
    let (model, spec) = tiny();
    let cfg = config(model.clone(), 16, 1, 0.1);
    let setup = NmpSetup {
        ranks: 2,
        fixed_bandwidth_gbps: Some(100.0),
        ..NmpSetup::default()
    };
    let pool = pool_for(&cfg, setup, 32);
    let mut tr = on_v100(cfg, SystemMode::BaselineNmp, Some(pool));
    let batch = teacher(&spec, 16, 1, model.bottom[0]).next_batch();
    let rec = tr.step(0, &batch).unwrap();
    let want: u64 = batch
        .tables
        .iter()
        .enumerate()
        .map(|(t, tb)| {
            nmpsim_nmp::encoded_len(&nmpsim_nmp::Instruction::GatherReduce {
                table: t as u32,
                pooling: Pooling::Sum,
                offsets: tb.offsets.clone(),
                indices: tb.indices.clone(),
                weights: None,
            })
        })
        .sum();
    let e = rec
        .timeline
        .events
        .iter()
        .find(|e| e.detail == "gather instructions to pool")
        .unwrap();
    assert_eq!(e.bytes, want);
}

/// The modelled dense path follows each batch's size: an epoch's last,
/// partial batch is charged as a batch of its own size, not the configured one.
#[test]
fn a_partial_batch_gets_the_dense_time_of_its_size() {
    let (model, spec) = tiny();
    let gpu = GpuPreset::named("a100").unwrap();
    let dense_events = |configured: usize, batch: usize| {
        let cfg = config(model.clone(), configured, 3, 0.05);
        let mut tr = system_mode_trainer(cfg, SystemMode::BaselineCpu, gpu.clone(), None).unwrap();
        let mut data = teacher(&spec, batch, 1, model.bottom[0]);
        let b = data.next_batch();
        assert_eq!(b.batch_size(), batch);
        // Twice: the second step reuses what the first computed.
        let mut out = Vec::new();
        for it in 0..2 {
            let rec = tr.step(it, &b).unwrap();
            out = rec
                .timeline
                .events
                .iter()
                .filter(|e| e.primitive == "mlp" || e.primitive == "interaction")
                .map(|e| (e.primitive.to_string(), e.detail.to_string(), e.time_ns))
                .collect::<Vec<_>>();
        }
        out
    };
    let partial = dense_events(4096, 40);
    assert_eq!(partial.len(), 8, "{partial:?}");
    assert_eq!(partial, dense_events(40, 40));
    let full = dense_events(4096, 4096);
    let (p, f): (f64, f64) = (
        partial.iter().map(|e| e.2).sum(),
        full.iter().map(|e| e.2).sum(),
    );
    assert!(p < f, "40 samples {p} ns, 4096 samples {f} ns");
}

/// The modelled casting is fitted to the one casting time measured on a GPU:
/// an RM1 batch (10 tables of 1M rows, batch 2048, 80 lookups a bag) cast in
/// 1.36-1.41 ms of kernel time on an H100 (docs/gpu.md). The fitted share of
/// the bandwidth is the one that gives the middle of that range on this
/// batch's analytic bytes; the V100 takes the same share of its bandwidth.
#[test]
fn modelled_casting_is_fitted_to_the_h100_measurement() {
    use nmpsim_dlrm::gpu::{CASTING_EFFICIENCY, CASTING_FIXED_LAUNCHES};
    use nmpsim_kernels::radix::gpu_passes;
    use nmpsim_kernels::traffic::{radix_pass_bytes, radix_passes};
    let p = preset("rm1", &PresetOverrides::default()).unwrap();
    let mut data = teacher(&p.data, 2048, 1, p.config.bottom[0]);
    let batch = data.next_batch();
    let h100 = GpuPreset::named("h100").unwrap();
    let v100 = GpuPreset::named("v100").unwrap();
    let (mut bytes, mut launches, mut h, mut v) = (0u64, 0u32, 0.0, 0.0);
    for tb in &batch.tables {
        let (_, tr) = nmpsim_kernels::tensor_cast(tb, Pooling::Sum).unwrap();
        // 1M rows: 20 key bits, three 8-bit passes on the GPU.
        let passes = gpu_passes(tb.num_rows);
        assert_eq!(passes, 3);
        let n = tb.indices.len();
        bytes += tr.total_bytes() + radix_pass_bytes(n, passes - radix_passes(tb.num_rows));
        launches += 3 * passes + CASTING_FIXED_LAUNCHES;
        h += h100.casting_ns(n, tb.num_rows, tr.total_bytes());
        v += v100.casting_ns(n, tb.num_rows, tr.total_bytes());
    }
    assert_eq!(batch.tables.len(), 10);
    // The fit: the share that gives 1.385 ms on the H100.
    let fitted = bytes as f64 / ((1.385e6 - launches as f64 * 5e3) * 3350.0);
    eprintln!("casting: {bytes} bytes, {launches} launches; fitted share {fitted:.5}");
    assert!(
        (fitted - CASTING_EFFICIENCY).abs() < 0.01 * fitted,
        "CASTING_EFFICIENCY {CASTING_EFFICIENCY}, fitted {fitted:.5}"
    );
    assert!((1.36e6..=1.41e6).contains(&h), "h100 {h} ns");
    // The V100: the launches alike, the bytes at 900 of 3350 GB/s.
    let launch_ns = launches as f64 * 5e3;
    let want_v = launch_ns + (h - launch_ns) * 3350.0 / 900.0;
    assert!((v - want_v).abs() < 1e-6 * want_v, "v100 {v} vs {want_v}");
}
