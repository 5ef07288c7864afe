//! The CUDA dense backend against the CPU one: identical start, identical
//! inputs, several steps; logits, loss, pooled gradients, parameters and
//! Adagrad accumulators agree to float rounding. Skips (passing) when no GPU
//! can be opened, saying why.
#![cfg(feature = "cuda")]

use nmpsim_dlrm::cuda_dense::CudaDense;
use nmpsim_dlrm::trainer::system_mode_trainer_with_dense;
use nmpsim_dlrm::{
    CpuDense, DenseBackend, DenseOptimizer, DlrmConfig, GpuPreset, Interaction, LrSchedule,
    PresetOverrides, Resource, Source, Stage, SystemMode, TeacherData, TrainConfig, preset,
};
use nmpsim_kernels::cuda::Gpu;
use nmpsim_kernels::table::SplitMix64;
use nmpsim_kernels::{Optimizer, Pooling};
use std::sync::Arc;

mod support {
    pub mod gpu;
}
use support::gpu::gpu_or_skip;

fn tiny() -> DlrmConfig {
    preset("tiny", &PresetOverrides::default()).unwrap().config
}

/// Wider than tiny: several column groups in the bias gradient, several
/// blocks in the element-wise kernels, 6 tables (15 pairs).
fn small(interaction: Interaction) -> DlrmConfig {
    DlrmConfig {
        bottom: vec![13, 70, 40, 16],
        top: vec![48, 33, 1],
        top_input: None,
        dim: 16,
        table_rows: vec![100; 6],
        interaction,
        pooling: Pooling::Sum,
    }
}

struct Inputs {
    dense: Vec<f32>,
    pooled: Vec<Vec<f32>>,
    labels: Vec<f32>,
}

fn inputs(cfg: &DlrmConfig, batch: usize, seed: u64) -> Inputs {
    let mut rng = SplitMix64::new(seed);
    let mut v = |n: usize, scale: f32| -> Vec<f32> {
        (0..n)
            .map(|_| (rng.next_f32() * 2.0 - 1.0) * scale)
            .collect()
    };
    let dense = v(batch * cfg.bottom[0], 1.0);
    let pooled = (0..cfg.table_rows.len())
        .map(|_| v(batch * cfg.dim, 0.5))
        .collect();
    let labels = v(batch, 1.0)
        .into_iter()
        .map(|x| if x > 0.0 { 1.0 } else { 0.0 })
        .collect();
    Inputs {
        dense,
        pooled,
        labels,
    }
}

fn close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = (0.0f32, 0usize);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(g.is_finite(), "{what}[{i}]: {g}");
        let err = (g - w).abs() / (1.0 + w.abs());
        if err > worst.0 {
            worst = (err, i);
        }
    }
    assert!(
        worst.0 <= tol,
        "{what}[{}]: cuda {} vs cpu {} (relative error {:e} > {tol:e})",
        worst.1,
        got[worst.1],
        want[worst.1],
        worst.0
    );
}

/// `steps` steps of both backends over batches of the given sizes.
fn run_parity(gpu: &Arc<Gpu>, cfg: &DlrmConfig, opt: DenseOptimizer, batches: &[usize], lr: f32) {
    let what = format!(
        "{:?} {} {:?}",
        cfg.interaction,
        opt.name(),
        (&cfg.bottom, &cfg.top)
    );
    let mut cpu = CpuDense::new(cfg, opt, 9).unwrap();
    let mut gpu_d = CudaDense::from_cpu(gpu.clone(), &cpu).unwrap();
    assert_eq!(gpu_d.name(), "cuda");
    assert_eq!(gpu_d.params(), cpu.params(), "{what}: identical start");
    // The same seed gives the same start through `new` too.
    let fresh = CudaDense::new(gpu.clone(), cfg, opt, 9).unwrap();
    assert_eq!(fresh.params(), cpu.params(), "{what}: new from the seed");
    let tol = 2e-4;
    for (step, &b) in batches.iter().enumerate() {
        let inp = inputs(cfg, b, 100 + step as u64);
        let lc = cpu.forward(&inp.dense, &inp.pooled, b).unwrap();
        let lg = gpu_d.forward(&inp.dense, &inp.pooled, b).unwrap();
        close(&format!("{what} step {step}: logits"), &lg, &lc, tol);
        let bc = cpu.backward(&inp.labels).unwrap();
        let bg = gpu_d.backward(&inp.labels).unwrap();
        assert!(
            (bc.loss - bg.loss).abs() <= 1e-4 * (1.0 + bc.loss.abs()),
            "{what} step {step}: loss cuda {} vs cpu {}",
            bg.loss,
            bc.loss
        );
        assert_eq!(bg.dpooled.len(), bc.dpooled.len());
        for (t, (g, c)) in bg.dpooled.iter().zip(&bc.dpooled).enumerate() {
            close(&format!("{what} step {step}: dpooled[{t}]"), g, c, tol);
        }
        cpu.step(lr);
        gpu_d.step(lr);
        let t = gpu_d.last_times_ns().unwrap();
        assert!(
            t.forward_ns() > 0.0 && t.backward_ns() > 0.0 && t.step_ns > 0.0,
            "{what}: measured times {t:?}"
        );
        close(
            &format!("{what} step {step}: parameters"),
            &gpu_d.params().values,
            &cpu.params().values,
            tol,
        );
        close(
            &format!("{what} step {step}: accumulators"),
            &gpu_d.accumulators().unwrap(),
            cpu.accumulators(),
            tol,
        );
    }
    assert_ne!(
        gpu_d.params(),
        fresh.params(),
        "{what}: training moved the parameters"
    );
}

