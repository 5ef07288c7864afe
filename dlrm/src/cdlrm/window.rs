//! cDLRM's three processes over a model's tables (Sec. 5), run in one thread
//! in the order in which they overlap: the prefetcher gathers the unique
//! rows of a window of `n` batches from the host tables (Algorithm 1), the
//! caching step installs a window into the caches (Sec. 5.2.1), each batch
//! trains on a compact working set of cached rows and conflict victims
//! (Sec. 5.2.2-5.2.3), and the eviction process writes evicted and victim
//! rows back to the host tables (Sec. 5.3).
//!
//! Two orders of these steps, [`Consistency`]:
//! - `coherent`: the write-back queue drains before a window is installed,
//!   and the rows it installs are re-read then, so every row a batch reads is
//!   its latest value: training is bit-identical to training the host tables
//!   directly with the same batches;
//! - `async`: the paper's order. The next window is fetched as soon as the
//!   current one is installed, before the rows that install evicted reach
//!   the host, so a row evicted there and needed by the next window is
//!   installed from its fetched, older value (the race of Sec. 5.3). Such
//!   stale installs are counted.

use std::collections::VecDeque;
use std::time::Instant;

use nmpsim_kernels::{EmbeddingTable, OptimizerState};
use nmpsim_traces::{Batch, TableBatch};
use rayon::prelude::*;
use serde::Serialize;

use super::cache::{DEFAULT_SETS, DEFAULT_WAYS, Geometry, TableCache, WriteBack};
use crate::DlrmError;

/// When the host tables see the cache's updates, against when the
/// prefetcher reads them (the module's docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Consistency {
    #[default]
    Coherent,
    Async,
}

impl std::str::FromStr for Consistency {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "coherent" => Ok(Consistency::Coherent),
            "async" => Ok(Consistency::Async),
            _ => Err(format!(
                "unknown consistency '{s}'; expected coherent or async"
            )),
        }
    }
}

/// The cache's and prefetcher's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CdlrmOptions {
    /// `L`: the set count limit (a table of at most `L` rows is held whole).
    pub sets: u64,
    pub ways: u32,
    /// `n`: batches per look-ahead window.
    pub lookahead: usize,
    pub consistency: Consistency,
    /// Seeds every table's way selection.
    pub seed: u64,
}

impl Default for CdlrmOptions {
    fn default() -> Self {
        CdlrmOptions {
            sets: DEFAULT_SETS,
            ways: DEFAULT_WAYS,
            lookahead: 100,
            consistency: Consistency::Coherent,
            seed: 0,
        }
    }
}

impl CdlrmOptions {
    pub fn validate(&self) -> Result<(), DlrmError> {
        if self.lookahead == 0 {
            return Err(DlrmError::Config(
                "--lookahead 0: a window needs at least 1 batch".into(),
            ));
        }
        Geometry::for_table(self.sets + 1, self.sets, self.ways).map(|_| ())
    }
}

/// One table's counts over a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CacheCounts {
    pub windows: u64,
    /// Unique rows of the windows, and those already held when installed.
    pub window_rows: u64,
    pub window_hits: u64,
    pub installed: u64,
    /// Window rows that found no slot (served by the victim table).
    pub conflict_victims: u64,
    /// Held rows a install displaced.
    pub evictions: u64,
    /// Rows installed from a fetched value the host had since overwritten.
    pub stale_installs: u64,
    /// Unique rows of the batches, served from the cache or the victim table.
    pub batch_rows: u64,
    pub batch_hits: u64,
    pub victim_rows: u64,
    /// Rows written to the host table (evictions, victims, the final flush).
    pub written_back: u64,
    /// Row bytes (values and optimizer state) to the device: installs and
    /// victim fetches; and back: write-backs.
    pub bytes_to_device: u64,
    pub bytes_to_host: u64,
}

impl CacheCounts {
    /// Adds another table's counts (windows: the most of either).
    pub fn merge(&mut self, o: &CacheCounts) {
        macro_rules! add {
            ($($f:ident),*) => { $(self.$f += o.$f;)* };
        }
        self.windows = self.windows.max(o.windows);
        add!(
            window_rows,
            window_hits,
            installed,
            conflict_victims,
            evictions,
            stale_installs
        );
        add!(
            batch_rows,
            batch_hits,
            victim_rows,
            written_back,
            bytes_to_device,
            bytes_to_host
        );
    }

