//! CUDA support shared by every GPU path of nmpsim (feature `cuda`): opening a
//! device, compiling the project's CUDA C sources at run time through NVRTC,
//! and a cache of loaded modules.
//!
//! Everything is loaded at run time (cudarc's dynamic loading): a binary built
//! with this feature runs on a machine without CUDA, and [`Gpu::open`] then
//! returns [`GpuUnavailable`] with the reason instead of panicking. NVRTC alone
//! (no driver, no device) is enough for [`compile`], which is how the sources
//! are checked on machines without a GPU.
//!
//! Library lookup: the CUDA driver (`libcuda.so`), NVRTC (`libnvrtc.so.13`)
//! and cuBLAS (`libcublas.so.13`) are found through the loader's search path;
//! set `LD_LIBRARY_PATH` to the folder that holds them when they are not in a
//! system location (for example the `nvidia/cu13/lib` folder of the NVRTC
//! wheel).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

pub use cudarc;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::{CompileOptions, Ptx};

use crate::error::KernelError;

mod backend;
pub mod bench;
pub use backend::{
    CastTiming, CudaBackend, DeviceCoalesced, DeviceTable, DeviceTt, KERNEL_NAMES, StagedBatch,
    StagedCasted, StagedTables, TtForwardTiming,
};

/// One CUDA C source of the project, embedded in the binary.
#[derive(Clone, Copy, Debug)]
pub struct CudaSource {
    /// File name under the crate's `cuda/` folder (also NVRTC's program name).
    pub name: &'static str,
    pub code: &'static str,
}

/// Every CUDA C source of this crate. Other crates keep their own lists and
/// compile them through [`compile`] / [`Gpu::function`] the same way.
pub const SOURCES: &[CudaSource] = &[CudaSource {
    name: "embedding.cu",
    code: include_str!("../../cuda/embedding.cu"),
}];

/// Why no GPU can be used here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuUnavailable(pub String);

impl fmt::Display for GpuUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GpuUnavailable {}

impl From<GpuUnavailable> for KernelError {
    fn from(e: GpuUnavailable) -> Self {
        KernelError::Cuda {
            what: format!("no usable GPU: {e}"),
        }
    }
}

