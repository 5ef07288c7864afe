//! `kernels check --backend`: the backends it names, each once, and what
//! happens when CUDA is asked for on a machine without a usable GPU.

use super::*;

/// The CUDA backend, or why it cannot be used here.
#[cfg(feature = "cuda")]
pub(super) fn cuda_backend() -> Result<nmpsim_kernels::cuda::CudaBackend, String> {
    nmpsim_kernels::cuda::CudaBackend::new().map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
pub(super) fn cuda_backend() -> Result<CpuBackend, String> {
    Err("this nmpsim was built without the `cuda` feature (no CUDA support)".into())
}

/// What `--backend` resolved to.
pub(super) enum Selected {
    /// The backends to check, and why CUDA was skipped (from `all`), if it was.
    Run(Vec<Box<dyn Backend>>, Option<String>),
    /// Stop with this status (CUDA named and no GPU; the reason is printed).
    Exit(ExitCode),
}

/// The backends of `--backend`, each once, in order. CUDA named explicitly
/// with no usable GPU prints the reason and exits 2; CUDA from `all` is
/// skipped with its reason.
pub(super) fn select_backends(names: &[String]) -> anyhow::Result<Selected> {
    let mut wanted: Vec<(&str, bool)> = Vec::new();
    for name in names {
        let expanded: &[(&str, bool)] = match name.as_str() {
            "cpu" => &[("cpu", true)],
            "cuda" => &[("cuda", true)],
            "all" => &[("cpu", false), ("cuda", false)],
            other => {
                anyhow::bail!("--backend: unknown backend `{other}`; available: cpu, cuda, all")
            }
        };
        for &(b, explicit) in expanded {
            match wanted.iter_mut().find(|w| w.0 == b) {
                Some(w) => w.1 |= explicit,
                None => wanted.push((b, explicit)),
            }
        }
    }
    let mut out: Vec<Box<dyn Backend>> = Vec::new();
    let mut skipped = None;
    for (name, explicit) in wanted {
        match name {
            "cpu" => out.push(Box::new(CpuBackend)),
            _ => match cuda_backend() {
                Ok(b) => out.push(Box::new(b)),
                Err(reason) if explicit => {
                    eprintln!("error: --backend cuda: no usable GPU: {reason}");
                    return Ok(Selected::Exit(ExitCode::from(2)));
                }
                Err(reason) => skipped = Some(reason),
            },
        }
    }
    Ok(Selected::Run(out, skipped))
}
