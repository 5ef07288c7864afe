//! A modelled host CPU: what the CPU-side embedding primitives would take on
//! a machine described by its sockets, cores, clock, memory channels and
//! last-level cache, so that a figure need not depend on the machine that
//! ran it, and the host can be a design-space axis.
//!
//! A host is a [`HostConfig`]: a preset ([`HostConfig::preset`]) or a TOML
//! file ([`HostConfig::from_toml`]). Its model of one primitive
//! ([`HostConfig::primitive_ns`], formula in `docs/host.md`) takes what the
//! kernels already count (`nmpsim_kernels::Traffic` and the sort passes),
//! split into what streams and what is read at random:
//!
//! ```text
//! stream  = streamed bytes / (peak x stream efficiency)
//! sort    = sort-pass bytes / (peak x sort efficiency)
//! random  = max(lines x 64 / (peak x random efficiency),
//!               lines x latency / (cores x misses in flight per core))
//!           over the lines that miss the last-level cache
//! time    = stream + sort + random
//! ```
//!
//! The efficiencies are the host's; until `nmpsim host calibrate` fits them
//! to this machine's measurements the presets carry the uncalibrated
//! defaults below and say so ([`HostConfig::calibration`]).

use serde::{Deserialize, Serialize};

use crate::DlrmError;

/// Where `nmpsim host calibrate` installs the host `this` (relative to the
/// working directory, beside the run directories; `NMPSIM_THIS_HOST`
/// overrides it).
pub const THIS_HOST_FILE: &str = "runs/this-host.toml";

/// Bytes of one cache line.
pub const LINE_BYTES: u64 = 64;

/// Shares of the peak memory bandwidth each kind of access reaches.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Efficiencies {
    /// Sequential reads and writes (indices, pooled rows, gradients).
    pub stream: f64,
    /// Scattered 64 B lines (table rows by index).
    pub random: f64,
    /// Radix-sort passes (a scattered write per key into its bucket).
    pub sort: f64,
}

/// Uncalibrated efficiencies: a streaming loop reaching 70% of the peak, a
/// scattered row read 40%, a radix pass 50%. Modelled, not measured.
pub const DEFAULT_EFFICIENCIES: Efficiencies = Efficiencies {
    stream: 0.7,
    random: 0.4,
    sort: 0.5,
};

/// Per primitive, a factor on its memory time: what the kernel's own
/// loop costs beyond its bytes (a row added from the core's caches, a
/// branch per segment), fitted by `nmpsim host calibrate`; gather-reduce
/// is the reference, always 1.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Factors {
    pub expand_coalesce: f64,
    pub casted_gather_reduce: f64,
    pub scatter: f64,
}

/// Uncalibrated factors: 1, the bytes alone.
pub const DEFAULT_FACTORS: Factors = Factors {
    expand_coalesce: 1.0,
    casted_gather_reduce: 1.0,
    scatter: 1.0,
};

/// Uncalibrated cost of one kernel call, us. Modelled, not measured.
pub const DEFAULT_CALL_OVERHEAD_US: f64 = 10.0;

/// Uncalibrated cost of one output row's loop, ns a core. Modelled, not
/// measured.
pub const DEFAULT_ITEM_NS: f64 = 50.0;

/// A host CPU and its memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostConfig {
    pub name: String,
    /// The parts and where their figures come from.
    pub description: String,
    pub sockets: u32,
    pub cores_per_socket: u32,
    /// Base clock, GHz.
    pub clock_ghz: f64,
    pub channels_per_socket: u32,
    /// DDR transfer rate, MT/s (8 bytes per transfer and channel).
    pub ddr_mts: u32,
    /// Last-level cache per socket, MiB.
    pub llc_mib_per_socket: f64,
    /// Loaded latency of a 64 B line from DRAM, ns.
    pub memory_latency_ns: f64,
    /// Line fills one core keeps in flight (its line fill buffers).
    pub misses_per_core: u32,
    /// Fixed cost of one kernel call (one table's primitive): starting its
    /// threads and joining them, us.
    pub call_overhead_us: f64,
    /// A core's time for one output row's loop (its start, its last rows'
    /// misses not yet in flight), ns.
    pub item_ns: f64,
    pub efficiency: Efficiencies,
    /// Per primitive, a factor on its memory time.
    pub factor: Factors,
    /// Where the efficiencies come from.
    pub calibration: String,
}

/// What one CPU primitive asks of the host.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PrimitiveWork {
    /// Bytes read or written in order.
    pub stream_bytes: u64,
    /// Bytes of radix-sort passes.
    pub sort_bytes: u64,
    /// Of `sort_bytes`, the share whose buffers the last-level cache holds
    /// (they cost what streamed bytes cost).
    pub sort_llc_share: f64,
    /// 64 B lines read or written at scattered addresses (table rows).
    pub random_lines: u64,
    /// Of `random_lines`, the share found in the last-level cache.
    pub llc_hit_share: f64,
    /// Kernel calls (tables), each [`HostConfig::call_overhead_us`].
    pub calls: u32,
    /// Output rows the kernel's loop produces (bags, coalesced rows,
    /// updated rows), each [`HostConfig::item_ns`] of a core.
    pub items: u64,
}

