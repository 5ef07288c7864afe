//! cDLRM's embedding cache of one table (Sec. 5.2.1): `sets x ways` slots
//! of a row with its optimizer state, the occupancy table (the slots' tags,
//! kept on the host), the entries pinned for the current look-ahead window,
//! random way selection with colliding misses resolved at random, and the
//! rows evicted to make room, queued for write-back.

use nmpsim_traces::Rng;

use crate::DlrmError;

/// The paper's set limit `L`: a table of at most this many rows is held
/// whole; a larger one gets `NextPrime(L)` sets.
pub const DEFAULT_SETS: u64 = 50_000;
/// The paper's ways per set.
pub const DEFAULT_WAYS: u32 = 16;

/// A slot no row occupies.
const EMPTY: u32 = u32::MAX;

/// The smallest prime at least `x` (2 for `x <= 2`). Trial division by
/// 6k ± 1 up to the square root: by Bertrand's postulate a prime lies below
/// `2x`, and for the set counts in use (below 2^32) the search is short.
pub fn next_prime(x: u64) -> u64 {
    let is_prime = |n: u64| {
        if n < 4 {
            return n >= 2;
        }
        if n % 2 == 0 || n % 3 == 0 {
            return false;
        }
        let mut d = 5u64;
        while d.saturating_mul(d) <= n {
            if n % d == 0 || n % (d + 2) == 0 {
                return false;
            }
            d += 6;
        }
        true
    };
    let mut n = x.max(2);
    while !is_prime(n) {
        n += 1;
    }
    n
}

/// A table's cache shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Geometry {
    pub sets: u64,
    pub ways: u32,
}

impl Geometry {
    /// The paper's shape for a table of `rows`: the whole table,
    /// direct-mapped (`sets = rows`, one way), when `rows <= limit`;
    /// otherwise `NextPrime(limit)` sets of `ways`.
    pub fn for_table(rows: u64, limit: u64, ways: u32) -> Result<Geometry, DlrmError> {
        if ways == 0 {
            return Err(DlrmError::Config(
                "--ways 0: a cache set needs at least 1 way".into(),
            ));
        }
        if limit == 0 {
            return Err(DlrmError::Config(
                "--cache-sets 0: a cache needs at least 1 set".into(),
            ));
        }
        if rows <= limit {
            return Ok(Geometry {
                sets: rows.max(1),
                ways: 1,
            });
        }
        let sets = next_prime(limit);
        if sets.saturating_mul(ways as u64) > u32::MAX as u64 {
            return Err(DlrmError::Config(format!(
                "--cache-sets {limit} --ways {ways}: {sets} sets of {ways} ways exceed 2^32 slots"
            )));
        }
        Ok(Geometry { sets, ways })
    }

    /// Slots in the cache.
    pub fn slots(&self) -> u64 {
        self.sets * self.ways as u64
    }

    /// The set of `row`: `row % sets`.
    pub fn set_of(&self, row: u32) -> u64 {
        row as u64 % self.sets
    }

    /// Bytes of the cache's rows and their optimizer state.
    pub fn bytes(&self, dim: usize, state_per_row: usize) -> u64 {
        self.slots() * (dim + state_per_row) as u64 * 4
    }
}

/// Rows on their way back to the host table: their values and optimizer
/// state, in the order they left.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteBack {
    pub rows: Vec<u32>,
    pub values: Vec<f32>,
    pub state: Vec<f32>,
}

