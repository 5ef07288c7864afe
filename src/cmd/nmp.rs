//! `nmpsim nmp …`: run embedding primitives on the NMP pool (per-rank NMP
//! cores over simulated DDR4 ranks). The work is in `nmpsim-nmp`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use nmpsim_kernels::traffic::{
    casted_gather_reduce_row_traffic, gather_reduce_row_traffic, scatter_row_traffic,
};
use nmpsim_kernels::{
    EmbeddingTable, Optimizer, OptimizerState, Pooling, casted_gather_reduce, gather_reduce,
    scatter_update, tensor_cast,
};
use nmpsim_nmp::{
    BatchReport, CoreParams, EnergyParams, Instruction, Layout, LayoutParams, LinkParams,
    Placement, Pool, PoolParams, StateWidth, TableShape, placement::SLICE_BYTES, run_batch_within,
};
use nmpsim_sim::{DramConfig, EngineKind};
use nmpsim_traces::{
    Batch, Distribution, GenSpec, Generator, ProfileOverrides, TableBatch, TraceReader,
};
use serde::Serialize;

use crate::cmd::demo::parse_optimizer;
use crate::rundir::{self, RunDir};

#[derive(Subcommand, Debug)]
pub enum NmpCommand {
    /// Run one embedding primitive on the pool and report time, effective bandwidth, balance and energy.
    #[command(after_help = "Examples:
  nmpsim nmp run --profile rm1 --primitive gather-reduce --ranks 32 --preset DDR4-3200-x8
  nmpsim nmp run --profile rm1 --placement all --batch 2048 --dist zipf:1.05
  nmpsim nmp run --profile rm1 --primitive casted-gather-reduce --placement row-interleaved
  nmpsim nmp run --profile rm1 --primitive scatter --optimizer adagrad --engine ramulator
  nmpsim nmp run --trace kaggle.nmpt --ranks 16 --json
  nmpsim nmp run --profile rm1 --rows 20000 --check        # also verify results against the kernels")]
    Run(RunArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Primitive {
    GatherReduce,
    CastedGatherReduce,
    Scatter,
}

impl Primitive {
    /// The name `--primitive` takes (clap's, which serde's renaming matches).
    fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_owned())
            .unwrap_or_default()
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Trace profile to generate (see `nmpsim trace gen --list-profiles`).
    #[arg(long, default_value = "rm1", conflicts_with = "trace")]
    profile: String,
    /// Binary embedding trace (.nmpt) instead of a profile.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Samples per batch (profiles).
    #[arg(long, default_value_t = 2048, conflicts_with = "trace")]
    batch: usize,
    /// Rows of the profile's largest tables.
    #[arg(long, conflicts_with = "trace")]
    rows: Option<u64>,
    /// Row distribution override: uniform, zipf:ALPHA, dlrm.
    #[arg(long, value_name = "DIST", conflicts_with = "trace")]
    dist: Option<String>,
    /// Trace batches to run: the first N of a --trace (all of it, with a note, if it holds fewer).
    #[arg(long, default_value_t = 1)]
    batches: u64,
    /// Seed of the generated trace and of the data.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Embedding dimension (at most 1048576).
    #[arg(long, default_value_t = 64)]
    dim: usize,
    /// The primitive to run: the forward gather-reduce, the casted gradient
    /// gather-reduce, or the scatter of coalesced gradients with the optimizer.
    #[arg(long, value_enum, default_value = "gather-reduce")]
    primitive: Primitive,
    /// Optimizer of the scatter: sgd, adagrad, row-wise-adagrad, rms-prop.
    #[arg(long, default_value = "sgd")]
    optimizer: String,
    /// Learning rate of the scatter's optimizer.
    #[arg(long, default_value_t = 0.01, value_parser = crate::cmd::f32_arg)]
    lr: f32,
    /// Number of NMP ranks (1 to 65536).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=65536))]
    ranks: u32,
    /// DDR4 preset of each rank (see `nmpsim dram presets`).
    #[arg(long, default_value = "DDR4-3200-x8", value_parser = crate::cmd::preset_arg)]
    preset: String,
    /// vector-sliced, row-interleaved, table-per-rank, or all.
    #[arg(long, default_value = "vector-sliced")]
    placement: String,
    /// Address mapping of each rank, most significant field first
    /// (default ro-ra-ba-co-bg; ro-ra-ba-bg-co keeps a row's slices in one DRAM row).
    #[arg(long, value_name = "FIELDS")]
    mapping: Option<String>,
    /// DRAM engine: dramsim3, ramulator or native (Rust; on one rank per channel it gives
    /// dramsim3's results but for the writes dramsim3 leaves unissued, over 20x faster).
    #[arg(long, default_value = "dramsim3")]
    engine: String,
    /// Core: requests in flight per rank, 1 to 64 (the core's 4 KiB input
    /// buffer holds 64 slices of 64 B).
    #[arg(long, default_value_t = 32)]
    queue: usize,
    /// Host link bandwidth in GB/s.
    #[arg(long, default_value_t = 25.0)]
    link_gbps: f64,
    /// Hold real table data in the pool and check its results against the kernels
    /// (a NaN or infinity the kernels lack counts as an infinite error). Needs memory
    /// for two copies of the tables and optimizer state; refused up front otherwise.
    #[arg(long)]
    check: bool,
    /// Run directory [default: runs/nmp-<time>-<pid>].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(c: NmpCommand) -> Result<ExitCode> {
    match c {
        NmpCommand::Run(a) => run_pool(a),
    }
}

#[derive(Serialize)]
struct PhaseReport {
    placement: Placement,
    batch: u64,
    phase: &'static str,
    /// Whether this phase is the primitive asked for (others set it up).
    primary: bool,
    /// The bytes of table, gradient and optimizer-state rows the phase's
    /// algorithm moves in memory, by the kernels' analytic accounting
    /// (Fig. 6): the kernels' traffic less the index arrays and pooled
    /// outputs, which the pool takes and returns over its link. Beside the
    /// report's `dram_read_bytes` and `dram_write_bytes`, what the simulated
    /// DRAM moved. `None` for a phase that only sets up another.
    #[serde(skip_serializing_if = "Option::is_none")]
    analytic_dram_bytes: Option<AnalyticBytes>,
    report: BatchReport,
}

/// Read and written bytes of the analytic accounting.
#[derive(Serialize, Clone, Copy, Default)]
struct AnalyticBytes {
    read: u64,
    write: u64,
}

impl From<nmpsim_kernels::Traffic> for AnalyticBytes {
    fn from(t: nmpsim_kernels::Traffic) -> Self {
        AnalyticBytes {
            read: t.read_bytes,
            write: t.write_bytes,
        }
    }
}

#[derive(Serialize)]
struct NmpConfig<'a> {
    source: String,
    /// The generator's whole spec (tables, distribution, batch, seed) when
    /// the trace was generated from a profile.
    generated: Option<&'a GenSpec>,
    /// Seed of the generated trace and of the table data.
    seed: u64,
    primitive: Primitive,
    optimizer: Optimizer,
    tables: &'a [TableShape],
    batches: u64,
    placements: &'a [Placement],
    pool: &'a PoolParams,
    ranks: u32,
    check: bool,
}

