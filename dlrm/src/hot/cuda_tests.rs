//! The strategies' GPU-placed primitives on a real GPU (`--device cuda`):
//! they run as CUDA kernels and are measured there, the run trains the same
//! numbers as without the GPU, and `fae-nmp`'s cold mini-batches run on the
//! pool's GPU emulation. Each test passes with a message where no GPU can be
//! opened (and fails where NMPSIM_REQUIRE_GPU is set).

use std::sync::{Arc, Mutex};

use nmpsim_kernels::Optimizer;
use nmpsim_kernels::cuda::Gpu;
use nmpsim_traces::Batch;

use super::input::Schedule;
use super::tests::{adagrad, config, context, note, options, same_bits, split_sequence};
use super::*;
use crate::emulate::PoolEmulator;
use crate::gpu::GpuPreset;
use crate::strategy::{self, BuildCtx};
use crate::timeline::{Event, Resource, Source};
use crate::trainer::{IterRecord, Observer, TrainConfig};
use crate::{CpuDense, DenseOptimizer, NmpSetup, PoolTimer};

// The GPU tests' shared skip: a GPU, or a passing skip that says why.
#[path = "../../tests/support/gpu.rs"]
mod gpu_support;
use gpu_support::gpu_or_skip;

/// Every step's timeline.
#[derive(Default)]
struct Events(Vec<Vec<Event>>);

impl Observer for Events {
    fn iteration(&mut self, rec: &IterRecord) -> Result<(), DlrmError> {
        self.0.push(rec.timeline.events.clone());
        Ok(())
    }
}

struct Trained {
    tr: crate::Trainer,
    notes: Vec<(String, String)>,
    events: Vec<Vec<Event>>,
}

/// Strategy `name` trained on `batches`, on `gpu` (and the pool on `emu`)
/// where given.
fn train_on(
    name: &str,
    c: &TrainConfig,
    h: &Arc<HotContext>,
    batches: &[Batch],
    pool: Option<Arc<Mutex<PoolTimer>>>,
    gpu: Option<&Arc<Gpu>>,
    emu: Option<&Arc<Mutex<PoolEmulator>>>,
) -> Trained {
    let entry = strategy::find(name).unwrap();
    let mut ctx = BuildCtx::new(
        c,
        GpuPreset::named("h100").unwrap(),
        pool.filter(|_| entry.uses_nmp),
    );
    ctx.hot = Some(h.clone());
    ctx.device = gpu.cloned();
    ctx.emulator = emu.cloned();
    let dense = CpuDense::new(&c.model, DenseOptimizer::Sgd, c.seed).unwrap();
    let mut tr = strategy::trainer(entry, &ctx, Box::new(dense)).unwrap();
    let mut data = batches.iter().cloned().map(Ok).peekable();
    let mut events = Events::default();
    let out = tr.train(&mut data, &[], &mut events).unwrap();
    assert_eq!(out.iterations, c.iters, "{name}");
    let notes = tr.embedding.notes();
    Trained {
        tr,
        notes,
        events: events.0,
    }
}

/// The GPU events of `primitive` over the run: (measured, modelled) counts
/// and the measured nanoseconds in all.
fn gpu_events(t: &Trained, primitive: &str) -> (usize, usize, f64) {
    let mut out = (0, 0, 0.0);
    for e in t.events.iter().flatten() {
        if e.resource == Resource::Gpu && e.primitive == primitive {
            match e.source {
                Source::Measured => {
                    out.0 += 1;
                    out.2 += e.time_ns;
                }
                Source::Modelled => out.1 += 1,
                _ => {}
            }
        }
    }
    out
}

/// fae, scars, cdlrm and eltt with `--device cuda`: their gather-reduce,
/// expand-coalesce and scatter run as CUDA kernels and are measured (none
/// is left modelled), the CUDA results agree with the CPU's, and the run
/// trains bit for bit what it trains without the GPU (the CPU's numbers are
/// the ones it keeps).
#[test]
fn gpu_placed_primitives_run_on_cuda_and_train_the_same_numbers() {
    let Some(gpu) = gpu_or_skip() else { return };
    for opt in [Optimizer::Sgd { lr: 0.1 }, adagrad()] {
        let c = config(20, opt);
        let h = context(&c, options(Schedule::off()));
        let batches = split_sequence(&c, &h);
        for name in ["fae", "scars", "cdlrm", "eltt"] {
            let what = format!("{name} {}", opt.name());
            let cpu = train_on(name, &c, &h, &batches, None, None, None);
            let cuda = train_on(name, &c, &h, &batches, None, Some(&gpu), None);
            assert!(
                same_bits(cuda.tr.tables(), cpu.tr.tables()),
                "{what}: tables differ"
            );
            assert_eq!(
                cuda.tr.dense_params(),
                cpu.tr.dense_params(),
                "{what}: dense differs"
            );
            let calls: u64 = note(&cuda.notes, "cuda primitive calls").parse().unwrap();
            assert!(calls > 0, "{what}: nothing ran on the GPU");
            for k in [
                "cuda vs cpu: pooled rows",
                "cuda vs cpu: coalesced gradients",
                "cuda vs cpu: first scatter",
            ] {
                let err: f64 = note(&cuda.notes, k).parse().unwrap();
                assert!(err <= super::gpu_cuda::TOLERANCE, "{what}: {k} {err}");
            }
            for p in ["gather-reduce", "expand-coalesce", "scatter"] {
                let (measured, modelled, ns) = gpu_events(&cuda, p);
                assert!(measured > 0 && ns > 0.0, "{what}: {p} not measured");
                assert_eq!(modelled, 0, "{what}: {p} still modelled on the GPU");
                let (m0, modelled0, _) = gpu_events(&cpu, p);
                assert_eq!(
                    (m0, modelled0),
                    (0, measured),
                    "{what}: {p} without the GPU"
                );
                eprintln!(
                    "{what}: {p}: {measured} calls, {:.1} us each on the GPU",
                    ns / measured as f64 / 1e3
                );
            }
        }
    }
}