impl WriteBack {
    pub fn push(&mut self, row: u32, values: &[f32], state: &[f32]) {
        self.rows.push(row);
        self.values.extend_from_slice(values);
        self.state.extend_from_slice(state);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Writes every queued row into `values` (`dim` per row) and `state`
    /// (`per_row` per row) of the host table, in order, and empties the
    /// queue; calls `written(row)` for each.
    pub fn drain_into(
        &mut self,
        values: &mut [f32],
        state: &mut [f32],
        dim: usize,
        per_row: usize,
        mut written: impl FnMut(u32),
    ) {
        for (i, &r) in self.rows.iter().enumerate() {
            let r = r as usize;
            values[r * dim..(r + 1) * dim].copy_from_slice(&self.values[i * dim..(i + 1) * dim]);
            state[r * per_row..(r + 1) * per_row]
                .copy_from_slice(&self.state[i * per_row..(i + 1) * per_row]);
            written(r as u32);
        }
        self.rows.clear();
        self.values.clear();
        self.state.clear();
    }
}

/// What one window's install did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Install {
    /// Rows already in the cache (pinned for the window).
    pub hits: u64,
    /// Rows placed in the cache.
    pub installed: u64,
    /// Occupied slots a placed row took (their rows queued for write-back).
    pub evicted: u64,
    /// Positions (in the window's rows) that found no slot: every way of
    /// their set pinned, or another miss won the way they drew. They are
    /// served through the victim table.
    pub victims: Vec<usize>,
}

/// A row placed by a window's install: its slot, its position in the
/// window's rows, and the row it displaces (`EMPTY`: none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Move {
    pub slot: usize,
    pub row: usize,
    old: u32,
}

/// A window's install as decided on the occupancy table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub install: Install,
    pub moves: Vec<Move>,
}

/// One table's cache.
#[derive(Clone, Debug)]
pub struct TableCache {
    pub geometry: Geometry,
    dim: usize,
    per_row: usize,
    /// The occupancy table: the row in each slot, `EMPTY` if none.
    tags: Vec<u32>,
    values: Vec<f32>,
    state: Vec<f32>,
    /// The window each slot is pinned for.
    pinned: Vec<u64>,
    window: u64,
    rng: Rng,
}

impl TableCache {
    /// An empty cache of `geometry` for rows of `dim` values and `per_row`
    /// optimizer-state values; `seed` seeds the way selection.
    pub fn new(
        geometry: Geometry,
        dim: usize,
        per_row: usize,
        seed: u64,
    ) -> Result<Self, DlrmError> {
        let slots = usize::try_from(geometry.slots())
            .map_err(|_| DlrmError::Config(format!("{} cache slots", geometry.slots())))?;
        Ok(TableCache {
            geometry,
            dim,
            per_row,
            tags: vec![EMPTY; slots],
            values: vec![0.0; slots * dim],
            state: vec![0.0; slots * per_row],
            pinned: vec![0; slots],
            window: 0,
            rng: Rng::new(seed),
        })
    }

    /// The slot holding `row`, if any (a look-up of the occupancy table).
    pub fn slot_of(&self, row: u32) -> Option<usize> {
        let ways = self.geometry.ways as usize;
        let base = self.geometry.set_of(row) as usize * ways;
        (base..base + ways).find(|&s| self.tags[s] == row)
    }

    /// Whether `slot` is pinned for the current window.
    pub fn is_pinned(&self, slot: usize) -> bool {
        self.window > 0 && self.pinned[slot] == self.window
    }

    /// The row in `slot`, if any.
    pub fn row_in(&self, slot: usize) -> Option<u32> {
        (self.tags[slot] != EMPTY).then_some(self.tags[slot])
    }

    /// The values and optimizer state of `slot`.
    pub fn slot(&self, slot: usize) -> (&[f32], &[f32]) {
        let (d, p) = (self.dim, self.per_row);
        (
            &self.values[slot * d..(slot + 1) * d],
            &self.state[slot * p..(slot + 1) * p],
        )
    }

    /// The values and optimizer state of `slot`, to update.
    pub fn slot_mut(&mut self, slot: usize) -> (&mut [f32], &mut [f32]) {
        let (d, p) = (self.dim, self.per_row);
        (
            &mut self.values[slot * d..(slot + 1) * d],
            &mut self.state[slot * p..(slot + 1) * p],
        )
    }

    /// Rows held now.
    pub fn occupied(&self) -> usize {
        self.tags.iter().filter(|&&t| t != EMPTY).count()
    }

    /// Installs a new window's unique rows `rows` (strictly ascending),
    /// whose values and state the prefetcher fetched (`values`: `dim` per
    /// row, `state`: `per_row` per row): [`TableCache::plan`], then
    /// [`TableCache::apply`].
    pub fn install(
        &mut self,
        rows: &[u32],
        values: &[f32],
        state: &[f32],
        wb: &mut WriteBack,
    ) -> Install {
        let plan = self.plan(rows);
        self.apply(&plan, rows, values, state, wb);
        plan.install
    }

