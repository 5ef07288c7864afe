//! The GPU side when no GPU is present: a roofline model per kernel from a
//! named GPU preset, and the host link (PCIe) it sits on. Every time from
//! here is labelled *modelled*.
//!
//! Peak figures are the vendors' data-sheet numbers; the efficiencies say how
//! much of a peak a well-tuned kernel reaches (cuBLAS SGEMM on large
//! matrices, a streaming kernel on HBM, a large DMA over PCIe) and are the
//! model's assumptions, stated in `docs/dlrm.md`.

use serde::{Deserialize, Serialize};

use crate::DlrmError;
use crate::dense::DenseTimes;

/// One GPU and its host link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuPreset {
    pub name: String,
    /// FP32 (non-tensor-core) peak, TFLOP/s.
    pub fp32_tflops: f64,
    /// Device memory bandwidth, GB/s.
    pub memory_gbps: f64,
    /// Host link (PCIe) bandwidth per direction, GB/s, data-sheet.
    pub host_link_gbps: f64,
    /// Share of `fp32_tflops` a GEMM reaches.
    pub gemm_efficiency: f64,
    /// Share of `memory_gbps` a streaming kernel reaches.
    pub memory_efficiency: f64,
    /// Share of `host_link_gbps` a large copy reaches.
    pub link_efficiency: f64,
    /// Fixed cost of one kernel launch, µs.
    pub launch_us: f64,
    /// Fixed cost of one host-link transfer, µs.
    pub transfer_latency_us: f64,
    /// Share of `memory_gbps` Tensor Casting's kernels reach on their
    /// analytic bytes ([`GpuPreset::casting_ns`]): fitted to the casting time
    /// measured on an H100 ([`CASTING_EFFICIENCY`]), the same on every preset,
    /// so a preset's casting scales with its bandwidth.
    #[serde(default = "casting_efficiency")]
    pub casting_efficiency: f64,
    /// Device memory, GiB (data-sheet): what a strategy may keep there
    /// (cDLRM's caches are refused beyond it).
    #[serde(default)]
    pub memory_gib: f64,
}

/// Tensor Casting's share of the memory bandwidth on its analytic bytes,
/// fitted to one measurement: casting every table of an RM1 batch (10
/// tables of 1M rows, batch 2048, 80 lookups a bag) took 1.36-1.41 ms of
/// kernel time on an H100 80GB HBM3 (`nmpsim train --model rm1 --mode all
/// --device cuda`, 5 device calls, docs/gpu.md). With [`CASTING_FIXED_LAUNCHES`]
/// and the preset's launch cost, this share makes the model give the
/// middle of that range, 1.385 ms. One point fixes one parameter: the model
/// is fitted there, not validated (docs/dlrm.md).
pub const CASTING_EFFICIENCY: f64 = 0.0712;

/// Launches of one table's casting besides the sort's three per radix pass
/// (histogram, scan, scatter): the bag ids, the head flags, their scan (two
/// launches) and the casted outputs.
pub const CASTING_FIXED_LAUNCHES: u32 = 5;

fn casting_efficiency() -> f64 {
    CASTING_EFFICIENCY
}

