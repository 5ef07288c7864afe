//! `impl Backend for CudaBackend`: every primitive on host data, checked as
//! the CPU function of the same name checks it; the inputs are copied to
//! the device, the kernels run, and the results are copied back.

use nmpsim_traces::TableBatch;

use super::CudaBackend;
use crate::backend::Backend;
use crate::cast::Casted;
use crate::coalesce::{CoalesceTraffic, Coalesced, check_expanded};
use crate::error::{KernelError, check_batch};
use crate::gather::{Expanded, check_expand_inputs, check_gather_inputs, check_pooling};
use crate::optimizer::{Optimizer, OptimizerState, check_scatter};
use crate::pooling::Pooling;
use crate::radix::check_keys;
use crate::table::EmbeddingTable;
use crate::traffic::{
    Traffic, coalesce_accumulate_traffic, expand_traffic, gather_reduce_traffic, scatter_traffic,
    sort_pairs_traffic, tensor_cast_traffic,
};

impl Backend for CudaBackend {
    fn name(&self) -> &str {
        "cuda"
    }

    fn gather_reduce(
        &self,
        table: &EmbeddingTable,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Vec<f32>, Traffic), KernelError> {
        check_gather_inputs(table, batch, pooling)?;
        let dim = table.dim;
        let bags = batch.batch_size();
        let n = batch.num_lookups();
        let traffic = gather_reduce_traffic(n, bags, dim, pooling == Pooling::WeightedSum);
        if bags == 0 {
            return Ok((Vec::new(), traffic));
        }
        let d_table = self.upload(&table.data)?;
        let d_idx = self.upload(&batch.indices)?;
        let d_off = self.upload(&batch.offsets)?;
        let d_w = match (pooling, batch.weights.as_deref()) {
            (Pooling::WeightedSum, Some(w)) => self.upload(w)?,
            _ => self.zeros::<f32>(1)?,
        };
        let mut d_out = self.zeros::<f32>(bags * dim)?;
        self.launch_gather_reduce(
            &d_table, dim, &d_idx, &d_off, &d_w, bags, pooling, &mut d_out,
        )?;
        Ok((self.download(&d_out, bags * dim)?, traffic))
    }

    fn expand(
        &self,
        grad_out: &[f32],
        dim: usize,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Expanded, Traffic), KernelError> {
        check_expand_inputs(grad_out, dim, batch, pooling)?;
        let bags = batch.batch_size();
        let n = batch.num_lookups();
        let traffic = expand_traffic(n, dim, pooling == Pooling::WeightedSum);
        let mut out = Expanded {
            src: batch.indices.clone(),
            dim,
            grads: Vec::new(),
        };
        if n == 0 {
            return Ok((out, traffic));
        }
        let d_g = self.upload(grad_out)?;
        let d_off = self.upload(&batch.offsets)?;
        let d_w = match (pooling, batch.weights.as_deref()) {
            (Pooling::WeightedSum, Some(w)) => self.upload(w)?,
            _ => self.zeros::<f32>(1)?,
        };
        let d_out = self.launch_expand(&d_g, dim, &d_off, &d_w, bags, n, pooling)?;
        out.grads = self.download(&d_out, n * dim)?;
        Ok((out, traffic))
    }

    fn coalesce(
        &self,
        expanded: &Expanded,
        num_rows: u64,
    ) -> Result<(Coalesced, CoalesceTraffic), KernelError> {
        // The checks of `coalesce_into`, then those of `radix::sort_pairs`.
        check_expanded(expanded)?;
        let (dim, n) = (expanded.dim, expanded.src.len());
        check_keys(&expanded.src, num_rows)?;
        let traffic = |unique| CoalesceTraffic {
            sort: sort_pairs_traffic(n, num_rows),
            accumulate: coalesce_accumulate_traffic(n, unique, dim),
        };
        if n == 0 {
            let empty = Coalesced::empty(dim);
            return Ok((empty, traffic(0)));
        }
        let d_src = self.upload(&expanded.src)?;
        let d_grads = self.upload(&expanded.grads)?;
        let (d_rows, unique, d_out) = self.coalesce_device(d_src, &d_grads, n, dim, num_rows)?;
        let rows = self.download(&d_rows, unique)?;
        let grads = self.download(&d_out, unique * dim)?;
        Ok((Coalesced { rows, dim, grads }, traffic(unique)))
    }