type Batches = Box<dyn Iterator<Item = Result<Batch>>>;

/// The trace's description, the generator's spec if it is generated, and
/// its batches.
fn batches_of(a: &RunArgs) -> Result<(String, Option<GenSpec>, Batches)> {
    if let Some(p) = &a.trace {
        let mut r = Some(TraceReader::open(p)?);
        let mut left = a.batches;
        // The first `--batches` batches; if they are the whole trace, its end
        // record is verified too (TraceReader::verify_if_at_end).
        let batches = std::iter::from_fn(move || {
            let reader = r.as_mut()?;
            if left == 0 {
                let end = reader.verify_if_at_end();
                r = None;
                return end.err().map(|e| Err(e.into()));
            }
            left -= 1;
            let b = reader.next();
            if b.is_none() {
                r = None;
            }
            b.map(|b| b.map_err(anyhow::Error::from))
        });
        return Ok((format!("trace {}", p.display()), None, Box::new(batches)));
    }
    let dist = match &a.dist {
        Some(d) => Some(d.parse::<Distribution>().map_err(anyhow::Error::msg)?),
        None => None,
    };
    let o = ProfileOverrides {
        batch_size: Some(a.batch),
        seed: Some(a.seed),
        rows: a.rows,
        distribution: dist,
        ..Default::default()
    };
    let spec = nmpsim_traces::profile(&a.profile, &o)?;
    let mut g = Generator::new(spec.clone())?;
    let n = a.batches;
    Ok((
        format!("profile {} (batch {})", a.profile, a.batch),
        Some(spec),
        Box::new((0..n).map(move |_| Ok(g.next_batch()))),
    ))
}