impl std::ops::Add for PrimitiveWork {
    type Output = PrimitiveWork;
    /// Two works one after the other: bytes, lines and calls add; the cache
    /// hit share is the lines' mean.
    fn add(self, o: PrimitiveWork) -> PrimitiveWork {
        let lines = self.random_lines + o.random_lines;
        let hits =
            self.random_lines as f64 * self.llc_hit_share + o.random_lines as f64 * o.llc_hit_share;
        let sorted = self.sort_bytes + o.sort_bytes;
        let sort_hits =
            self.sort_bytes as f64 * self.sort_llc_share + o.sort_bytes as f64 * o.sort_llc_share;
        PrimitiveWork {
            stream_bytes: self.stream_bytes + o.stream_bytes,
            sort_bytes: sorted,
            sort_llc_share: if sorted == 0 {
                0.0
            } else {
                sort_hits / sorted as f64
            },
            random_lines: lines,
            llc_hit_share: if lines == 0 { 0.0 } else { hits / lines as f64 },
            calls: self.calls + o.calls,
            items: self.items + o.items,
        }
    }
}

/// The calibration of a machine that ran nmpsim (`nmpsim host calibrate`,
/// its run kept in the source tree), which the presets' efficiencies,
/// factors and call cost come from ([`HostConfig::scaled_from`]).
pub const REFERENCE_CALIBRATION: &str =
    include_str!("../../bench/host/results/2026-12-02-epyc-2vcpu/host.toml");
/// Where [`REFERENCE_CALIBRATION`]'s run is.
pub const REFERENCE_CALIBRATION_DIR: &str = "bench/host/results/2026-12-02-epyc-2vcpu";

impl HostConfig {
    /// This host with the fitted parameters of `reference` (a calibrated
    /// machine), scaled by what is known of this one: a rate the reference
    /// reached on its cores is taken to scale with cores x clock, up to this
    /// host's peak, so each efficiency is `min(1, e x s)` with
    /// `s = (cores x GHz / peak) of this host over that of the reference`.
    /// The factors, the call cost and the output-row cost carry over as
    /// they are; the latency, fills in flight and cache are this host's own.
    pub fn scaled_from(mut self, reference: &HostConfig, reference_dir: &str) -> Self {
        let s = (self.cores() as f64 * self.clock_ghz * reference.peak_gbps())
            / (reference.cores() as f64 * reference.clock_ghz * self.peak_gbps());
        let e = &reference.efficiency;
        let scaled = |v: f64| (v * s).min(1.0);
        self.efficiency = Efficiencies {
            stream: scaled(e.stream),
            random: scaled(e.random),
            sort: scaled(e.sort),
        };
        self.factor = reference.factor;
        self.call_overhead_us = reference.call_overhead_us;
        self.item_ns = reference.item_ns;
        self.calibration = format!(
            "modelled: the efficiencies of the machine calibrated in {reference_dir} ({} cores, {:.1} GB/s) scaled by cores x clock / peak ({s:.3}x, each at most 1); its factors and call cost as they are",
            reference.cores(),
            reference.peak_gbps()
        );
        self
    }

    /// The host [`REFERENCE_CALIBRATION`] describes.
    pub fn reference() -> Self {
        let mut h = Self::from_toml(REFERENCE_CALIBRATION, REFERENCE_CALIBRATION_DIR)
            .expect("the reference calibration in the source tree is a valid host file");
        h.name = "reference".into();
        h.calibration = format!("{} ({REFERENCE_CALIBRATION_DIR})", h.calibration);
        h
    }

    /// The presets of machines nmpsim does not run on, their parameters
    /// scaled from the reference calibration.
    pub const NAMES: [&'static str; 2] = ["dgx1", "spr-2s"];

    /// `dgx1`: the Tensor Casting paper's host, two Intel Xeon E5-2698 v4
    /// (20 cores, 2.2 GHz base, 50 MB last-level cache, four DDR4-2400
    /// channels each; Intel's product specification). `spr-2s`: a current
    /// two-socket server, two Intel Xeon Platinum 8480+ (56 cores, 2.0 GHz
    /// base, 105 MB last-level cache, eight DDR5-4800 channels each; Intel's
    /// product specification). Latencies and fills in flight are modelled
    /// (about 90 and 110 ns loaded, 10 and 16 line fill buffers a core).
    pub fn preset(name: &str) -> Result<Self, DlrmError> {
        let h = match name.to_ascii_lowercase().as_str() {
            "this" => return Self::this(),
            "dgx1" => HostConfig {
                name: "dgx1".into(),
                description: "2 x Intel Xeon E5-2698 v4 (20 cores, 2.2 GHz base, 50 MB LLC, 4 x DDR4-2400 each; Intel product specification), the DGX-1 of the Tensor Casting paper".into(),
                sockets: 2,
                cores_per_socket: 20,
                clock_ghz: 2.2,
                channels_per_socket: 4,
                ddr_mts: 2400,
                llc_mib_per_socket: 50.0,
                memory_latency_ns: 90.0,
                misses_per_core: 10,
                call_overhead_us: DEFAULT_CALL_OVERHEAD_US,
                item_ns: DEFAULT_ITEM_NS,
                efficiency: DEFAULT_EFFICIENCIES,
                factor: DEFAULT_FACTORS,
                calibration: "uncalibrated defaults, modelled".into(),
            },
            "spr-2s" => HostConfig {
                name: "spr-2s".into(),
                description: "2 x Intel Xeon Platinum 8480+ (56 cores, 2.0 GHz base, 105 MB LLC, 8 x DDR5-4800 each; Intel product specification)".into(),
                sockets: 2,
                cores_per_socket: 56,
                clock_ghz: 2.0,
                channels_per_socket: 8,
                ddr_mts: 4800,
                llc_mib_per_socket: 105.0,
                memory_latency_ns: 110.0,
                misses_per_core: 16,
                call_overhead_us: DEFAULT_CALL_OVERHEAD_US,
                item_ns: DEFAULT_ITEM_NS,
                efficiency: DEFAULT_EFFICIENCIES,
                factor: DEFAULT_FACTORS,
                calibration: "uncalibrated defaults, modelled".into(),
            },
            "reference" => return Ok(Self::reference()),
            _ => {
                return Err(DlrmError::Config(format!(
                    "unknown host preset `{name}`; expected one of {}, reference (the calibrated machine the presets scale from), this (after `nmpsim host calibrate`) or a host file (.toml)",
                    Self::NAMES.join(", ")
                )));
            }
        };
        Ok(h.scaled_from(&Self::reference(), REFERENCE_CALIBRATION_DIR))
    }

    /// The host file of `this`, the machine `nmpsim host calibrate` fitted:
    /// `$NMPSIM_THIS_HOST`, else `runs/this-host.toml`.
    pub fn this_path() -> std::path::PathBuf {
        std::env::var_os("NMPSIM_THIS_HOST")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::PathBuf::from(THIS_HOST_FILE))
    }