/// eltt with every table a TT table and `--device cuda`: the TT forward and
/// the TT backward with its fused update run as CUDA kernels and are
/// measured (none left modelled), the pooled rows equal the CPU's, the cores
/// after the first update agree within the tolerance, and the run trains
/// what it trains without the GPU (the CPU's numbers are kept).
#[test]
fn eltt_tt_tables_run_on_cuda() {
    let Some(gpu) = gpu_or_skip() else { return };
    for opt in [Optimizer::Sgd { lr: 0.1 }, adagrad()] {
        let c = config(20, opt);
        let h = context(&c, options(Schedule::off()));
        let batches = split_sequence(&c, &h);
        let run = |device: Option<&Arc<Gpu>>| {
            let entry = strategy::find("eltt").unwrap();
            let mut ctx = BuildCtx::new(&c, GpuPreset::named("h100").unwrap(), None);
            ctx.eltt = crate::eltt::ElttOptions {
                rank: 8,
                threshold: 0,
                ..Default::default()
            };
            ctx.device = device.cloned();
            let dense = CpuDense::new(&c.model, DenseOptimizer::Sgd, c.seed).unwrap();
            let mut tr = strategy::trainer(entry, &ctx, Box::new(dense)).unwrap();
            let mut data = batches.iter().cloned().map(Ok).peekable();
            let mut events = Events::default();
            tr.train(&mut data, &[], &mut events).unwrap();
            let notes = tr.embedding.notes();
            Trained {
                tr,
                notes,
                events: events.0,
            }
        };
        let what = opt.name();
        let cpu = run(None);
        let cuda = run(Some(&gpu));
        assert_eq!(
            cuda.tr.dense_params(),
            cpu.tr.dense_params(),
            "{what}: dense differs"
        );
        let calls: u64 = note(&cuda.notes, "cuda TT calls").parse().unwrap();
        assert_eq!(
            calls,
            2 * c.iters * c.model.table_rows.len() as u64,
            "{what}"
        );
        for k in [
            "cuda vs cpu: TT pooled rows",
            "cuda vs cpu: TT cores after the first update",
        ] {
            let err: f64 = note(&cuda.notes, k).parse().unwrap();
            assert!(err <= super::gpu_cuda::TOLERANCE, "{what}: {k} {err}");
        }
        for p in ["tt-gather-reduce", "tt-backward"] {
            let (measured, modelled, ns) = gpu_events(&cuda, p);
            assert!(
                measured as u64 == c.iters && ns > 0.0,
                "{what}: {p} not measured"
            );
            assert_eq!(modelled, 0, "{what}: {p} still modelled on the GPU");
            assert_eq!(
                gpu_events(&cpu, p).1,
                measured,
                "{what}: {p} without the GPU"
            );
            eprintln!(
                "eltt {what}: {p}: {measured} calls, {:.1} us each on the GPU",
                ns / measured as f64 / 1e3
            );
        }
    }
}

/// fae-nmp with `--device cuda`: the cold mini-batches run on the pool's
/// GPU emulation (its tables on the device), the hot rows go back and forth
/// at every switch, and the run ends with the tables the emulation-free run
/// has, up to the order of f32 sums.
#[test]
fn fae_nmp_cold_mini_batches_run_on_the_emulated_pool() {
    let Some(gpu) = gpu_or_skip() else { return };
    let c = config(20, adagrad());
    let h = context(&c, options(Schedule::off()));
    let batches = split_sequence(&c, &h);
    let pool = || {
        let setup = NmpSetup {
            fixed_bandwidth_gbps: Some(100.0),
            ..NmpSetup::default()
        };
        let shapes: Vec<(u64, usize)> = c.model.table_rows.iter().map(|&r| (r, 8)).collect();
        Some(Arc::new(Mutex::new(
            PoolTimer::new(
                setup,
                &shapes,
                c.batch,
                (c.batch * 4) as u64,
                &c.embedding_optimizer,
            )
            .unwrap(),
        )))
    };
    let emu = Arc::new(Mutex::new(PoolEmulator::new(gpu.clone()).unwrap()));
    let plain = train_on("fae-nmp", &c, &h, &batches, pool(), None, None);
    let emulated = train_on("fae-nmp", &c, &h, &batches, pool(), Some(&gpu), Some(&emu));
    let syncs: u64 = note(&emulated.notes, "hot-row syncs").parse().unwrap();
    assert!(syncs >= 3, "{syncs} syncs");
    let pool_events = |t: &Trained, s: Source| {
        t.events
            .iter()
            .flatten()
            .filter(|e| e.resource == Resource::Nmp && e.source == s)
            .count()
    };
    assert!(pool_events(&emulated, Source::Emulated) > 0);
    assert_eq!(pool_events(&plain, Source::Emulated), 0);
    // The hot rows trained on the GPU reached the pool's device tables and
    // came back: a lost copy would leave whole rows apart, not roundings.
    let mut worst = 0.0f64;
    for (a, b) in emulated.tr.tables().iter().zip(plain.tr.tables()) {
        worst = worst.max(nmpsim_kernels::check::row_rel_err(&a.data, &b.data, a.dim));
    }
    assert!(
        worst < 1e-4,
        "fae-nmp emulated vs simulated tables: {worst:.3e}"
    );
    assert!(!same_bits(
        plain.tr.tables(),
        &crate::embedding::initial_tables_for(&c).unwrap().0
    ));
}
