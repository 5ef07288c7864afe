//! The row reads (and update read-modify-writes) of an embedding index trace.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use nmpsim_traces::{Batch, TraceError, TraceReader};
use serde::{Deserialize, Serialize};

use crate::{BURST_BYTES, MemOp, SimError};

use super::{ELEMENT_BYTES, TABLE_ALIGN_BYTES, align_up};

/// Which pass of embedding training an [`EmbeddingRequests`] stream replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingPhase {
    /// The forward gather: every lookup reads its row.
    Forward,
    /// The sparse update: every unique row of a batch is read and written back.
    Update,
    /// Forward then update, batch by batch.
    Both,
}

impl FromStr for EmbeddingPhase {
    type Err = SimError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "forward" => Ok(EmbeddingPhase::Forward),
            "update" => Ok(EmbeddingPhase::Update),
            "both" => Ok(EmbeddingPhase::Both),
            _ => Err(SimError::param(
                "phase",
                format!("`{s}`; expected `forward`, `update` or `both`"),
            )),
        }
    }
}

impl fmt::Display for EmbeddingPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EmbeddingPhase::Forward => "forward",
            EmbeddingPhase::Update => "update",
            EmbeddingPhase::Both => "both",
        })
    }
}

/// Where the embedding tables live in memory: table `t`'s row `r` starts at
/// `table_bases[t] + r * row_bytes`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingLayout {
    /// Elements (f32) per row.
    pub dim: usize,
    /// Where the first table is placed (its base is `base` rounded up to 4096 B).
    pub base: u64,
    /// First byte of each table; each a multiple of 4096.
    pub table_bases: Vec<u64>,
    /// Bytes per row: `dim * 4` rounded up to a multiple of 64.
    pub row_bytes: u64,
    /// Bytes from `base` to the end of the last table.
    pub total_bytes: u64,
}

impl EmbeddingLayout {
    /// Lays out tables of `table_rows` rows each, one after the other from `base`,
    /// every table base aligned up to 4096 B.
    pub fn new(table_rows: &[u64], dim: usize, base: u64) -> Result<Self, SimError> {
        if dim == 0 {
            return Err(SimError::param("dim", "0; expected at least 1"));
        }
        let too_big = || {
            SimError::param(
                "dim / base",
                format!(
                    "dim {dim} from base {base:#x}: the {} tables do not fit in the 64-bit address space",
                    table_rows.len()
                ),
            )
        };
        let row_bytes = (dim as u64)
            .checked_mul(ELEMENT_BYTES)
            .and_then(|b| align_up(b, BURST_BYTES))
            .ok_or_else(too_big)?;
        let mut table_bases = Vec::with_capacity(table_rows.len());
        let mut end = base;
        for &rows in table_rows {
            let tb = align_up(end, TABLE_ALIGN_BYTES).ok_or_else(too_big)?;
            end = rows
                .checked_mul(row_bytes)
                .and_then(|size| tb.checked_add(size))
                .ok_or_else(too_big)?;
            table_bases.push(tb);
        }
        Ok(EmbeddingLayout {
            dim,
            base,
            table_bases,
            row_bytes,
            total_bytes: end - base,
        })
    }

    /// First byte of row `row` of table `table`. Panics if `table` is out of range.
    pub fn row_addr(&self, table: usize, row: u64) -> u64 {
        self.table_bases[table] + row * self.row_bytes
    }

    /// 64 B requests per row.
    pub fn bursts_per_row(&self) -> u64 {
        self.row_bytes / BURST_BYTES
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Forward,
    Update,
}

/// The 64 B requests of an embedding trace, streamed one batch at a time.
///
/// Per batch and table: [`EmbeddingPhase::Forward`] reads every lookup's row
/// (bags in order, each row as `row_bytes / 64` consecutive reads);
/// [`EmbeddingPhase::Update`] takes each unique row in ascending order and reads
/// it, then writes it back. [`EmbeddingPhase::Both`] does a batch's forward pass
/// for all tables, then its update pass. The first error ends the iteration.
pub struct EmbeddingRequests {
    reader: TraceReader,
    layout: EmbeddingLayout,
    phase: EmbeddingPhase,
    max_batches: Option<u64>,
    batches: u64,
    batch: Option<Batch>,
    pos: Position,
    done: bool,
}

/// Where an [`EmbeddingRequests`] stream is within its current batch.
#[derive(Debug, Default)]
struct Position {
    /// Stage of the current batch; `None` when it is used up.
    stage: Option<Stage>,
    table: usize,
    /// Lookup (forward) or unique-row (update) position within the table.
    item: usize,
    /// Burst within the row: `0..bursts` (forward), `0..2 * bursts` (update).
    burst: u64,
    /// The sorted unique rows of the current table (update stage).
    unique: Vec<u32>,
    unique_ready: bool,
}

impl Position {
    fn start_table(&mut self, table: usize) {
        self.table = table;
        self.item = 0;
        self.burst = 0;
        self.unique_ready = false;
    }
}

impl fmt::Debug for EmbeddingRequests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddingRequests")
            .field("path", &self.reader.path())
            .field("layout", &self.layout)
            .field("phase", &self.phase)
            .field("batches", &self.batches)
            .finish_non_exhaustive()
    }
}