    /// `this`: the calibrated host file of this machine ([`Self::this_path`]).
    pub fn this() -> Result<Self, DlrmError> {
        let path = Self::this_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_toml(&text, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(DlrmError::Config(format!(
                "host `this` is this machine as `nmpsim host calibrate` fits it, and {} does not exist yet: run `nmpsim host calibrate` first",
                path.display()
            ))),
            Err(e) => Err(DlrmError::Config(format!(
                "host file {}: {e}",
                path.display()
            ))),
        }
    }

    /// A preset by name, or the host file at that path (a name ending in
    /// `.toml`).
    pub fn named_or_file(name: &str) -> Result<Self, DlrmError> {
        if name.ends_with(".toml") {
            let text = std::fs::read_to_string(name)
                .map_err(|e| DlrmError::Config(format!("host file {name}: {e}")))?;
            return Self::from_toml(&text, name);
        }
        Self::preset(name)
    }

    /// A host from a TOML file's text (`what` names it in errors). Every
    /// field is required but `description` and `calibration`; each error
    /// names the file, the field and what was expected.
    pub fn from_toml(text: &str, what: &str) -> Result<Self, DlrmError> {
        let doc: toml_edit::DocumentMut = text
            .parse()
            .map_err(|e| DlrmError::Config(format!("host file {what}: {e}")))?;
        let err = |field: &str, msg: String| {
            DlrmError::Config(format!("host file {what}: field `{field}`: {msg}"))
        };
        let known = [
            "name",
            "description",
            "sockets",
            "cores_per_socket",
            "clock_ghz",
            "channels_per_socket",
            "ddr_mts",
            "llc_mib_per_socket",
            "memory_latency_ns",
            "misses_per_core",
            "call_overhead_us",
            "item_ns",
            "calibration",
            "efficiency",
            "factor",
        ];
        for (k, _) in doc.iter() {
            if !known.contains(&k) {
                return Err(err(
                    k,
                    format!("unknown; a host file has {}", known.join(", ")),
                ));
            }
        }
        let item = |field: &str| doc.get(field).filter(|i| !i.is_none());
        let string = |field: &str, default: Option<&str>| -> Result<String, DlrmError> {
            match item(field) {
                Some(i) => i
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| err(field, "expected a string".into())),
                None => default
                    .map(str::to_string)
                    .ok_or_else(|| err(field, "missing".into())),
            }
        };
        let count = |field: &str| -> Result<u32, DlrmError> {
            let i = item(field).ok_or_else(|| err(field, "missing".into()))?;
            let v = i.as_integer().ok_or_else(|| {
                err(
                    field,
                    format!("`{}` is not a whole number", i.to_string().trim()),
                )
            })?;
            u32::try_from(v)
                .ok()
                .filter(|&v| v >= 1)
                .ok_or_else(|| err(field, format!("{v}; expected at least 1")))
        };
        let number = |table: &toml_edit::Item,
                      field: &str,
                      shown: &str|
         -> Result<f64, DlrmError> {
            let i = table
                .get(field)
                .filter(|i| !i.is_none())
                .ok_or_else(|| err(shown, "missing".into()))?;
            let v = i
                .as_float()
                .or_else(|| i.as_integer().map(|x| x as f64))
                .ok_or_else(|| err(shown, format!("`{}` is not a number", i.to_string().trim())))?;
            if v > 0.0 && v.is_finite() {
                Ok(v)
            } else {
                Err(err(shown, format!("{v}; expected a positive number")))
            }
        };
        let root = doc.as_item();
        let non_negative = |field: &str| -> Result<f64, DlrmError> {
            let i = item(field).ok_or_else(|| err(field, "missing".into()))?;
            let v = i
                .as_float()
                .or_else(|| i.as_integer().map(|x| x as f64))
                .ok_or_else(|| err(field, format!("`{}` is not a number", i.to_string().trim())))?;
            if v >= 0.0 && v.is_finite() {
                Ok(v)
            } else {
                Err(err(field, format!("{v}; expected a number at least 0")))
            }
        };
        let eff = item("efficiency").ok_or_else(|| {
            err(
                "efficiency",
                "missing (a table of stream, random and sort)".into(),
            )
        })?;
        if !eff.is_table_like() {
            return Err(err(
                "efficiency",
                "expected a table of stream, random and sort".into(),
            ));
        }
        if let Some(t) = eff.as_table_like() {
            for (k, _) in t.iter() {
                if !["stream", "random", "sort"].contains(&k) {
                    return Err(err(
                        &format!("efficiency.{k}"),
                        "unknown; [efficiency] has stream, random and sort".into(),
                    ));
                }
            }
        }
        let share = |field: &str| -> Result<f64, DlrmError> {
            let shown = format!("efficiency.{field}");
            let v = number(eff, field, &shown)?;
            if v <= 1.0 {
                Ok(v)
            } else {
                Err(err(
                    &shown,
                    format!("{v}; expected a share of the peak, at most 1"),
                ))
            }
        };
        let fac = item("factor").ok_or_else(|| {
            err(
                "factor",
                "missing (a table of expand_coalesce, casted_gather_reduce and scatter)".into(),
            )
        })?;
        if !fac.is_table_like() {
            return Err(err(
                "factor",
                "expected a table of expand_coalesce, casted_gather_reduce and scatter".into(),
            ));
        }
        let factor_names = ["expand_coalesce", "casted_gather_reduce", "scatter"];
        if let Some(t) = fac.as_table_like() {
            for (k, _) in t.iter() {
                if !factor_names.contains(&k) {
                    return Err(err(
                        &format!("factor.{k}"),
                        "unknown; [factor] has expand_coalesce, casted_gather_reduce and scatter"
                            .into(),
                    ));
                }
            }
        }
        let factor = |field: &str| number(fac, field, &format!("factor.{field}"));
        let h = HostConfig {
            name: string("name", None)?,
            description: string("description", Some(""))?,
            sockets: count("sockets")?,
            cores_per_socket: count("cores_per_socket")?,
            clock_ghz: number(root, "clock_ghz", "clock_ghz")?,
            channels_per_socket: count("channels_per_socket")?,
            ddr_mts: count("ddr_mts")?,
            llc_mib_per_socket: number(root, "llc_mib_per_socket", "llc_mib_per_socket")?,
            memory_latency_ns: number(root, "memory_latency_ns", "memory_latency_ns")?,
            misses_per_core: count("misses_per_core")?,
            call_overhead_us: non_negative("call_overhead_us")?,
            item_ns: non_negative("item_ns")?,
            efficiency: Efficiencies {
                stream: share("stream")?,
                random: share("random")?,
                sort: share("sort")?,
            },
            factor: Factors {
                expand_coalesce: factor("expand_coalesce")?,
                casted_gather_reduce: factor("casted_gather_reduce")?,
                scatter: factor("scatter")?,
            },
            calibration: string("calibration", Some("as the file gives"))?,
        };
        Ok(h)
    }

    /// The host as a TOML file [`HostConfig::from_toml`] reads back.
    pub fn to_toml(&self) -> String {
        let e = &self.efficiency;
        format!(
            "name = {:?}\ndescription = {:?}\nsockets = {}\ncores_per_socket = {}\nclock_ghz = {}\nchannels_per_socket = {}\nddr_mts = {}\nllc_mib_per_socket = {}\nmemory_latency_ns = {}\nmisses_per_core = {}\ncall_overhead_us = {}\nitem_ns = {}\ncalibration = {:?}\n\n[efficiency]\nstream = {}\nrandom = {}\nsort = {}\n\n[factor]\nexpand_coalesce = {}\ncasted_gather_reduce = {}\nscatter = {}\n",
            self.name,
            self.description,
            self.sockets,
            self.cores_per_socket,
            self.clock_ghz,
            self.channels_per_socket,
            self.ddr_mts,
            self.llc_mib_per_socket,
            self.memory_latency_ns,
            self.misses_per_core,
            self.call_overhead_us,
            self.item_ns,
            self.calibration,
            e.stream,
            e.random,
            e.sort,
            self.factor.expand_coalesce,
            self.factor.casted_gather_reduce,
            self.factor.scatter
        )
    }

    pub fn cores(&self) -> u32 {
        self.sockets * self.cores_per_socket
    }

    /// Peak memory bandwidth, GB/s: channels x MT/s x 8 bytes.
    pub fn peak_gbps(&self) -> f64 {
        (self.sockets * self.channels_per_socket) as f64 * self.ddr_mts as f64 * 8.0 / 1e3
    }

    /// Last-level cache of all sockets, bytes.
    pub fn llc_bytes(&self) -> u64 {
        (self.sockets as f64 * self.llc_mib_per_socket * (1u64 << 20) as f64) as u64
    }

    /// The model's time of `w` on `cores` of this host's cores (at most its
    /// own), ns (module docs).
    pub fn primitive_ns(&self, w: &PrimitiveWork, cores: u32) -> f64 {
        let peak = self.peak_gbps();
        let e = &self.efficiency;
        let cores = cores.clamp(1, self.cores()) as f64;
        let hit = w.llc_hit_share.clamp(0.0, 1.0);
        // A line the cache serves costs what a streamed line costs (or a
        // missed one, if that is less: a hit is never slower than a miss).
        let hits = w.random_lines as f64 * hit;
        let stream = w.stream_bytes as f64 / (peak * e.stream)
            + hits * LINE_BYTES as f64 / (peak * e.stream.max(e.random));
        let sort_hit = w.sort_llc_share.clamp(0.0, 1.0);
        let sort = w.sort_bytes as f64
            * ((1.0 - sort_hit) / (peak * e.sort) + sort_hit / (peak * e.stream.max(e.sort)));
        let misses = w.random_lines as f64 - hits;
        let bandwidth = misses * LINE_BYTES as f64 / (peak * e.random);
        let latency = misses * self.memory_latency_ns / (cores * self.misses_per_core as f64);
        w.calls as f64 * self.call_overhead_us * 1e3
            + w.items as f64 * self.item_ns / cores
            + stream
            + sort
            + bandwidth.max(latency)
    }

    /// The model's time of `work` on all the host's cores, ns.
    pub fn time_ns(&self, work: &PrimitiveWork) -> f64 {
        self.primitive_ns(work, self.cores())
    }

    /// The factor on `primitive`'s memory time ([`Factors`]).
    pub fn factor_of(&self, primitive: CpuPrimitive) -> f64 {
        match primitive {
            CpuPrimitive::GatherReduce => 1.0,
            CpuPrimitive::ExpandCoalesce => self.factor.expand_coalesce,
            CpuPrimitive::CastedGatherReduce => self.factor.casted_gather_reduce,
            CpuPrimitive::Scatter => self.factor.scatter,
        }
    }

    /// The model's time of `primitive`'s `work` on all the host's cores,
    /// ns: its calls' cost plus its factor times its memory time.
    pub fn primitive_time_ns(&self, primitive: CpuPrimitive, work: &PrimitiveWork) -> f64 {
        let fixed = work.calls as f64 * self.call_overhead_us * 1e3
            + work.items as f64 * self.item_ns / self.cores() as f64;
        fixed + self.factor_of(primitive) * (self.time_ns(work) - fixed)
    }
}