    /// The share of the batches' unique rows found in the cache.
    pub fn hit_rate(&self) -> f64 {
        self.batch_hits as f64 / self.batch_rows.max(1) as f64
    }
}

/// What the parts of a window's start took on this machine, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WindowTimes {
    /// The write-back queue drained into the host tables.
    pub write_back_ns: f64,
    /// `coherent`: the rows the install places, read again from the host
    /// tables.
    pub reread_ns: f64,
    /// The occupancy tables' look-ups and the ways chosen (the host's part
    /// of the caching step).
    pub plan_ns: f64,
    /// The rows copied into and out of the caches (here; the device's
    /// part, which the strategy models).
    pub apply_ns: f64,
    /// The next window's unique rows found and gathered.
    pub prefetch_ns: f64,
    /// Of `prefetch_ns`, finding the unique rows.
    pub prefetch_unique_ns: f64,
}

/// A window's rows and their values as the prefetcher read them.
struct Fetched {
    rows: Vec<Vec<u32>>,
    values: Vec<Vec<f32>>,
    state: Vec<Vec<f32>>,
    /// The write-backs the host had seen when it was read.
    at: u32,
}

/// One batch's rows of one table on the device: its unique rows (ascending)
/// as a compact table with their optimizer state, and the batch with its
/// indices as positions in it. Train on these, then hand them back.
pub struct Working {
    pub unique: Vec<u32>,
    /// The cache slot of each unique row; `None`: a conflict victim.
    slots: Vec<Option<usize>>,
    pub table: EmbeddingTable,
    pub state: OptimizerState,
    pub batch: TableBatch,
}

impl Working {
    /// The batch's conflict victims: its rows served from the victim table.
    pub fn victims(&self) -> Vec<u32> {
        self.unique
            .iter()
            .zip(&self.slots)
            .filter(|(_, s)| s.is_none())
            .map(|(&r, _)| r)
            .collect()
    }
}

/// The host tables with their caches, write-back queues and prefetch queue.
pub struct CachedTables {
    pub host: Vec<EmbeddingTable>,
    pub host_state: Vec<OptimizerState>,
    caches: Vec<TableCache>,
    wb: Vec<WriteBack>,
    /// Per table and row, the write-back count when it was last written.
    written: Vec<Vec<u32>>,
    drains: u32,
    queue: VecDeque<Fetched>,
    /// An installed window's buffers, for the next prefetch.
    spare: Option<Fetched>,
    /// The rows drained per table, when tracked.
    drained: Option<Vec<Vec<u32>>>,
    /// The rows the last coherent install read again per table, when the
    /// write-backs are tracked.
    reread: Vec<Vec<u32>>,
    pub options: CdlrmOptions,
    pub counts: Vec<CacheCounts>,
}

