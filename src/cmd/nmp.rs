//! `nmpsim nmp …`: run embedding primitives on the NMP pool (per-rank NMP
//! cores over simulated DDR4 ranks). The work is in `nmpsim-nmp`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::builder::TypedValueParser as _;
use clap::{Args, Subcommand};
use nmpsim_kernels::Optimizer;
use nmpsim_nmp::run::{PoolRun, Primitive, check_bytes, layouts_bytes, layouts_for, table_shapes};
use nmpsim_nmp::{
    CoreParams, EnergyParams, LinkParams, Placement, PoolParams, TableShape, placement::SLICE_BYTES,
};
use nmpsim_traces::{Batch, Distribution, GenSpec, Generator, ProfileOverrides, TraceReader};
use serde::Serialize;

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
    #[arg(
        long,
        default_value = "gather-reduce",
        value_parser = clap::builder::PossibleValuesParser::new(Primitive::ALL.map(Primitive::name))
            .map(|s| s.parse::<Primitive>().expect("a listed primitive"))
    )]
    primitive: Primitive,
    #[command(flatten)]
    scatter: crate::cmd::ScatterOptimizerArgs,
    #[command(flatten)]
    pool: crate::cmd::PoolArgs,
    /// Core: requests in flight per rank, 1 to 64 (the core's 4 KiB input
    /// buffer holds 64 slices of 64 B).
    #[arg(long, default_value_t = 32)]
    queue: usize,
    /// Hold real table data in the pool and check its results against the kernels
    /// (a NaN or infinity the kernels lack counts as an infinite error). Needs memory
    /// for two copies of the tables and optimizer state; refused up front otherwise.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    output: crate::cmd::RunOutputArgs,
}

pub fn run(c: NmpCommand) -> Result<ExitCode> {
    match c {
        NmpCommand::Run(a) => run_pool(a),
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

fn run_pool(a: RunArgs) -> Result<ExitCode> {
    crate::cmd::at_least_one(&[
        ("--batches", a.batches),
        ("--dim", a.dim as u64),
        ("--ranks", a.pool.ranks as u64),
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
    crate::cmd::check_link_gbps(a.pool.link_gbps)?;
    let engine = a.pool.engine;
    let mut dram = a.pool.dram.config()?;
    if dram.ranks != 1 {
        let (from, fix) = match &a.pool.dram.dram_config {
            Some(f) => (
                format!("--dram-config {}", f.display()),
                "a file with `ranks = 1` (or none)".to_string(),
            ),
            None => (
                format!("--preset {}", a.pool.dram.preset),
                a.pool
                    .dram
                    .preset
                    .trim_end_matches(|c: char| c != '-')
                    .trim_end_matches('-')
                    .to_string(),
            ),
        };
        bail!(
            "{from}: a channel of {} ranks; each NMP core sits on one DDR4 rank, so the pool's ranks (--ranks) take a single-rank configuration, e.g. {fix}",
            dram.ranks
        );
    }
    if let Some(m) = &a.pool.mapping {
        dram.mapping = nmpsim_sim::AddressMapping::parse(m)?;
    }
    let placements: Vec<Placement> = if a.pool.placement.eq_ignore_ascii_case("all") {
        Placement::ALL.to_vec()
    } else {
        vec![a.pool.placement.parse()?]
    };
    let optimizer = a.scatter.optimizer()?;
    if !a.output.quiet && !matches!(a.primitive, Primitive::Scatter) {
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
            alu_lanes: a.pool.alu_lanes,
            alu_clock_ghz: a.pool.alu_ghz,
            ..core
        },
        link: LinkParams {
            bandwidth_gbps: a.pool.link_gbps,
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
    let run = PoolRun {
        primitive: a.primitive,
        placements: placements.clone(),
        params: params.clone(),
        ranks: a.pool.ranks,
        dim: a.dim,
        optimizer,
        seed: a.seed,
        check: a.check,
        // A batch's DRAM requests are built before they are simulated: a
        // batch that would take more than 80% of the memory available now is
        // refused (counted before any is built) rather than aborting the
        // process.
        request_budget: crate::cmd::memory_available().map_or(u64::MAX, |m| m.bytes / 10 * 8),
    };
    let shapes = table_shapes(&batches, a.dim);
    crate::cmd::check_memory(
        layouts_bytes(&placements, &shapes, a.pool.ranks),
        "the pool's layouts (a region per table and rank, the slices each rank holds)",
        "--ranks or --dim, or use fewer tables",
    )?;
    // Every placement must fit, and with --check the memory hold the pool's
    // tables and state and the kernels' copies, before the run directory.
    let layouts = layouts_for(&run, &batches)?;
    if a.check {
        crate::cmd::check_memory(
            check_bytes(&run, &layouts, &shapes),
            "--check: the pool's regions (tables, optimizer state, gradient and coalesced buffers) and the reference copies",
            "--rows or --dim, pick a smaller --profile or --trace, or leave out --check",
        )?;
    }
    let rd = RunDir::create(a.output.out.as_deref(), "nmp")?;
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
            ranks: a.pool.ranks,
            check: a.check,
        },
    )?;
    let pb = rundir::progress(
        (placements.len() * batches.len() * a.primitive.phases()) as u64,
        "nmp",
        a.output.quiet || a.output.json,
    );
    let results = run.run(&batches, layouts, &mut |placement, phase, done| {
        if done {
            pb.inc(1);
        } else {
            pb.set_message(format!("{placement} {phase}"));
        }
    })?;
    pb.finish_and_clear();
    rd.write_results("nmp run", &results)?;
    let (header, rows) = results.phases_table();
    rd.write_csv("phases.csv", &header, &rows)?;
    let text = results.summary_text(&run, &source);
    rd.finish_and_print("nmp run", &results, &text, a.output.json)?;
    Ok(if !results.checks_pass() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
