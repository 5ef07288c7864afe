//! cDLRM's CPU work on a modelled host (`--host`): the prefetcher's search
//! for a window's unique rows and its gathers, the occupancy tables'
//! look-ups, the coherent re-reads and the write-backs, each as work of the
//! [`crate::host`] model, so that with a modelled host no time of `cdlrm`
//! depends on the machine that runs it.
//!
//! The rules (`docs/host.md`): finding the unique rows is SCARS's host
//! coalesce (the window's lookups sorted by radix passes, the unique ones
//! kept); a gather or a re-read copies each row with its optimizer state,
//! read at random and written in order, a row in the cache with the chance
//! a row of the table has (each is read once a window); a row's occupancy
//! look-up reads its set's tags (`ways` 4-byte tags, at random; the whole
//! occupancy table in the cache if it fits); a write-back is a scatter of
//! the rows with their state (read and written at random). Gathers and
//! look-ups take the gather-reduce's factor (1), write-backs the
//! scatter's. The tables share the cache as they do in the other modes.

use std::sync::Arc;

use nmpsim_traces::Batch;

use crate::host::{CpuPrimitive, HostConfig, LINE_BYTES, PrimitiveWork};

/// One table as the model sees it.
#[derive(Clone, Copy, Debug)]
pub struct TableInfo {
    pub num_rows: u64,
    pub dim: usize,
    pub state_values: usize,
    /// The cache's ways a set (its tags a look-up reads) and its sets.
    pub ways: u32,
    pub sets: u64,
}

/// The modelled host's times of cDLRM's CPU work over its tables.
#[derive(Clone, Debug)]
pub struct HostWork {
    pub host: Arc<HostConfig>,
    pub tables: Vec<TableInfo>,
}

impl HostWork {
    /// Each table's share of the last-level cache, bytes.
    fn llc(&self) -> u64 {
        self.host.llc_bytes() / self.tables.len().max(1) as u64
    }

    /// The chance that one row of table `t`, read once, is in its share of
    /// the cache.
    fn row_chance(&self, t: usize) -> f64 {
        let i = &self.tables[t];
        let row = ((i.dim + i.state_values) as u64 * 4).max(1);
        (self.llc() as f64 / (i.num_rows.max(1) * row) as f64).min(1.0)
    }

    /// The detail a timeline entry of this work carries.
    pub fn detail(&self, what: &str) -> String {
        format!("cpu (host {}: {what})", self.host.name)
    }

    /// Finding `window`'s unique rows, `unique[t]` of table `t`, ns.
    pub fn find_unique_ns(&self, window: &[Batch], unique: &[usize]) -> f64 {
        self.tables
            .iter()
            .enumerate()
            .map(|(t, info)| {
                let n: usize = window.iter().map(|b| b.tables[t].indices.len()).sum();
                let w = crate::host::unique_rows_work(
                    n,
                    info.num_rows,
                    unique.get(t).copied().unwrap_or(0),
                    0,
                    0,
                );
                self.host.time_ns(&w)
            })
            .sum()
    }

    /// The work of copying `rows` rows of table `t` with their state out
    /// of the host table: read at random, written in order.
    pub fn copy_work(&self, t: usize, rows: usize) -> PrimitiveWork {
        let i = &self.tables[t];
        let values = (i.dim + i.state_values) as u64;
        let lines = (i.dim as u64 * 4).div_ceil(LINE_BYTES)
            + (i.state_values as u64 * 4).div_ceil(LINE_BYTES);
        PrimitiveWork {
            stream_bytes: rows as u64 * values * 4,
            sort_bytes: 0,
            sort_llc_share: 0.0,
            random_lines: rows as u64 * lines,
            llc_hit_share: self.row_chance(t),
            calls: u32::from(rows > 0),
            items: rows as u64,
        }
    }

    /// Copying `rows[t]` rows of each table `t` out of the host tables, ns.
    pub fn copy_ns(&self, rows: &[usize]) -> f64 {
        per_table(rows, |t, r| self.host.time_ns(&self.copy_work(t, r)))
    }