impl GpuPreset {
    pub const NAMES: [&'static str; 3] = ["v100", "a100", "h100"];

    /// `v100` (the paper's DGX-1 GPU, PCIe gen3 x16), `a100` (SXM4 40 GB, PCIe
    /// gen4), `h100` (SXM5, PCIe gen5).
    pub fn named(name: &str) -> Result<Self, DlrmError> {
        // (v100: the 16 GiB of the DGX-1V the paper cites.)
        let (n, tf, mem, link, gib) = match name.to_ascii_lowercase().as_str() {
            "v100" => ("v100", 15.7, 900.0, 15.75, 16.0),
            "a100" => ("a100", 19.5, 1555.0, 31.5, 40.0),
            "h100" => ("h100", 67.0, 3350.0, 63.0, 80.0),
            _ => {
                return Err(DlrmError::Config(format!(
                    "unknown GPU preset `{name}`; expected one of {}",
                    Self::NAMES.join(", ")
                )));
            }
        };
        Ok(GpuPreset {
            name: n.to_string(),
            fp32_tflops: tf,
            memory_gbps: mem,
            host_link_gbps: link,
            gemm_efficiency: 0.7,
            memory_efficiency: 0.8,
            link_efficiency: 0.8,
            launch_us: 5.0,
            transfer_latency_us: 10.0,
            casting_efficiency: CASTING_EFFICIENCY,
            memory_gib: gib,
        })
    }

    /// Tensor Casting of one table of `num_rows` rows with `lookups`
    /// lookups, whose analytic traffic is `analytic_bytes`
    /// (`nmpsim_kernels::tensor_cast_traffic`): the CUDA backend's radix
    /// passes (8-bit digits; three launches each, and any pass beyond this
    /// crate's CPU radix plan added to the bytes as the traffic counts a
    /// pass), [`CASTING_FIXED_LAUNCHES`] more launches, and the bytes at
    /// [`GpuPreset::casting_efficiency`] of the bandwidth.
    pub fn casting_ns(&self, lookups: usize, num_rows: u64, analytic_bytes: u64) -> f64 {
        let gpu = nmpsim_kernels::radix::gpu_passes(num_rows);
        let cpu = nmpsim_kernels::traffic::radix_passes(num_rows);
        let bytes = analytic_bytes
            + nmpsim_kernels::traffic::radix_pass_bytes(lookups, gpu.saturating_sub(cpu));
        let launches = 3 * gpu + CASTING_FIXED_LAUNCHES;
        launches as f64 * self.launch_us * 1e3
            + bytes as f64 / (self.memory_gbps * self.casting_efficiency)
    }

    /// A kernel doing `flops` over `bytes` of device memory: the slower of
    /// compute and memory, plus a launch.
    pub fn kernel_ns(&self, flops: f64, bytes: f64, compute_efficiency: f64) -> f64 {
        let c = flops / (self.fp32_tflops * 1e3 * compute_efficiency);
        let m = bytes / (self.memory_gbps * self.memory_efficiency);
        c.max(m) + self.launch_us * 1e3
    }

    /// `C (m x n) = A (m x k) B (k x n)` in FP32.
    pub fn gemm_ns(&self, m: usize, k: usize, n: usize) -> f64 {
        let flops = 2.0 * (m * k * n) as f64;
        let bytes = 4.0 * (m * k + k * n + m * n) as f64;
        self.kernel_ns(flops, bytes, self.gemm_efficiency)
    }

    /// An element-wise kernel reading and writing `bytes` in all.
    /// Device memory in bytes.
    pub fn mem_bytes(&self) -> f64 {
        self.memory_gib * (1u64 << 30) as f64
    }

    pub fn stream_ns(&self, bytes: f64) -> f64 {
        self.kernel_ns(0.0, bytes, 1.0)
    }

    /// One copy of `bytes` over the host link.
    pub fn host_transfer_ns(&self, bytes: u64) -> f64 {
        transfer_ns(
            bytes,
            self.host_link_gbps * self.link_efficiency,
            self.transfer_latency_us,
        )
    }
}

/// `bytes` over a link of `gbps` (GB/s = bytes/ns) with a fixed latency.
pub fn transfer_ns(bytes: u64, gbps: f64, latency_us: f64) -> f64 {
    if bytes == 0 {
        return 0.0;
    }
    bytes as f64 / gbps + latency_us * 1e3
}

/// Modelled GPU time of the dense path of one iteration, by part (the
/// optimizer step: one element-wise kernel over the flat parameter buffer,
/// as the CUDA backend runs it), and its flops.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DenseModel {
    #[serde(flatten)]
    pub times: DenseTimes,
    pub flops: f64,
}

impl DenseModel {
    pub fn total_ns(&self) -> f64 {
        let t = &self.times;
        t.bottom_forward_ns
            + t.interaction_forward_ns
            + t.top_forward_ns
            + t.loss_ns
            + t.top_backward_ns
            + t.interaction_backward_ns
            + t.bottom_backward_ns
            + t.step_ns
    }
}

fn mlp_ns(gpu: &GpuPreset, arch: &[usize], batch: usize, input_grad: bool) -> (f64, f64, f64) {
    let (mut f, mut b, mut flops) = (0.0, 0.0, 0.0);
    for (i, w) in arch.windows(2).enumerate() {
        let (k, n) = (w[0], w[1]);
        // Forward: GEMM, then bias + activation in place.
        f += gpu.gemm_ns(batch, k, n) + gpu.stream_ns(8.0 * (batch * n) as f64);
        // Backward: activation mask, dW, db, and dX (not for the first layer
        // of the bottom MLP, whose input, the dense features, needs none).
        b += gpu.stream_ns(12.0 * (batch * n) as f64) + gpu.gemm_ns(n, batch, k);
        b += gpu.stream_ns(4.0 * (batch * n) as f64);
        if i > 0 || input_grad {
            b += gpu.gemm_ns(batch, n, k);
        }
        flops += if i > 0 || input_grad { 6.0 } else { 4.0 } * (batch * k * n) as f64;
    }
    (f, b, flops)
}

/// Weights and biases of an MLP of layer widths `arch`.
pub fn mlp_params(arch: &[usize]) -> usize {
    arch.windows(2).map(|w| w[0] * w[1] + w[1]).sum()
}