#[test]
fn cuda_dense_matches_cpu_dense_step_by_step() {
    let Some(gpu) = gpu_or_skip() else { return };
    for opt in [
        DenseOptimizer::Sgd,
        DenseOptimizer::parse("adagrad").unwrap(),
    ] {
        for interaction in [Interaction::Dot, Interaction::Cat] {
            let mut t = tiny();
            t.interaction = interaction;
            t.top_input = None;
            run_parity(&gpu, &t, opt, &[8, 8, 8, 8, 8], 0.1);
            // Growing and shrinking batches (buffers reallocated, then reused).
            run_parity(&gpu, &small(interaction), opt, &[37, 300, 1, 37, 257], 0.05);
        }
    }
}

#[test]
fn cuda_dense_rejects_what_cpu_dense_rejects() {
    let Some(gpu) = gpu_or_skip() else { return };
    let cfg = tiny();
    let mut d = CudaDense::new(gpu, &cfg, DenseOptimizer::Sgd, 1).unwrap();
    // Backward before any forward.
    assert!(d.backward(&[1.0; 4]).is_err());
    let inp = inputs(&cfg, 4, 1);
    assert!(d.forward(&inp.dense[1..], &inp.pooled, 4).is_err());
    assert!(d.forward(&inp.dense, &inp.pooled[1..], 4).is_err());
    let logits = d.forward(&inp.dense, &inp.pooled, 4).unwrap();
    assert_eq!(logits.len(), 4);
    assert!(d.backward(&inp.labels[..3]).is_err());
    assert!(d.backward(&inp.labels).is_ok());
    // A step without a backward pass is a no-op.
    let before = d.params();
    d.step(0.1);
    assert_ne!(d.params(), before);
    let after = d.params();
    d.step(0.1);
    assert_eq!(d.params(), after);
}

#[test]
fn trainer_with_cuda_dense_measures_the_dense_stage() {
    let Some(gpu) = gpu_or_skip() else { return };
    let p = preset("tiny", &PresetOverrides::default()).unwrap();
    let cfg = TrainConfig {
        model: p.config.clone(),
        batch: 32,
        iters: 6,
        seed: 5,
        lr: 0.1,
        dense_optimizer: DenseOptimizer::Sgd,
        embedding_optimizer: Optimizer::Sgd { lr: 0.1 },
        schedule: LrSchedule::default(),
        print_every: 10,
        test_every: 0,
    };
    let v100 = GpuPreset::named("v100").unwrap();
    let run = |dense: Box<dyn DenseBackend>| {
        let mut tr = system_mode_trainer_with_dense(
            cfg.clone(),
            SystemMode::BaselineCpu,
            v100.clone(),
            None,
            dense,
        )
        .unwrap();
        let mut spec = p.data.clone();
        spec.batch_size = 32;
        spec.seed = 1;
        let mut data = TeacherData::new(spec, cfg.model.bottom[0], 7).unwrap();
        let mut recs = Vec::new();
        for it in 0..cfg.iters {
            let b = data.next_batch();
            recs.push(tr.step(it, &b).unwrap());
        }
        (recs, tr.dense_params())
    };
    let cpu = CpuDense::new(&cfg.model, cfg.dense_optimizer, cfg.seed).unwrap();
    let cuda = CudaDense::new(gpu, &cfg.model, cfg.dense_optimizer, cfg.seed).unwrap();
    assert!(cuda.device_name().is_some());
    let (rc, pc) = run(Box::new(cpu));
    let (rg, pg) = run(Box::new(cuda));
    close("trained parameters", &pg.values, &pc.values, 1e-3);
    for (c, g) in rc.iter().zip(&rg) {
        assert!((c.loss - g.loss).abs() < 1e-3 * (1.0 + c.loss.abs()));
        let dense: Vec<_> = g
            .timeline
            .events
            .iter()
            .filter(|e| e.stage == Stage::Dense)
            .collect();
        assert!(!dense.is_empty());
        for e in dense {
            assert_eq!(e.source, Source::Measured, "{e:?}");
            assert_eq!(e.resource, Resource::Gpu, "{e:?}");
        }
        assert!(
            c.timeline
                .events
                .iter()
                .filter(|e| e.stage == Stage::Dense)
                .all(|e| e.source == Source::Modelled)
        );
    }
}
