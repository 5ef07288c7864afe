//! The GPU emulation of the NMP pool: its kernels compile (no GPU needed), and
//! on a GPU the emulated time follows the simulated bandwidth.
#![cfg(feature = "cuda")]

use nmpsim_dlrm::emulate::{KERNELS, PoolEmulator, SOURCES, throttle_target_ns};
use nmpsim_kernels::cuda::{CHECK_ARCH, compile, nvrtc_present};
use nmpsim_kernels::{EmbeddingTable, Optimizer, OptimizerState, Pooling};
use nmpsim_traces::{BagSize, Distribution, TableSpec, generate_table_batch};

mod support {
    pub mod gpu;
}
use support::gpu::gpu_or_skip;

#[test]
fn emulation_kernels_compile_through_nvrtc() {
    if !nvrtc_present() {
        assert!(
            std::env::var_os("NMPSIM_REQUIRE_NVRTC").is_none(),
            "NMPSIM_REQUIRE_NVRTC is set but libnvrtc.so.13 cannot be loaded"
        );
        eprintln!("skipped: NVRTC (libnvrtc.so.13) not found; `./x test` installs it");
        return;
    }
    for src in SOURCES {
        let ptx = compile(src, CHECK_ARCH)
            .unwrap_or_else(|e| panic!("{e}"))
            .to_src();
        for k in KERNELS {
            assert!(
                ptx.contains(&format!(".entry {k}")),
                "{}: kernel {k} missing from the PTX",
                src.name
            );
        }
    }
}

/// Halving the pool's effective bandwidth doubles the emulated time of a
/// bandwidth-bound gather-reduce (within 10%), and the emulated time is never
/// below the real work.
#[test]
fn emulated_time_follows_the_simulated_bandwidth() {
    let Some(gpu) = gpu_or_skip() else { return };
    let mut emu = PoolEmulator::new(gpu).expect("emulator");
    let spec = TableSpec {
        rows: 200_000,
        distribution: Distribution::Uniform,
        bag_size: BagSize::Fixed { size: 20 },
        weighted: false,
    };
    let batch = generate_table_batch(&spec, 2048, 7).unwrap();
    let table = EmbeddingTable::seeded(spec.rows, 64, 3).unwrap();
    let cpu = nmpsim_kernels::gather_reduce(&table, &batch, Pooling::Sum).unwrap();
    let (casted, _) = nmpsim_kernels::tensor_cast(&batch, Pooling::Sum).unwrap();
    let grad_out: Vec<f32> = (0..2048 * 64)
        .map(|i| ((i % 97) as f32 - 48.0) / 64.0)
        .collect();
    let cpu_coalesced = nmpsim_kernels::casted_gather_reduce(&casted, &grad_out, 64).unwrap();
    // The pool's tables on the device, as the trainer keeps them; the batch
    // staged before each timed region, so the region holds the kernels.
    let sgd = Optimizer::Sgd { lr: 0.1 };
    let state = OptimizerState::new(&sgd, spec.rows, 64).unwrap();
    let dt = emu.backend().upload_table(&table, &state).unwrap();
    // A pool far slower than the GPU: the throttle, not the work, sets the time.
    let mut times = Vec::new();
    for gbps in [1.0, 0.5] {
        let target = throttle_target_ns(cpu.1.total_bytes(), gbps);
        let mut staged = emu
            .backend()
            .stage_batch(&dt, &batch, Pooling::Sum)
            .unwrap();
        assert_eq!(staged.traffic(), cpu.1);
        // Warm-up (module load), then the measured run.
        emu.run(target, |b| Ok(b.gather_reduce_staged(&dt, &mut staged)?))
            .unwrap();
        let ((), e) = emu
            .run(target, |b| Ok(b.gather_reduce_staged(&dt, &mut staged)?))
            .unwrap();
        let out = emu.backend().download_pooled(&staged).unwrap();
        let err = out
            .iter()
            .zip(&cpu.0)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            err < 1e-3,
            "GPU gather-reduce differs from the CPU by {err}"
        );
        eprintln!(
            "gather-reduce at {gbps} GB/s: raw {:.0} ns, target {:.0} ns, emulated {:.0} ns",
            e.raw_ns, e.target_ns, e.emulated_ns
        );
        assert!(
            !e.work_bound(),
            "the pool must be slower than the work: {e:?}"
        );
        assert!(e.throttle_error() < 0.10, "{e:?}");
        times.push(e.emulated_ns);

        // The casted gather-reduce, its result left on the device.
        let mut sc = emu.backend().stage_casted(&casted, &grad_out, 64).unwrap();
        let target = throttle_target_ns(sc.traffic().total_bytes(), gbps);
        let ((), e) = emu
            .run(target, |b| Ok(b.casted_gather_reduce_staged(&mut sc)?))
            .unwrap();
        let got = emu
            .backend()
            .download_coalesced(&sc.into_coalesced())
            .unwrap();
        assert_eq!(got.rows, cpu_coalesced.0.rows);
        let err = got
            .grads
            .iter()
            .zip(&cpu_coalesced.0.grads)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(err < 1e-4, "GPU casted gather-reduce differs by {err}");
        eprintln!(
            "casted gather-reduce at {gbps} GB/s: raw {:.0} ns, target {:.0} ns, emulated {:.0} ns",
            e.raw_ns, e.target_ns, e.emulated_ns
        );
        assert!(!e.work_bound(), "{e:?}");
        assert!(e.throttle_error() < 0.10, "{e:?}");
        times.push(e.emulated_ns);
    }
    for (what, full, half) in [
        ("gather-reduce", times[0], times[2]),
        ("casted gather-reduce", times[1], times[3]),
    ] {
        let ratio = half / full;
        assert!(
            (ratio - 2.0).abs() <= 0.2,
            "{what}: halving the bandwidth scaled the emulated time by {ratio:.3}, expected 2 within 10%"
        );
    }
}

