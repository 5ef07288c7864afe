//! `cdlrm-nmp`'s side of the NMP pool: the host tables live in the pool, so
//! the prefetcher's gathers, the coherent re-reads and the conflict victims'
//! fetches run there as `gather` instructions (rows with their optimizer
//! state, unreduced), and the write-backs as scatters of the rows sent to
//! the pool. The pool only times them (the numbers are the host tables' in
//! this machine's memory, which the `nmp` crate's functional pool is tested
//! to equal).
//!
//! The pool's ISA has no plain store of rows: a write-back is a
//! load-coalesced of the rows and a scatter with the run's optimizer, which
//! reads each row and its state before writing them (up to twice the DRAM
//! traffic of a plain store).

use std::sync::{Arc, Mutex};

use nmpsim_kernels::Optimizer;
use nmpsim_kernels::traffic::scatter_traffic;
use nmpsim_nmp::Instruction;

use crate::DlrmError;
use crate::pooltime::{PoolTimer, array_bytes, fingerprint};
use crate::timeline::{Resource, Source};

/// One piece of pool-side work, before it is put on a lane.
#[derive(Clone, Debug, PartialEq)]
pub struct Work {
    pub primitive: &'static str,
    pub detail: String,
    pub resource: Resource,
    pub source: Source,
    pub ns: f64,
    pub bytes: u64,
    pub energy_pj: f64,
}

/// The pool's timer with the tables' shapes.
pub struct PoolSide {
    timer: Arc<Mutex<PoolTimer>>,
    dims: Vec<usize>,
    state_per_row: Vec<usize>,
}

impl PoolSide {
    pub fn new(timer: Arc<Mutex<PoolTimer>>, dims: Vec<usize>, state_per_row: Vec<usize>) -> Self {
        PoolSide {
            timer,
            dims,
            state_per_row,
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut PoolTimer) -> R) -> Result<R, DlrmError> {
        Ok(f(&mut *crate::pooltime::lock(&self.timer)?))
    }

    fn link(&self, what: String, bytes: u64) -> Result<Work, DlrmError> {
        let ns = self.with(|p| p.setup.link_ns(bytes))?;
        Ok(Work {
            primitive: "transfer",
            detail: what,
            resource: Resource::PoolLink,
            source: Source::Modelled,
            ns,
            bytes,
            energy_pj: 0.0,
        })
    }

    /// Gathers `rows` (per table) out of the pool with their optimizer
    /// state (the `gather` instruction), and sends them over the pool's
    /// link: the instructions in, the pool's work, the rows out.
    /// `primitive` names the timing (its calibration and cache); `to` says
    /// where the rows go.
    pub fn gather(
        &self,
        primitive: &'static str,
        rows: &[Vec<u32>],
        iteration: u64,
        to: &str,
    ) -> Result<Vec<Work>, DlrmError> {
        let n: usize = rows.iter().map(Vec::len).sum();
        if n == 0 {
            return Ok(Vec::new());
        }
        let (mut bytes, mut instr_bytes, mut out_bytes) = (0u64, 0u64, 0u64);
        for (t, r) in rows.iter().enumerate().filter(|(_, r)| !r.is_empty()) {
            // (The rows and their state read, and the row ids.)
            bytes += (r.len() * (self.dims[t] + self.state_per_row[t] + 1) * 4) as u64;
            instr_bytes += nmpsim_nmp::HEADER_BYTES as u64 + array_bytes(r.len());
            out_bytes += self.with(|p| nmpsim_nmp::gather_rows_link_out_bytes(p.layout(), t, r))?;
        }
        let instrs = || {
            rows.iter()
                .enumerate()
                .filter(|(_, r)| !r.is_empty())
                .map(|(t, r)| Instruction::Gather {
                    table: t as u32,
                    rows: r.clone(),
                })
                .collect::<Vec<_>>()
        };
        let fp = fingerprint(rows.iter().map(Vec::as_slice));
        let pt = self.with(|p| p.time(primitive, iteration, fp, bytes, instrs))??;
        // The rows drain over the link while the pool reads them; what the
        // ranks still hold follows (all of it for a fixed-bandwidth pool).
        let tail = pt
            .link_out_tail_bytes
            .map_or(out_bytes, |b| b.min(out_bytes));
        Ok(vec![
            self.link(format!("{primitive} instructions to pool"), instr_bytes)?,
            Work {
                primitive,
                detail: format!("nmp (gather: {n} rows with their state)"),
                resource: Resource::Nmp,
                source: pt.source,
                ns: pt.time_ns,
                bytes,
                energy_pj: pt.energy_pj.unwrap_or(0.0),
            },
            self.link(format!("{primitive}: rows pool to {to}"), tail)?,
        ])
    }

    /// Writes `rows` (per table; sorted and deduplicated here: a later
    /// write of a row replaces an earlier one) back into the pool: the rows
    /// over the link, a load-coalesced and a scatter with `optimizer`.
    pub fn store(
        &self,
        primitive: &'static str,
        rows: &[Vec<u32>],
        optimizer: &Optimizer,
        iteration: u64,
        from: &str,
    ) -> Result<Vec<Work>, DlrmError> {
        let rows: Vec<Vec<u32>> = rows
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.sort_unstable();
                r.dedup();
                r
            })
            .collect();
        let n: usize = rows.iter().map(Vec::len).sum();
        if n == 0 {
            return Ok(Vec::new());
        }
        let max_unique = self.with(|p| {
            let l = p.layout();
            l.tables
                .iter()
                .map(|s| l.params.max_unique.min(s.rows).max(1))
                .collect::<Vec<_>>()
        })?;
        let (mut bytes, mut in_bytes) = (0u64, 0u64);
        for (t, r) in rows.iter().enumerate() {
            let d = self.dims[t];
            for chunk in r.chunks(max_unique[t] as usize) {
                let k = chunk.len();
                // (load-coalesced writes the rows; scatter reads them back
                // with the old rows and state, and writes rows and state.)
                bytes +=
                    (k * d * 4) as u64 + scatter_traffic(k, d, self.state_per_row[t]).total_bytes();
                in_bytes += 2 * nmpsim_nmp::HEADER_BYTES as u64
                    + array_bytes(k)
                    + array_bytes(k * d)
                    + (k * self.state_per_row[t] * 4) as u64;
            }
        }
        let instrs = || {
            let mut v = Vec::new();
            for (t, r) in rows.iter().enumerate() {
                for chunk in r.chunks(max_unique[t] as usize) {
                    v.push(Instruction::LoadCoalesced {
                        table: t as u32,
                        rows: chunk.to_vec(),
                        grads: vec![0.0; chunk.len() * self.dims[t]],
                    });
                    v.push(Instruction::Scatter {
                        table: t as u32,
                        optimizer: *optimizer,
                    });
                }
            }
            v
        };
        let fp = fingerprint(rows.iter().map(Vec::as_slice));
        let pt = self.with(|p| p.time(primitive, iteration, fp, bytes, instrs))??;
        Ok(vec![
            self.link(format!("{primitive}: rows {from} to pool"), in_bytes)?,
            Work {
                primitive,
                detail: format!("nmp (load-coalesced + scatter: {n} rows)"),
                resource: Resource::Nmp,
                source: pt.source,
                ns: pt.time_ns,
                bytes,
                energy_pj: pt.energy_pj.unwrap_or(0.0),
            },
        ])
    }
}