/// The CPU primitives the model times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuPrimitive {
    GatherReduce,
    ExpandCoalesce,
    CastedGatherReduce,
    Scatter,
}

impl CpuPrimitive {
    pub const ALL: [CpuPrimitive; 4] = [
        CpuPrimitive::GatherReduce,
        CpuPrimitive::ExpandCoalesce,
        CpuPrimitive::CastedGatherReduce,
        CpuPrimitive::Scatter,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CpuPrimitive::GatherReduce => "gather-reduce",
            CpuPrimitive::ExpandCoalesce => "expand-coalesce",
            CpuPrimitive::CastedGatherReduce => "casted-gather-reduce",
            CpuPrimitive::Scatter => "scatter",
        }
    }
}

/// One table's batch as the model sees it: its lookups (row ids), bags,
/// row width, whether the bags carry weights (weighted-sum pooling) and
/// whether casting gives each lookup a scale (mean or weighted pooling), the
/// table's rows and the batch's unique rows.
#[derive(Clone, Copy, Debug)]
pub struct TableShape<'a> {
    pub indices: &'a [u32],
    pub bags: usize,
    pub dim: usize,
    pub weighted: bool,
    pub scaled: bool,
    pub num_rows: u64,
    pub unique: usize,
}

impl<'a> TableShape<'a> {
    /// The shape of `batch` under `pooling`, with `unique` rows.
    pub fn of(
        batch: &'a nmpsim_traces::TableBatch,
        dim: usize,
        pooling: nmpsim_kernels::Pooling,
        unique: usize,
    ) -> Self {
        use nmpsim_kernels::Pooling;
        TableShape {
            indices: &batch.indices,
            bags: batch.offsets.len().saturating_sub(1),
            dim,
            weighted: pooling == Pooling::WeightedSum,
            scaled: pooling != Pooling::Sum,
            num_rows: batch.num_rows,
            unique,
        }
    }

