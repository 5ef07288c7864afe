//! GPU emulation of the NMP pool (Tensor Casting's Section V method).
//!
//! The paper ran the NMP operations as CUDA kernels on a GPU standing in for
//! the pool. One modern GPU is far faster than the pool it stands for, so the
//! emulator throttles: the pool's primitives run on a stream of their own, and
//! after the real work a pad kernel holds that stream until
//! `bytes / effective_bw` has passed since the work began, where the effective
//! bandwidth is the pool's *simulated* one ([`crate::pooltime::PoolTimer`]).
//! Link transfers are emulated the same way at the link bandwidth. Work on
//! other streams (the dense MLPs) overlaps with the pool stream for real.
//! Every emulated time comes with the raw time of the real kernels.
//!
//! The arithmetic ([`throttle_target_ns`], [`Emulated`]) is plain Rust; the
//! device side (`PoolEmulator`) needs the `cuda` feature and a GPU.

use serde::{Deserialize, Serialize};

/// The time the pool stream must take for `bytes` at `gbps` (GB/s = bytes/ns).
/// Zero for no bytes; infinite for a non-positive bandwidth.
pub fn throttle_target_ns(bytes: u64, gbps: f64) -> f64 {
    if bytes == 0 {
        0.0
    } else if gbps > 0.0 {
        bytes as f64 / gbps
    } else {
        f64::INFINITY
    }
}

/// One emulated operation: the real kernels' time and the throttled time the
/// pool stream took (both from CUDA events), and the target it was held to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Emulated {
    pub raw_ns: f64,
    pub target_ns: f64,
    pub emulated_ns: f64,
}

impl Emulated {
    /// Whether the real work alone took longer than the target (the GPU is
    /// slower than the pool it emulates for this operation).
    pub fn work_bound(&self) -> bool {
        self.raw_ns > self.target_ns
    }

    /// The emulated time's relative distance from `max(raw, target)`, the
    /// time a perfect throttle gives.
    pub fn throttle_error(&self) -> f64 {
        let ideal = self.raw_ns.max(self.target_ns);
        if ideal > 0.0 {
            (self.emulated_ns - ideal).abs() / ideal
        } else {
            0.0
        }
    }
}

#[cfg(feature = "cuda")]
pub use device::{KERNELS, PoolEmulator, SOURCES};

#[cfg(feature = "cuda")]
mod device {
    use std::sync::Arc;

    use nmpsim_kernels::cuda::cudarc::driver::sys::CUevent_flags;
    use nmpsim_kernels::cuda::cudarc::driver::{
        CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
    };
    use nmpsim_kernels::cuda::{CudaBackend, CudaSource, Gpu, driver_err};

    use super::{Emulated, throttle_target_ns};
    use crate::DlrmError;

    /// The throttling kernels.
    pub const SOURCES: &[CudaSource] = &[CudaSource {
        name: "emulate.cu",
        code: include_str!("../cuda/emulate.cu"),
    }];

    /// Kernel names the emulator loads (checked against the PTX in tests).
    pub const KERNELS: &[&str] = &["nmpsim_stamp", "nmpsim_pad_until"];

    /// The NMP pool on a GPU: a stream of its own, the embedding primitives on
    /// it, and the throttle.
    pub struct PoolEmulator {
        gpu: Arc<Gpu>,
        stream: Arc<CudaStream>,
        backend: CudaBackend,
        slots: CudaSlice<u64>,
        stamp: CudaFunction,
        pad: CudaFunction,
    }

    impl PoolEmulator {
        /// An emulator on `gpu`, with a new stream.
        pub fn new(gpu: Arc<Gpu>) -> Result<Self, DlrmError> {
            let stream = gpu
                .ctx
                .new_stream()
                .map_err(driver_err("creating the pool stream"))?;
            let backend = CudaBackend::with_stream(gpu.clone(), stream.clone());
            let slots = stream
                .alloc_zeros::<u64>(2)
                .map_err(driver_err("allocating the throttle's timer slots"))?;
            let stamp = gpu.function(&SOURCES[0], KERNELS[0])?;
            let pad = gpu.function(&SOURCES[0], KERNELS[1])?;
            // The embedding kernels are compiled now, not on their first
            // launch inside a timed region.
            gpu.module(&nmpsim_kernels::cuda::SOURCES[0])?;
            Ok(PoolEmulator {
                gpu,
                stream,
                backend,
                slots,
                stamp,
                pad,
            })
        }

        pub fn gpu(&self) -> &Arc<Gpu> {
            &self.gpu
        }

        /// The pool stream.
        pub fn stream(&self) -> &Arc<CudaStream> {
            &self.stream
        }

        /// The embedding primitives, running on the pool stream.
        pub fn backend(&self) -> &CudaBackend {
            &self.backend
        }