    /// The work of `rows` occupancy look-ups in table `t`'s tags.
    pub fn look_up_work(&self, t: usize, rows: usize) -> PrimitiveWork {
        let i = &self.tables[t];
        let tags = u64::from(i.ways) * 4;
        let all = i.sets * tags;
        PrimitiveWork {
            stream_bytes: 0,
            sort_bytes: 0,
            sort_llc_share: 0.0,
            random_lines: rows as u64 * tags.div_ceil(LINE_BYTES),
            llc_hit_share: if all == 0 {
                1.0
            } else {
                (self.llc() as f64 / all as f64).min(1.0)
            },
            calls: u32::from(rows > 0),
            items: rows as u64,
        }
    }

    /// The occupancy tables' look-ups of `rows[t]` rows of each table, ns.
    pub fn look_up_ns(&self, rows: &[usize]) -> f64 {
        per_table(rows, |t, r| self.host.time_ns(&self.look_up_work(t, r)))
    }

    /// The work of writing `rows` rows of table `t` with their state back.
    pub fn write_back_work(&self, t: usize, rows: usize) -> PrimitiveWork {
        let i = &self.tables[t];
        let mut w = crate::host::scatter_work(rows, i.dim, i.state_values, self.row_chance(t));
        w.calls = u32::from(rows > 0);
        w
    }

    /// Writing `rows[t]` rows of each table `t` back, ns.
    pub fn write_back_ns(&self, rows: &[usize]) -> f64 {
        per_table(rows, |t, r| {
            self.host
                .primitive_time_ns(CpuPrimitive::Scatter, &self.write_back_work(t, r))
        })
    }
}

/// `time(t, rows[t])` summed over the tables `t`.
fn per_table(rows: &[usize], time: impl Fn(usize, usize) -> f64) -> f64 {
    rows.iter().enumerate().map(|(t, &r)| time(t, r)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(host: &str) -> HostWork {
        let info = TableInfo {
            num_rows: 1_000_000,
            dim: 64,
            state_values: 1,
            ways: 16,
            sets: 50_021,
        };
        HostWork {
            host: Arc::new(HostConfig::preset(host).unwrap()),
            tables: vec![info; 4],
        }
    }

    #[test]
    fn no_rows_cost_nothing_and_more_rows_cost_more() {
        let w = work("dgx1");
        assert_eq!(w.copy_ns(&[0, 0, 0, 0]), 0.0);
        assert_eq!(w.look_up_ns(&[0; 4]), 0.0);
        assert_eq!(w.write_back_ns(&[0; 4]), 0.0);
        for f in [
            HostWork::copy_ns,
            HostWork::look_up_ns,
            HostWork::write_back_ns,
        ] {
            let a = f(&w, &[1000, 0, 0, 0]);
            let b = f(&w, &[1000, 1000, 0, 0]);
            let c = f(&w, &[4000, 1000, 0, 0]);
            assert!(a > 0.0 && b > a && c > b, "{a} {b} {c}");
        }
    }

    #[test]
    fn a_copy_reads_each_row_and_its_state_once() {
        let w = work("dgx1");
        let c = w.copy_work(0, 10);
        // A 256 B row is 4 lines, its 4 B state one more.
        assert_eq!(c.random_lines, 50);
        assert_eq!(c.stream_bytes, 10 * 65 * 4);
        // A look-up reads one set's 16 tags: one line.
        assert_eq!(w.look_up_work(0, 10).random_lines, 10);
        // A write-back reads and writes the row and its state.
        assert_eq!(w.write_back_work(0, 10).random_lines, 100);
    }

    #[test]
    fn a_bigger_host_is_never_slower() {
        let (small, big) = (work("dgx1"), work("spr-2s"));
        let rows = [5000, 3000, 100, 0];
        assert!(big.copy_ns(&rows) <= small.copy_ns(&rows));
        assert!(big.look_up_ns(&rows) <= small.look_up_ns(&rows));
        assert!(big.write_back_ns(&rows) <= small.write_back_ns(&rows));
    }
}