    /// The work of `primitive` on this table's batch, on a host whose
    /// last-level cache holds `llc_bytes` (the docs' cache rules: the
    /// gather's most looked-up rows that fit; the buffer a step just wrote,
    /// as much of it as fits; the scatter's unique rows, as many as fit).
    pub fn work(
        &self,
        primitive: CpuPrimitive,
        state_values_per_row: usize,
        llc_bytes: u64,
    ) -> PrimitiveWork {
        let row = self.dim as u64 * 4;
        let n = self.indices.len();
        let fits = |bytes: u64| {
            if bytes == 0 {
                1.0
            } else {
                (llc_bytes as f64 / bytes as f64).min(1.0)
            }
        };
        match primitive {
            CpuPrimitive::GatherReduce => gather_reduce_work(
                n,
                self.bags,
                self.dim,
                self.weighted,
                llc_hit_share(self.indices, row, llc_bytes, self.num_rows),
            ),
            CpuPrimitive::ExpandCoalesce => expand_coalesce_work(
                n,
                self.unique,
                self.dim,
                self.weighted,
                self.num_rows,
                fits(n as u64 * row),
                // (Two buffers of (key, value) pairs.)
                fits(n as u64 * 16),
            ),
            CpuPrimitive::CastedGatherReduce => casted_gather_reduce_work(
                n,
                self.unique,
                self.dim,
                self.scaled,
                fits(self.bags as u64 * row),
            ),
            CpuPrimitive::Scatter => {
                let per_row = row + state_values_per_row as u64 * 4;
                scatter_work(
                    self.unique,
                    self.dim,
                    state_values_per_row,
                    fits(self.unique as u64 * per_row),
                )
            }
        }
    }
}