/// The modes on a GPU (casting measured there, the NMP modes' pool emulated)
/// compute what they compute without it:
/// same pooled outputs, same tables after a few steps; the pool's events are
/// labelled emulated, and their raw GPU times are reported.
#[test]
fn modes_on_the_gpu_match_the_cpu() {
    use std::sync::{Arc, Mutex};

    use nmpsim_dlrm::embedding::{EmbeddingStrategy, HostTimes, StepCtx, SystemModes, TimingEnv};
    use nmpsim_dlrm::{
        GpuPreset, NmpSetup, PoolTimer, PresetOverrides, Source, StepTimeline, SystemMode,
        TeacherData, preset,
    };
    use nmpsim_kernels::Optimizer;

    let Some(gpu) = gpu_or_skip() else { return };
    let p = preset("tiny", &PresetOverrides::default()).unwrap();
    let cfg = p.config;
    let batch_size = 64;
    let mut spec = p.data.clone();
    spec.batch_size = batch_size;
    let optimizer = Optimizer::Adagrad {
        lr: 0.1,
        eps: 1e-8,
        initial_accumulator: 0.0,
    };
    let shapes: Vec<(u64, usize)> = cfg.table_rows.iter().map(|&r| (r, cfg.dim)).collect();
    let emu = Arc::new(Mutex::new(PoolEmulator::new(gpu.clone()).unwrap()));
    for mode in [
        SystemMode::TcastCpu,
        SystemMode::BaselineNmp,
        SystemMode::TcastNmp,
    ] {
        let env = || {
            let setup = NmpSetup {
                ranks: 2,
                fixed_bandwidth_gbps: Some(5.0),
                ..NmpSetup::default()
            };
            TimingEnv {
                gpu: GpuPreset::named("h100").unwrap(),
                pool: Some(Arc::new(Mutex::new(
                    PoolTimer::new(setup, &shapes, batch_size, 4096, &optimizer).unwrap(),
                ))),
                host: None,
            }
        };
        let new = || {
            SystemModes::new(
                mode,
                &cfg.table_rows,
                cfg.dim,
                Pooling::Sum,
                &optimizer,
                5,
                env(),
            )
            .unwrap()
        };
        let mut plain = new();
        let mut emulated = new().with_gpu_casting(gpu.clone()).unwrap();
        if mode.uses_nmp() {
            emulated = emulated.with_emulator(emu.clone()).unwrap();
            assert!(emulated.emulating() && !plain.emulating());
        } else {
            assert!(
                new().with_emulator(emu.clone()).is_err(),
                "{mode} has no pool"
            );
        }
        let mut data = TeacherData::new(spec.clone(), cfg.bottom[0], 3).unwrap();
        for it in 0..4u64 {
            let batch = data.next_batch();
            let mut outs = Vec::new();
            let (mut emulated_events, mut gpu_casting) = (0, 0);
            for s in [&mut plain as &mut dyn EmbeddingStrategy, &mut emulated] {
                let mut timeline = StepTimeline::default();
                let mut host = HostTimes::default();
                let mut ctx = StepCtx {
                    iteration: it,
                    previous_ns: 0.0,
                    optimizer,
                    timeline: &mut timeline,
                    host: &mut host,
                };
                let pooled = s.forward(&batch, &mut ctx).unwrap();
                // A fixed pseudo-gradient of the pooled outputs.
                let d: Vec<Vec<f32>> = pooled
                    .iter()
                    .map(|o| o.iter().map(|x| 0.5 * x - 0.01).collect())
                    .collect();
                s.backward(&batch, &d, &mut ctx).unwrap();
                emulated_events += timeline
                    .events
                    .iter()
                    .filter(|e| e.source == Source::Emulated)
                    .count();
                gpu_casting += timeline
                    .events
                    .iter()
                    .filter(|e| e.primitive == "casting" && e.source == Source::Measured)
                    .count();
                outs.push((pooled, host));
            }
            if mode.uses_nmp() {
                assert!(emulated_events >= 2, "{mode}: no emulated pool events");
            }
            let (a, b) = (&outs[0].0, &outs[1].0);
            for (x, y) in a.iter().zip(b) {
                let err = nmpsim_kernels::check::row_rel_err(y, x, cfg.dim);
                assert!(
                    err < 1e-4,
                    "{mode} step {it}: pooled outputs differ by {err}"
                );
            }
            assert!(
                !mode.uses_nmp()
                    || outs[1]
                        .1
                        .entries
                        .iter()
                        .any(|(p, _)| p.ends_with("gpu-raw")),
                "raw GPU times are reported"
            );
            if mode != SystemMode::BaselineNmp {
                assert_eq!(gpu_casting, 1, "{mode}: casting measured on the GPU");
            }
        }
        if mode.uses_nmp() {
            assert!(
                emulated.infer(&data.next_batch()).is_err(),
                "stale host tables are refused"
            );
        }
        emulated.sync().unwrap();
        for (x, y) in plain.tables().iter().zip(emulated.tables()) {
            let err = nmpsim_kernels::check::row_rel_err(&y.data, &x.data, cfg.dim);
            assert!(err < 1e-4, "{mode}: tables differ by {err} after 4 steps");
        }
    }
}