/// Whether the CUDA driver library can be loaded.
pub fn driver_present() -> bool {
    // SAFETY: only tries to open the shared library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether the NVRTC library can be loaded.
pub fn nvrtc_present() -> bool {
    // SAFETY: only tries to open the shared library.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Whether the cuBLAS library can be loaded.
pub fn cublas_present() -> bool {
    // SAFETY: only tries to open the shared library.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

/// NVRTC's version, if the library can be loaded.
pub fn nvrtc_version() -> Option<(i32, i32)> {
    if !nvrtc_present() {
        return None;
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; nvrtcVersion only writes two ints.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
}

/// The virtual architecture NVRTC compiles for when no device is open: the
/// oldest that CUDA 13 accepts (Turing).
pub const CHECK_ARCH: &str = "compute_75";

fn arch_name(major: i32, minor: i32) -> &'static str {
    // NVRTC wants a `&'static str`; the set of architectures is small, so each
    // distinct one is leaked once.
    static NAMES: Mutex<Vec<(i32, i32, &'static str)>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| n.0 == major && n.1 == minor) {
        return n.2;
    }
    let s: &'static str = Box::leak(format!("compute_{major}{minor}").into_boxed_str());
    names.push((major, minor, s));
    s
}

/// Compiles one source to PTX for `arch` (`compute_XY`). Errors carry NVRTC's
/// log, which names the file and line.
pub fn compile(src: &CudaSource, arch: &'static str) -> Result<Ptx, KernelError> {
    if !nvrtc_present() {
        return Err(KernelError::Cuda {
            what: "the NVRTC library (libnvrtc.so.13) cannot be loaded; put its folder on LD_LIBRARY_PATH".into(),
        });
    }
    let opts = CompileOptions {
        arch: Some(arch),
        name: Some(src.name.to_string()),
        options: vec!["--std=c++17".into()],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(src.code, opts).map_err(|e| {
        let log = match &e {
            cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                log.to_string_lossy().into_owned()
            }
            other => format!("{other:?}"),
        };
        KernelError::Cuda {
            what: format!("NVRTC could not compile {}:\n{log}", src.name),
        }
    })
}

/// Maps a driver error to the crate's error, naming what was being done.
pub fn driver_err(doing: &str) -> impl Fn(cudarc::driver::DriverError) -> KernelError + '_ {
    move |e| KernelError::Cuda {
        what: format!("{doing}: {e}"),
    }
}

/// The kind of a kernel parameter as PTX declares it: 64-bit (pointers and
/// 64-bit integers), 32-bit integer, `float`, `double`, or anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    B64,
    B32,
    F32,
    F64,
    Other,
}

impl ParamKind {
    fn of_ptx(ty: &str) -> Self {
        match ty {
            ".u64" | ".s64" | ".b64" => ParamKind::B64,
            ".u32" | ".s32" | ".b32" => ParamKind::B32,
            ".f32" => ParamKind::F32,
            ".f64" => ParamKind::F64,
            _ => ParamKind::Other,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ParamKind::B64 => "64-bit",
            ParamKind::B32 => "int",
            ParamKind::F32 => "float",
            ParamKind::F64 => "double",
            ParamKind::Other => "other",
        }
    }
}

/// The names of every kernel (`.entry`) of `ptx`.
pub fn ptx_entries(ptx: &str) -> Vec<&str> {
    ptx.lines()
        .filter_map(|l| l.split(".entry ").nth(1))
        .filter_map(|rest| rest.split(['(', ' ']).next())
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect()
}

/// The parameters of kernel `kernel` in `ptx`, or `None` if it has no entry.
pub fn ptx_params(ptx: &str, kernel: &str) -> Option<Vec<ParamKind>> {
    let head = format!(".entry {kernel}(");
    let start = ptx.find(&head)? + head.len();
    let end = start + ptx[start..].find(')')?;
    Some(
        ptx[start..end]
            .split(',')
            .filter_map(|p| {
                let mut words = p.split_whitespace();
                (words.next() == Some(".param"))
                    .then(|| ParamKind::of_ptx(words.next().unwrap_or("")))
            })
            .collect(),
    )
}

/// What one launch argument is to the kernel (how cudarc passes it): device
/// buffers are 64-bit pointers, scalars their own kind.
pub trait KernelArg {
    fn kind(&self) -> ParamKind;
}

macro_rules! kernel_arg {
    ($kind:expr => $($t:ty),+) => {
        $(impl KernelArg for &$t {
            fn kind(&self) -> ParamKind {
                $kind
            }
        })+
    };
}
kernel_arg!(ParamKind::B64 => u64, i64, usize);
kernel_arg!(ParamKind::B32 => u32, i32);
kernel_arg!(ParamKind::F32 => f32);
kernel_arg!(ParamKind::F64 => f64);

impl<T> KernelArg for &cudarc::driver::CudaSlice<T> {
    fn kind(&self) -> ParamKind {
        ParamKind::B64
    }
}

impl<T> KernelArg for &mut cudarc::driver::CudaSlice<T> {
    fn kind(&self) -> ParamKind {
        ParamKind::B64
    }
}

impl<T> KernelArg for &cudarc::driver::CudaView<'_, T> {
    fn kind(&self) -> ParamKind {
        ParamKind::B64
    }
}

impl<T> KernelArg for &mut cudarc::driver::CudaViewMut<'_, T> {
    fn kind(&self) -> ParamKind {
        ParamKind::B64
    }
}

/// Compares a launch's arguments with the kernel's parameters; the error
/// names the kernel, the file and the first parameter that differs.
pub fn check_params(
    src: &str,
    kernel: &str,
    params: &[ParamKind],
    args: &[ParamKind],
) -> Result<(), KernelError> {
    if params == args {
        return Ok(());
    }
    let list = |v: &[ParamKind]| v.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ");
    let first = params
        .iter()
        .zip(args)
        .position(|(a, b)| a != b)
        .unwrap_or(params.len().min(args.len()));
    Err(KernelError::Cuda {
        what: format!(
            "kernel `{kernel}` of {src} takes ({}) but is launched with ({}): parameter {first} differs",
            list(params),
            list(args)
        ),
    })
}

/// A module loaded on a device and the PTX it was loaded from.
type LoadedModule = (Arc<CudaModule>, Arc<str>);

/// An open CUDA device: its context, the stream kernels run on, and the
/// modules compiled for it so far.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    /// The stream every primitive of [`CudaBackend`] runs on.
    pub stream: Arc<CudaStream>,
    name: String,
    capability: (i32, i32),
    /// Loaded modules and their PTX, by source name.
    modules: Mutex<HashMap<&'static str, LoadedModule>>,
    /// Kernels whose launch arguments have been checked against their PTX.
    checked: Mutex<std::collections::HashSet<String>>,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("name", &self.name)
            .field("capability", &self.capability)
            .finish()
    }
}

