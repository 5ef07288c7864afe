//! `nmpsim tt`: the tensor-train (EL-Rec's Eff-TT) shapes of a model's or a
//! profile's tables, and what they cost against the dense tables.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use nmpsim_kernels::tt::TtShape;
use serde::Serialize;

use crate::rundir::{self, RunDir};

/// EL-Rec's threshold: tables of more rows are decomposed.
pub const DEFAULT_THRESHOLD: u64 = 1_000_000;
/// The paper's TT rank on a V100.
pub const DEFAULT_RANK: usize = 128;

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    nmpsim tt --model criteo-kaggle --rows-scale 1\n  \
    nmpsim tt --model rm1 --tt-rank 64\n  \
    nmpsim tt --profile criteo-kaggle --dim 16 --tt-threshold 100000 --json\n  \
    nmpsim tt --rows 10000000,500000 --dim 64\n  \
    nmpsim tt --rows 10000000 --dim 16 --bench --reorder\n  \
    nmpsim tt --rows 10000000 --dim 16 --bench --device cuda   # also on this machine's GPU")]
pub struct TtArgs {
    /// A model preset (`nmpsim train --model`): its tables and dimension.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["profile", "rows"])]
    model: Option<String>,
    /// With --model criteo-kaggle: the scale of its table sizes (default 0.25, 1 = the full 33.8M rows).
    #[arg(long, value_name = "S", requires = "model")]
    rows_scale: Option<f64>,
    /// A trace profile's tables (`nmpsim trace gen --list-profiles`), at --dim.
    #[arg(long, value_name = "NAME", conflicts_with = "rows")]
    profile: Option<String>,
    /// Tables of these row counts, at --dim.
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    rows: Vec<u64>,
    /// The embedding dimension (a model's own by default, else 64).
    #[arg(long, value_parser = crate::cmd::positive_arg::<usize>)]
    dim: Option<usize>,
    /// TT rank R (ranks [1, R, R, 1]).
    #[arg(long, default_value_t = DEFAULT_RANK, value_parser = crate::cmd::positive_arg::<usize>)]
    tt_rank: usize,
    /// Tables of more rows than this become TT tables; the others stay dense.
    #[arg(long, value_name = "ROWS", default_value_t = DEFAULT_THRESHOLD)]
    tt_threshold: u64,
    /// Time each TT table's forward on this machine (with and without
    /// batch-level reuse, beside the dense gather-reduce of its shape) and
    /// model it on --gpu.
    #[arg(long)]
    bench: bool,
    /// With --bench: samples a batch.
    #[arg(long, default_value_t = 2048, requires = "bench", value_parser = crate::cmd::positive_arg::<usize>)]
    batch: usize,
    /// With --bench: batches drawn from each table's distribution (a profile's or the
    /// model's; --dist for --rows) and timed.
    #[arg(long, default_value_t = 16, requires = "bench", value_parser = crate::cmd::positive_arg::<usize>)]
    batches: usize,
    /// With --bench: timed passes over the batches (the median is reported).
    #[arg(long, default_value_t = 5, requires = "bench", value_parser = crate::cmd::positive_arg::<usize>)]
    reps: usize,
    /// With --bench and --rows: the rows' distribution.
    #[arg(long, default_value = "zipf:1.05", requires = "bench")]
    dist: nmpsim_traces::Distribution,
    /// With --bench: rename each table's rows by EL-Rec's locality-based
    /// reordering (the top 1% of rows hot), built from --reorder-batches
    /// batches drawn before the timed ones.
    #[arg(long, requires = "bench")]
    reorder: bool,
    /// With --reorder: the batches the reordering is built from (drawn
    /// before the timed ones, from the same distribution).
    #[arg(long, default_value_t = 64, requires = "reorder", value_parser = crate::cmd::positive_arg::<usize>)]
    reorder_batches: usize,
    /// With --bench: the GPU preset the forward is modelled on.
    #[arg(long, default_value = "v100", requires = "bench")]
    gpu: String,
    /// With --bench: `cuda` also times the forward on this machine's GPU
    /// (CUDA device 0; the kernels alone, with CUDA events), with and without
    /// reuse, on the same batches, and checks its pooled rows against the
    /// CPU's bit for bit.
    #[arg(long, default_value = "cpu", requires = "bench", value_parser = ["cpu", "cuda"])]
    device: String,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Run directory (config.json, results.json, summary.txt).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// One table's choice.
#[derive(Serialize)]
struct TableTt {
    table: usize,
    rows: u64,
    dim: usize,
    /// `tt` or `dense`.
    kind: &'static str,
    shape: Option<TtShape>,
    params: u64,
    bytes: u64,
    dense_bytes: u64,
    compression: f64,
    /// FLOPs of one row: from its cores (no reuse), and from a prefix
    /// product already computed (all reuse); 0 for a dense row (read).
    flops_per_lookup: u64,
    flops_per_lookup_reused: u64,
    /// Bytes one lookup reads: the three core slices, or the dense row.
    bytes_per_lookup: u64,
    /// With --bench (TT tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    bench: Option<Bench>,
}

/// One TT table's forward, ms per batch: measured on this machine's CPU,
/// and modelled on the GPU preset.
#[derive(Serialize)]
struct Bench {
    batch: usize,
    batches: usize,
    reordered: bool,
    lookups_per_prefix: f64,
    cpu_reuse_ms: f64,
    cpu_plain_ms: f64,
    cpu_dense_ms: Option<f64>,
    gpu_reuse_ms: f64,
    gpu_plain_ms: f64,
    gpu_dense_ms: f64,
    gflops_reuse: f64,
    gflops_plain: f64,
    /// With --device cuda: measured on this machine's GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    cuda: Option<CudaBench>,
}

/// The forward on this machine's GPU, ms per batch (the kernels alone).
#[derive(Serialize)]
struct CudaBench {
    device: String,
    reuse_ms: f64,
    plain_ms: f64,
    equals_cpu: bool,
}

/// The GPU of `--device cuda`.
#[cfg(feature = "cuda")]
type CudaHandle = nmpsim_kernels::cuda::CudaBackend;
#[cfg(not(feature = "cuda"))]
type CudaHandle = std::convert::Infallible;

/// CUDA device 0, or why it cannot be used (before anything is timed).
#[cfg(feature = "cuda")]
fn open_cuda() -> Result<CudaHandle> {
    nmpsim_kernels::cuda::CudaBackend::new()
        .map_err(|e| anyhow::anyhow!("--device cuda: no usable GPU: {e}"))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda() -> Result<CudaHandle> {
    bail!("--device cuda: this nmpsim was built without the `cuda` feature")
}

/// Times the forward on the GPU (`--device cuda`).
#[cfg(feature = "cuda")]
fn cuda_bench(
    b: &CudaHandle,
    table: &nmpsim_kernels::tt::TtTable,
    batches: &[nmpsim_traces::TableBatch],
    reps: usize,
) -> Result<CudaBench> {
    let t = b.tt_forward_timing(table, batches, nmpsim_kernels::Pooling::Sum, reps)?;
    Ok(CudaBench {
        device: b.gpu().name().to_string(),
        reuse_ms: t.reuse_ms,
        plain_ms: t.plain_ms,
        equals_cpu: t.equals_cpu,
    })
}

#[cfg(not(feature = "cuda"))]
fn cuda_bench(
    b: &CudaHandle,
    _: &nmpsim_kernels::tt::TtTable,
    _: &[nmpsim_traces::TableBatch],
    _: usize,
) -> Result<CudaBench> {
    match *b {}
}

#[derive(Serialize)]
struct TtResults {
    source: String,
    rank: usize,
    threshold: u64,
    tables: Vec<TableTt>,
    dense_bytes: u64,
    bytes: u64,
    compression: f64,
}

/// The tables' rows, the dimension, a description of where they came from,
/// and each table's lookups (distribution and bag) for --bench.
fn tables(a: &TtArgs) -> Result<(Vec<u64>, usize, String, Vec<nmpsim_traces::TableSpec>)> {
    if let Some(m) = &a.model {
        let p = nmpsim_dlrm::presets::preset(
            m,
            &nmpsim_dlrm::presets::PresetOverrides {
                rows_scale: a.rows_scale,
                dim: a.dim,
                ..Default::default()
            },
        )?;
        return Ok((
            p.config.table_rows.clone(),
            p.config.dim,
            format!("model {}", p.name),
            p.data.tables.clone(),
        ));
    }
    let dim = a.dim.unwrap_or(64);
    if let Some(name) = &a.profile {
        let spec = nmpsim_traces::profile(name, &nmpsim_traces::ProfileOverrides::default())?;
        return Ok((
            spec.tables.iter().map(|t| t.rows).collect(),
            dim,
            format!("profile {name}"),
            spec.tables.clone(),
        ));
    }
    if a.rows.is_empty() {
        bail!("name the tables: --model NAME, --profile NAME or --rows N,...");
    }
    if let Some(i) = a.rows.iter().position(|&r| r == 0) {
        bail!("--rows: table {i} has 0 rows; expected at least 1");
    }
    let specs = a
        .rows
        .iter()
        .map(|&rows| nmpsim_traces::TableSpec {
            rows,
            distribution: a.dist.clone(),
            bag_size: nmpsim_traces::BagSize::Fixed { size: 1 },
            weighted: false,
        })
        .collect();
    Ok((a.rows.clone(), dim, "--rows".into(), specs))
}

pub fn run(a: TtArgs) -> Result<ExitCode> {
    let (rows, dim, source, specs) = tables(&a)?;
    let cuda = if a.bench && a.device == "cuda" {
        Some(open_cuda()?)
    } else {
        None
    };
    let mut out = Vec::with_capacity(rows.len());
    for (t, &r) in rows.iter().enumerate() {
        let dense = r * dim as u64 * 4;
        let row = if r > a.tt_threshold {
            let s = TtShape::new(r, dim, a.tt_rank)
                .map_err(|e| anyhow::anyhow!("table {t} ({r} rows): {e}"))?;
            TableTt {
                table: t,
                rows: r,
                dim,
                kind: "tt",
                shape: Some(s),
                params: s.params(),
                bytes: s.bytes(),
                dense_bytes: dense,
                compression: dense as f64 / s.bytes() as f64,
                flops_per_lookup: s.row_flops(),
                flops_per_lookup_reused: s.last_flops(),
                bytes_per_lookup: (0..3).map(|k| s.slice_len(k) as u64 * 4).sum(),
                bench: if a.bench {
                    Some(bench(&a, t, &specs[t], s, cuda.as_ref())?)
                } else {
                    None
                },
            }
        } else {
            TableTt {
                table: t,
                rows: r,
                dim,
                kind: "dense",
                shape: None,
                params: r * dim as u64,
                bytes: dense,
                dense_bytes: dense,
                compression: 1.0,
                flops_per_lookup: 0,
                flops_per_lookup_reused: 0,
                bytes_per_lookup: dim as u64 * 4,
                bench: None,
            }
        };
        out.push(row);
    }
    let dense_bytes: u64 = out.iter().map(|t| t.dense_bytes).sum();
    let bytes: u64 = out.iter().map(|t| t.bytes).sum();
    let r = TtResults {
        source,
        rank: a.tt_rank,
        threshold: a.tt_threshold,
        dense_bytes,
        bytes,
        compression: dense_bytes as f64 / bytes.max(1) as f64,
        tables: out,
    };
    let text = summary(&r);
    if let Some(dir) = &a.out {
        let rd = RunDir::create(Some(dir), "tt")?;
        let config = serde_json::json!({
            "source": r.source, "dim": dim, "tt_rank": a.tt_rank, "tt_threshold": a.tt_threshold,
        });
        rd.write_config("tt", &config)?;
        rd.write_results("tt", &r)?;
        rd.write_summary(&text)?;
        rd.finish()?;
    }
    if a.json {
        outln!("{}", rundir::results_json("tt", &r)?)?;
    } else {
        outln!("{text}")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Times table `t`'s forward (`--bench`).
fn bench(
    a: &TtArgs,
    t: usize,
    spec: &nmpsim_traces::TableSpec,
    s: TtShape,
    gpu_dev: Option<&CudaHandle>,
) -> Result<Bench> {
    use nmpsim_kernels::tt::{Reorder, TtTable};
    let gpu = nmpsim_dlrm::gpu::GpuPreset::named(&a.gpu)?;
    let dense_bytes = s.dense_bytes();
    crate::cmd::memory::check_memory(
        (s.bytes() + dense_bytes) as u128,
        &format!(
            "table {t}'s TT cores and its dense table ({} rows x {})",
            s.rows, s.dim
        ),
        "--tt-threshold (fewer tables timed) or the table sizes",
    )?;
    let mut g = nmpsim_traces::Generator::new(nmpsim_traces::GenSpec {
        tables: vec![spec.clone()],
        batch_size: a.batch,
        seed: 1,
    })?;
    let mut draw = |n: usize| -> Vec<nmpsim_traces::TableBatch> {
        (0..n)
            .map(|_| g.next_batch().tables.swap_remove(0))
            .collect()
    };
    // (The bijection from batches before the timed ones: built from the
    // timed batches themselves, it would put each batch's new rows together
    // by construction.)
    let profile = if a.reorder {
        draw(a.reorder_batches)
    } else {
        Vec::new()
    };
    let mut batches = draw(a.batches);
    if a.reorder {
        let refs: Vec<_> = profile.iter().collect();
        let r = Reorder::build(s.rows, &refs, 0.01)?;
        batches = batches
            .iter()
            .map(|b| r.apply(b))
            .collect::<Result<_, _>>()?;
    }
    let table = TtTable::seeded(s.rows, s.dim, s.ranks[1], 3)?;
    let dense = nmpsim_kernels::EmbeddingTable::seeded(s.rows, s.dim, 3)?;
    let b = nmpsim_kernels::tt::bench::bench_forward(
        &table,
        Some(&dense),
        &batches,
        nmpsim_kernels::Pooling::Sum,
        a.reps,
    )?;
    let model = |c: &nmpsim_kernels::tt::TtCost| {
        gpu.kernel_ns(
            c.flops as f64,
            c.traffic.total_bytes() as f64,
            gpu.gemm_efficiency,
        ) / 1e6
    };
    let lookups: usize = batches.iter().map(|b| b.num_lookups()).sum::<usize>() / batches.len();
    let cuda = match gpu_dev {
        Some(d) => Some(cuda_bench(d, &table, &batches, a.reps)?),
        None => None,
    };
    Ok(Bench {
        batch: a.batch,
        batches: a.batches,
        reordered: a.reorder,
        lookups_per_prefix: lookups as f64 / b.reuse.prefixes.max(1) as f64,
        cpu_reuse_ms: b.reuse_ns / 1e6,
        cpu_plain_ms: b.plain_ns / 1e6,
        cpu_dense_ms: b.dense_ns.map(|x| x / 1e6),
        gpu_reuse_ms: model(&b.reuse),
        gpu_plain_ms: model(&b.plain),
        gpu_dense_ms: gpu.stream_ns(b.dense.map_or(0, |d| d.total_bytes()) as f64) / 1e6,
        gflops_reuse: b.reuse.flops as f64 / b.reuse_ns,
        gflops_plain: b.plain.flops as f64 / b.plain_ns,
        cuda,
    })
}

fn mib(b: u64) -> String {
    format!("{:.2}", b as f64 / (1u64 << 20) as f64)
}

fn summary(r: &TtResults) -> String {
    let mut t = nmpsim_traces::TextTable::new([
        "table",
        "rows",
        "kind",
        "row factors",
        "dim factors",
        "params",
        "MiB",
        "dense MiB",
        "ratio",
        "FLOPs/lookup",
        "reused",
        "bytes/lookup",
    ])
    .left(&[2, 3, 4]);
    for x in &r.tables {
        let (rf, df) = match &x.shape {
            Some(s) => (
                format!(
                    "{}x{}x{}",
                    s.row_factors[0], s.row_factors[1], s.row_factors[2]
                ),
                format!(
                    "{}x{}x{}",
                    s.dim_factors[0], s.dim_factors[1], s.dim_factors[2]
                ),
            ),
            None => ("-".into(), "-".into()),
        };
        t.row([
            x.table.to_string(),
            x.rows.to_string(),
            x.kind.to_string(),
            rf,
            df,
            x.params.to_string(),
            mib(x.bytes),
            mib(x.dense_bytes),
            format!("{:.2}x", x.compression),
            x.flops_per_lookup.to_string(),
            x.flops_per_lookup_reused.to_string(),
            x.bytes_per_lookup.to_string(),
        ]);
    }
    let tt = r.tables.iter().filter(|x| x.kind == "tt").count();
    let mut bench = String::new();
    if r.tables.iter().any(|x| x.bench.is_some()) {
        let mut b = nmpsim_traces::TextTable::new([
            "table",
            "lookups/prefix",
            "cpu reuse",
            "cpu plain",
            "reuse speed-up",
            "cpu dense",
            "gpu reuse",
            "gpu plain",
            "gpu dense",
            "GFLOP/s reuse",
        ]);
        for x in &r.tables {
            let Some(m) = &x.bench else { continue };
            b.row([
                x.table.to_string(),
                format!("{:.2}", m.lookups_per_prefix),
                format!("{:.3} ms (meas)", m.cpu_reuse_ms),
                format!("{:.3} ms (meas)", m.cpu_plain_ms),
                format!("{:.2}x", m.cpu_plain_ms / m.cpu_reuse_ms),
                m.cpu_dense_ms
                    .map_or("-".into(), |d| format!("{d:.3} ms (meas)")),
                format!("{:.3} ms (model)", m.gpu_reuse_ms),
                format!("{:.3} ms (model)", m.gpu_plain_ms),
                format!("{:.3} ms (model)", m.gpu_dense_ms),
                format!("{:.2}", m.gflops_reuse),
            ]);
        }
        bench = format!(
            "\nforward per batch (median of the passes; meas: this machine's CPU, model: the GPU preset):\n{}",
            b.render()
        );
        if r.tables
            .iter()
            .any(|x| x.bench.as_ref().is_some_and(|m| m.cuda.is_some()))
        {
            let mut c = nmpsim_traces::TextTable::new([
                "table",
                "device",
                "cuda reuse",
                "cuda plain",
                "reuse speed-up",
                "model reuse",
                "cuda = cpu",
            ]);
            for x in &r.tables {
                let Some(m) = &x.bench else { continue };
                let Some(g) = &m.cuda else { continue };
                c.row([
                    x.table.to_string(),
                    g.device.clone(),
                    format!("{:.3} ms (meas, cuda)", g.reuse_ms),
                    format!("{:.3} ms (meas, cuda)", g.plain_ms),
                    format!("{:.2}x", g.plain_ms / g.reuse_ms),
                    format!("{:.3} ms (model)", m.gpu_reuse_ms),
                    if g.equals_cpu { "bit for bit" } else { "NO" }.to_string(),
                ]);
            }
            bench.push_str(&format!(
                "\non this machine's GPU (the kernels alone, CUDA events; the batches' prefixes found on the host, untimed):\n{}",
                c.render()
            ));
        }
    }
    format!(
        "{}: {} tables, TT rank {}, tables over {} rows as TT ({tt} of them)\n{}\nembedding footprint: {} MiB dense, {} MiB with TT tables: {:.2}x smaller\n(FLOPs per lookup: a row from its cores; reused: from a prefix product already computed, the batch-level reuse's best case. A dense lookup reads its row and computes nothing.){bench}",
        r.source,
        r.tables.len(),
        r.rank,
        r.threshold,
        t.render(),
        mib(r.dense_bytes),
        mib(r.bytes),
        r.compression
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU's table of `--bench --device cuda` (only a GPU machine runs
    /// it): every TT table with a GPU timing gets a row, with its labels.
    #[test]
    fn the_cuda_table_lists_each_timed_table_with_its_sources() {
        let s = TtShape::new(10_000_000, 16, 128).unwrap();
        let bench = |cuda: Option<CudaBench>| Bench {
            batch: 2048,
            batches: 8,
            reordered: false,
            lookups_per_prefix: 1.2,
            cpu_reuse_ms: 4.0,
            cpu_plain_ms: 9.0,
            cpu_dense_ms: Some(0.5),
            gpu_reuse_ms: 0.2,
            gpu_plain_ms: 0.3,
            gpu_dense_ms: 0.01,
            gflops_reuse: 10.0,
            gflops_plain: 12.0,
            cuda,
        };
        let table = |t: usize, cuda: Option<CudaBench>| TableTt {
            table: t,
            rows: s.rows,
            dim: 16,
            kind: "tt",
            shape: Some(s),
            params: s.params(),
            bytes: s.bytes(),
            dense_bytes: s.dense_bytes(),
            compression: 1.0,
            flops_per_lookup: s.row_flops(),
            flops_per_lookup_reused: s.last_flops(),
            bytes_per_lookup: 0,
            bench: Some(bench(cuda)),
        };
        let r = TtResults {
            source: "--rows".into(),
            rank: 128,
            threshold: 1_000_000,
            tables: vec![
                table(
                    0,
                    Some(CudaBench {
                        device: "H200".into(),
                        reuse_ms: 0.05,
                        plain_ms: 0.2,
                        equals_cpu: true,
                    }),
                ),
                table(
                    1,
                    Some(CudaBench {
                        device: "H200".into(),
                        reuse_ms: 0.1,
                        plain_ms: 0.1,
                        equals_cpu: false,
                    }),
                ),
                table(2, None),
            ],
            dense_bytes: 1,
            bytes: 1,
            compression: 1.0,
        };
        let text = summary(&r);
        let gpu = text
            .split("on this machine's GPU")
            .nth(1)
            .expect("a GPU table");
        assert!(
            gpu.contains("0.050 ms (meas, cuda)") && gpu.contains("4.00x"),
            "{gpu}"
        );
        assert!(gpu.contains("bit for bit") && gpu.contains("NO"), "{gpu}");
        // Table 2 had no GPU timing: two rows only.
        assert_eq!(gpu.matches("H200").count(), 2, "{gpu}");
        // Without any GPU timing there is no GPU table.
        let mut cpu_only = r;
        for t in &mut cpu_only.tables {
            if let Some(b) = &mut t.bench {
                b.cuda = None;
            }
        }
        assert!(!summary(&cpu_only).contains("on this machine's GPU"));
    }
}
