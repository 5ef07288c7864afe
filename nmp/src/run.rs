//! A pool run as library code, what `nmpsim nmp run` drives: batches
//! through the timed pool under one or more placements, one primitive with
//! the phases that set it up (gradients loaded, casted gather-reduce), each
//! phase's report beside the bytes the kernels' analytic accounting moves,
//! and, on request, every result checked against the kernels.
//!
//! ```
//! use nmpsim_nmp::run::{PoolRun, Primitive, layouts_for};
//! use nmpsim_nmp::{Placement, PoolParams};
//! use nmpsim_traces::{Generator, ProfileOverrides, profile};
//! let spec = profile("rm1", &ProfileOverrides {
//!     batch_size: Some(64),
//!     rows: Some(5000),
//!     ..Default::default()
//! }).unwrap();
//! let batches = vec![Generator::new(spec).unwrap().next_batch()];
//! let params = PoolParams {
//!     engine: nmpsim_sim::EngineKind::Native,
//!     dram: nmpsim_sim::DramConfig::preset("DDR4-3200-x8").unwrap(),
//!     core: Default::default(),
//!     link: Default::default(),
//!     energy: Default::default(),
//! };
//! let run = PoolRun {
//!     primitive: Primitive::Scatter,
//!     placements: vec![Placement::VectorSliced],
//!     params,
//!     ranks: 4,
//!     dim: 16,
//!     optimizer: nmpsim_kernels::Optimizer::Sgd { lr: 0.01 },
//!     seed: 1,
//!     check: true,
//!     request_budget: u64::MAX,
//! };
//! let layouts = layouts_for(&run, &batches).unwrap();
//! let results = run.run(&batches, layouts, &mut |_, _, _| {}).unwrap();
//! // Loaded gradients, the casted gather-reduce, the scatter: the pool's
//! // tables and optimizer state equal the kernels'.
//! assert_eq!(results.phases.len(), 3);
//! assert!(results.checks_pass());
//! ```

use serde::{Deserialize, Serialize};

use nmpsim_kernels::traffic::{
    casted_gather_reduce_row_traffic, gather_reduce_row_traffic, scatter_row_traffic,
};
use nmpsim_kernels::{
    EmbeddingTable, Optimizer, OptimizerState, Pooling, casted_gather_reduce, gather_reduce,
    scatter_update, tensor_cast,
};
use nmpsim_traces::{Batch, TableBatch};

use crate::{
    BatchReport, Instruction, Layout, LayoutParams, NmpError, Placement, Pool, PoolParams,
    StateWidth, TableShape, run_batch_within,
};

/// The primitive a run times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Primitive {
    /// The forward gather-reduce.
    GatherReduce,
    /// The gradient's casted gather-reduce (after its gradients are loaded).
    CastedGatherReduce,
    /// The scatter of the coalesced gradients with the optimizer (after the
    /// two phases above).
    Scatter,
}

impl Primitive {
    pub const ALL: [Primitive; 3] = [
        Primitive::GatherReduce,
        Primitive::CastedGatherReduce,
        Primitive::Scatter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Primitive::GatherReduce => "gather-reduce",
            Primitive::CastedGatherReduce => "casted-gather-reduce",
            Primitive::Scatter => "scatter",
        }
    }

    /// Phases a batch takes: the primitive and those that set it up.
    pub fn phases(self) -> usize {
        match self {
            Primitive::GatherReduce => 1,
            Primitive::CastedGatherReduce => 2,
            Primitive::Scatter => 3,
        }
    }
}

impl std::fmt::Display for Primitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Primitive {
    type Err = NmpError;
    fn from_str(s: &str) -> Result<Self, NmpError> {
        Primitive::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                NmpError::param(
                    "primitive",
                    format!("`{s}` is not a primitive; expected gather-reduce, casted-gather-reduce or scatter"),
                )
            })
    }
}

/// A pool run.
#[derive(Clone, Debug)]
pub struct PoolRun {
    pub primitive: Primitive,
    /// Each runs every batch on a pool of its own.
    pub placements: Vec<Placement>,
    pub params: PoolParams,
    pub ranks: u32,
    pub dim: usize,
    /// The scatter's optimizer.
    pub optimizer: Optimizer,
    /// Seed of the table data and gradients (with `check`).
    pub seed: u64,
    /// Hold real data and check every result against the kernels.
    pub check: bool,
    /// A phase whose DRAM requests would take more bytes than this is
    /// refused before they are built.
    pub request_budget: u64,
}