impl Gpu {
    /// Opens device `ordinal`, or says why it cannot.
    pub fn open(ordinal: usize) -> Result<Arc<Gpu>, GpuUnavailable> {
        if !driver_present() {
            return Err(GpuUnavailable(
                "the CUDA driver library (libcuda.so) is not installed on this machine".into(),
            ));
        }
        if !nvrtc_present() {
            return Err(GpuUnavailable(
                "the NVRTC library (libnvrtc.so.13) cannot be loaded; put its folder on LD_LIBRARY_PATH".into(),
            ));
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| GpuUnavailable(format!("CUDA device {ordinal} cannot be opened: {e}")))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let capability = ctx
            .compute_capability()
            .map_err(|e| GpuUnavailable(format!("compute capability of device {ordinal}: {e}")))?;
        let stream = ctx
            .new_stream()
            .map_err(|e| GpuUnavailable(format!("creating a stream: {e}")))?;
        Ok(Arc::new(Gpu {
            ctx,
            stream,
            name,
            capability,
            modules: Mutex::new(HashMap::new()),
            checked: Mutex::new(std::collections::HashSet::new()),
        }))
    }

    /// The device's name, e.g. `NVIDIA H100 80GB HBM3`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compute capability (major, minor).
    pub fn capability(&self) -> (i32, i32) {
        self.capability
    }

    /// The device's NVRTC architecture, `compute_XY`.
    pub fn arch(&self) -> &'static str {
        arch_name(self.capability.0, self.capability.1)
    }

    /// The module of `src`, compiled and loaded on first use.
    pub fn module(&self, src: &CudaSource) -> Result<Arc<CudaModule>, KernelError> {
        Ok(self.module_and_ptx(src)?.0)
    }

    fn module_and_ptx(&self, src: &CudaSource) -> Result<LoadedModule, KernelError> {
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = modules.get(src.name) {
            return Ok(m.clone());
        }
        let ptx = compile(src, self.arch())?;
        let text: Arc<str> = ptx.to_src().into();
        let m = self
            .ctx
            .load_module(ptx)
            .map_err(driver_err(&format!("loading the module of {}", src.name)))?;
        // Load every kernel now. With the driver's lazy loading a kernel is
        // otherwise loaded at its first launch, which can wait for the
        // device to go idle: a first launch from one thread while another
        // thread's stream is held (the timed casting) would stall. Querying
        // an attribute loads the kernel.
        for name in ptx_entries(&text) {
            m.load_function(name)
                .and_then(|f| f.num_regs())
                .map_err(driver_err(&format!(
                    "loading kernel `{name}` of {}",
                    src.name
                )))?;
        }
        modules.insert(src.name, (m.clone(), text.clone()));
        Ok((m, text))
    }

    /// Checks, once per kernel, that a launch's arguments match the kernel's
    /// parameters in the compiled PTX (count and kind), so a mismatch is an
    /// error naming the kernel rather than wrong numbers.
    pub fn check_launch(
        &self,
        src: &CudaSource,
        kernel: &str,
        args: &[ParamKind],
    ) -> Result<(), KernelError> {
        let key = format!("{}:{kernel}", src.name);
        if self
            .checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&key)
        {
            return Ok(());
        }
        let (_, ptx) = self.module_and_ptx(src)?;
        let params = ptx_params(&ptx, kernel).ok_or_else(|| KernelError::Cuda {
            what: format!("{} has no kernel `{kernel}`", src.name),
        })?;
        check_params(src.name, kernel, &params, args)?;
        self.checked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key);
        Ok(())
    }

    /// Kernel `name` of `src`.
    pub fn function(&self, src: &CudaSource, name: &str) -> Result<CudaFunction, KernelError> {
        self.module(src)?
            .load_function(name)
            .map_err(driver_err(&format!("kernel `{name}` of {}", src.name)))
    }
}

/// The process-wide default device (ordinal 0), opened on first use; every GPU
/// path shares it so that modules are compiled once.
pub fn default_gpu() -> Result<Arc<Gpu>, GpuUnavailable> {
    static GPU: Mutex<Option<Result<Arc<Gpu>, GpuUnavailable>>> = Mutex::new(None);
    let mut g = GPU.lock().unwrap_or_else(|e| e.into_inner());
    g.get_or_insert_with(|| Gpu::open(0)).clone()
}
