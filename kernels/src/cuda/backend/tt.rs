//! Eff-TT tables on the device (EL-Rec, `crate::tt`): the three cores and an
//! optimizer's state resident ([`DeviceTt`]), the forward gather-reduce with
//! or without batch-level reuse, and the backward aggregated in advance with
//! the update fused, each timed with CUDA events around its kernels alone.
//!
//! The host finds the batch's structure, as the CPU code does, and copies it
//! to the device before the timed region: the distinct prefixes and each
//! lookup's slot (forward); the prefix groups of the unique rows, and per
//! core the touched slices and which groups or rows add into each
//! (backward). The device computes every product and sum, in the CPU code's
//! order (`embedding.cu`, last section), so on the same inputs the forward
//! equals [`crate::tt::tt_gather_reduce`] bit for bit. The backward's
//! in-advance aggregation is this backend's expand and coalesce (timed
//! too), whose sums may round apart from the CPU's casted gather-reduce, so
//! the updated cores agree to rounding, not bit for bit.

use std::collections::BTreeMap;

use cudarc::driver::{CudaFunction, CudaSlice, PushKernelArg};
use nmpsim_traces::TableBatch;

use super::{
    CudaBackend, DeviceCoalesced, K_TT_GRAD_FIRST, K_TT_GRAD_LAST, K_TT_GRAD_PREFIX, K_TT_POOL,
    K_TT_PREFIX, K_TT_REDUCE, grid, pooling_mode, source,
};
use crate::cuda::driver_err;
use crate::error::KernelError;
use crate::optimizer::Optimizer;
use crate::pooling::Pooling;
use crate::tt::{CORES, TtGrads, TtShape, TtState, TtTable};

/// A TT table's cores and its optimizer's state on the device.
pub struct DeviceTt {
    shape: TtShape,
    cores: [CudaSlice<f32>; CORES],
    /// One value per core value (Adagrad, RMSprop), or a dummy (SGD).
    state: [CudaSlice<f32>; CORES],
    stateful: bool,
}

impl DeviceTt {
    pub fn shape(&self) -> &TtShape {
        &self.shape
    }
}

impl std::fmt::Debug for DeviceTt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceTt")
            .field("shape", &self.shape)
            .field("stateful", &self.stateful)
            .finish()
    }
}

/// The state's values of core `k`, checked against the core.
fn state_of<'a>(
    table: &TtTable,
    state: &'a TtState,
    k: usize,
) -> Result<Option<&'a [f32]>, KernelError> {
    let v = &state.values[k];
    if v.is_empty() {
        return Ok(None);
    }
    if v.len() != table.cores[k].len() {
        return Err(KernelError::shape(
            "state",
            v.len(),
            format!("core {k}'s {} values", table.cores[k].len()),
        ));
    }
    Ok(Some(v))
}

/// The forward's prefixes: `(i1, i2)` of each computed prefix product, and
/// each lookup's slot among them. With reuse, the distinct prefixes of the
/// batch (in the CPU's order of reuse keys `i2 m_1 + i1`); without, one per
/// lookup.
fn forward_prefixes(s: &TtShape, indices: &[u32], reuse: bool) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    if !reuse {
        let (p1, p2) = indices
            .iter()
            .map(|&r| {
                let [i1, i2, _] = s.split(r);
                (i1, i2)
            })
            .unzip();
        return (p1, p2, (0..indices.len() as u32).collect());
    }
    let (keys, slots) = crate::tt::forward::prefixes(s, indices);
    let (p1, p2) = keys
        .iter()
        .map(|&k| crate::tt::forward::key_prefix(s, k))
        .unzip();
    (p1, p2, slots)
}

/// The backward's structure over the unique rows (ascending): the groups of
/// rows sharing a prefix (`gstart`, CSR), each row's group, each group's
/// `(i1, i2)`, and per core the touched slices with, CSR, the groups (cores
/// 0 and 1) or rows (core 2) that add into each, in order.
struct Groups {
    gstart: Vec<u32>,
    ugroup: Vec<u32>,
    g1: Vec<u32>,
    g2: Vec<u32>,
    /// Per core: (touched slices, cstart, from).
    slices: [(Vec<u32>, Vec<u32>, Vec<u32>); CORES],
}