impl CachedTables {
    /// Caches of the paper's shape over `host` (with its optimizer state),
    /// all empty.
    pub fn new(
        host: Vec<EmbeddingTable>,
        host_state: Vec<OptimizerState>,
        options: CdlrmOptions,
    ) -> Result<Self, DlrmError> {
        options.validate()?;
        let mut caches = Vec::with_capacity(host.len());
        for (t, (h, s)) in host.iter().zip(&host_state).enumerate() {
            let g = Geometry::for_table(h.rows, options.sets, options.ways)?;
            let seed = options.seed ^ (t as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            caches.push(TableCache::new(g, h.dim, s.values_per_row, seed)?);
        }
        Ok(CachedTables {
            written: host.iter().map(|h| vec![0; h.rows as usize]).collect(),
            wb: vec![WriteBack::default(); host.len()],
            counts: vec![CacheCounts::default(); host.len()],
            caches,
            host,
            host_state,
            drains: 0,
            queue: VecDeque::new(),
            spare: None,
            drained: None,
            reread: Vec::new(),
            options,
        })
    }

    pub fn geometry(&self, t: usize) -> Geometry {
        self.caches[t].geometry
    }

    fn row_bytes(&self, t: usize) -> u64 {
        (self.host[t].dim + self.host_state[t].values_per_row) as u64 * 4
    }

    /// Algorithm 1 for one window: per table its unique rows, gathered with
    /// their optimizer state from the host tables as they are now (the
    /// tables in parallel, as the paper's pool of prefetching processes).
    /// Returns the time (ns, on this machine) of its two parts: finding the
    /// unique rows, and gathering them.
    pub fn prefetch(&mut self, window: &[Batch]) -> (f64, f64) {
        let tables = self.host.len();
        // (Into the buffers of a window already installed, when there is one.)
        let mut bufs: Vec<(Vec<u32>, Vec<f32>, Vec<f32>)> = match self.spare.take() {
            Some(f) => f
                .rows
                .into_iter()
                .zip(f.values)
                .zip(f.state)
                .map(|((r, v), s)| (r, v, s))
                .collect(),
            None => (0..tables).map(|_| Default::default()).collect(),
        };
        let t0 = Instant::now();
        bufs.par_iter_mut()
            .enumerate()
            .for_each(|(t, out)| unique_rows_into(self.host[t].rows, window, t, &mut out.0));
        let unique_ns = t0.elapsed().as_nanos() as f64;
        let t0 = Instant::now();
        bufs.par_iter_mut().enumerate().for_each(|(t, out)| {
            gather_rows_into(
                &self.host[t],
                &self.host_state[t],
                &out.0,
                &mut out.1,
                &mut out.2,
            )
        });
        let gather_ns = t0.elapsed().as_nanos() as f64;
        let mut f = Fetched {
            rows: Vec::with_capacity(tables),
            values: Vec::with_capacity(tables),
            state: Vec::with_capacity(tables),
            at: self.drains,
        };
        for (r, v, s) in bufs {
            f.rows.push(r);
            f.values.push(v);
            f.state.push(s);
        }
        self.queue.push_back(f);
        (unique_ns, gather_ns)
    }

    /// The rows the last coherent install read again from the host, per
    /// table, ascending (tracked with the write-backs; empty otherwise).
    pub fn reread_rows(&self) -> &[Vec<u32>] {
        &self.reread
    }

    /// The unique rows per table of the window fetched last (the one
    /// [`CachedTables::begin_window`] installs next), ascending.
    pub fn queued_rows(&self) -> Option<&[Vec<u32>]> {
        self.queue.back().map(|f| &f.rows[..])
    }

    /// From now on, remember the rows every drain writes back, per table,
    /// for [`CachedTables::take_written_back`].
    pub fn track_write_backs(&mut self) {
        if self.drained.is_none() {
            self.drained = Some(vec![Vec::new(); self.host.len()]);
        }
    }

    /// The rows written back per table since the last call (each drain's
    /// rows in drain order), when [`CachedTables::track_write_backs`] is on.
    pub fn take_written_back(&mut self) -> Option<Vec<Vec<u32>>> {
        let n = self.host.len();
        self.drained
            .as_mut()
            .map(|d| std::mem::replace(d, vec![Vec::new(); n]))
    }

    /// Starts the next window (fetched by an earlier [`prefetch`]), and
    /// fetches `next`, the window after it, in the order of the run's
    /// [`Consistency`]; returns what each part took on this machine.
    ///
    /// [`prefetch`]: CachedTables::prefetch
    pub fn begin_window(&mut self, next: Option<&[Batch]>) -> Result<WindowTimes, DlrmError> {
        let ns = |t: Instant| t.elapsed().as_nanos() as f64;
        let mut times = WindowTimes::default();
        let mut f = self
            .queue
            .pop_front()
            .ok_or_else(|| DlrmError::Config("no window was prefetched".into()))?;
        let coherent = self.options.consistency == Consistency::Coherent;
        if coherent {
            let t0 = Instant::now();
            self.drain();
            times.write_back_ns += ns(t0);
        }
        // The tables' caching steps in parallel: the decisions, then the copies.
        let t0 = Instant::now();
        let plans: Vec<_> = self
            .caches
            .par_iter_mut()
            .zip(f.rows.par_iter())
            .map(|(c, rows)| c.plan(rows))
            .collect();
        times.plan_ns += ns(t0);
        if coherent {
            // The rows the install places, read again now the host has every
            // write-back (a hit keeps the cache's copy, which is current).
            let t0 = Instant::now();
            let track = self.drained.is_some();
            if track {
                self.reread = plans
                    .iter()
                    .enumerate()
                    .map(|(t, plan)| {
                        let mut r: Vec<u32> = plan.moves.iter().map(|m| f.rows[t][m.row]).collect();
                        r.sort_unstable();
                        r
                    })
                    .collect();
            }
            for (t, plan) in plans.iter().enumerate() {
                let (d, p) = (self.host[t].dim, self.host_state[t].values_per_row);
                for m in &plan.moves {
                    let (v, s) = row_of(&self.host[t], &self.host_state[t], f.rows[t][m.row]);
                    f.values[t][m.row * d..(m.row + 1) * d].copy_from_slice(v);
                    f.state[t][m.row * p..(m.row + 1) * p].copy_from_slice(s);
                }
            }
            f.at = self.drains;
            times.reread_ns += ns(t0);
        }
        let t0 = Instant::now();
        self.caches
            .par_iter_mut()
            .zip(self.wb.par_iter_mut())
            .zip(plans.par_iter())
            .enumerate()
            .for_each(|(t, ((c, wb), plan))| {
                c.apply(plan, &f.rows[t], &f.values[t], &f.state[t], wb)
            });
        times.apply_ns += ns(t0);
        for (t, plan) in plans.iter().enumerate() {
            let rows = &f.rows[t];
            // Rows placed from a fetched copy the host has since overwritten.
            let stale = plan
                .moves
                .iter()
                .filter(|m| self.written[t][rows[m.row] as usize] > f.at)
                .count() as u64;
            let done = &plan.install;
            let bytes = self.row_bytes(t);
            let c = &mut self.counts[t];
            c.windows += 1;
            c.window_rows += rows.len() as u64;
            c.window_hits += done.hits;
            c.installed += done.installed;
            c.evictions += done.evicted;
            c.conflict_victims += done.victims.len() as u64;
            c.stale_installs += stale;
            c.bytes_to_device += done.installed * bytes;
        }
        self.spare = Some(f);
        if let Some(next) = next {
            let (unique_ns, gather_ns) = self.prefetch(next);
            times.prefetch_unique_ns += unique_ns;
            times.prefetch_ns += unique_ns + gather_ns;
        }
        if !coherent {
            let t0 = Instant::now();
            self.drain();
            times.write_back_ns += ns(t0);
        }
        Ok(times)
    }

    /// Brings the host tables up to date with the caches' rows, which stay
    /// cached (for an evaluation, or the run's end). The prefetcher sees
    /// the rows as written then, as a write-back.
    pub fn sync_host(&mut self) {
        self.drain();
        self.drains += 1;
        let seq = self.drains;
        for t in 0..self.host.len() {
            let (dim, per_row) = (self.host[t].dim, self.host_state[t].values_per_row);
            let cache = &self.caches[t];
            for slot in 0..cache.geometry.slots() as usize {
                if let Some(r) = cache.row_in(slot) {
                    let (v, s) = cache.slot(slot);
                    let r = r as usize;
                    self.host[t].data[r * dim..(r + 1) * dim].copy_from_slice(v);
                    self.host_state[t].values[r * per_row..(r + 1) * per_row].copy_from_slice(s);
                    self.written[t][r] = seq;
                }
            }
        }
    }

    /// The eviction process: every queued row written to its host table.
    pub fn drain(&mut self) {
        self.drains += 1;
        for t in 0..self.host.len() {
            self.drain_table(t);
        }
    }

    /// Table `t`'s queued rows written to it, as of write-back `self.drains`.
    fn drain_table(&mut self, t: usize) {
        let seq = self.drains;
        let (dim, per_row) = (self.host[t].dim, self.host_state[t].values_per_row);
        let n = self.wb[t].rows.len() as u64;
        if let Some(d) = &mut self.drained {
            d[t].extend_from_slice(&self.wb[t].rows);
        }
        self.counts[t].written_back += n;
        self.counts[t].bytes_to_host += n * self.row_bytes(t);
        let written = &mut self.written[t];
        self.wb[t].drain_into(
            &mut self.host[t].data,
            &mut self.host_state[t].values,
            dim,
            per_row,
            |r| written[r as usize] = seq,
        );
    }

    /// Table `t`'s rows of one batch of the current window: the cached ones
    /// from the cache, the conflict victims fetched from the host into the
    /// victim table.
    pub fn working(&mut self, t: usize, batch: &TableBatch) -> Result<Working, DlrmError> {
        let mut unique = batch.indices.clone();
        unique.sort_unstable();
        unique.dedup();
        let (dim, per_row) = (self.host[t].dim, self.host_state[t].values_per_row);
        let mut values = Vec::with_capacity(unique.len() * dim);
        let mut state = Vec::with_capacity(unique.len() * per_row);
        let mut slots = Vec::with_capacity(unique.len());
        let cache = &self.caches[t];
        for &r in &unique {
            let slot = cache.slot_of(r);
            let (v, s) = match slot {
                Some(s) => cache.slot(s),
                None => row_of(&self.host[t], &self.host_state[t], r),
            };
            values.extend_from_slice(v);
            state.extend_from_slice(s);
            slots.push(slot);
        }
        let victims = slots.iter().filter(|s| s.is_none()).count() as u64;
        let bytes = self.row_bytes(t);
        let c = &mut self.counts[t];
        c.batch_rows += unique.len() as u64;
        c.batch_hits += unique.len() as u64 - victims;
        c.victim_rows += victims;
        c.bytes_to_device += victims * bytes;
        let compact = TableBatch {
            num_rows: unique.len() as u64,
            offsets: batch.offsets.clone(),
            indices: batch
                .indices
                .iter()
                .map(|r| unique.binary_search(r).expect("a unique row") as u32)
                .collect(),
            weights: batch.weights.clone(),
        };
        Ok(Working {
            table: EmbeddingTable::from_vec(unique.len() as u64, dim, values)?,
            state: OptimizerState {
                rows: unique.len() as u64,
                values_per_row: per_row,
                values: state,
            },
            unique,
            slots,
            batch: compact,
        })
    }

    /// Hands a trained working set back: cached rows into their slots, the
    /// victims flushed to the host through the write-back queue (Sec. 5.2.3).
    /// Returns the time (ns, on this machine) of that flush, 0 without
    /// victims.
    pub fn finish(&mut self, t: usize, w: Working) -> f64 {
        let (dim, per_row) = (w.table.dim, w.state.values_per_row);
        let mut victims = false;
        for (i, (&r, slot)) in w.unique.iter().zip(&w.slots).enumerate() {
            let (v, s) = (
                &w.table.data[i * dim..(i + 1) * dim],
                &w.state.values[i * per_row..(i + 1) * per_row],
            );
            match slot {
                Some(slot) => {
                    let (cv, cs) = self.caches[t].slot_mut(*slot);
                    cv.copy_from_slice(v);
                    cs.copy_from_slice(s);
                }
                None => {
                    self.wb[t].push(r, v, s);
                    victims = true;
                }
            }
        }
        if !victims {
            return 0.0;
        }
        // (Only this table's queue: the others have nothing of this batch.)
        let t0 = Instant::now();
        self.drains += 1;
        self.drain_table(t);
        t0.elapsed().as_nanos() as f64
    }

    /// The end of training: every cached row written back, so the host
    /// tables hold the trained model.
    pub fn flush(&mut self) {
        for (c, wb) in self.caches.iter_mut().zip(&mut self.wb) {
            c.flush(wb);
        }
        self.drain();
    }

    /// Rows held in table `t`'s cache now.
    pub fn occupied(&self, t: usize) -> usize {
        self.caches[t].occupied()
    }
}

/// Algorithm 1's body for table `t`: the unique rows of `window` in it
/// (ascending), and their values and optimizer state gathered from `table`
/// and `state`.
pub fn fetch_window(
    table: &EmbeddingTable,
    state: &OptimizerState,
    window: &[Batch],
    t: usize,
) -> (Vec<u32>, Vec<f32>, Vec<f32>) {
    let mut out = (Vec::new(), Vec::new(), Vec::new());
    fetch_window_into(table, state, window, t, &mut out);
    out
}

/// [`fetch_window`] into the buffers of an earlier window (their memory
/// reused, as the prefetcher's buffers are in steady state).
pub fn fetch_window_into(
    table: &EmbeddingTable,
    state: &OptimizerState,
    window: &[Batch],
    t: usize,
    out: &mut (Vec<u32>, Vec<f32>, Vec<f32>),
) {
    unique_rows_into(table.rows, window, t, &mut out.0);
    gather_rows_into(table, state, &out.0, &mut out.1, &mut out.2);
}

/// The unique rows (ascending) that `window` looks up in its table `t` of
/// `table_rows` rows, into `rows` (its memory reused).
pub fn unique_rows_into(table_rows: u64, window: &[Batch], t: usize, rows: &mut Vec<u32>) {
    rows.clear();
    let lookups: usize = window.iter().map(|b| b.tables[t].indices.len()).sum();
    if lookups as u64 >= table_rows / 8 {
        // Many lookups for the table's rows: one bit a row marks those
        // looked up, read out in order (no sort of every lookup).
        let words = table_rows.div_ceil(64) as usize;
        // (The batches marked in parallel, each task into a bitset of its
        // own, the bitsets joined.)
        let seen = window
            .par_iter()
            .fold(
                || vec![0u64; words],
                |mut seen, b| {
                    for &r in &b.tables[t].indices {
                        seen[r as usize / 64] |= 1 << (r % 64);
                    }
                    seen
                },
            )
            .reduce(
                || vec![0u64; words],
                |mut a, b| {
                    a.iter_mut().zip(&b).for_each(|(x, y)| *x |= y);
                    a
                },
            );
        // (Read out in parallel: each chunk of words into its share of
        // `rows`, found by counting the chunks' bits first.)
        const WORDS_PER_TASK: usize = 1024;
        let counts: Vec<usize> = seen
            .par_chunks(WORDS_PER_TASK)
            .map(|c| c.iter().map(|w| w.count_ones() as usize).sum())
            .collect();
        rows.resize(counts.iter().sum(), 0);
        let mut outs = Vec::with_capacity(counts.len());
        let mut rest = &mut rows[..];
        for &n in &counts {
            let (head, tail) = rest.split_at_mut(n);
            outs.push(head);
            rest = tail;
        }
        seen.par_chunks(WORDS_PER_TASK)
            .zip(outs)
            .enumerate()
            .for_each(|(k, (words, out))| {
                let mut i = 0;
                for (w, &bits) in words.iter().enumerate() {
                    let base = ((k * WORDS_PER_TASK + w) * 64) as u32;
                    let mut bits = bits;
                    while bits != 0 {
                        out[i] = base + bits.trailing_zeros();
                        i += 1;
                        bits &= bits - 1;
                    }
                }
            });
    } else {
        rows.extend(
            window
                .iter()
                .flat_map(|b| b.tables[t].indices.iter().copied()),
        );
        rows.sort_unstable();
        rows.dedup();
    }
}

/// Rows a task of [`gather_rows_into`] copies.
const GATHER_ROWS_PER_TASK: usize = 4096;

/// `rows` of `table` and their optimizer state, gathered into `v` and `s`
/// (their memory reused), in parallel chunks of rows.
pub fn gather_rows_into(
    table: &EmbeddingTable,
    state: &OptimizerState,
    rows: &[u32],
    v: &mut Vec<f32>,
    s: &mut Vec<f32>,
) {
    let (d, p) = (table.dim, state.values_per_row);
    // (Every value is written below.)
    nmpsim_kernels::table::resize_for_overwrite(v, rows.len() * d);
    nmpsim_kernels::table::resize_for_overwrite(s, rows.len() * p);
    let n = GATHER_ROWS_PER_TASK;
    v.par_chunks_mut(n * d.max(1))
        .zip(rows.par_chunks(n))
        .for_each(|(out, rows)| copy_runs(&table.data, d, rows, out));
    if p > 0 {
        s.par_chunks_mut(n * p)
            .zip(rows.par_chunks(n))
            .for_each(|(out, rows)| copy_runs(&state.values, p, rows, out));
    }
}

/// Rows `rows` of `width` values of `from` into `out`, one after another:
/// each run of consecutive rows in one copy (a window's rows are ascending,
/// and a long window's are mostly consecutive).
fn copy_runs(from: &[f32], width: usize, rows: &[u32], out: &mut [f32]) {
    if width == 0 {
        return;
    }
    let mut i = 0;
    while i < rows.len() {
        let first = rows[i] as usize;
        let mut j = i + 1;
        while j < rows.len() && rows[j] as usize == first + (j - i) {
            j += 1;
        }
        out[i * width..j * width].copy_from_slice(&from[first * width..(first + j - i) * width]);
        i = j;
    }
}

fn row_of<'a>(
    table: &'a EmbeddingTable,
    state: &'a OptimizerState,
    r: u32,
) -> (&'a [f32], &'a [f32]) {
    let (d, p, r) = (table.dim, state.values_per_row, r as usize);
    (
        &table.data[r * d..(r + 1) * d],
        &state.values[r * p..(r + 1) * p],
    )
}
