//! Runs one small RM1-like batch's scatter (with the gradients loaded and
//! coalesced first) on an 8-rank pool under every placement, checks the
//! pool's tables and optimizer state against the kernels', and prints the
//! summary: the library side of
//! `nmpsim nmp run --primitive scatter --placement all --check`.
//!
//! ```text
//! cargo run -p nmpsim-nmp --example pool_scatter
//! ```

use nmpsim_kernels::Optimizer;
use nmpsim_nmp::run::{PoolRun, Primitive, layouts_for};
use nmpsim_nmp::{Placement, PoolParams};
use nmpsim_sim::{DramConfig, EngineKind};
use nmpsim_traces::{Generator, ProfileOverrides, profile};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = profile(
        "rm1",
        &ProfileOverrides {
            batch_size: Some(64),
            rows: Some(5_000),
            ..Default::default()
        },
    )?;
    let batches = vec![Generator::new(spec)?.next_batch()];
    let run = PoolRun {
        primitive: Primitive::Scatter,
        placements: Placement::ALL.to_vec(),
        params: PoolParams {
            engine: EngineKind::Native,
            dram: DramConfig::preset("DDR4-3200-x8")?,
            core: Default::default(),
            link: Default::default(),
            energy: Default::default(),
        },
        ranks: 8,
        dim: 32,
        optimizer: Optimizer::RowWiseAdagrad {
            lr: 0.01,
            eps: 1e-8,
        },
        seed: 1,
        check: true,
        request_budget: u64::MAX,
    };
    let layouts = layouts_for(&run, &batches)?;
    let results = run.run(&batches, layouts, &mut |_, _, _| {})?;
    print!(
        "{}",
        results.summary_text(&run, "profile rm1 (batch 64, 5000 rows)")
    );
    if !results.checks_pass() {
        return Err("the pool's results differ from the kernels'".into());
    }
    Ok(())
}