fn groups_of(s: &TtShape, rows: &[u32]) -> Groups {
    let groups = crate::tt::backward::prefix_groups(s, rows);
    let (mut gstart, mut ugroup, mut g1, mut g2) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (g, &(a, b)) in groups.iter().enumerate() {
        gstart.push(a as u32);
        let [i1, i2, _] = s.split(rows[a]);
        g1.push(i1);
        g2.push(i2);
        ugroup.extend(std::iter::repeat_n(g as u32, b - a));
    }
    gstart.push(rows.len() as u32);
    let csr = |by: BTreeMap<u32, Vec<u32>>| {
        let (mut touched, mut cstart, mut from) = (Vec::new(), vec![0u32], Vec::new());
        for (slice, v) in by {
            touched.push(slice);
            from.extend(v);
            cstart.push(from.len() as u32);
        }
        (touched, cstart, from)
    };
    let mut by: [BTreeMap<u32, Vec<u32>>; CORES] = Default::default();
    for (g, (&a, &b)) in g1.iter().zip(&g2).enumerate() {
        by[0].entry(a).or_default().push(g as u32);
        by[1].entry(b).or_default().push(g as u32);
    }
    for (u, &r) in rows.iter().enumerate() {
        by[2].entry(s.split(r)[2]).or_default().push(u as u32);
    }
    let [b0, b1, b2] = by;
    Groups {
        gstart,
        ugroup,
        g1,
        g2,
        slices: [csr(b0), csr(b1), csr(b2)],
    }
}

impl CudaBackend {
    /// Copies a TT table's cores and `state` to the device.
    pub fn upload_tt(&self, table: &TtTable, state: &TtState) -> Result<DeviceTt, KernelError> {
        let mut st = Vec::with_capacity(CORES);
        let mut stateful = None;
        for k in 0..CORES {
            let v = state_of(table, state, k)?;
            if *stateful.get_or_insert(v.is_some()) != v.is_some() {
                return Err(KernelError::invalid(
                    "state",
                    "some cores have optimizer state and others none",
                ));
            }
            st.push(match v {
                Some(v) => self.upload(v)?,
                None => self.zeros::<f32>(1)?,
            });
        }
        let cores = [0, 1, 2].map(|k| self.upload(&table.cores[k]));
        let [c0, c1, c2] = cores;
        let [s0, s1, s2]: [CudaSlice<f32>; CORES] = st.try_into().expect("three cores");
        self.sync()?;
        Ok(DeviceTt {
            shape: table.shape,
            cores: [c0?, c1?, c2?],
            state: [s0, s1, s2],
            stateful: stateful.unwrap_or(false),
        })
    }

    /// Copies `table`'s cores and `state` into `d` (same shape, no
    /// allocation): the device copy of a table that changed on the host.
    pub fn refresh_tt(
        &self,
        d: &mut DeviceTt,
        table: &TtTable,
        state: &TtState,
    ) -> Result<(), KernelError> {
        if table.shape != d.shape {
            return Err(KernelError::shape(
                "table",
                format!("{:?}", table.shape),
                format!("the device table's {:?}", d.shape),
            ));
        }
        for k in 0..CORES {
            self.stream
                .memcpy_htod(&table.cores[k], &mut d.cores[k])
                .map_err(driver_err("copying a TT core to the device"))?;
            match (state_of(table, state, k)?, d.stateful) {
                (Some(v), true) => self
                    .stream
                    .memcpy_htod(v, &mut d.state[k])
                    .map_err(driver_err("copying a TT core's state to the device"))?,
                (None, false) => {}
                _ => {
                    return Err(KernelError::invalid(
                        "state",
                        "the optimizer state differs in kind from the device table's",
                    ));
                }
            }
        }
        self.sync()
    }

