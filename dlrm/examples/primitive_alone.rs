//! The backward primitives of `nmpsim host calibrate`, timed outside the
//! calibration: expand-coalesce and the casted gather-reduce on shapes of
//! equal lookups (80 lookups a bag x 512 bags, 20 x 2048), one batch of each
//! in turn, every batch new, as the calibration draws them.
//!
//! A point's time in a calibration is measured among the other points'
//! kernels. This probe shows what the same kernels take with only the
//! chosen neighbours around them, so that a calibration point far from its
//! shape's time alone can be told from the model's error (`docs/host.md`).
//!
//! ```sh
//! cargo run --release -p nmpsim-dlrm --example primitive_alone            # the kernels alone
//! cargo run --release -p nmpsim-dlrm --example primitive_alone -- gs      # with a gather before and a scatter after
//! ```
//!
//! `g` adds the forward gather-reduce of the same batch before the timed
//! kernels, `s` the SGD scatter of its coalesced rows after them. Every figure
//! is measured: the lower quartile over the rounds, ns a lookup.

use std::time::Instant;

use nmpsim_kernels::{
    Coalesced, EmbeddingTable, Expanded, Optimizer, OptimizerState, Pooling,
    casted_gather_reduce_into, coalesce_into, expand_into, gather_reduce, scatter_update,
    tensor_cast,
};
use nmpsim_traces::{BagSize, Distribution, TableSpec, generate_table_batch};

const ROWS: u64 = 1_000_000;
const DIM: usize = 64;
const ROUNDS: usize = 40;

fn lower_quartile(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[(v.len() - 1) / 4]
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    if let Some(c) = mode.chars().find(|c| !matches!(c, 'g' | 's')) {
        eprintln!(
            "primitive_alone: unknown mode letter `{c}`; expected `g` (gather before), `s` (scatter after) or nothing"
        );
        std::process::exit(2);
    }
    let (gather, scatter) = (mode.contains('g'), mode.contains('s'));
    let mut table = EmbeddingTable::seeded(ROWS, DIM, 7).expect("table");
    let optimizer = Optimizer::Sgd { lr: 1e-6 };
    let mut state = OptimizerState::new(&optimizer, ROWS, DIM).expect("state");
    let shapes: [(u32, usize); 2] = [(80, 512), (20, 2048)];
    let mut expanded = Expanded::empty(DIM);
    let mut coalesced = Coalesced::empty(DIM);
    let mut times = vec![(Vec::new(), Vec::new()); shapes.len()];
    let mut seed = 0;
    // Round 0 is a warm-up (buffers grown, pages faulted in).
    for round in 0..=ROUNDS {
        for (k, &(lookups, bags)) in shapes.iter().enumerate() {
            let spec = TableSpec {
                rows: ROWS,
                distribution: Distribution::Uniform,
                bag_size: BagSize::Fixed { size: lookups },
                weighted: false,
            };
            seed += 1;
            let batch = generate_table_batch(&spec, bags, seed).expect("batch");
            let grads: Vec<f32> = (0..bags * DIM)
                .map(|i| ((i % 13) as f32 - 6.0) * 1e-3)
                .collect();
            if gather {
                let (pooled, _) = gather_reduce(&table, &batch, Pooling::Sum).expect("gather");
                std::hint::black_box(&pooled);
            }
            let t0 = Instant::now();
            expand_into(&grads, DIM, &batch, Pooling::Sum, &mut expanded).expect("expand");
            coalesce_into(&expanded, batch.num_rows, &mut coalesced).expect("coalesce");
            let expand_coalesce = t0.elapsed().as_nanos() as f64;
            let (casted, _) = tensor_cast(&batch, Pooling::Sum).expect("cast");
            let t0 = Instant::now();
            casted_gather_reduce_into(&casted, &grads, DIM, &mut coalesced).expect("casted");
            let casted_ns = t0.elapsed().as_nanos() as f64;
            if scatter {
                scatter_update(&mut table, &mut state, &coalesced, &optimizer).expect("scatter");
            }
            if round > 0 {
                let n = (lookups as usize * bags) as f64;
                times[k].0.push(expand_coalesce / n);
                times[k].1.push(casted_ns / n);
            }
        }
    }
    println!(
        "{ROUNDS} rounds, {ROWS} rows of {DIM}, uniform rows; gather before: {gather}, scatter after: {scatter}"
    );
    for (&(lookups, bags), (ec, ca)) in shapes.iter().zip(&mut times) {
        println!(
            "{lookups:>3} lookups a bag x {bags:>4} bags: expand-coalesce {:6.1} ns a lookup, casted gather-reduce {:6.1} ns a lookup (measured, lower quartile)",
            lower_quartile(ec),
            lower_quartile(ca)
        );
    }
}
