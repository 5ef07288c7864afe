//! What the demo asks of the machine: the memory check before it allocates
//! anything, and the large-buffer copy bandwidth it reports beside its
//! primitives.

use super::*;

/// Refuses configurations whose tables and optimizer state would not fit in memory,
/// before allocating anything.
pub(super) fn check_memory(
    spec: &GenSpec,
    dim: usize,
    opt: &Optimizer,
    weighted: bool,
) -> Result<()> {
    let per_row = (dim + opt.state_values_per_row(dim)) as u128 * 4;
    let need: u128 = spec.tables.iter().map(|t| t.rows as u128 * per_row).sum();
    crate::cmd::check_memory(
        need,
        "the tables and optimizer state",
        "--rows, --tables or --dim",
    )?;
    // Then with one batch held at a time: every table's indices, offsets and
    // weights, and the buffers the largest table's primitives reuse (pooled
    // rows and the output gradient; the expanded gradient and its rows, the
    // coalesced and the casted gradients, at most a row per lookup; the
    // casting's arrays).
    let b = spec.batch_size as u128;
    let dim = dim as u128;
    let lookups = |t: &nmpsim_traces::TableSpec| b * u128::from(t.bag_size.max());
    let batch: u128 = spec
        .tables
        .iter()
        .map(|t| 4 * (lookups(t) * (1 + u128::from(t.weighted | weighted)) + b + 1))
        .sum();
    let most = spec.tables.iter().map(lookups).max().unwrap_or(0);
    let buffers = 4 * (2 * b * dim + most * (3 * dim + 1) + 4 * most);
    crate::cmd::check_memory(
        need + batch + buffers,
        &format!(
            "the tables and optimizer state, a batch of {b} bags on {} tables and the primitives' buffers",
            spec.tables.len()
        ),
        "--batch, --bag, --tables, --rows or --dim",
    )
}

/// Median of three copies of a 256 MiB buffer, counting read + write bytes.
pub(super) fn copy_bandwidth_gbps() -> f64 {
    let n = 64 << 20; // f32 elements: 256 MiB
    let src = vec![1.0f32; n];
    let mut dst = vec![0.0f32; n];
    dst.copy_from_slice(&src); // fault the pages in before timing
    let mut t = Vec::new();
    for _ in 0..3 {
        let t0 = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
        t.push(t0.elapsed().as_secs_f64());
    }
    (2 * n * 4) as f64 / median(&t) / 1e9
}