    /// The device table's cores and state, on the host.
    pub fn download_tt(&self, d: &DeviceTt) -> Result<(TtTable, TtState), KernelError> {
        let mut t = TtTable::zeros(d.shape);
        let mut values: [Vec<f32>; CORES] = Default::default();
        for (k, (core, v)) in t.cores.iter_mut().zip(&mut values).enumerate() {
            *core = self.download(&d.cores[k], d.shape.core_len(k))?;
            if d.stateful {
                *v = self.download(&d.state[k], d.shape.core_len(k))?;
            }
        }
        Ok((t, TtState { values }))
    }

    /// The TT forward of `batch` on `d` (`bags x dim`, as
    /// [`crate::tt::tt_gather_reduce`] computes it, bit for bit), and the
    /// milliseconds of its kernels: the prefix products (the batch's
    /// distinct ones with `reuse`, one per lookup without), then a product
    /// per lookup with its last core slice, pooled.
    pub fn tt_gather_reduce_timed(
        &self,
        d: &DeviceTt,
        batch: &TableBatch,
        pooling: Pooling,
        reuse: bool,
    ) -> Result<(Vec<f32>, f64), KernelError> {
        crate::gather::check_lookups(batch, pooling, d.shape.rows)?;
        let s = &d.shape;
        let (bags, n) = (batch.batch_size(), batch.num_lookups());
        if bags == 0 {
            return Ok((Vec::new(), 0.0));
        }
        let [n1, n2, n3] = s.dim_factors.map(|x| x as u64);
        let (r, pr, m3) = (s.ranks[1] as u64, s.prefix_rows() as u64, s.row_factors[2]);
        let (p1, p2, slots) = forward_prefixes(s, &batch.indices, reuse);
        let count = p1.len() as u64;
        let d_p1 = self.upload(&p1)?;
        let d_p2 = self.upload(&p2)?;
        let d_slots = self.upload(&slots)?;
        let d_idx = self.upload(&batch.indices)?;
        let d_off = self.upload(&batch.offsets)?;
        let (d_w, has_w) = match (pooling, batch.weights.as_deref()) {
            (Pooling::WeightedSum, Some(w)) => (self.upload(w)?, 1u64),
            _ => (self.zeros::<f32>(1)?, 0),
        };
        let mut prefix = self.zeros::<f32>(p1.len() * (pr * r) as usize)?;
        let mut out = self.zeros::<f32>(bags * s.dim)?;
        let (n2r, bags64, mode) = (n2 * r, bags as u64, pooling_mode(pooling));
        let c = &d.cores;
        let ms = self.time_ms(|| {
            if n > 0 {
                launch!(
                    self,
                    K_TT_PREFIX,
                    grid(count * n1 * n2r),
                    &c[0],
                    &c[1],
                    &d_p1,
                    &d_p2,
                    &count,
                    &n1,
                    &r,
                    &n2r,
                    &mut prefix
                )?;
            }
            launch!(
                self,
                K_TT_POOL,
                grid(bags64 * s.dim as u64),
                &prefix,
                &d_slots,
                &c[2],
                &d_idx,
                &d_off,
                &d_w,
                &has_w,
                &bags64,
                &pr,
                &r,
                &n3,
                &m3,
                &mode,
                &mut out
            )
        })?;
        Ok((self.download(&out, bags * s.dim)?, ms))
    }

