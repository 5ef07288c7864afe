//! A training run driven as library code (`nmpsim_dlrm::run`): records,
//! summaries, failures and stops, without the command line.

use std::path::PathBuf;

use nmpsim_dlrm::report::{self, ReportHeader};
use nmpsim_dlrm::run::{self, Data, Driver, Monitor, RecordFiles, Silent, Synthetic, TrainRun};
use nmpsim_dlrm::summary::RunState;
use nmpsim_dlrm::{
    BuildCtx, DataSource, DlrmError, GpuPreset, PresetOverrides, Status, StrategyEntry,
    TrainConfig, Trainer, preset, strategy,
};

/// A temporary directory (`.0`), removed when dropped.
struct Dir(PathBuf, #[allow(dead_code)] tempfile::TempDir);
impl Dir {
    fn new(name: &str) -> Self {
        let d = tempfile::Builder::new()
            .prefix(&format!("nmpsim-run-{name}-"))
            .tempdir()
            .unwrap();
        Dir(d.path().to_path_buf(), d)
    }
}

/// The tiny model's synthetic data ([`Synthetic`]); `fail` names a
/// strategy whose trainer cannot be built; every summary state handed over
/// is kept.
struct Tiny {
    inner: Synthetic,
    fail: Option<&'static str>,
    /// The data of this strategy (by run order) breaks after two batches.
    break_data: Option<usize>,
    data_calls: usize,
    states: Vec<(Vec<String>, RunState)>,
}

impl Tiny {
    fn new(batch: usize) -> (Self, TrainConfig) {
        let p = preset("tiny", &PresetOverrides::default()).unwrap();
        let cfg = TrainConfig::sgd(p.config.clone(), batch, 8, 0.1);
        (
            Tiny {
                inner: Synthetic {
                    preset: p,
                    batch,
                    seed: 3,
                    test_batches: 1,
                },
                fail: None,
                break_data: None,
                data_calls: 0,
                states: Vec::new(),
            },
            cfg,
        )
    }
}

impl Driver for Tiny {
    type Error = DlrmError;
    fn data(&mut self) -> Result<Data, DlrmError> {
        let (train, test) = self.inner.data()?;
        self.data_calls += 1;
        if self.break_data == Some(self.data_calls) {
            return Ok((Box::new(Breaks(train, 2)), test));
        }
        Ok((train, test))
    }
    fn trainer(
        &mut self,
        mode: &'static StrategyEntry,
        ctx: &BuildCtx,
    ) -> Result<Trainer, DlrmError> {
        if self.fail == Some(mode.name) {
            // A configuration the trainer refuses: the run reports it.
            let mut bad = ctx.clone();
            let mut cfg = ctx.config.clone();
            cfg.batch = 0;
            bad.config = &cfg;
            return self.inner.trainer(mode, &bad);
        }
        self.inner.trainer(mode, ctx)
    }
    fn summaries(
        &mut self,
        s: &[nmpsim_dlrm::ModeSummary],
        state: RunState,
    ) -> Result<(), DlrmError> {
        self.states
            .push((s.iter().map(|m| m.mode.clone()).collect(), state));
        Ok(())
    }
}

/// Data that fails after its first `.1` batches.
struct Breaks(Box<dyn DataSource>, u32);
impl DataSource for Breaks {
    fn next_batch(&mut self) -> Option<Result<nmpsim_traces::Batch, DlrmError>> {
        if self.1 == 0 {
            return Some(Err(DlrmError::Config("the data broke".into())));
        }
        self.1 -= 1;
        self.0.next_batch()
    }
}

/// A run of the strategies `modes` selects, modelled on a V100.
fn run_of(modes: &str, cfg: TrainConfig) -> TrainRun {
    TrainRun::new(
        strategy::select(modes).unwrap(),
        cfg,
        GpuPreset::named("v100").unwrap(),
    )
}

/// Record directory `name`, tiny data in batches of `batch`, baseline-cpu
/// and tcast-cpu on it, and the record files.
fn two_modes(name: &str, batch: usize) -> (Dir, Tiny, TrainRun, RecordFiles) {
    let d = Dir::new(name);
    let (tiny, cfg) = Tiny::new(batch);
    let run = run_of("baseline-cpu,tcast-cpu", cfg);
    let files = RecordFiles::create(&d.0).unwrap();
    (d, tiny, run, files)
}

fn csv_rows(path: &std::path::Path) -> Vec<csv::StringRecord> {
    csv::Reader::from_path(path)
        .unwrap()
        .records()
        .map(|r| r.unwrap())
        .collect()
}

#[test]
fn a_run_records_every_strategy_and_hands_over_its_summaries() {
    let (d, mut tiny, run, mut files) = two_modes("records", 32);
    let out = run::train_modes(&run, &mut files, &mut Silent, &mut tiny).unwrap();
    assert_eq!(out.status, Status::Completed);
    assert!(out.failure.is_none());
    let names: Vec<&str> = out.summaries.iter().map(|s| s.mode.as_str()).collect();
    assert_eq!(names, ["baseline-cpu", "tcast-cpu"]);
    // Identical data and seed: the two strategies learn the same numbers
    // (casting reorders only sums of one row's gradients).
    let (a, b) = (&out.summaries[0], &out.summaries[1]);
    assert_eq!(a.iterations, 8);
    assert!((a.final_loss.unwrap() - b.final_loss.unwrap()).abs() < 1e-4);
    assert_eq!(a.speedup_over_baseline_cpu, Some(1.0));
    // After each strategy, the summaries so far, the run still going.
    assert_eq!(
        tiny.states,
        vec![
            (vec!["baseline-cpu".to_string()], RunState::Running),
            (
                vec!["baseline-cpu".to_string(), "tcast-cpu".to_string()],
                RunState::Running
            )
        ]
    );
    // One line per iteration and strategy; the timeline's events each with
    // their source; one evaluation per strategy at the end.
    let it = csv_rows(&d.0.join(run::ITERATIONS_CSV));
    assert_eq!(it.len(), 16);
    assert_eq!(&it[8][0], "tcast-cpu");
    assert_eq!(&it[8][1], "0");
    let tl = csv_rows(&d.0.join(run::TIMELINE_CSV));
    assert!(tl.iter().any(|r| &r[4] == "casting" && &r[7] == "modelled"));
    assert!(tl.iter().all(|r| r.len() == 11));
    let ev = csv_rows(&d.0.join(run::EVAL_CSV));
    assert_eq!(ev.len(), 2);
    let log = std::fs::read_to_string(d.0.join(run::LOG)).unwrap();
    assert!(
        log.contains("[tcast-cpu] Finished training it 8/8 of epoch 0, "),
        "{log}"
    );

    // The report and summary.csv from the same summaries.
    let text = report::report_text(
        &ReportHeader {
            model: "tiny",
            batch: 32,
            tables: 3,
            dim: 4,
            gpu: "v100",
            device_name: None,
            pool: None,
        },
        &out.summaries,
        &d.0,
    );
    assert!(text.starts_with("model tiny (batch 32, 3 tables, dim 4), GPU modelled as v100\n"));
    assert!(
        text.contains("tcast-cpu") && text.contains(" model "),
        "{text}"
    );
    let csv = report::summary_csv(&out.summaries);
    let rows: Vec<csv::StringRecord> = csv::Reader::from_reader(csv.as_bytes())
        .records()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(&rows[1][0], "tcast-cpu");
    assert_eq!(&rows[1][1], "completed");
    assert_eq!(&rows[0][8], "1.0000");
}

#[test]
fn a_failed_strategy_ends_the_run_with_the_summaries_so_far() {
    let d = Dir::new("failed");
    let (mut tiny, cfg) = Tiny::new(16);
    tiny.fail = Some("tcast-cpu");
    let run = run_of("all", cfg);
    // Strategies on the pool need one.
    let mut files = RecordFiles::create(&d.0).unwrap();
    let e = run::train_modes(&run, &mut files, &mut Silent, &mut tiny)
        .err()
        .expect("no pool");
    assert!(e.to_string().contains("no pool is configured"), "{e}");

    let run = TrainRun {
        modes: strategy::select("baseline-cpu,tcast-cpu").unwrap(),
        ..run
    };
    let e = run::train_modes(&run, &mut files, &mut Silent, &mut tiny)
        .err()
        .expect("a trainer that cannot be built is the driver's error");
    assert!(
        e.to_string().contains("batch size must be at least 1"),
        "{e}"
    );
    // The first strategy's summary was handed over before.
    assert_eq!(tiny.states.len(), 1);

    // A strategy whose training fails ends the run: its summary (failed)
    // is handed over with the run marked failed, and the rest do not run.
    let (mut tiny, cfg) = Tiny::new(16);
    tiny.break_data = Some(2);
    let run = TrainRun { config: cfg, ..run };
    let run = TrainRun {
        modes: strategy::select("tcast").unwrap()[..2].to_vec(),
        ..run
    };
    let out = run::train_modes(&run, &mut files, &mut Silent, &mut tiny).unwrap();
    assert_eq!(out.status, Status::Failed);
    let f = out.failure.expect("a failure");
    assert_eq!(f.mode, "tcast-cpu");
    assert!(
        f.error.to_string().contains("the data broke"),
        "{}",
        f.error
    );
    assert!(f.summary_error.is_none());
    assert_eq!(out.summaries[1].status, Status::Failed);
    assert_eq!(out.summaries[1].iterations, 2);
    assert_eq!(
        tiny.states.last().unwrap().1,
        RunState::Ended(Status::Failed)
    );
}

/// Stops the run after `after` iterations.
struct StopAfter {
    after: u64,
    seen: u64,
    lines: Vec<String>,
    started: Vec<(String, bool)>,
}
impl Monitor for StopAfter {
    fn mode_started(&mut self, mode: &str, simulating: bool) {
        self.started.push((mode.to_string(), simulating));
    }
    fn line(&mut self, line: &str) {
        self.lines.push(line.to_string());
    }
    fn iteration(&mut self, _mode: &str, _over: bool) {
        self.seen += 1;
    }
    fn should_stop(&self) -> bool {
        self.seen >= self.after
    }
}

#[test]
fn a_stop_ends_the_run_interrupted_after_the_current_iteration() {
    let (d, mut tiny, run, mut files) = two_modes("stop", 16);
    let mut m = StopAfter {
        after: 3,
        seen: 0,
        lines: Vec::new(),
        started: Vec::new(),
    };
    let out = run::train_modes(&run, &mut files, &mut m, &mut tiny).unwrap();
    assert_eq!(out.status, Status::Interrupted);
    assert_eq!(out.summaries.len(), 1);
    assert_eq!(out.summaries[0].status, Status::Interrupted);
    assert_eq!(out.summaries[0].iterations, 3);
    assert_eq!(m.started, vec![("baseline-cpu".to_string(), false)]);
    // The stopped strategy logged its last iterations; the log has them too.
    assert!(
        m.lines
            .iter()
            .any(|l| l.starts_with("[baseline-cpu] Finished training it 3/8")),
        "{:?}",
        m.lines
    );
    assert_eq!(csv_rows(&d.0.join(run::ITERATIONS_CSV)).len(), 3);
    assert_eq!(
        report::status_line(RunState::Ended(Status::Interrupted), &["tcast-cpu".into()]),
        Some("run interrupted; not run: tcast-cpu".into())
    );
    assert_eq!(
        report::status_line(RunState::Ended(Status::Completed), &[]),
        None
    );
}

#[test]
fn a_status_is_named_as_results_json_names_it() {
    for s in [
        Status::Completed,
        Status::DataExhausted,
        Status::Interrupted,
        Status::Failed,
    ] {
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
}

#[test]
fn the_memory_estimate_covers_the_measured_peak_and_grows_with_the_run() {
    let rm2 = preset("rm2", &PresetOverrides::sized(Some(1000), None)).unwrap();
    let bag = rm2
        .data
        .tables
        .iter()
        .map(|t| match t.bag_size {
            nmpsim_traces::BagSize::Fixed { size } => size,
            nmpsim_traces::BagSize::Uniform { max, .. } => max,
        })
        .max()
        .unwrap() as u64;
    let cfg = TrainConfig::sgd(rm2.config.clone(), 8192, 1, 0.1);
    // RM2 at batch 8192 and 1000 rows peaked at 7.6 GB, measured.
    let counted = cfg.memory_bytes(1, bag);
    assert!(counted as f64 >= 7.6e9, "{counted}");
    assert!(cfg.memory_bytes(4, bag) > counted);
    let half = TrainConfig::sgd(rm2.config, 4096, 1, 0.1);
    assert!(half.memory_bytes(1, bag) < counted);
}

/// cDLRM (coherent) trains exactly the numbers baseline-cpu trains, with
/// tiny caches that evict and leave conflict victims; in the paper's
/// asynchronous order it may not, and says how often a row was installed
/// stale.
#[test]
fn cdlrm_coherent_trains_baseline_cpus_numbers_and_async_counts_stale_rows() {
    for optimizer in [
        nmpsim_kernels::OptimizerKind::Sgd,
        nmpsim_kernels::OptimizerKind::Adagrad,
    ] {
        let d = Dir::new("cdlrm");
        let (mut tiny, mut cfg) = Tiny::new(16);
        cfg.iters = 20;
        cfg.embedding_optimizer = optimizer.with_lr(0.1);
        let shapes: Vec<(u64, usize)> = cfg
            .model
            .table_rows
            .iter()
            .map(|&r| (r, cfg.model.dim))
            .collect();
        let pool = nmpsim_dlrm::pooltime::PoolTimer::new(
            nmpsim_dlrm::pooltime::NmpSetup {
                ranks: 4,
                ..Default::default()
            },
            &shapes,
            cfg.batch,
            // (The coalesced buffer smaller than a window's rows: the
            // write-backs go in several instructions.)
            8,
            &cfg.embedding_optimizer,
        )
        .unwrap();
        let mut run = run_of("baseline-cpu,cdlrm,cdlrm-nmp", cfg);
        run.pool = Some(std::sync::Arc::new(std::sync::Mutex::new(pool)));
        // The tiny model's 64-, 32- and 16-row tables over 5 sets of 2 ways.
        run.cdlrm = nmpsim_dlrm::cdlrm::CdlrmOptions {
            sets: 5,
            ways: 2,
            lookahead: 3,
            ..Default::default()
        };
        let mut files = RecordFiles::create(&d.0).unwrap();
        let out = run::train_modes(&run, &mut files, &mut Silent, &mut tiny).unwrap();
        assert!(out.failure.is_none(), "{:?}", out.failure.map(|f| f.error));
        let (base, cdlrm) = (&out.summaries[0], &out.summaries[1]);
        assert_eq!(cdlrm.mode, "cdlrm");
        assert_eq!(base.final_loss, cdlrm.final_loss, "{optimizer}");
        assert_eq!(
            base.final_eval.as_ref().map(|e| e.loss),
            cdlrm.final_eval.as_ref().map(|e| e.loss),
            "{optimizer}"
        );
        // Every iteration's training loss, to the last digit.
        let it = csv_rows(&d.0.join(run::ITERATIONS_CSV));
        let loss = |mode: &str| -> Vec<String> {
            it.iter()
                .filter(|r| &r[0] == mode)
                .map(|r| r[3].to_string())
                .collect()
        };
        assert_eq!(loss("baseline-cpu"), loss("cdlrm"), "{optimizer}");
        assert_eq!(loss("cdlrm").len(), 20);
        // With its host tables in the pool, the same numbers.
        assert_eq!(loss("cdlrm"), loss("cdlrm-nmp"), "{optimizer}");
        assert_eq!(out.summaries[2].final_loss, cdlrm.final_loss);
        let note = |k: &str| {
            cdlrm
                .notes
                .iter()
                .find(|n| n.0.starts_with(k))
                .unwrap_or_else(|| panic!("no note {k}: {:?}", cdlrm.notes))
                .1
                .clone()
        };
        assert_eq!(note("stale installs"), "0");
        assert_ne!(note("evictions"), "0");
        assert_eq!(note("windows"), "7");
        // The timeline has the caching step (measured) and the prefetcher
        // on its overlapped lane.
        let tl = csv_rows(&d.0.join(run::TIMELINE_CSV));
        assert!(
            tl.iter()
                .any(|r| &r[0] == "cdlrm" && &r[4] == "caching" && &r[7] == "measured")
        );
        assert!(tl.iter().any(|r| &r[0] == "cdlrm" && &r[4] == "prefetch"));
        // cdlrm-nmp's prefetch gathers, write-backs and victims' fetches are
        // the pool's, simulated; the prefetcher runs in the background, and
        // the first window's fetch is waited for.
        for primitive in ["prefetch", "write-back", "victim fetch"] {
            assert!(
                tl.iter().any(|r| &r[0] == "cdlrm-nmp"
                    && &r[4] == primitive
                    && &r[6] == "nmp"
                    && &r[7] == "simulated"),
                "{optimizer}: no simulated {primitive} on the pool"
            );
        }
        assert!(
            tl.iter()
                .any(|r| &r[0] == "cdlrm-nmp" && &r[4] == "prefetch" && &r[3] == "2")
        );
        assert!(
            tl.iter()
                .any(|r| &r[0] == "cdlrm-nmp" && &r[1] == "0" && r[5].ends_with("waited for"))
        );
        let nmp = &out.summaries[2];
        assert!(nmp.figures["prefetch_stall_ms"] > 0.0);
        // The paper's split of an iteration: batch computation, and the
        // caching overhead amortised over the window.
        let f = &cdlrm.figures;
        assert!(f["batch_computation_ms"] > 0.0);
        let total = f["batch_computation_ms"] + f["amortised_caching_overhead_ms"];
        assert!((f["total_per_batch_ms"] - total).abs() < 1e-9 * total.max(1.0));
        // (The modelled iteration, its mean, is the batch computation plus
        // the caching steps and stalls, here over the same steps.)
        assert!(f["batch_computation_ms"] < cdlrm.modelled_ms_per_iteration);

        // The paper's order: windows fetched before the evicted rows reach
        // the host. Each stale install is counted, and the losses part.
        let d = Dir::new("cdlrm-async");
        run.cdlrm.consistency = nmpsim_dlrm::cdlrm::Consistency::Async;
        let mut files = RecordFiles::create(&d.0).unwrap();
        let out = run::train_modes(&run, &mut files, &mut Silent, &mut tiny).unwrap();
        let a = &out.summaries[1];
        let stale: u64 = a
            .notes
            .iter()
            .find(|n| n.0 == "stale installs")
            .unwrap()
            .1
            .parse()
            .unwrap();
        assert!(stale > 0, "{optimizer}: no stale install");
        assert_ne!(out.summaries[0].final_loss, a.final_loss, "{optimizer}");
    }
}

/// eltt-nmp trains eltt's numbers (every loss, SGD and Adagrad), with its
/// TT lookups and the write-back of the updated core slices simulated on
/// the pool, and says what bounded the pool: with one ALU lane its products
/// do.
#[test]
fn eltt_nmp_trains_eltts_numbers_with_the_tt_lookups_on_the_pool() {
    for optimizer in [
        nmpsim_kernels::OptimizerKind::Sgd,
        nmpsim_kernels::OptimizerKind::Adagrad,
    ] {
        let mut bounds = Vec::new();
        for lanes in [16, 1] {
            let (mut data, mut cfg) = tiny8(32);
            cfg.iters = 8;
            cfg.embedding_optimizer = optimizer.with_lr(0.1);
            let shapes: Vec<(u64, usize)> = cfg
                .model
                .table_rows
                .iter()
                .map(|&r| (r, cfg.model.dim))
                .collect();
            let pool = nmpsim_dlrm::pooltime::PoolTimer::new(
                nmpsim_dlrm::pooltime::NmpSetup {
                    ranks: 4,
                    alu_lanes: lanes,
                    sim_batches: nmpsim_dlrm::pooltime::SimBatches::First(3),
                    ..Default::default()
                },
                &shapes,
                cfg.batch,
                64,
                &cfg.embedding_optimizer,
            )
            .unwrap();
            let d = Dir::new("eltt-nmp");
            let mut run = run_of("eltt,eltt-nmp", cfg);
            run.pool = Some(std::sync::Arc::new(std::sync::Mutex::new(pool)));
            run.eltt = nmpsim_dlrm::eltt::ElttOptions {
                rank: 3,
                threshold: 20,
                reuse: true,
                reorder_batches: 0,
            };
            let mut files = RecordFiles::create(&d.0).unwrap();
            let out = run::train_modes(&run, &mut files, &mut Silent, &mut data).unwrap();
            assert!(out.failure.is_none(), "{:?}", out.failure.map(|f| f.error));
            let it = csv_rows(&d.0.join(run::ITERATIONS_CSV));
            let loss = |mode: &str| -> Vec<String> {
                it.iter()
                    .filter(|r| &r[0] == mode)
                    .map(|r| r[3].to_string())
                    .collect()
            };
            assert_eq!(loss("eltt").len(), 8);
            assert_eq!(loss("eltt"), loss("eltt-nmp"), "{optimizer:?}");
            let (e, n) = (&out.summaries[0], &out.summaries[1]);
            assert_eq!(n.mode, "eltt-nmp");
            assert_eq!(
                e.final_eval.as_ref().map(|x| x.loss),
                n.final_eval.as_ref().map(|x| x.loss)
            );
            let tl = csv_rows(&d.0.join(run::TIMELINE_CSV));
            for p in ["tt-gather-reduce", "tt-write"] {
                for src in ["simulated", "simulated-proxy"] {
                    assert!(
                        tl.iter().any(|r| &r[0] == "eltt-nmp"
                            && &r[4] == p
                            && &r[6] == "nmp"
                            && &r[7] == src),
                        "no {src} {p} on the pool"
                    );
                }
            }
            // The backward stays on the GPU, modelled; no TT lookup there.
            assert!(
                tl.iter()
                    .any(|r| &r[0] == "eltt-nmp" && &r[4] == "tt-backward" && &r[6] == "gpu")
            );
            assert!(
                !tl.iter()
                    .any(|r| &r[0] == "eltt-nmp" && &r[4] == "tt-gather-reduce" && &r[6] == "gpu")
            );
            let f = &n.figures;
            assert!(
                f["tt_pool_forward_ms"] > 0.0 && f["tt_pool_write_mb"] > 0.0,
                "{f:?}"
            );
            assert!(!e.figures.contains_key("tt_pool_forward_ms"));
            bounds.push(f["tt_pool_compute_bound_share"]);
            let note = &n
                .notes
                .iter()
                .find(|x| x.0 == "tt lookups on the pool")
                .unwrap()
                .1;
            assert!(
                note.contains(&format!("{lanes} lanes at 1.6 GHz")),
                "{note}"
            );
        }
        // Rank 3 at dim 8: a lookup's products are a few multiply-adds per
        // byte, so one lane bounds every forward and sixteen none.
        assert_eq!(bounds, vec![0.0, 1.0], "{optimizer:?}");
    }
}

/// The tiny model at dim 8 (a TT split, 2 x 2 x 2) on its planted teacher.
fn tiny8(batch: usize) -> (Synthetic, TrainConfig) {
    let p = preset(
        "tiny",
        &PresetOverrides {
            dim: Some(8),
            ..Default::default()
        },
    )
    .unwrap();
    let mut cfg = TrainConfig::sgd(p.config.clone(), batch, 30, 0.1);
    cfg.iters = 30;
    (
        Synthetic {
            preset: p,
            batch,
            seed: 3,
            test_batches: 1,
        },
        cfg,
    )
}

/// eltt: with no table over the threshold it trains baseline-cpu's numbers
/// (its dense tables' primitives are the same kernels); with TT tables it
/// learns, its reuse changes no number but the modelled time, and what it
/// cannot shape is refused by name.
#[test]
fn eltt_trains_dense_tables_as_baseline_and_tt_tables_with_or_without_reuse() {
    let (mut data, cfg) = tiny8(32);
    let d = Dir::new("eltt-dense");
    let mut run = run_of("baseline-cpu,eltt", cfg.clone());
    run.eltt.threshold = 1000;
    let mut files = RecordFiles::create(&d.0).unwrap();
    let out = run::train_modes(&run, &mut files, &mut Silent, &mut data).unwrap();
    assert!(out.failure.is_none(), "{:?}", out.failure.map(|f| f.error));
    let it = csv_rows(&d.0.join(run::ITERATIONS_CSV));
    let loss = |mode: &str| -> Vec<String> {
        it.iter()
            .filter(|r| &r[0] == mode)
            .map(|r| r[3].to_string())
            .collect()
    };
    assert_eq!(loss("baseline-cpu"), loss("eltt"));
    assert_eq!(out.summaries[1].figures["tt_tables"], 0.0);

    // The 64- and 32-row tables as TT tables of rank 3.
    let mut losses = Vec::new();
    let mut times = Vec::new();
    for reuse in [true, false] {
        let d = Dir::new("eltt-tt");
        let mut run = run_of("eltt", cfg.clone());
        run.eltt = nmpsim_dlrm::eltt::ElttOptions {
            rank: 3,
            threshold: 20,
            reuse,
            reorder_batches: 0,
        };
        let mut files = RecordFiles::create(&d.0).unwrap();
        let out = run::train_modes(&run, &mut files, &mut Silent, &mut data).unwrap();
        assert!(out.failure.is_none(), "{:?}", out.failure.map(|f| f.error));
        let s = &out.summaries[0];
        assert_eq!(s.figures["tt_tables"], 2.0);
        assert!(s.figures["compression"] > 1.0, "{:?}", s.figures);
        let it = csv_rows(&d.0.join(run::ITERATIONS_CSV));
        let l: Vec<f64> = it.iter().map(|r| r[3].parse().unwrap()).collect();
        assert!(l[l.len() - 1] < l[0], "no learning: {l:?}");
        losses.push(l);
        times.push(s.modelled_ms_per_iteration);
        let tl = csv_rows(&d.0.join(run::TIMELINE_CSV));
        for p in ["tt-gather-reduce", "tt-backward"] {
            assert!(
                tl.iter()
                    .any(|r| &r[4] == p && &r[6] == "gpu" && &r[7] == "modelled"),
                "no modelled {p}"
            );
        }
    }
    assert_eq!(losses[0], losses[1], "reuse changed the numbers");

    // Reordered rows: every batch trained (the first ones, read to build the
    // bijection, too), and it still learns.
    let d = Dir::new("eltt-reorder");
    let mut run = run_of("eltt", cfg.clone());
    run.eltt = nmpsim_dlrm::eltt::ElttOptions {
        rank: 3,
        threshold: 20,
        reuse: true,
        reorder_batches: 8,
    };
    let mut files = RecordFiles::create(&d.0).unwrap();
    let out = run::train_modes(&run, &mut files, &mut Silent, &mut data).unwrap();
    assert!(out.failure.is_none(), "{:?}", out.failure.map(|f| f.error));
    let it = csv_rows(&d.0.join(run::ITERATIONS_CSV));
    assert_eq!(it.len(), 30);
    let l: Vec<f64> = it.iter().map(|r| r[3].parse().unwrap()).collect();
    assert!(l[l.len() - 1] < l[0], "no learning: {l:?}");
    assert!(
        out.summaries[0]
            .notes
            .iter()
            .any(|n| n.1.contains("reordered from the first 8 batches"))
    );
    assert!(times[0] < times[1], "reuse did not save time: {times:?}");

    // What eltt cannot do is an error naming it.
    let mut bad = cfg.clone();
    bad.embedding_optimizer = nmpsim_kernels::OptimizerKind::RowWiseAdagrad.with_lr(0.1);
    let ctx = nmpsim_dlrm::strategy::BuildCtx {
        eltt: nmpsim_dlrm::eltt::ElttOptions {
            rank: 2,
            threshold: 20,
            ..Default::default()
        },
        ..nmpsim_dlrm::strategy::BuildCtx::new(&bad, GpuPreset::named("v100").unwrap(), None)
    };
    let e = (strategy::find("eltt").unwrap().build)(&ctx)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("row-wise Adagrad is not defined on TT cores"),
        "{e}"
    );
    let (_, mut c4) = Tiny::new(16);
    c4.model.dim = 4;
    let ctx = nmpsim_dlrm::strategy::BuildCtx {
        eltt: nmpsim_dlrm::eltt::ElttOptions {
            rank: 2,
            threshold: 20,
            ..Default::default()
        },
        ..nmpsim_dlrm::strategy::BuildCtx::new(&c4, GpuPreset::named("v100").unwrap(), None)
    };
    let e = (strategy::find("eltt").unwrap().build)(&ctx)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("table 0 (64 rows) as a TT table") && e.contains("4 cannot split"),
        "{e}"
    );
}