/// The tables of `batches` (their first batch's) at dimension `dim`.
pub fn table_shapes(batches: &[Batch], dim: usize) -> Vec<TableShape> {
    batches.first().map_or(Vec::new(), |b| {
        b.tables
            .iter()
            .map(|t| TableShape {
                rows: t.num_rows,
                dim,
            })
            .collect()
    })
}

/// The layout parameters of `run` on `batches`: buffers sized for their
/// largest batch.
pub fn layout_params(run: &PoolRun, batches: &[Batch]) -> LayoutParams {
    let max_bags = batches
        .iter()
        .map(|b| b.tables[0].offsets.len() as u64 - 1)
        .max()
        .unwrap_or(1);
    let max_lookups = batches
        .iter()
        .flat_map(|b| b.tables.iter().map(|t| t.indices.len() as u64))
        .max()
        .unwrap_or(1)
        .max(1);
    LayoutParams {
        ranks: run.ranks,
        rank_capacity_bytes: run.params.dram.capacity_bytes(),
        state_values_per_row: StateWidth::of(&run.optimizer),
        max_bags,
        max_unique: max_lookups,
    }
}

/// Host memory the layouts of `placements` take (before they are made): a
/// region per table and rank (about 100 B), and the slices each rank holds
/// of each table (4 B each; every slice on every rank with rows of the table
/// under row interleaving).
pub fn layouts_bytes(placements: &[Placement], shapes: &[TableShape], ranks: u32) -> u128 {
    placements
        .iter()
        .map(|p| {
            let held: u128 = shapes
                .iter()
                .map(|s| s.slices() as u128 * p.slice_holders(ranks as u64, s.rows) as u128)
                .sum();
            shapes.len() as u128 * ranks as u128 * 100 + held * 4
        })
        .sum()
}

/// Host memory a checked run takes beside its layouts: the pool holds every
/// rank's regions as its layout sizes them (tables, state, gradient and
/// coalesced buffers, 4 KiB-aligned; one placement's pool at a time), and
/// the kernels one copy of the tables and state.
pub fn check_bytes(run: &PoolRun, layouts: &[Layout], shapes: &[TableShape]) -> u128 {
    let per_row = (run.dim + run.optimizer.state_values_per_row(run.dim)) as u128 * 4;
    let rows: u128 = shapes.iter().map(|s| s.rows as u128).sum();
    let pool: u128 = layouts
        .iter()
        .map(|l| l.used_bytes.iter().map(|&b| b as u128).sum::<u128>())
        .max()
        .unwrap_or(0);
    pool + rows * per_row
}

/// The layout of every placement of `run` for `batches` (an error if there
/// are no tables, or they do not fit one).
pub fn layouts_for(run: &PoolRun, batches: &[Batch]) -> Result<Vec<Layout>, NmpError> {
    if batches.first().is_none_or(|b| b.tables.is_empty()) {
        return Err(NmpError::param(
            "batches",
            "the pool needs at least one batch with at least one embedding table",
        ));
    }
    let shapes = table_shapes(batches, run.dim);
    let params = layout_params(run, batches);
    run.placements
        .iter()
        .map(|&p| Layout::new(p, &shapes, params.clone()))
        .collect()
}

/// Read and written bytes of the analytic accounting.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq)]
pub struct AnalyticBytes {
    pub read: u64,
    pub write: u64,
}

impl From<nmpsim_kernels::Traffic> for AnalyticBytes {
    fn from(t: nmpsim_kernels::Traffic) -> Self {
        AnalyticBytes {
            read: t.read_bytes,
            write: t.write_bytes,
        }
    }
}

/// One phase of one batch under one placement.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PhaseReport {
    pub placement: Placement,
    pub batch: u64,
    pub phase: String,
    /// Whether this phase is the primitive asked for (others set it up).
    pub primary: bool,
    /// The bytes of table, gradient and optimizer-state rows the phase's
    /// algorithm moves in memory, by the kernels' analytic accounting
    /// (Fig. 6): the kernels' traffic less the index arrays and pooled
    /// outputs, which the pool takes and returns over its link. Beside the
    /// report's `dram_read_bytes` and `dram_write_bytes`, what the simulated
    /// DRAM moved. `None` for a phase that only sets up another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analytic_dram_bytes: Option<AnalyticBytes>,
    pub report: BatchReport,
}