/// The share of `lookups` (row ids, any order, into a table of `num_rows`
/// rows of `row_bytes` each) that hit a last-level cache of `llc_bytes`. A
/// modelled cache that holds the table's hottest rows, judged from the
/// batch: of the batch's most looked-up rows that fit, those looked up more
/// than once are hot (every lookup of them hits, the first too: they were
/// hot in the batches before); a row looked up once is in the cache with the
/// chance a row of the table has, the room left over the table's rows.
pub fn llc_hit_share(lookups: &[u32], row_bytes: u64, llc_bytes: u64, num_rows: u64) -> f64 {
    if lookups.is_empty() {
        return 0.0;
    }
    let mut ids = lookups.to_vec();
    ids.sort_unstable();
    let mut counts: Vec<u64> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let j = ids[i..].partition_point(|&x| x == ids[i]) + i;
        counts.push((j - i) as u64);
        i = j;
    }
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let fit = (llc_bytes / row_bytes.max(1)) as usize;
    let hot: Vec<u64> = counts
        .iter()
        .copied()
        .take(fit)
        .take_while(|&c| c > 1)
        .collect();
    let hot_hits: u64 = hot.iter().sum();
    let room = fit - hot.len();
    let cold_rows = num_rows.saturating_sub(hot.len() as u64).max(1);
    let chance = (room as f64 / cold_rows as f64).min(1.0);
    let cold_lookups = (lookups.len() as u64 - hot_hits) as f64;
    (hot_hits as f64 + cold_lookups * chance) / lookups.len() as f64
}

/// The work of a CPU gather-reduce of `n` lookups of `dim`-wide rows into
/// `bags` bags: each row's lines read at random, the indices and offsets
/// (and weights) read and the pooled rows written in order
/// (`nmpsim_kernels::gather_reduce_traffic`'s bytes, split).
pub fn gather_reduce_work(
    n: usize,
    bags: usize,
    dim: usize,
    weighted: bool,
    llc_hit_share: f64,
) -> PrimitiveWork {
    let t = nmpsim_kernels::traffic::gather_reduce_traffic(n, bags, dim, weighted);
    let rows = nmpsim_kernels::traffic::gather_reduce_row_traffic(n, dim);
    let row_lines = (dim as u64 * 4).div_ceil(LINE_BYTES);
    PrimitiveWork {
        stream_bytes: t.total_bytes() - rows.total_bytes(),
        sort_bytes: 0,
        sort_llc_share: 0.0,
        random_lines: n as u64 * row_lines,
        llc_hit_share,
        calls: 1,
        items: bags as u64,
    }
}

/// The work of a CPU scatter of `unique` coalesced rows with
/// `state_values_per_row` optimizer state: each row and its state read and
/// written at random, the coalesced gradients and row ids read in order.
pub fn scatter_work(
    unique: usize,
    dim: usize,
    state_values_per_row: usize,
    llc_hit_share: f64,
) -> PrimitiveWork {
    let t = nmpsim_kernels::traffic::scatter_traffic(unique, dim, state_values_per_row);
    let rows = nmpsim_kernels::traffic::scatter_row_traffic(unique, dim, state_values_per_row);
    let lines = |values: usize| (values as u64 * 4).div_ceil(LINE_BYTES);
    let per_row = 2
        * (lines(dim)
            + if state_values_per_row > 0 {
                lines(state_values_per_row)
            } else {
                0
            });
    PrimitiveWork {
        stream_bytes: t.total_bytes() - rows.total_bytes(),
        sort_bytes: 0,
        sort_llc_share: 0.0,
        random_lines: unique as u64 * per_row,
        llc_hit_share,
        calls: 1,
        items: unique as u64,
    }
}

/// The work of a CPU expand-coalesce (Algorithm 1) of `n` lookups into
/// `unique` rows of a `num_rows`-row table: the expand streams (the bag
/// gradients read in bag order, the expanded rows written), the argsort is
/// radix passes, the accumulation reads the expanded rows in sorted order
/// (at random; `llc_hit_share` of them still in the cache; the sort's
/// buffers `sort_llc_share` in the cache) and writes the coalesced rows in
/// order (`expand_traffic`, `sort_pairs_traffic` and
/// `coalesce_accumulate_traffic`'s bytes, split).
pub fn expand_coalesce_work(
    n: usize,
    unique: usize,
    dim: usize,
    weighted: bool,
    num_rows: u64,
    llc_hit_share: f64,
    sort_llc_share: f64,
) -> PrimitiveWork {
    use nmpsim_kernels::traffic as tr;
    let expand = tr::expand_traffic(n, dim, weighted);
    let sort = tr::sort_pairs_traffic(n, num_rows);
    let acc = tr::coalesce_accumulate_traffic(n, unique, dim);
    let row = dim as u64 * 4;
    let row_lines = row.div_ceil(LINE_BYTES);
    PrimitiveWork {
        stream_bytes: expand.total_bytes() + acc.total_bytes() - n as u64 * row,
        sort_bytes: sort.total_bytes(),
        sort_llc_share,
        random_lines: n as u64 * row_lines,
        llc_hit_share,
        calls: 1,
        items: unique as u64,
    }
}

/// The work of finding a batch's unique rows on the CPU and copying them
/// into a buffer (SCARS's host-side coalesce): the `n` lookups sorted (radix
/// passes over a `num_rows`-row key), the indices rewritten as positions,
/// the `gathered` rows read at random from the host tables, the `unique`
/// rows written in order.
pub fn unique_rows_work(
    n: usize,
    num_rows: u64,
    unique: usize,
    gathered: usize,
    dim: usize,
) -> PrimitiveWork {
    let sort = nmpsim_kernels::traffic::sort_pairs_traffic(n, num_rows);
    let row = dim as u64 * 4;
    PrimitiveWork {
        stream_bytes: 8 * n as u64 + unique as u64 * row,
        sort_bytes: sort.total_bytes(),
        sort_llc_share: 0.0,
        random_lines: gathered as u64 * row.div_ceil(LINE_BYTES),
        llc_hit_share: 0.0,
        calls: 1,
        items: unique as u64,
    }
}