    /// The caching step's decisions for a new window's unique rows `rows`
    /// (strictly ascending), made on the occupancy table alone (the host's
    /// part, Sec. 5.2.1): the previous window's pins are released; rows
    /// already held are pinned; every other row draws a uniformly random
    /// unpinned way of its set, all draws made against the set as it is
    /// after the hits, and where several rows drew one way a random one of
    /// them takes it (the tags and pins are updated for it). The rest are
    /// the window's conflict victims.
    pub fn plan(&mut self, rows: &[u32]) -> Plan {
        debug_assert!(rows.windows(2).all(|w| w[0] < w[1]));
        self.window += 1;
        let w = self.window;
        let ways = self.geometry.ways as usize;
        let mut out = Plan::default();
        let mut misses = Vec::new();
        for (i, &r) in rows.iter().enumerate() {
            match self.slot_of(r) {
                Some(s) => {
                    self.pinned[s] = w;
                    out.install.hits += 1;
                }
                None => misses.push(i),
            }
        }
        // Every miss draws at once, from the ways the hits left unpinned.
        let mut claims: Vec<(usize, usize)> = Vec::with_capacity(misses.len());
        let mut free = Vec::with_capacity(ways);
        for &i in &misses {
            let base = self.geometry.set_of(rows[i]) as usize * ways;
            free.clear();
            free.extend((base..base + ways).filter(|&s| self.pinned[s] != w));
            if free.is_empty() {
                out.install.victims.push(i);
            } else {
                claims.push((free[self.rng.below(free.len() as u64) as usize], i));
            }
        }
        claims.sort_by_key(|&(s, _)| s);
        for group in claims.chunk_by(|a, b| a.0 == b.0) {
            let winner = self.rng.below(group.len() as u64) as usize;
            let (slot, i) = group[winner];
            out.install.victims.extend(
                group
                    .iter()
                    .enumerate()
                    .filter(|&(k, _)| k != winner)
                    .map(|(_, c)| c.1),
            );
            let old = self.tags[slot];
            if old != EMPTY {
                out.install.evicted += 1;
            }
            out.moves.push(Move { slot, row: i, old });
            self.tags[slot] = rows[i];
            self.pinned[slot] = w;
            out.install.installed += 1;
        }
        out.install.victims.sort_unstable();
        out
    }

    /// Carries out `plan` (made by [`TableCache::plan`] for `rows`): each
    /// displaced row's values and state into `wb`, each placed row's
    /// fetched values and state into its slot (the device's part).
    pub fn apply(
        &mut self,
        plan: &Plan,
        rows: &[u32],
        values: &[f32],
        state: &[f32],
        wb: &mut WriteBack,
    ) {
        let (d, p) = (self.dim, self.per_row);
        for m in &plan.moves {
            let slot = m.slot;
            debug_assert_eq!(self.tags[slot], rows[m.row]);
            if m.old != EMPTY {
                wb.push(
                    m.old,
                    &self.values[slot * d..(slot + 1) * d],
                    &self.state[slot * p..(slot + 1) * p],
                );
            }
            let i = m.row;
            self.values[slot * d..(slot + 1) * d].copy_from_slice(&values[i * d..(i + 1) * d]);
            self.state[slot * p..(slot + 1) * p].copy_from_slice(&state[i * p..(i + 1) * p]);
        }
    }

    /// Empties the cache, every held row into `wb` (the end of training).
    pub fn flush(&mut self, wb: &mut WriteBack) {
        let (d, p) = (self.dim, self.per_row);
        for slot in 0..self.tags.len() {
            if self.tags[slot] != EMPTY {
                wb.push(
                    self.tags[slot],
                    &self.values[slot * d..(slot + 1) * d],
                    &self.state[slot * p..(slot + 1) * p],
                );
                self.tags[slot] = EMPTY;
            }
        }
    }
}