/// A checked batch.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct FunctionalCheck {
    pub placement: Placement,
    pub batch: u64,
    /// The primitive's results against the kernels': gather-reduce
    /// outputs, coalesced gradients, or updated tables and optimizer state.
    pub max_rel_err: f32,
}

/// A pool run's results (`results.json`'s `results` of `nmpsim nmp run`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PoolResults {
    pub phases: Vec<PhaseReport>,
    /// With a check: one per placement and batch.
    pub functional_checks: Vec<FunctionalCheck>,
}

/// The largest relative difference a check allows.
pub const CHECK_TOLERANCE: f32 = 1e-5;

impl PoolResults {
    /// Whether every check holds (none is a NaN or past [`CHECK_TOLERANCE`]).
    pub fn checks_pass(&self) -> bool {
        !self
            .functional_checks
            .iter()
            .any(|c| c.max_rel_err.is_nan() || c.max_rel_err > CHECK_TOLERANCE)
    }

    /// `phases.csv`: a header and one row per phase.
    pub fn phases_table(&self) -> (Vec<&'static str>, Vec<Vec<String>>) {
        // One table gives both the header and the values, so the two cannot
        // drift apart.
        type Column = (&'static str, fn(&PhaseReport) -> String);
        let columns: &[Column] = &[
            ("placement", |p| p.placement.to_string()),
            ("batch", |p| p.batch.to_string()),
            ("phase", |p| p.phase.to_string()),
            ("primary", |p| p.primary.to_string()),
            ("ranks", |p| p.report.ranks.to_string()),
            ("active_ranks", |p| p.report.active_ranks.to_string()),
            ("time_ns", |p| p.report.time_ns.to_string()),
            ("compute_ns", |p| p.report.compute_ns.to_string()),
            ("link_in_ns", |p| p.report.link_in_ns.to_string()),
            ("link_out_ns", |p| p.report.link_out_ns.to_string()),
            ("request_read_bytes", |p| {
                p.report.request_read_bytes.to_string()
            }),
            ("request_write_bytes", |p| {
                p.report.request_write_bytes.to_string()
            }),
            ("dram_read_bytes", |p| p.report.dram_read_bytes.to_string()),
            ("dram_write_bytes", |p| {
                p.report.dram_write_bytes.to_string()
            }),
            ("effective_bandwidth_gbps", |p| {
                p.report.effective_bandwidth_gbps.to_string()
            }),
            ("memory_side_bandwidth_gbps", |p| {
                p.report.memory_side_bandwidth_gbps.to_string()
            }),
            ("end_to_end_bandwidth_gbps", |p| {
                p.report.end_to_end_bandwidth_gbps.to_string()
            }),
            ("peak_bandwidth_gbps", |p| {
                p.report.peak_bandwidth_gbps.to_string()
            }),
            ("mean_busy_fraction", |p| {
                p.report.mean_busy_fraction.to_string()
            }),
            ("load_imbalance", |p| p.report.load_imbalance.to_string()),
            ("link_in_bytes", |p| p.report.link_in_bytes.to_string()),
            ("link_out_bytes", |p| p.report.link_out_bytes.to_string()),
            ("link_out_tail_bytes", |p| {
                p.report.link_out_tail_bytes.to_string()
            }),
            ("energy_dram_pj", |p| p.report.energy.dram_pj.to_string()),
            ("energy_alu_pj", |p| p.report.energy.alu_pj.to_string()),
            ("energy_buffer_pj", |p| {
                p.report.energy.buffer_pj.to_string()
            }),
            ("energy_link_pj", |p| p.report.energy.link_pj.to_string()),
            ("energy_total_pj", |p| p.report.energy.total_pj.to_string()),
            ("wall_s", |p| p.report.wall_s.to_string()),
            ("sim_requests_per_s", |p| {
                p.report.sim_requests_per_s.to_string()
            }),
        ];
        let header: Vec<&str> = columns.iter().map(|c| c.0).collect();
        let rows: Vec<Vec<String>> = self
            .phases
            .iter()
            .map(|p| columns.iter().map(|c| (c.1)(p)).collect())
            .collect();
        (header, rows)
    }

    /// The run's summary: a line per phase, then the checks; `source` says
    /// where the batches came from.
    pub fn summary_text(&self, run: &PoolRun, source: &str) -> String {
        let mut text = format!(
            "{source}, {} ranks of {} (mapping {}) on {}, primitive {}\n",
            run.ranks,
            run.params.dram.name,
            run.params.dram.mapping.name(),
            run.params.engine,
            run.primitive.name(),
        );
        // (A batch column when more than one batch ran.)
        let batch = usize::from(self.phases.iter().any(|p| p.batch > 0));
        let header = [
            "batch",
            "placement",
            "phase",
            "time us",
            "eff GB/s",
            "of peak",
            "mem GB/s",
            "active",
            "imbal.",
            "link MB",
            "energy uJ",
        ];
        let mut t = nmpsim_traces::TextTable::new(&header[1 - batch..]).left(&[batch, batch + 1]);
        for p in &self.phases {
            let r = &p.report;
            let cells = [
                p.batch.to_string(),
                p.placement.name().to_string(),
                format!("{}{}", p.phase, if p.primary { " *" } else { "" }),
                format!("{:.2}", r.time_ns / 1e3),
                format!("{:.1}", r.effective_bandwidth_gbps),
                format!(
                    "{:.1}%",
                    r.effective_bandwidth_gbps / r.peak_bandwidth_gbps * 100.0
                ),
                format!("{:.1}", r.memory_side_bandwidth_gbps),
                r.active_ranks.to_string(),
                format!("{:.2}", r.load_imbalance),
                format!("{:.2}", (r.link_in_bytes + r.link_out_bytes) as f64 / 1e6),
                format!("{:.1}", r.energy.total_pj / 1e6),
            ];
            t.row(cells.into_iter().skip(1 - batch));
        }
        text.push_str(&t.render());
        text.push_str("(* the primitive asked for; eff = DRAM bytes / compute time, back-pressure included; of peak = eff / (ranks x per-rank peak); mem = DRAM bytes / slowest rank's DRAM time)\n");
        let what = match run.primitive {
            Primitive::GatherReduce => "outputs",
            Primitive::CastedGatherReduce => "coalesced gradients",
            Primitive::Scatter => "updated tables and optimizer state",
        };
        for FunctionalCheck {
            placement: p,
            batch: b,
            max_rel_err: e,
        } in &self.functional_checks
        {
            text.push_str(&format!(
                "functional check {p}, batch {b}: {what}, max difference to the kernels {e:.2e} (over 1 + the value)\n"
            ));
        }
        text
    }
}

/// How a table's bags pool: a weighted sum where the trace carries
/// per-lookup weights for the table, a sum otherwise. The weights travel
/// with the indices (gather-reduce) and scale the casted gradients.
fn pooling_of(tb: &TableBatch) -> Pooling {
    if tb.weights.is_some() {
        Pooling::WeightedSum
    } else {
        Pooling::Sum
    }
}

impl PoolRun {
    /// Runs `batches` under every placement, on `layouts` (one per
    /// placement, [`layouts_for`]); `progress` hears of each phase as it
    /// starts (`false`) and ends (`true`).
    pub fn run(
        &self,
        batches: &[Batch],
        layouts: Vec<Layout>,
        progress: &mut dyn FnMut(Placement, &str, bool),
    ) -> Result<PoolResults, NmpError> {
        let run = self;
        if layouts.len() != run.placements.len() {
            return Err(NmpError::param(
                "layouts",
                format!(
                    "{} layouts for {} placements",
                    layouts.len(),
                    run.placements.len()
                ),
            ));
        }
        let shapes = table_shapes(batches, run.dim);
        let mut phases = Vec::new();
        let mut checks = Vec::new();
        for (&placement, layout) in run.placements.iter().zip(layouts) {
            // With --check: the pool holds real tables, and the kernels keep
            // their own copies (tables and optimizer state), updated as the
            // pool's are, to check the pool's results against.
            let mut reference: Vec<(EmbeddingTable, OptimizerState)> = Vec::new();
            let mut pool = if run.check {
                let mut p = Pool::new(layout);
                for (t, s) in shapes.iter().enumerate() {
                    let table = EmbeddingTable::seeded(s.rows, s.dim, run.seed ^ (t as u64 + 1))?;
                    let state = OptimizerState::new(&run.optimizer, s.rows, s.dim)?;
                    p.load_table(t, &table)?;
                    p.load_state(t, &state)?;
                    reference.push((table, state));
                }
                p
            } else {
                Pool::without_data(layout)
            };
            for (bi, batch) in batches.iter().enumerate() {
                let mut run_phase = |pool: &mut Pool,
                                     phase: &'static str,
                                     primary: bool,
                                     analytic_dram_bytes: Option<AnalyticBytes>,
                                     instrs: Vec<Instruction>|
                 -> Result<(), NmpError> {
                    progress(placement, phase, false);
                    let report =
                        run_batch_within(pool, &instrs, &run.params, run.request_budget)
                            .map_err(|e| e.within(format!("{placement}: {phase} of batch {bi}")))?;
                    phases.push(PhaseReport {
                        placement,
                        batch: bi as u64,
                        phase: phase.to_string(),
                        primary,
                        analytic_dram_bytes,
                        report,
                    });
                    progress(placement, phase, true);
                    Ok(())
                };
                let gathers: Vec<Instruction> = batch
                    .tables
                    .iter()
                    .enumerate()
                    .map(|(t, tb)| Instruction::GatherReduce {
                        table: t as u32,
                        pooling: pooling_of(tb),
                        offsets: tb.offsets.clone(),
                        indices: tb.indices.clone(),
                        weights: tb.weights.clone(),
                    })
                    .collect();
                match run.primitive {
                    Primitive::GatherReduce => {
                        if run.check {
                            let mut worst = 0.0f32;
                            for (t, i) in gathers.iter().enumerate() {
                                let got = pool.execute(i)?.expect("gather returns data");
                                let tb = &batch.tables[t];
                                let (want, _) = gather_reduce(&reference[t].0, tb, pooling_of(tb))?;
                                // (A row-interleaved pool adds per-rank partial
                                // sums: a correct reassociation may differ by up to
                                // f32's bound on the bag's sum.)
                                let (magnitude, terms) =
                                    gather_magnitudes(&reference[t].0, tb, pooling_of(tb));
                                worst = worst.max(worst_sum_err(&got, &want, &magnitude, terms));
                            }
                            checks.push(FunctionalCheck {
                                placement,
                                batch: bi as u64,
                                max_rel_err: worst,
                            });
                        }
                        let lookups = batch.tables.iter().map(|tb| tb.indices.len()).sum();
                        let analytic = gather_reduce_row_traffic(lookups, run.dim).into();
                        run_phase(&mut pool, "gather-reduce", true, Some(analytic), gathers)?;
                    }
                    Primitive::CastedGatherReduce | Primitive::Scatter => {
                        let mut loads = Vec::new();
                        let mut casts = Vec::new();
                        // The kernels' coalesced gradients of each table (--check).
                        let mut want_coalesced = Vec::new();
                        // Lookups and unique rows of the batch, over its tables.
                        let (mut lookups, mut unique) = (0usize, 0usize);
                        for (t, tb) in batch.tables.iter().enumerate() {
                            let bags = tb.offsets.len() as u32 - 1;
                            let grads = if run.check {
                                EmbeddingTable::seeded(
                                    bags as u64,
                                    run.dim,
                                    run.seed ^ 0xabc ^ t as u64,
                                )?
                                .data
                            } else {
                                vec![0.0; bags as usize * run.dim]
                            };
                            let (c, _) = tensor_cast(tb, pooling_of(tb))?;
                            lookups += tb.indices.len();
                            unique += c.unique_rows.len();
                            if run.check {
                                want_coalesced.push(casted_gather_reduce(&c, &grads, run.dim)?.0);
                            }
                            loads.push(Instruction::LoadGradient {
                                table: t as u32,
                                bags,
                                grads,
                            });
                            casts.push(Instruction::CastedGatherReduce {
                                table: t as u32,
                                num_bags: bags,
                                casted_src: c.casted_src,
                                casted_dst: c.casted_dst,
                                unique_rows: c.unique_rows,
                                scale: c.scale,
                            });
                        }
                        run_phase(&mut pool, "load-gradient", false, None, loads)?;
                        let analytic =
                            casted_gather_reduce_row_traffic(lookups, unique, run.dim).into();
                        let primary = run.primitive == Primitive::CastedGatherReduce;
                        run_phase(
                            &mut pool,
                            "casted-gather-reduce",
                            primary,
                            primary.then_some(analytic),
                            casts,
                        )?;
                        if run.check && run.primitive == Primitive::CastedGatherReduce {
                            let mut worst = 0.0f32;
                            for (t, want) in want_coalesced.iter().enumerate() {
                                let got = pool.read_coalesced(t);
                                if got.rows != want.rows {
                                    worst = f32::INFINITY;
                                }
                                worst = worst.max(worst_rel_err(&got.grads, &want.grads));
                            }
                            checks.push(FunctionalCheck {
                                placement,
                                batch: bi as u64,
                                max_rel_err: worst,
                            });
                        }
                        if run.primitive == Primitive::Scatter {
                            let scatters = (0..batch.tables.len())
                                .map(|t| Instruction::Scatter {
                                    table: t as u32,
                                    optimizer: run.optimizer,
                                })
                                .collect();
                            let per_row = run.optimizer.state_values_per_row(run.dim);
                            let analytic = scatter_row_traffic(unique, run.dim, per_row).into();
                            run_phase(&mut pool, "scatter", true, Some(analytic), scatters)?;
                            if run.check {
                                // The kernels apply the same coalesced gradients;
                                // the tables and the optimizer state must agree.
                                let mut worst = 0.0f32;
                                for (t, want) in want_coalesced.iter().enumerate() {
                                    let (table, state) = &mut reference[t];
                                    scatter_update(table, state, want, &run.optimizer)?;
                                    let got = pool.read_table(t)?;
                                    worst = worst.max(worst_rel_err(&got.data, &table.data));
                                    let got = pool.read_state(t, state.values_per_row)?;
                                    worst = worst.max(worst_rel_err(&got, &state.values));
                                }
                                checks.push(FunctionalCheck {
                                    placement,
                                    batch: bi as u64,
                                    max_rel_err: worst,
                                });
                            }
                        }
                    }
                }
            }
        }
        Ok(PoolResults {
            phases,
            functional_checks: checks,
        })
    }
}

/// Per bag and element, the sum of the absolute values of the terms a
/// gather-reduce of `tb` adds (weights included, a mean's division too), and
/// the most terms in one bag: the scale of f32's rounding of those sums.
fn gather_magnitudes(
    table: &EmbeddingTable,
    tb: &nmpsim_traces::TableBatch,
    pooling: Pooling,
) -> (Vec<f32>, usize) {
    let dim = table.dim;
    let bags = tb.offsets.len().saturating_sub(1);
    let mut out = vec![0.0f32; bags * dim];
    let mut most = 0;
    for (b, o) in out.chunks_mut(dim).enumerate() {
        let (s, e) = (tb.offsets[b] as usize, tb.offsets[b + 1] as usize);
        most = most.max(e - s);
        for i in s..e {
            let r = tb.indices[i] as usize;
            let w = match (&tb.weights, pooling) {
                (Some(w), Pooling::WeightedSum) => w[i].abs(),
                _ => 1.0,
            };
            for (acc, &x) in o.iter_mut().zip(&table.data[r * dim..(r + 1) * dim]) {
                *acc += w * x.abs();
            }
        }
        if pooling == Pooling::Mean && e > s {
            let inv = 1.0 / (e - s) as f32;
            o.iter_mut().for_each(|v| *v *= inv);
        }
    }
    (out, most)
}

/// The largest relative error of `got` against `want`, `|g - w| / (1 + |w|)`.
/// A NaN or an infinity where the reference has another value is an
/// infinite error (`f32::max` alone would drop a NaN), and so are lengths
/// that differ.
fn worst_rel_err(got: &[f32], want: &[f32]) -> f32 {
    worst_err(got, want, |_| 0.0)
}

/// [`worst_rel_err`] of sums of at most `terms` terms whose magnitudes are
/// `magnitude`: each element's difference first loses f32's bound on a sum's
/// rounding in any order (`nmpsim_kernels::check::f32_sum_error_bound`; two
/// more roundings for a weight's product and a mean's division).
fn worst_sum_err(got: &[f32], want: &[f32], magnitude: &[f32], terms: usize) -> f32 {
    if magnitude.len() != want.len() {
        return f32::INFINITY;
    }
    let gamma = nmpsim_kernels::check::f32_sum_error_bound(terms + 2) as f32;
    // (A slack that is not finite bounds nothing.)
    worst_err(got, want, |k| {
        Some(gamma * magnitude[k])
            .filter(|s| s.is_finite())
            .unwrap_or(0.0)
    })
}

/// The largest `(|g - w| - slack(k)).max(0) / (1 + |w|)` over the elements
/// `k`; see [`worst_rel_err`] for NaNs, infinities and lengths.
fn worst_err(got: &[f32], want: &[f32], slack: impl Fn(usize) -> f32) -> f32 {
    if got.len() != want.len() {
        return f32::INFINITY;
    }
    got.iter()
        .zip(want)
        .enumerate()
        .fold(0.0f32, |m, (k, (&g, &w))| {
            // (Two NaNs agree whatever their payloads or signs: summed in
            // another order, the first NaN met is another one.)
            if g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()) {
                return m;
            }
            let d = (g - w).abs();
            if d.is_nan() {
                return f32::INFINITY;
            }
            m.max((d - slack(k)).max(0.0) / (1.0 + w.abs()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_tables_is_refused_not_a_panic() {
        let run = PoolRun {
            primitive: Primitive::GatherReduce,
            placements: vec![Placement::VectorSliced],
            params: PoolParams {
                engine: nmpsim_sim::EngineKind::Native,
                dram: nmpsim_sim::DramConfig::preset("DDR4-3200-x8").unwrap(),
                core: Default::default(),
                link: Default::default(),
                energy: Default::default(),
            },
            ranks: 2,
            dim: 16,
            optimizer: Optimizer::Sgd { lr: 0.1 },
            seed: 1,
            check: false,
            request_budget: u64::MAX,
        };
        let e = layouts_for(&run, &[]).unwrap_err().to_string();
        assert!(e.contains("at least one batch"), "{e}");
    }

    #[test]
    fn a_nan_or_infinity_the_reference_lacks_is_an_infinite_error() {
        assert_eq!(worst_rel_err(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert_eq!(worst_rel_err(&[1.0, 3.0], &[1.0, 1.0]), 1.0);
        assert_eq!(worst_rel_err(&[f32::NAN, 2.0], &[1.0, 2.0]), f32::INFINITY);
        assert_eq!(worst_rel_err(&[1.0, f32::NAN], &[1.0, 2.0]), f32::INFINITY);
        // Sums: the f32 bound on their rounding is allowed, and no more.
        let gamma = nmpsim_kernels::check::f32_sum_error_bound(12) as f32;
        let within = 100.0 + 0.9 * gamma * 1000.0;
        assert_eq!(worst_sum_err(&[within], &[100.0], &[1000.0], 10), 0.0);
        let beyond = 100.0 + 3.0 * gamma * 1000.0;
        assert!(worst_sum_err(&[beyond], &[100.0], &[1000.0], 10) > 0.0);
        assert_eq!(
            worst_sum_err(&[f32::NAN], &[1.0], &[1.0], 10),
            f32::INFINITY
        );
        assert_eq!(
            worst_sum_err(&[f32::INFINITY], &[1.0], &[f32::INFINITY], 10),
            f32::INFINITY
        );
        assert_eq!(worst_rel_err(&[f32::INFINITY], &[1.0]), f32::INFINITY);
        assert_eq!(worst_rel_err(&[1.0], &[f32::NAN]), f32::INFINITY);
        // The same value, infinities included, is no error.
        assert_eq!(worst_rel_err(&[f32::INFINITY], &[f32::INFINITY]), 0.0);
        assert_eq!(worst_rel_err(&[1.0], &[1.0, 2.0]), f32::INFINITY);
        // NaNs of other payloads or signs on both sides agree.
        let (a, b) = (f32::from_bits(0x7fc0_0002), f32::from_bits(0x7fc0_0001));
        assert_eq!(worst_rel_err(&[a], &[b]), 0.0);
        assert_eq!(worst_rel_err(&[-f32::NAN], &[f32::NAN]), 0.0);
        assert_eq!(worst_sum_err(&[a], &[b], &[1.0], 10), 0.0);
    }
}