        fn one_thread() -> LaunchConfig {
            LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (1, 1, 1),
                shared_mem_bytes: 0,
            }
        }

        /// Runs `work` on the pool stream and holds the stream until
        /// `target_ns` have passed since the work began. Returns what `work`
        /// returned and the raw and emulated times.
        pub fn run<T>(
            &mut self,
            target_ns: f64,
            work: impl FnOnce(&CudaBackend) -> Result<T, DlrmError>,
        ) -> Result<(T, Emulated), DlrmError> {
            if !target_ns.is_finite() || target_ns < 0.0 {
                return Err(DlrmError::Config(format!(
                    "emulated pool time must be finite and non-negative, got {target_ns} ns"
                )));
            }
            let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let target = target_ns.round() as u64;
            {
                use nmpsim_kernels::cuda::KernelArg;
                let slots = (&self.slots).kind();
                self.gpu.check_launch(&SOURCES[0], KERNELS[0], &[slots])?;
                self.gpu
                    .check_launch(&SOURCES[0], KERNELS[1], &[slots, (&target).kind()])?;
            }
            let start = self
                .stream
                .record_event(timing)
                .map_err(driver_err("recording the pool stream's start"))?;
            // SAFETY: `nmpsim_stamp(unsigned long long*)` with a 2-slot buffer.
            unsafe {
                self.stream
                    .launch_builder(&self.stamp)
                    .arg(&mut self.slots)
                    .launch(Self::one_thread())
            }
            .map_err(driver_err("launching nmpsim_stamp"))?;
            let out = work(&self.backend)?;
            let worked = self
                .stream
                .record_event(timing)
                .map_err(driver_err("recording the end of the pool's work"))?;
            // SAFETY: `nmpsim_pad_until(unsigned long long*, unsigned long long)`.
            unsafe {
                self.stream
                    .launch_builder(&self.pad)
                    .arg(&mut self.slots)
                    .arg(&target)
                    .launch(Self::one_thread())
            }
            .map_err(driver_err("launching nmpsim_pad_until"))?;
            let end = self
                .stream
                .record_event(timing)
                .map_err(driver_err("recording the end of the throttle"))?;
            let raw_ms = start
                .elapsed_ms(&worked)
                .map_err(driver_err("timing the pool's work"))?;
            let all_ms = start
                .elapsed_ms(&end)
                .map_err(driver_err("timing the throttled pool stream"))?;
            Ok((
                out,
                Emulated {
                    raw_ns: raw_ms as f64 * 1e6,
                    target_ns,
                    emulated_ns: all_ms as f64 * 1e6,
                },
            ))
        }

        /// A link transfer of `bytes` at `gbps` plus a fixed latency, emulated
        /// as a hold of the pool stream (no data moves: the pool and the GPU
        /// are one device here).
        pub fn transfer(
            &mut self,
            bytes: u64,
            gbps: f64,
            latency_ns: f64,
        ) -> Result<Emulated, DlrmError> {
            // As the modelled link: nothing to move costs nothing (and
            // holds no stream: a hold of zero would still cost its launch).
            if bytes == 0 {
                return Ok(Emulated {
                    raw_ns: 0.0,
                    target_ns: 0.0,
                    emulated_ns: 0.0,
                });
            }
            let target = throttle_target_ns(bytes, gbps) + latency_ns.max(0.0);
            Ok(self.run(target, |_| Ok(()))?.1)
        }

        /// Pads the pool stream for `target_ns` with no work: the throttle
        /// alone, for calibration.
        pub fn hold(&mut self, target_ns: f64) -> Result<Emulated, DlrmError> {
            Ok(self.run(target_ns, |_| Ok(()))?.1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_is_bytes_over_bandwidth() {
        assert_eq!(throttle_target_ns(0, 100.0), 0.0);
        assert_eq!(throttle_target_ns(1_000_000, 100.0), 10_000.0);
        // Halving the bandwidth doubles the target.
        let a = throttle_target_ns(123_456_789, 640.0);
        let b = throttle_target_ns(123_456_789, 320.0);
        assert!((b / a - 2.0).abs() < 1e-12);
        assert!(throttle_target_ns(1, 0.0).is_infinite());
    }

    #[test]
    fn throttle_error_is_relative_to_the_slower_of_work_and_target() {
        let e = Emulated {
            raw_ns: 100.0,
            target_ns: 1000.0,
            emulated_ns: 1050.0,
        };
        assert!(!e.work_bound());
        assert!((e.throttle_error() - 0.05).abs() < 1e-12);
        let w = Emulated {
            raw_ns: 2000.0,
            target_ns: 1000.0,
            emulated_ns: 2000.0,
        };
        assert!(w.work_bound());
        assert_eq!(w.throttle_error(), 0.0);
    }
}
