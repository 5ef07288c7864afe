//! `nmpsim gpu`: what this machine offers the GPU paths. Whether the CUDA
//! driver, NVRTC and cuBLAS load, device 0's name, compute capability and
//! memory, and whether every CUDA source of the project compiles through
//! NVRTC for it (or for the oldest supported architecture without a device).

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

#[derive(Args)]
#[command(
    after_help = "Exit status: 0 when a GPU is usable and every source compiles; 1 when a source\ndoes not compile; 2 when no GPU can be used (the reason is printed).\n\nExamples:\n  nmpsim gpu\n  nmpsim gpu --json\n  bench/gpu/env.sh target/release/nmpsim gpu    # with the CUDA libraries found"
)]
pub struct GpuArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Default)]
struct Report {
    cuda_feature: bool,
    driver: bool,
    /// Whether NVRTC (libnvrtc.so.13) loads, and its version if it does.
    nvrtc: bool,
    nvrtc_version: Option<String>,
    cublas: bool,
    device: Option<Device>,
    /// Why no GPU can be used, if none can.
    unavailable: Option<String>,
    /// The architecture the sources were compiled for.
    arch: Option<String>,
    sources: Vec<SourceCheck>,
}

#[derive(Serialize)]
struct Device {
    name: String,
    compute_capability: String,
    memory_bytes: u64,
    free_bytes: u64,
}

#[derive(Serialize)]
struct SourceCheck {
    name: String,
    ok: bool,
    kernels: usize,
    error: Option<String>,
}

#[cfg(feature = "cuda")]
fn probe() -> Report {
    use nmpsim_kernels::cuda::{
        CHECK_ARCH, compile, cublas_present, default_gpu, driver_present, nvrtc_version,
    };
    let mut r = Report {
        cuda_feature: true,
        driver: driver_present(),
        nvrtc_version: nvrtc_version().map(|(a, b)| format!("{a}.{b}")),
        cublas: cublas_present(),
        ..Report::default()
    };
    r.nvrtc = r.nvrtc_version.is_some();
    let arch = match default_gpu() {
        Ok(g) => {
            let (total, free) = g
                .ctx
                .mem_get_info()
                .map(|(free, total)| (total as u64, free as u64))
                .unwrap_or((0, 0));
            let (a, b) = g.capability();
            r.device = Some(Device {
                name: g.name().to_string(),
                compute_capability: format!("{a}.{b}"),
                memory_bytes: total,
                free_bytes: free,
            });
            g.arch()
        }
        Err(e) => {
            r.unavailable = Some(e.to_string());
            CHECK_ARCH
        }
    };
    if r.nvrtc {
        r.arch = Some(arch.to_string());
        let all = nmpsim_kernels::cuda::SOURCES
            .iter()
            .chain(nmpsim_dlrm::cuda::SOURCES)
            .chain(nmpsim_dlrm::emulate::SOURCES);
        for src in all {
            r.sources.push(match compile(src, arch) {
                Ok(ptx) => SourceCheck {
                    name: src.name.to_string(),
                    ok: true,
                    kernels: ptx.to_src().matches(".entry ").count(),
                    error: None,
                },
                Err(e) => SourceCheck {
                    name: src.name.to_string(),
                    ok: false,
                    kernels: 0,
                    error: Some(e.to_string()),
                },
            });
        }
    }
    r
}

#[cfg(not(feature = "cuda"))]
fn probe() -> Report {
    Report {
        unavailable: Some("this nmpsim was built without the `cuda` feature".into()),
        ..Report::default()
    }
}

pub fn run(a: GpuArgs) -> anyhow::Result<ExitCode> {
    let r = probe();
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
    } else {
        let found = |b: bool| if b { "found" } else { "not found" };
        outln!(
            "CUDA support built in: {}",
            if r.cuda_feature { "yes" } else { "no" }
        )?;
        outln!("CUDA driver (libcuda.so): {}", found(r.driver))?;
        match &r.nvrtc_version {
            Some(v) => outln!("NVRTC (libnvrtc.so.13): found, version {v}")?,
            None => outln!("NVRTC (libnvrtc.so.13): not found")?,
        }
        outln!("cuBLAS (libcublas.so.13): {}", found(r.cublas))?;
        match (&r.device, &r.unavailable) {
            (Some(d), _) => outln!(
                "device 0: {}, compute {}, {:.1} GiB ({:.1} GiB free)",
                d.name,
                d.compute_capability,
                d.memory_bytes as f64 / (1u64 << 30) as f64,
                d.free_bytes as f64 / (1u64 << 30) as f64
            )?,
            (None, Some(why)) => outln!("device 0: none usable: {why}")?,
            (None, None) => outln!("device 0: none")?,
        }
        if let Some(arch) = &r.arch {
            outln!("CUDA sources, compiled through NVRTC for {arch}:")?;
            for s in &r.sources {
                match &s.error {
                    None => outln!("  {:<14} ok, {} kernels", s.name, s.kernels)?,
                    Some(e) => outln!("  {:<14} FAILED\n{e}", s.name)?,
                }
            }
        } else if r.cuda_feature {
            outln!("CUDA sources: not checked (no NVRTC)")?;
        }
        if r.device.is_some() && !r.cublas {
            outln!("note: `train --device cuda` needs cuBLAS on the loader's path")?;
        }
    }
    Ok(if r.sources.iter().any(|s| !s.ok) {
        ExitCode::from(1)
    } else if r.device.is_none() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