impl EmbeddingRequests {
    /// Opens the trace at `path` with `dim`-element f32 rows laid out from `base`
    /// (see [`EmbeddingLayout`]), checks the tables fit in `capacity_bytes`, and
    /// replays `phase` for at most `max_batches` batches (all when `None`).
    pub fn open(
        path: &Path,
        dim: usize,
        base: u64,
        phase: EmbeddingPhase,
        capacity_bytes: u64,
        max_batches: Option<u64>,
    ) -> Result<Self, SimError> {
        let reader = TraceReader::open(path)?;
        let layout =
            EmbeddingLayout::new(&reader.header().table_rows, dim, base).map_err(|e| match e {
                SimError::Param { name, what } => SimError::Param {
                    name,
                    what: format!("{what} (the tables of {})", path.display()),
                },
                e => e,
            })?;
        let end = base.checked_add(layout.total_bytes);
        if end.is_none_or(|e| e > capacity_bytes) {
            return Err(SimError::AddressOutOfRange {
                addr: end.map_or(u64::MAX, |e| e.saturating_sub(1).max(base)),
                capacity: capacity_bytes,
                context: format!(
                    " (embedding tables of {}: {} tables of dim {dim} need {} bytes from base {base:#x})",
                    path.display(),
                    layout.table_bases.len(),
                    layout.total_bytes
                ),
            });
        }
        Ok(EmbeddingRequests {
            reader,
            layout,
            phase,
            max_batches,
            batches: 0,
            batch: None,
            pos: Position::default(),
            done: false,
        })
    }

    pub fn layout(&self) -> &EmbeddingLayout {
        &self.layout
    }

    pub fn phase(&self) -> EmbeddingPhase {
        self.phase
    }

    /// Batches started so far.
    pub fn batches_read(&self) -> u64 {
        self.batches
    }

    /// The next request of the current batch, if any is left.
    fn next_in_batch(&mut self) -> Option<MemOp> {
        let batch = self.batch.as_ref()?;
        let layout = &self.layout;
        let p = &mut self.pos;
        let bursts = layout.bursts_per_row();
        loop {
            let stage = p.stage?;
            let Some(tb) = batch.tables.get(p.table) else {
                p.stage = match (stage, self.phase) {
                    (Stage::Forward, EmbeddingPhase::Both) => Some(Stage::Update),
                    _ => None,
                };
                p.start_table(0);
                continue;
            };
            match stage {
                Stage::Forward => {
                    let Some(&row) = tb.indices.get(p.item) else {
                        p.start_table(p.table + 1);
                        continue;
                    };
                    let addr = layout.row_addr(p.table, u64::from(row)) + p.burst * BURST_BYTES;
                    p.burst += 1;
                    if p.burst == bursts {
                        p.burst = 0;
                        p.item += 1;
                    }
                    return Some(MemOp::read(addr));
                }
                Stage::Update => {
                    if !p.unique_ready {
                        p.unique.clear();
                        p.unique.extend_from_slice(&tb.indices);
                        p.unique.sort_unstable();
                        p.unique.dedup();
                        p.unique_ready = true;
                    }
                    let Some(&row) = p.unique.get(p.item) else {
                        p.start_table(p.table + 1);
                        continue;
                    };
                    let b = p.burst;
                    let addr =
                        layout.row_addr(p.table, u64::from(row)) + (b % bursts) * BURST_BYTES;
                    p.burst += 1;
                    if p.burst == 2 * bursts {
                        p.burst = 0;
                        p.item += 1;
                    }
                    return Some(if b < bursts {
                        MemOp::read(addr)
                    } else {
                        MemOp::write(addr)
                    });
                }
            }
        }
    }

    /// Loads the next batch; `Ok(false)` at the end of the trace or batch limit.
    fn load_batch(&mut self) -> Result<bool, SimError> {
        self.batch = None;
        if self.max_batches.is_some_and(|m| self.batches >= m) {
            // (Stopping at the trace's last batch still verifies it whole.)
            self.reader.verify_if_at_end()?;
            return Ok(false);
        }
        let Some(batch) = self.reader.next().transpose()? else {
            return Ok(false);
        };
        // The reader checks batches against the header the layout was built from;
        // this guards the layout's assumptions should that ever change.
        let rows = &self.reader.header().table_rows;
        if batch.tables.len() != rows.len()
            || batch.tables.iter().zip(rows).any(|(t, &r)| t.num_rows != r)
        {
            return Err(SimError::Trace(TraceError::Format {
                path: self.reader.path().to_path_buf(),
                what: format!(
                    "batch {}: table shapes differ from the trace header",
                    self.batches
                ),
            }));
        }
        self.batches += 1;
        self.batch = Some(batch);
        self.pos.stage = Some(match self.phase {
            EmbeddingPhase::Forward | EmbeddingPhase::Both => Stage::Forward,
            EmbeddingPhase::Update => Stage::Update,
        });
        self.pos.start_table(0);
        Ok(true)
    }
}

impl Iterator for EmbeddingRequests {
    type Item = Result<MemOp, SimError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            if let Some(op) = self.next_in_batch() {
                return Some(Ok(op));
            }
            match self.load_batch() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl std::iter::FusedIterator for EmbeddingRequests {}