    /// The aggregation of `grad_out` per unique row (this backend's expand
    /// and coalesce, timed: its milliseconds) and the structure of the
    /// chain rule over those rows, on the device; `None` for a batch with
    /// no lookups.
    fn prepare_backward(
        &self,
        d: &DeviceTt,
        batch: &TableBatch,
        grad_out: &[f32],
        pooling: Pooling,
    ) -> Result<(Option<Backward>, f64), KernelError> {
        crate::gather::check_lookups(batch, pooling, d.shape.rows)?;
        let s = d.shape;
        let (coal, ms) = self.expand_coalesce_timed(grad_out, s.dim, batch, pooling)?;
        if coal.rows.is_empty() {
            return Ok((None, ms));
        }
        let g = groups_of(&s, &coal.rows);
        let (groups, unique) = (g.g1.len(), coal.rows.len());
        let lens = [0, 1, 2].map(|k| s.slice_len(k));
        let p = s.prefix_rows() * s.ranks[1];
        let mut csr = Vec::with_capacity(CORES);
        let mut reduced = Vec::with_capacity(CORES);
        for (k, (touched, cstart, from)) in g.slices.iter().enumerate() {
            csr.push((self.upload(cstart)?, self.upload(from)?));
            reduced.push(DeviceCoalesced {
                rows: self.upload(touched)?,
                grads: self.zeros::<f32>(touched.len() * lens[k])?,
                unique: touched.len(),
                dim: lens[k],
                host_rows: touched.clone(),
            });
        }
        Ok((
            Some(Backward {
                rows: self.upload(&coal.rows)?,
                grads: self.upload(&coal.grads)?,
                gstart: self.upload(&g.gstart)?,
                ugroup: self.upload(&g.ugroup)?,
                g1: self.upload(&g.g1)?,
                g2: self.upload(&g.g2)?,
                csr,
                reduced,
                prods: self.zeros::<f32>(groups * p)?,
                dp: self.zeros::<f32>(groups * p)?,
                da: self.zeros::<f32>(groups * lens[0])?,
                db: self.zeros::<f32>(groups * lens[1])?,
                dc: self.zeros::<f32>(unique * lens[2])?,
                groups: groups as u64,
                unique: unique as u64,
            }),
            ms,
        ))
    }

    /// Enqueues the chain rule over `b` on the cores of `d`: the groups'
    /// prefix products, dP, dC2 per row, dC0 and dC1 per group, and each
    /// core's slice gradients summed into `b.reduced`.
    fn enqueue_core_grads(&self, d: &DeviceTt, b: &mut Backward) -> Result<(), KernelError> {
        let s = &d.shape;
        let [n1, n2, n3] = s.dim_factors.map(|x| x as u64);
        let (r, pr, m3) = (s.ranks[1] as u64, s.prefix_rows() as u64, s.row_factors[2]);
        let n2r = n2 * r;
        let lens = [0, 1, 2].map(|k| s.slice_len(k) as u64);
        let (groups, unique) = (b.groups, b.unique);
        let cores = &d.cores;
        launch!(
            self,
            K_TT_PREFIX,
            grid(groups * pr * r),
            &cores[0],
            &cores[1],
            &b.g1,
            &b.g2,
            &groups,
            &n1,
            &r,
            &n2r,
            &mut b.prods
        )?;
        launch!(
            self,
            K_TT_GRAD_PREFIX,
            grid(groups * pr * r),
            &b.grads,
            &b.rows,
            &b.gstart,
            &groups,
            &cores[2],
            &pr,
            &r,
            &n3,
            &m3,
            &mut b.dp
        )?;
        launch!(
            self,
            K_TT_GRAD_LAST,
            grid(unique * lens[2]),
            &b.grads,
            &b.ugroup,
            &unique,
            &b.prods,
            &pr,
            &r,
            &n3,
            &mut b.dc
        )?;
        launch!(
            self,
            K_TT_GRAD_FIRST,
            grid(groups * (lens[0] + lens[1])),
            &b.dp,
            &b.g1,
            &b.g2,
            &groups,
            &cores[0],
            &cores[1],
            &n1,
            &r,
            &n2r,
            &mut b.da,
            &mut b.db
        )?;
        for (k, src) in [&b.da, &b.db, &b.dc].into_iter().enumerate() {
            let (cstart, from) = &b.csr[k];
            let touched = b.reduced[k].unique as u64;
            launch!(
                self,
                K_TT_REDUCE,
                grid(touched * lens[k]),
                src,
                from,
                cstart,
                &touched,
                &lens[k],
                &mut b.reduced[k].grads
            )?;
        }
        Ok(())
    }