/// The work of a CPU casted gather-reduce (Algorithm 3) of `n` casted
/// lookups into `unique` rows: the output gradients read by casted src (at
/// random; `llc_hit_share` of them in the cache, the batch's gradients being
/// a small matrix), the casted arrays read and the coalesced rows written in
/// order (`casted_gather_reduce_traffic`'s bytes, split).
pub fn casted_gather_reduce_work(
    n: usize,
    unique: usize,
    dim: usize,
    scaled: bool,
    llc_hit_share: f64,
) -> PrimitiveWork {
    use nmpsim_kernels::traffic as tr;
    let t = tr::casted_gather_reduce_traffic(n, unique, dim, scaled);
    let row = dim as u64 * 4;
    let row_lines = row.div_ceil(LINE_BYTES);
    PrimitiveWork {
        stream_bytes: t.total_bytes() - n as u64 * row,
        sort_bytes: 0,
        sort_llc_share: 0.0,
        random_lines: n as u64 * row_lines,
        llc_hit_share,
        calls: 1,
        items: unique as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_their_data_sheets_peak_and_cores() {
        let d = HostConfig::preset("dgx1").unwrap();
        // 2 sockets x 4 channels x 2400 MT/s x 8 B.
        assert!((d.peak_gbps() - 153.6).abs() < 1e-9);
        assert_eq!(d.cores(), 40);
        let s = HostConfig::preset("SPR-2S").unwrap();
        assert!((s.peak_gbps() - 614.4).abs() < 1e-9);
        assert_eq!(s.cores(), 112);
        let e = HostConfig::preset("epyc").unwrap_err().to_string();
        assert!(e.contains("dgx1, spr-2s"), "{e}");
    }

    #[test]
    fn a_host_file_reads_back_what_it_was_written_from() {
        for name in HostConfig::NAMES {
            let h = HostConfig::preset(name).unwrap();
            assert_eq!(HostConfig::from_toml(&h.to_toml(), "x.toml").unwrap(), h);
        }
    }

    #[test]
    fn a_bad_host_file_names_its_field() {
        let d = HostConfig::preset("dgx1").unwrap();
        let good = d.to_toml();
        let cases = [
            (
                good.replace("sockets = 2\n", ""),
                "field `sockets`: missing",
            ),
            (
                good.replace("channels_per_socket = 4", "channels_per_socket = 0"),
                "field `channels_per_socket`: 0; expected at least 1",
            ),
            (
                good.replace("clock_ghz = 2.2", "clock_ghz = -2.2"),
                "field `clock_ghz`: -2.2; expected a positive number",
            ),
            (
                good.replace(
                    &format!("stream = {}\n", d.efficiency.stream),
                    "stream = 1.5\n",
                ),
                "field `efficiency.stream`: 1.5; expected a share",
            ),
            (
                good.replace(&format!("random = {}\n", d.efficiency.random), ""),
                "field `efficiency.random`: missing",
            ),
            (
                good.replace("ddr_mts = 2400", "ddr_mts = \"fast\""),
                "field `ddr_mts`: `\"fast\"` is not a whole number",
            ),
            (format!("turbo = true\n{good}"), "field `turbo`: unknown"),
            (
                good.replace(
                    &format!("scatter = {}\n", d.factor.scatter),
                    "scatter = 0\n",
                ),
                "field `factor.scatter`: 0; expected a positive number",
            ),
            (
                good.replace(
                    &format!("call_overhead_us = {}", d.call_overhead_us),
                    "call_overhead_us = -1",
                ),
                "field `call_overhead_us`: -1; expected a number at least 0",
            ),
            (
                format!("{good}\nvector = 0.9\n"),
                "field `factor.vector`: unknown",
            ),
            (
                good.replace("name = \"dgx1\"", "name = 3"),
                "field `name`: expected a string",
            ),
            ("name = \"x\"".to_string(), "field `efficiency`: missing"),
        ];
        for (text, want) in cases {
            let e = HostConfig::from_toml(&text, "h.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("host file h.toml") && e.contains(want),
                "{e}\nwanted: {want}"
            );
        }
    }

    #[test]
    fn more_bandwidth_or_cores_never_makes_a_primitive_slower() {
        let works = [
            expand_coalesce_work(2048 * 80, 50_000, 64, false, 1 << 20, 0.3, 0.5),
            casted_gather_reduce_work(2048 * 80, 50_000, 64, false, 0.9),
            gather_reduce_work(2048 * 80, 2048, 64, false, 0.0),
            gather_reduce_work(2048 * 80, 2048, 64, true, 0.5),
            scatter_work(50_000, 64, 64, 0.1),
            PrimitiveWork {
                stream_bytes: 1 << 20,
                sort_bytes: 1 << 22,
                sort_llc_share: 0.0,
                random_lines: 1000,
                llc_hit_share: 0.0,
                calls: 3,
                items: 100,
            },
        ];
        let mut odd = HostConfig::preset("dgx1").unwrap();
        odd.name = "odd".into();
        odd.efficiency = Efficiencies {
            stream: 0.3,
            random: 0.9,
            sort: 0.2,
        };
        for base in [
            HostConfig::preset("dgx1").unwrap(),
            HostConfig::preset("spr-2s").unwrap(),
            HostConfig::reference(),
            odd,
        ] {
            for w in &works {
                check_monotone(&base, w);
            }
        }
    }

    fn check_monotone(base: &HostConfig, w: &PrimitiveWork) {
        {
            let t0 = base.primitive_ns(w, base.cores());
            assert!(t0 > 0.0);
            let mut more = base.clone();
            more.channels_per_socket *= 2;
            assert!(more.primitive_ns(w, more.cores()) <= t0);
            more.ddr_mts = 3200;
            assert!(more.primitive_ns(w, more.cores()) <= t0);
            let mut cores = base.clone();
            cores.cores_per_socket *= 2;
            assert!(cores.primitive_ns(w, cores.cores()) <= t0);
            assert!(base.primitive_ns(w, 1) >= t0);
            // Cache hits never cost time.
            let mut hot = *w;
            hot.llc_hit_share = 1.0;
            hot.sort_llc_share = 1.0;
            assert!(base.primitive_ns(&hot, base.cores()) <= t0);
            // And through a primitive's factor, and a preset's own scaling.
            for p in CpuPrimitive::ALL {
                let t = base.primitive_time_ns(p, w);
                assert!(base.primitive_time_ns(p, &hot) <= t);
                if HostConfig::NAMES.contains(&base.name.as_str()) {
                    let mut m = base.clone();
                    m.channels_per_socket *= 2;
                    let m = m.scaled_from(&HostConfig::reference(), "r");
                    assert!(m.primitive_time_ns(p, w) <= t * (1.0 + 1e-12), "{p:?}");
                    let mut c = base.clone();
                    c.cores_per_socket *= 2;
                    let c = c.scaled_from(&HostConfig::reference(), "r");
                    assert!(c.primitive_time_ns(p, w) <= t * (1.0 + 1e-12), "{p:?}");
                }
            }
        }
    }

    #[test]
    fn the_split_work_adds_up_to_the_kernels_traffic() {
        let (n, b, d) = (1000, 64, 48);
        let w = gather_reduce_work(n, b, d, true, 0.0);
        let t = nmpsim_kernels::traffic::gather_reduce_traffic(n, b, d, true);
        // Rows of 192 B are 3 lines each: the row bytes exactly.
        assert_eq!(
            w.stream_bytes + w.random_lines * LINE_BYTES,
            t.total_bytes()
        );
        // Expand-coalesce: the expand and accumulate streams, the sort's
        // passes and the expanded rows read at random are its bytes.
        let (n, u) = (5000, 1200);
        let w = expand_coalesce_work(n, u, d, false, 1 << 20, 0.0, 0.0);
        use nmpsim_kernels::traffic as tr;
        let t = tr::expand_traffic(n, d, false)
            + tr::sort_pairs_traffic(n, 1 << 20)
            + tr::coalesce_accumulate_traffic(n, u, d);
        assert_eq!(
            w.stream_bytes + w.sort_bytes + w.random_lines * LINE_BYTES,
            t.total_bytes()
        );
        assert_eq!(
            w.sort_bytes,
            tr::sort_pairs_traffic(n, 1 << 20).total_bytes()
        );
        // Casted gather-reduce: the gradient rows at random, the rest in order.
        let w = casted_gather_reduce_work(n, u, d, true, 0.0);
        let t = tr::casted_gather_reduce_traffic(n, u, d, true);
        assert_eq!(
            w.stream_bytes + w.random_lines * LINE_BYTES,
            t.total_bytes()
        );
        assert_eq!(w.sort_bytes, 0);
        let w = scatter_work(100, 16, 1, 0.0);
        let t = nmpsim_kernels::traffic::scatter_traffic(100, 16, 1);
        // A 64 B row and its 4 B state: a line each, read and written.
        assert_eq!(w.random_lines, 100 * 4);
        assert!(w.stream_bytes < t.total_bytes());
    }

    #[test]
    fn one_latency_bound_miss_stream_and_one_bandwidth_bound_one() {
        let h = HostConfig::preset("dgx1").unwrap();
        let w = PrimitiveWork {
            random_lines: 1_000_000,
            ..Default::default()
        };
        // On one core: 1M lines x 90 ns / 10 in flight = 9 ms, latency-bound.
        assert!((h.primitive_ns(&w, 1) - 9e6).abs() < 1.0);
        // On 40: bandwidth-bound, 64 MB at its random share of 153.6 GB/s.
        let bw = 64e6 / (153.6 * h.efficiency.random);
        assert!(bw < 9e6 / 40.0 * 10.0);
        assert!((h.primitive_ns(&w, 40) - bw).abs() < 1.0);
    }

    #[test]
    fn the_hottest_rows_that_fit_take_their_lookups_share() {
        // Row 7 four times, row 3 twice, rows 1 and 2 once: a cache of two
        // rows holds 7 and 3, 6 of the 8 lookups.
        let l = [7, 3, 7, 1, 7, 2, 3, 7];
        assert_eq!(llc_hit_share(&l, 64, 128, 1000), 0.75);
        assert_eq!(llc_hit_share(&l, 64, 0, 1000), 0.0);
        // Room for 4 rows: 7 and 3, and 2 of the 998 other rows for the
        // two lookups seen once.
        let s = llc_hit_share(&l, 64, 256, 1000);
        assert!((s - (6.0 + 2.0 * 2.0 / 998.0) / 8.0).abs() < 1e-12, "{s}");
        // A cache that holds the whole table hits every lookup.
        assert_eq!(llc_hit_share(&l, 64, 1 << 20, 1000), 1.0);
        assert_eq!(llc_hit_share(&[], 64, 1 << 20, 1000), 0.0);
        // Lookups seen once each: the cache's share of the table.
        let once: Vec<u32> = (0..100).collect();
        assert!((llc_hit_share(&once, 64, 64 * 250, 1000) - 0.25).abs() < 1e-12);
    }
}