    fn tensor_cast(
        &self,
        batch: &TableBatch,
        pooling: Pooling,
    ) -> Result<(Casted, Traffic), KernelError> {
        check_batch(batch)?;
        check_pooling(batch, pooling)?;
        let n = batch.num_lookups();
        let bags = batch.batch_size();
        let traffic =
            |unique| tensor_cast_traffic(n, bags, unique, batch.num_rows, pooling.scaled());
        if n == 0 {
            let empty = Casted {
                casted_src: Vec::new(),
                casted_dst: Vec::new(),
                unique_rows: Vec::new(),
                scale: pooling.scaled().then(Vec::new),
                num_bags: bags,
            };
            return Ok((empty, traffic(0)));
        }
        let d_idx = self.upload(&batch.indices)?;
        let d_off = self.upload(&batch.offsets)?;
        let d_w = match (pooling, batch.weights.as_deref()) {
            (Pooling::WeightedSum, Some(w)) => Some(self.upload(w)?),
            _ => None,
        };
        let c = self.enqueue_cast(d_idx, &d_off, d_w.as_ref(), batch, pooling)?;
        self.finish_cast(c)
    }

    fn casted_gather_reduce(
        &self,
        casted: &Casted,
        grad_out: &[f32],
        dim: usize,
    ) -> Result<(Coalesced, Traffic), KernelError> {
        let mut staged = self.stage_casted(casted, grad_out, dim)?;
        let traffic = staged.traffic();
        if staged.out.unique == 0 {
            return Ok((Coalesced::empty(dim), traffic));
        }
        self.casted_gather_reduce_staged(&mut staged)?;
        Ok((self.download_coalesced(&staged.out)?, traffic))
    }

    fn scatter_update(
        &self,
        table: &mut EmbeddingTable,
        state: &mut OptimizerState,
        grads: &Coalesced,
        optimizer: &Optimizer,
    ) -> Result<Traffic, KernelError> {
        let (dim, per_row) = check_scatter(table, state, grads, optimizer)?;
        let unique = grads.rows.len();
        let traffic = scatter_traffic(unique, dim, per_row);
        if unique == 0 {
            return Ok(traffic);
        }
        let mut d_table = self.upload(&table.data)?;
        let mut d_state = self.upload(&state.values)?;
        let staged = self.stage_coalesced(grads)?;
        self.launch_scatter(&mut d_table, &mut d_state, &staged, optimizer)?;
        self.download_into(&d_table, &mut table.data)?;
        if per_row > 0 {
            self.download_into(&d_state, &mut state.values)?;
        }
        Ok(traffic)
    }

    fn runs_tt(&self) -> bool {
        true
    }

    fn tt_gather_reduce(
        &self,
        table: &crate::tt::TtTable,
        batch: &TableBatch,
        pooling: Pooling,
        reuse: bool,
    ) -> Result<Vec<f32>, KernelError> {
        let none = crate::tt::TtState {
            values: Default::default(),
        };
        let d = self.upload_tt(table, &none)?;
        Ok(self.tt_gather_reduce_timed(&d, batch, pooling, reuse)?.0)
    }

    fn tt_core_grads(
        &self,
        table: &crate::tt::TtTable,
        batch: &TableBatch,
        grad_out: &[f32],
        pooling: Pooling,
    ) -> Result<crate::tt::TtGrads, KernelError> {
        let none = crate::tt::TtState {
            values: Default::default(),
        };
        let d = self.upload_tt(table, &none)?;
        Ok(self.tt_core_grads_timed(&d, batch, grad_out, pooling)?.0)
    }
}