    /// The core gradients of `batch` on `d`, aggregated in advance, as
    /// [`crate::tt::tt_core_grads`] computes them (to the rounding of the
    /// aggregation: module docs), and the milliseconds of every kernel, the
    /// aggregation's included.
    pub fn tt_core_grads_timed(
        &self,
        d: &DeviceTt,
        batch: &TableBatch,
        grad_out: &[f32],
        pooling: Pooling,
    ) -> Result<(TtGrads, f64), KernelError> {
        let (prepared, ms_agg) = self.prepare_backward(d, batch, grad_out, pooling)?;
        let mut out = TtGrads::default();
        let Some(mut b) = prepared else {
            return Ok((out, ms_agg));
        };
        let ms = self.time_ms(|| self.enqueue_core_grads(d, &mut b))?;
        for (k, r) in b.reduced.iter().enumerate() {
            out.slices[k] = r.host_rows.clone();
            out.grads[k] = self.download(&r.grads, r.unique * r.dim)?;
        }
        Ok((out, ms_agg + ms))
    }

    /// The TT backward of `batch` on `d` with the update fused, as
    /// [`crate::tt::tt_backward_update`] computes it: the output gradients
    /// `grad_out` (`bags x dim`) aggregated per unique row (this backend's
    /// expand and coalesce), the chain rule once per unique row and prefix,
    /// the slice gradients summed in prefix order and applied with
    /// `optimizer` (the scatter kernel, a core slice standing for a row),
    /// never leaving the device. Returns the milliseconds of every kernel,
    /// the aggregation's included.
    pub fn tt_backward_update_timed(
        &self,
        d: &mut DeviceTt,
        batch: &TableBatch,
        grad_out: &[f32],
        pooling: Pooling,
        optimizer: &Optimizer,
    ) -> Result<f64, KernelError> {
        optimizer.validate()?;
        if matches!(optimizer, Optimizer::RowWiseAdagrad { .. }) {
            return Err(KernelError::invalid(
                "optimizer",
                "row-wise Adagrad is not defined on TT cores; use sgd, adagrad or rms-prop",
            ));
        }
        let stateful = !matches!(optimizer, Optimizer::Sgd { .. });
        if stateful != d.stateful {
            return Err(KernelError::invalid(
                "state",
                format!(
                    "{} needs {} optimizer state on the device table",
                    optimizer.name(),
                    if stateful { "its" } else { "no" }
                ),
            ));
        }
        let (prepared, ms_agg) = self.prepare_backward(d, batch, grad_out, pooling)?;
        let Some(mut b) = prepared else {
            return Ok(ms_agg);
        };
        let ms = self.time_ms(|| {
            self.enqueue_core_grads(d, &mut b)?;
            let DeviceTt { cores, state, .. } = &mut *d;
            for (k, (core, st)) in cores.iter_mut().zip(state.iter_mut()).enumerate() {
                self.launch_scatter(core, st, &b.reduced[k], optimizer)?;
            }
            Ok(())
        })?;
        Ok(ms_agg + ms)
    }
}

/// The TT forward of one table on the device over a set of batches: the
/// median pass of the kernels' time, per batch, with and without reuse.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TtForwardTiming {
    pub reuse_ms: f64,
    pub plain_ms: f64,
    /// Whether every batch's pooled rows equal the CPU's bit for bit (both
    /// forms).
    pub equals_cpu: bool,
}

impl CudaBackend {
    /// Times the TT forward of `table` over `batches` on the device, with
    /// and without reuse (after one untimed pass): per form, the median of
    /// `reps` passes of the kernels' milliseconds summed over the batches,
    /// per batch. The untimed pass compares every batch's pooled rows with
    /// the CPU's.
    pub fn tt_forward_timing(
        &self,
        table: &TtTable,
        batches: &[TableBatch],
        pooling: Pooling,
        reps: usize,
    ) -> Result<TtForwardTiming, KernelError> {
        if batches.is_empty() {
            return Err(KernelError::invalid("batches", "none to time"));
        }
        let none = TtState {
            values: Default::default(),
        };
        let d = self.upload_tt(table, &none)?;
        let mut equals_cpu = true;
        let mut ms = [0.0f64; 2];
        for (k, reuse) in [true, false].into_iter().enumerate() {
            for b in batches {
                let (got, _) = self.tt_gather_reduce_timed(&d, b, pooling, reuse)?;
                let (want, _) = crate::tt::tt_gather_reduce(table, b, pooling, reuse)?;
                equals_cpu &= got
                    .iter()
                    .map(|x| x.to_bits())
                    .eq(want.iter().map(|x| x.to_bits()));
            }
            let mut passes = Vec::with_capacity(reps.max(1));
            for _ in 0..reps.max(1) {
                let mut total = 0.0;
                for b in batches {
                    total += self.tt_gather_reduce_timed(&d, b, pooling, reuse)?.1;
                }
                passes.push(total / batches.len() as f64);
            }
            passes.sort_by(f64::total_cmp);
            ms[k] = passes[passes.len() / 2];
        }
        Ok(TtForwardTiming {
            reuse_ms: ms[0],
            plain_ms: ms[1],
            equals_cpu,
        })
    }
}