/// The dense path of a DLRM (bottom MLP `bottom`, dot or cat interaction of
/// `tables + 1` vectors of width `dim`, top MLP `top` including its input) at
/// batch `batch`, as the GPU would run it. The optimizer step moves
/// `step_bytes_per_param` bytes per MLP parameter (SGD 12: the weight and its
/// gradient read, the weight written; Adagrad 20, with its accumulator read
/// and written).
#[allow(clippy::too_many_arguments)]
pub fn model_dense(
    gpu: &GpuPreset,
    bottom: &[usize],
    top: &[usize],
    tables: usize,
    dim: usize,
    dot: bool,
    batch: usize,
    step_bytes_per_param: usize,
) -> DenseModel {
    let (bf, bb, bfl) = mlp_ns(gpu, bottom, batch, false);
    let (tf, tb, tfl) = mlp_ns(gpu, top, batch, true);
    let n = tables + 1;
    let (inf, inb, infl) = if dot {
        // Batched GEMM F F^T, then the triangle gather and concatenation;
        // backward: the triangle scatter and two batched GEMMs.
        let flops = 2.0 * (batch * n * n * dim) as f64;
        let bytes = 4.0 * (batch * (n * dim + n * n)) as f64;
        let tri = 4.0 * (batch * top[0]) as f64 * 2.0;
        let f = gpu.kernel_ns(flops, bytes, gpu.gemm_efficiency * 0.5) + gpu.stream_ns(tri);
        let b = 2.0 * gpu.kernel_ns(flops, bytes, gpu.gemm_efficiency * 0.5) + gpu.stream_ns(tri);
        (f, b, 3.0 * flops)
    } else {
        let bytes = 8.0 * (batch * n * dim) as f64;
        (gpu.stream_ns(bytes), gpu.stream_ns(bytes), 0.0)
    };
    DenseModel {
        times: DenseTimes {
            bottom_forward_ns: bf,
            interaction_forward_ns: inf,
            top_forward_ns: tf,
            loss_ns: gpu.stream_ns(12.0 * batch as f64),
            top_backward_ns: tb,
            interaction_backward_ns: inb,
            bottom_backward_ns: bb,
            step_ns: gpu
                .stream_ns(((mlp_params(bottom) + mlp_params(top)) * step_bytes_per_param) as f64),
        },
        flops: bfl + tfl + infl,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_and_roofline() {
        let v = GpuPreset::named("V100").unwrap();
        let h = GpuPreset::named("h100").unwrap();
        assert!(
            GpuPreset::named("tpu")
                .unwrap_err()
                .to_string()
                .contains("v100, a100, h100")
        );
        // A large GEMM is compute-bound: 2 * 4096^3 flops at 70% of 15.7 TF.
        let t = v.gemm_ns(4096, 4096, 4096);
        let want = 2.0 * 4096f64.powi(3) / (15.7e3 * 0.7) + 5e3;
        assert!((t - want).abs() / want < 1e-9);
        // A faster GPU is never slower.
        let rm = |gpu: &GpuPreset| {
            model_dense(
                gpu,
                &[13, 512, 256, 64, 16],
                &[367, 512, 256, 1],
                26,
                16,
                true,
                2048,
                12,
            )
        };
        let (mv, mh) = (rm(&v), rm(&h));
        assert!(mh.total_ns() < mv.total_ns());
        // The optimizer step: one kernel over 12 bytes per parameter.
        let params = (13 * 512 + 512) + (512 * 256 + 256) + (256 * 64 + 64) + (64 * 16 + 16);
        let params = params + (367 * 512 + 512) + (512 * 256 + 256) + (256 + 1);
        assert_eq!(
            mlp_params(&[13, 512, 256, 64, 16]) + mlp_params(&[367, 512, 256, 1]),
            params
        );
        let want = 12.0 * params as f64 / (900.0 * 0.8) + 5e3;
        assert!((mv.times.step_ns - want).abs() < 1e-6);
        let total = mv.times.bottom_forward_ns
            + mv.times.interaction_forward_ns
            + mv.times.top_forward_ns
            + mv.times.loss_ns
            + mv.times.top_backward_ns
            + mv.times.interaction_backward_ns
            + mv.times.bottom_backward_ns
            + mv.times.step_ns;
        assert_eq!(mv.total_ns(), total);
        assert!(mv.total_ns() > 0.0 && mv.flops > 0.0);
        // 1 MB over PCIe gen3 at 80%: 1e6 / 12.6 ns + 10 us.
        assert!((v.host_transfer_ns(1_000_000) - (1e6 / 12.6 + 1e4)).abs() < 1e-6);
        assert_eq!(v.host_transfer_ns(0), 0.0);
    }
}
