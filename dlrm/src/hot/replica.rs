//! The GPU's copy of the hot rows: per table a compact table of the hot
//! rows (ascending host row order) with their optimizer state, and the map
//! from host row ids to its own.

use nmpsim_kernels::{EmbeddingTable, OptimizerState};
use nmpsim_traces::{Batch, TableBatch};

use crate::DlrmError;

/// A host row that is not in the replica.
const ABSENT: u32 = u32::MAX;

/// The hot rows of every table, held apart from the host's tables.
#[derive(Debug, Clone)]
pub struct Replica {
    /// Per table the host rows held, ascending.
    rows: Vec<Vec<u32>>,
    /// Per table, host row -> replica row (`ABSENT` if cold); empty when
    /// the table is held whole (the map is the identity).
    map: Vec<Vec<u32>>,
    pub tables: Vec<EmbeddingTable>,
    pub states: Vec<OptimizerState>,
}

impl Replica {
    /// A replica of `rows` (per table, ascending) of `host`, copied from it.
    pub fn new(
        rows: &[Vec<u32>],
        host: &[EmbeddingTable],
        states: &[OptimizerState],
    ) -> Result<Self, DlrmError> {
        let mut tables = Vec::with_capacity(host.len());
        let mut rstates = Vec::with_capacity(host.len());
        let mut map = Vec::with_capacity(host.len());
        for (t, ((h, s), r)) in host.iter().zip(states).zip(rows).enumerate() {
            if r.windows(2).any(|w| w[0] >= w[1]) || r.last().is_some_and(|&x| x as u64 >= h.rows) {
                return Err(DlrmError::Config(format!(
                    "table {t}: the hot rows must be ascending row ids below {}",
                    h.rows
                )));
            }
            let whole = r.len() as u64 == h.rows;
            map.push(if whole {
                Vec::new()
            } else {
                let mut m = vec![ABSENT; h.rows as usize];
                for (i, &x) in r.iter().enumerate() {
                    m[x as usize] = i as u32;
                }
                m
            });
            tables.push(EmbeddingTable::zeros(r.len() as u64, h.dim)?);
            rstates.push(OptimizerState {
                rows: r.len() as u64,
                values_per_row: s.values_per_row,
                values: vec![0.0; r.len() * s.values_per_row],
            });
        }
        let mut out = Replica {
            rows: rows.to_vec(),
            map,
            tables,
            states: rstates,
        };
        out.load(host, states);
        Ok(out)
    }

    /// Tables.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Rows held in all.
    pub fn rows(&self) -> u64 {
        self.rows.iter().map(|r| r.len() as u64).sum()
    }

    /// The host rows of table `t` it holds, ascending.
    pub fn host_rows(&self, t: usize) -> &[u32] {
        &self.rows[t]
    }

    /// Bytes of every held row's values and optimizer state: what one
    /// synchronisation moves.
    pub fn bytes(&self) -> u64 {
        self.tables
            .iter()
            .zip(&self.states)
            .map(|(t, s)| t.bytes() + s.bytes())
            .sum()
    }

    /// The replica row of host row `row` of table `t`, if held.
    pub fn local(&self, t: usize, row: u32) -> Option<u32> {
        let m = &self.map[t];
        if m.is_empty() {
            return Some(row);
        }
        m.get(row as usize).copied().filter(|&x| x != ABSENT)
    }

    /// Copies the held rows (values and state) from the host's tables.
    pub fn load(&mut self, host: &[EmbeddingTable], states: &[OptimizerState]) {
        for (t, rows) in self.rows.iter().enumerate() {
            copy_rows(
                rows,
                &host[t],
                &states[t],
                |i, r| (r, i),
                &mut self.tables[t],
                &mut self.states[t],
            );
        }
    }

    /// Copies the held rows (values and state) back into the host's tables.
    pub fn store(&self, host: &mut [EmbeddingTable], states: &mut [OptimizerState]) {
        for (t, rows) in self.rows.iter().enumerate() {
            let (dt, ds) = (&mut host[t], &mut states[t]);
            copy_rows(
                rows,
                &self.tables[t],
                &self.states[t],
                |i, r| (i, r),
                dt,
                ds,
            );
        }
    }

    /// Whether the held rows equal the host's, bit for bit.
    pub fn equals_host(&self, host: &[EmbeddingTable], states: &[OptimizerState]) -> bool {
        self.rows.iter().enumerate().all(|(t, rows)| {
            let (d, v) = (self.tables[t].dim, self.states[t].values_per_row);
            rows.iter().enumerate().all(|(i, &r)| {
                let r = r as usize;
                bits(&self.tables[t].data[i * d..(i + 1) * d])
                    .eq(bits(&host[t].data[r * d..(r + 1) * d]))
                    && bits(&self.states[t].values[i * v..(i + 1) * v])
                        .eq(bits(&states[t].values[r * v..(r + 1) * v]))
            })
        })
    }

    /// `batch` with every index turned into the replica's row; an index it
    /// does not hold is an error naming it.
    pub fn remap(&self, batch: &Batch) -> Result<Batch, DlrmError> {
        let tables = batch
            .tables
            .iter()
            .enumerate()
            .map(|(t, tb)| {
                let indices = tb
                    .indices
                    .iter()
                    .map(|&r| {
                        self.local(t, r).ok_or_else(|| {
                            DlrmError::Config(format!(
                                "table {t}: row {r} is not hot, yet the batch was taken for a hot one"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(TableBatch {
                    num_rows: self.tables[t].rows,
                    offsets: tb.offsets.clone(),
                    indices,
                    weights: tb.weights.clone(),
                })
            })
            .collect::<Result<Vec<_>, DlrmError>>()?;
        Ok(Batch::of_tables(tables))
    }
}

fn bits(v: &[f32]) -> impl Iterator<Item = u32> + '_ {
    v.iter().map(|x| x.to_bits())
}

/// For the `i`-th of `rows` (host row `r`), copies source row `pick(i, r).0`
/// to destination row `pick(i, r).1`, values and state.
fn copy_rows(
    rows: &[u32],
    src: &EmbeddingTable,
    src_state: &OptimizerState,
    pick: impl Fn(usize, usize) -> (usize, usize),
    dst: &mut EmbeddingTable,
    dst_state: &mut OptimizerState,
) {
    let (d, v) = (src.dim, src_state.values_per_row);
    for (i, &r) in rows.iter().enumerate() {
        let (from, to) = pick(i, r as usize);
        dst.data[to * d..(to + 1) * d].copy_from_slice(&src.data[from * d..(from + 1) * d]);
        if v > 0 {
            dst_state.values[to * v..(to + 1) * v]
                .copy_from_slice(&src_state.values[from * v..(from + 1) * v]);
        }
    }
}