/// The device side of one TT backward ([`CudaBackend::prepare_backward`]).
struct Backward {
    rows: CudaSlice<u32>,
    grads: CudaSlice<f32>,
    gstart: CudaSlice<u32>,
    ugroup: CudaSlice<u32>,
    g1: CudaSlice<u32>,
    g2: CudaSlice<u32>,
    /// Per core: (cstart, from).
    csr: Vec<(CudaSlice<u32>, CudaSlice<u32>)>,
    /// Per core: the touched slices and their gradients.
    reduced: Vec<DeviceCoalesced>,
    prods: CudaSlice<f32>,
    dp: CudaSlice<f32>,
    da: CudaSlice<f32>,
    db: CudaSlice<f32>,
    dc: CudaSlice<f32>,
    groups: u64,
    unique: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forward_prefixes_are_the_cpus_and_every_lookup_finds_its_own() {
        let s = TtShape::new(1000, 16, 4).unwrap();
        let rows = [5u32, 17, 5, 999, 18, 400, 17];
        let (p1, p2, slots) = forward_prefixes(&s, &rows, true);
        // As many as the CPU's distinct prefixes, and each lookup's slot
        // holds its own (i1, i2).
        let (keys, cpu_slots) = crate::tt::forward::prefixes(&s, &rows);
        assert_eq!(p1.len(), keys.len());
        assert_eq!(slots, cpu_slots);
        for (l, &r) in rows.iter().enumerate() {
            let [i1, i2, _] = s.split(r);
            assert_eq!((p1[slots[l] as usize], p2[slots[l] as usize]), (i1, i2));
        }
        let (q1, _, own) = forward_prefixes(&s, &rows, false);
        assert_eq!(q1.len(), rows.len());
        assert_eq!(own, (0..rows.len() as u32).collect::<Vec<_>>());
    }

    #[test]
    fn groups_and_slice_lists_follow_the_cpus_prefix_order() {
        let s = TtShape::new(1000, 16, 4).unwrap();
        let m3 = s.row_factors[2] as u32;
        // Unique rows ascending: two in the first prefix, one in the next,
        // two in a later one, two of them on one last-core slice.
        let rows = [1u32, 2, m3 + 1, 5 * m3 + 2, 5 * m3 + 3];
        let g = groups_of(&s, &rows);
        assert_eq!(g.gstart, vec![0, 2, 3, 5]);
        assert_eq!(g.ugroup, vec![0, 0, 1, 2, 2]);
        for (x, &start) in g.gstart[..3].iter().enumerate() {
            let [i1, i2, _] = s.split(rows[start as usize]);
            assert_eq!((g.g1[x], g.g2[x]), (i1, i2));
        }
        // Core 2: slices 1, 2, 3; slice 2 gets rows 1 and 3, in order.
        let (touched, cstart, from) = &g.slices[2];
        assert_eq!(touched, &vec![1, 2, 3]);
        assert_eq!(cstart, &vec![0, 2, 4, 5]);
        assert_eq!(from, &vec![0, 2, 1, 3, 4]);
        // Every group adds into exactly one slice of cores 0 and 1.
        for k in 0..2 {
            assert_eq!(g.slices[k].2.len(), 3);
            assert_eq!(*g.slices[k].1.last().unwrap(), 3);
        }
    }
}