/// Bytes a batch takes in memory: its offsets, indices, weights, dense
/// features and labels.
fn batch_bytes(b: &Batch) -> u128 {
    let tables: usize = b
        .tables
        .iter()
        .map(|t| t.offsets.len() + t.indices.len() + t.weights.as_ref().map_or(0, Vec::len))
        .sum();
    let other = b.dense.as_ref().map_or(0, Vec::len) + b.labels.as_ref().map_or(0, Vec::len);
    4 * (tables + other) as u128
}

/// The batches to run, all held in memory (the pool's layout needs the
/// largest of them): refused, naming --batches, once they would take more
/// than a run may: estimated from the first batch up front when there will
/// be exactly `exact` of them (a generated source), and counted as they come.
fn hold_batches(batches: Batches, source: &str, exact: Option<u64>) -> Result<Vec<Batch>> {
    let budget = crate::cmd::memory_available().map(|m| m.bytes as u128 * 8 / 10);
    let refuse = |need: u128, n: u64, about: &str| -> anyhow::Error {
        anyhow::anyhow!(
            "{source}: {n} batches take {about}{:.1} GB in memory, more than the {:.1} GB a run may take; lower --batches",
            need as f64 / 1e9,
            budget.unwrap_or(0) as f64 / 1e9
        )
    };
    let mut held = Vec::new();
    let mut bytes = 0u128;
    for b in batches {
        let b = b?;
        let one = batch_bytes(&b);
        bytes += one;
        if let Some(budget) = budget {
            if let (true, Some(n)) = (held.is_empty(), exact) {
                // (Later batches may be smaller: an estimate, refused only
                // when even half of it is too much.)
                let need = one.saturating_mul(n as u128);
                if need / 2 > budget {
                    return Err(refuse(need, n, "about "));
                }
            }
            if bytes > budget {
                return Err(refuse(bytes, held.len() as u64 + 1, ""));
            }
        }
        held.push(b);
    }
    Ok(held)
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

fn run_pool(a: RunArgs) -> Result<ExitCode> {
    crate::cmd::at_least_one(&[
        ("--batches", a.batches),
        ("--dim", a.dim as u64),
        ("--ranks", a.ranks as u64),
    ])?;
    if a.queue == 0 {
        bail!("--queue 0: the core needs at least 1 request in flight");
    }
    let core = CoreParams::default();
    let max_queue = core.input_buffer_bytes / SLICE_BYTES;
    if a.queue as u64 > max_queue {
        bail!(
            "--queue {}: at most {max_queue}; the core's {} B input buffer holds {max_queue} slices of {SLICE_BYTES} B, so no more requests can be in flight",
            a.queue,
            core.input_buffer_bytes
        );
    }
    crate::cmd::check_link_gbps(a.link_gbps)?;
    let engine: EngineKind = a.engine.parse()?;
    let mut dram = DramConfig::preset(&a.preset)?;
    if dram.ranks != 1 {
        bail!(
            "--preset {}: a channel of {} ranks; each NMP core sits on one DDR4 rank, so the pool's ranks (--ranks) take a single-rank preset, e.g. {}",
            a.preset,
            dram.ranks,
            a.preset
                .trim_end_matches(|c: char| c != '-')
                .trim_end_matches('-')
        );
    }
    if let Some(m) = &a.mapping {
        dram.mapping = nmpsim_sim::AddressMapping::parse(m)?;
    }
    let placements: Vec<Placement> = if a.placement.eq_ignore_ascii_case("all") {
        Placement::ALL.to_vec()
    } else {
        vec![a.placement.parse()?]
    };
    let optimizer = parse_optimizer(&a.optimizer, a.lr)?;
    if !a.quiet && !matches!(a.primitive, Primitive::Scatter) {
        let given = crate::cmd::flags_given(&["--optimizer", "--lr"]);
        if !given.is_empty() {
            eprintln!(
                "note: {} set{} the scatter's optimizer, which --primitive {} does not use",
                given.join(" and "),
                if given.len() == 1 { "s" } else { "" },
                a.primitive.name()
            );
        }
    }
    let params = PoolParams {
        engine,
        dram: dram.clone(),
        core: CoreParams {
            request_queue: a.queue,
            ..core
        },
        link: LinkParams {
            bandwidth_gbps: a.link_gbps,
            ..LinkParams::default()
        },
        energy: EnergyParams::default(),
    };
    let (source, generated, batches) = batches_of(&a)?;
    // (A generated source makes exactly --batches batches; a trace may hold
    // fewer, so its batches are only counted as they come.)
    let exact = a.trace.is_none().then_some(a.batches);
    let batches = hold_batches(batches, &source, exact)?;
    if batches.is_empty() {
        bail!("{source}: holds no batches");
    }
    if (batches.len() as u64) < a.batches {
        eprintln!(
            "note: {source} holds {} batches; running those, not the {} --batches asks for",
            batches.len(),
            a.batches
        );
    }
    if batches[0].tables.is_empty() {
        bail!("{source}: holds no embedding tables; the pool needs at least one");
    }
    let shapes: Vec<TableShape> = batches[0]
        .tables
        .iter()
        .map(|t| TableShape {
            rows: t.num_rows,
            dim: a.dim,
        })
        .collect();
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
    let layout_params = LayoutParams {
        ranks: a.ranks,
        rank_capacity_bytes: dram.capacity_bytes(),
        state_values_per_row: StateWidth::of(&optimizer),
        max_bags,
        max_unique: max_lookups,
    };
    // The layouts themselves: a region per table and rank (about 100 B), and
    // the slices each rank holds of each table (4 B each; every slice on every
    // rank under row interleaving).
    let layout_bytes: u128 = placements
        .iter()
        .map(|p| {
            let held: u128 = shapes
                .iter()
                .map(|s| s.slices() as u128 * p.slice_holders(a.ranks as u64, s.rows) as u128)
                .sum();
            shapes.len() as u128 * a.ranks as u128 * 100 + held * 4
        })
        .sum();
    crate::cmd::check_memory(
        layout_bytes,
        "the pool's layouts (a region per table and rank, the slices each rank holds)",
        "--ranks or --dim, or use fewer tables",
    )?;
    // Every placement must fit, and with --check the memory hold the pool's
    // tables and state and the kernels' copies, before the run directory.
    let layouts = placements
        .iter()
        .map(|&p| Layout::new(p, &shapes, layout_params.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    if a.check {
        // The pool holds every rank's regions as its layout sizes them
        // (tables, state, gradient and coalesced buffers, 4 KiB-aligned; one
        // placement's pool at a time); the kernels hold one copy of the tables
        // and state.
        let per_row = (a.dim + optimizer.state_values_per_row(a.dim)) as u128 * 4;
        let rows: u128 = shapes.iter().map(|s| s.rows as u128).sum();
        let pool: u128 = layouts
            .iter()
            .map(|l| l.used_bytes.iter().map(|&b| b as u128).sum::<u128>())
            .max()
            .unwrap_or(0);
        crate::cmd::check_memory(
            pool + rows * per_row,
            "--check: the pool's regions (tables, optimizer state, gradient and coalesced buffers) and the reference copies",
            "--rows or --dim, pick a smaller --profile or --trace, or leave out --check",
        )?;
    }
    // A batch's DRAM requests are built before they are simulated: a batch
    // that would take more than 80% of the memory available now is refused
    // (counted before any is built) rather than aborting the process.
    let request_budget = crate::cmd::memory_available().map_or(u64::MAX, |m| m.bytes / 10 * 8);
    let rd = RunDir::create(a.out.as_deref(), "nmp")?;
    rd.remove_earlier(&["phases.csv"])?;
    rd.write_config(
        "nmp run",
        &NmpConfig {
            source: source.clone(),
            generated: generated.as_ref(),
            seed: a.seed,
            primitive: a.primitive,
            optimizer,
            tables: &shapes,
            batches: batches.len() as u64,
            placements: &placements,
            pool: &params,
            ranks: a.ranks,
            check: a.check,
        },
    )?;
    let phases_per_batch = match a.primitive {
        Primitive::GatherReduce => 1,
        Primitive::CastedGatherReduce => 2,
        Primitive::Scatter => 3,
    };
    let pb = rundir::progress(
        (placements.len() * batches.len() * phases_per_batch) as u64,
        "nmp",
        a.quiet || a.json,
    );
    let mut phases = Vec::new();
    let mut checks = Vec::new();
    for (&placement, layout) in placements.iter().zip(layouts) {
        // With --check: the pool holds real tables, and the kernels keep
        // their own copies (tables and optimizer state), updated as the
        // pool's are, to check the pool's results against.
        let mut reference: Vec<(EmbeddingTable, OptimizerState)> = Vec::new();
        let mut pool = if a.check {
            let mut p = Pool::new(layout);
            for (t, s) in shapes.iter().enumerate() {
                let table = EmbeddingTable::seeded(s.rows, s.dim, a.seed ^ (t as u64 + 1))?;
                let state = OptimizerState::new(&optimizer, s.rows, s.dim)?;
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
             -> Result<()> {
                pb.set_message(format!("{placement} {phase}"));
                let report = run_batch_within(pool, &instrs, &params, request_budget)
                    .with_context(|| format!("{placement}: {phase} of batch {bi}"))?;
                phases.push(PhaseReport {
                    placement,
                    batch: bi as u64,
                    phase,
                    primary,
                    analytic_dram_bytes,
                    report,
                });
                pb.inc(1);
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
            match a.primitive {
                Primitive::GatherReduce => {
                    if a.check {
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
                        checks.push((placement, bi as u64, worst));
                    }
                    let lookups = batch.tables.iter().map(|tb| tb.indices.len()).sum();
                    let analytic = gather_reduce_row_traffic(lookups, a.dim).into();
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
                        let grads = if a.check {
                            EmbeddingTable::seeded(bags as u64, a.dim, a.seed ^ 0xabc ^ t as u64)?
                                .data
                        } else {
                            vec![0.0; bags as usize * a.dim]
                        };
                        let (c, _) = tensor_cast(tb, pooling_of(tb))?;
                        lookups += tb.indices.len();
                        unique += c.unique_rows.len();
                        if a.check {
                            want_coalesced.push(casted_gather_reduce(&c, &grads, a.dim)?.0);
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
                    let analytic = casted_gather_reduce_row_traffic(lookups, unique, a.dim).into();
                    let primary = a.primitive == Primitive::CastedGatherReduce;
                    run_phase(
                        &mut pool,
                        "casted-gather-reduce",
                        primary,
                        primary.then_some(analytic),
                        casts,
                    )?;
                    if a.check && a.primitive == Primitive::CastedGatherReduce {
                        let mut worst = 0.0f32;
                        for (t, want) in want_coalesced.iter().enumerate() {
                            let got = pool.read_coalesced(t);
                            if got.rows != want.rows {
                                worst = f32::INFINITY;
                            }
                            worst = worst.max(worst_rel_err(&got.grads, &want.grads));
                        }
                        checks.push((placement, bi as u64, worst));
                    }
                    if a.primitive == Primitive::Scatter {
                        let scatters = (0..batch.tables.len())
                            .map(|t| Instruction::Scatter {
                                table: t as u32,
                                optimizer,
                            })
                            .collect();
                        let per_row = optimizer.state_values_per_row(a.dim);
                        let analytic = scatter_row_traffic(unique, a.dim, per_row).into();
                        run_phase(&mut pool, "scatter", true, Some(analytic), scatters)?;
                        if a.check {
                            // The kernels apply the same coalesced gradients;
                            // the tables and the optimizer state must agree.
                            let mut worst = 0.0f32;
                            for (t, want) in want_coalesced.iter().enumerate() {
                                let (table, state) = &mut reference[t];
                                scatter_update(table, state, want, &optimizer)?;
                                let got = pool.read_table(t)?;
                                worst = worst.max(worst_rel_err(&got.data, &table.data));
                                let got = pool.read_state(t, state.values_per_row)?;
                                worst = worst.max(worst_rel_err(&got, &state.values));
                            }
                            checks.push((placement, bi as u64, worst));
                        }
                    }
                }
            }
        }
    }
    pb.finish_and_clear();
    #[derive(Serialize)]
    struct Check {
        placement: Placement,
        batch: u64,
        /// The primitive's results against the kernels': gather-reduce
        /// outputs, coalesced gradients, or updated tables and optimizer state.
        max_rel_err: f32,
    }
    #[derive(Serialize)]
    struct Results<'a> {
        phases: &'a [PhaseReport],
        /// With `--check`: one per placement and batch.
        functional_checks: Vec<Check>,
    }
    let results = Results {
        phases: &phases,
        functional_checks: checks
            .iter()
            .map(|&(placement, batch, max_rel_err)| Check {
                placement,
                batch,
                max_rel_err,
            })
            .collect(),
    };
    rd.write_results("nmp run", &results)?;
    // One table gives both the header and the values, so the two cannot drift
    // apart.
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
    let rows: Vec<Vec<String>> = phases
        .iter()
        .map(|p| columns.iter().map(|c| (c.1)(p)).collect())
        .collect();
    rd.write_csv("phases.csv", &header, &rows)?;
    // (A batch column when more than one batch ran.)
    let several = phases.iter().any(|p| p.batch > 0);
    let batch_col = |b: &str| {
        if several {
            format!("{b:>5} ")
        } else {
            String::new()
        }
    };
    let mut text = format!(
        "{source}, {} ranks of {} (mapping {}) on {engine}, primitive {}\n{}{:<16} {:<21} {:>10} {:>10} {:>9} {:>10} {:>7} {:>8} {:>10} {:>10}\n",
        a.ranks,
        dram.name,
        dram.mapping.name(),
        a.primitive.name(),
        batch_col("batch"),
        "placement",
        "phase",
        "time us",
        "eff GB/s",
        "of peak",
        "mem GB/s",
        "active",
        "imbal.",
        "link MB",
        "energy uJ"
    );
    for p in &phases {
        let r = &p.report;
        text.push_str(&format!(
            "{}{:<16} {:<21} {:>10.2} {:>10.1} {:>8.1}% {:>10.1} {:>7} {:>8.2} {:>10.2} {:>10.1}\n",
            batch_col(&p.batch.to_string()),
            p.placement.name(),
            format!("{}{}", p.phase, if p.primary { " *" } else { "" }),
            r.time_ns / 1e3,
            r.effective_bandwidth_gbps,
            r.effective_bandwidth_gbps / r.peak_bandwidth_gbps * 100.0,
            r.memory_side_bandwidth_gbps,
            r.active_ranks,
            r.load_imbalance,
            (r.link_in_bytes + r.link_out_bytes) as f64 / 1e6,
            r.energy.total_pj / 1e6
        ));
    }
    text.push_str("(* the primitive asked for; eff = DRAM bytes / compute time, back-pressure included; of peak = eff / (ranks x per-rank peak); mem = DRAM bytes / slowest rank's DRAM time)\n");
    let what = match a.primitive {
        Primitive::GatherReduce => "outputs",
        Primitive::CastedGatherReduce => "coalesced gradients",
        Primitive::Scatter => "updated tables and optimizer state",
    };
    for (p, b, e) in &checks {
        text.push_str(&format!(
            "functional check {p}, batch {b}: {what}, max difference to the kernels {e:.2e} (over 1 + the value)\n"
        ));
    }
    rd.write_summary(&text)?;
    let dir = rd.finish()?;
    if a.json {
        outln!("{}", rundir::results_json("nmp run", &results)?)?;
    } else {
        out!("{text}")?;
        outln!("run directory: {}", dir.display())?;
    }
    let bad = checks.iter().any(|(_, _, e)| e.is_nan() || *e > 1e-5);
    Ok(if bad {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
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
    use super::{worst_rel_err, worst_sum_err};

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
