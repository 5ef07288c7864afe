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
    pub efficiency: Efficiencies,
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
    /// 64 B lines read or written at scattered addresses (table rows).
    pub random_lines: u64,
    /// Of `random_lines`, the share found in the last-level cache.
    pub llc_hit_share: f64,
}

impl HostConfig {
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
                efficiency: DEFAULT_EFFICIENCIES,
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
                efficiency: DEFAULT_EFFICIENCIES,
                calibration: "uncalibrated defaults, modelled".into(),
            },
            _ => {
                return Err(DlrmError::Config(format!(
                    "unknown host preset `{name}`; expected one of {} or a host file (.toml)",
                    Self::NAMES.join(", ")
                )));
            }
        };
        Ok(h)
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
            "calibration",
            "efficiency",
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
            efficiency: Efficiencies {
                stream: share("stream")?,
                random: share("random")?,
                sort: share("sort")?,
            },
            calibration: string("calibration", Some("as the file gives"))?,
        };
        Ok(h)
    }

    /// The host as a TOML file [`HostConfig::from_toml`] reads back.
    pub fn to_toml(&self) -> String {
        let e = &self.efficiency;
        format!(
            "name = {:?}\ndescription = {:?}\nsockets = {}\ncores_per_socket = {}\nclock_ghz = {}\nchannels_per_socket = {}\nddr_mts = {}\nllc_mib_per_socket = {}\nmemory_latency_ns = {}\nmisses_per_core = {}\ncalibration = {:?}\n\n[efficiency]\nstream = {}\nrandom = {}\nsort = {}\n",
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
            self.calibration,
            e.stream,
            e.random,
            e.sort
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
        let stream = w.stream_bytes as f64 / (peak * e.stream);
        let sort = w.sort_bytes as f64 / (peak * e.sort);
        let misses = w.random_lines as f64 * (1.0 - w.llc_hit_share.clamp(0.0, 1.0));
        let bandwidth = misses * LINE_BYTES as f64 / (peak * e.random);
        let latency = misses * self.memory_latency_ns / (cores * self.misses_per_core as f64);
        stream + sort + bandwidth.max(latency)
    }
}

/// The share of `lookups` (row ids, any order) that hit the last-level
/// cache when its `llc_bytes` hold the hottest rows of `row_bytes` each: the
/// lookups of the `llc_bytes / row_bytes` most looked-up rows. A modelled
/// cache: perfect frequency ordering, nothing else in it.
pub fn llc_hit_share(lookups: &[u32], row_bytes: u64, llc_bytes: u64) -> f64 {
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
    let hit: u64 = counts.iter().take(fit).sum();
    hit as f64 / lookups.len() as f64
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
        random_lines: n as u64 * row_lines,
        llc_hit_share,
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
        random_lines: unique as u64 * per_row,
        llc_hit_share,
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
        let good = HostConfig::preset("dgx1").unwrap().to_toml();
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
                good.replace("stream = 0.7", "stream = 1.5"),
                "field `efficiency.stream`: 1.5; expected a share",
            ),
            (
                good.replace("random = 0.4\n", ""),
                "field `efficiency.random`: missing",
            ),
            (
                good.replace("ddr_mts = 2400", "ddr_mts = \"fast\""),
                "field `ddr_mts`: `\"fast\"` is not a whole number",
            ),
            (format!("turbo = true\n{good}"), "field `turbo`: unknown"),
            (
                format!("{good}\nvector = 0.9\n"),
                "field `efficiency.vector`: unknown",
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
        let base = HostConfig::preset("dgx1").unwrap();
        let works = [
            gather_reduce_work(2048 * 80, 2048, 64, false, 0.0),
            gather_reduce_work(2048 * 80, 2048, 64, true, 0.5),
            scatter_work(50_000, 64, 64, 0.1),
            PrimitiveWork {
                stream_bytes: 1 << 20,
                sort_bytes: 1 << 22,
                random_lines: 1000,
                llc_hit_share: 0.0,
            },
        ];
        for w in &works {
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
            assert!(base.primitive_ns(&hot, base.cores()) <= t0);
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
        // On 40: bandwidth-bound, 64 MB at 0.4 x 153.6 GB/s.
        let bw = 64e6 / (153.6 * 0.4);
        assert!((h.primitive_ns(&w, 40) - bw).abs() < 1.0);
    }

    #[test]
    fn the_hottest_rows_that_fit_take_their_lookups_share() {
        // Row 7 four times, row 3 twice, rows 1 and 2 once: a cache of two
        // rows holds 7 and 3, 6 of the 8 lookups.
        let l = [7, 3, 7, 1, 7, 2, 3, 7];
        assert_eq!(llc_hit_share(&l, 64, 128), 0.75);
        assert_eq!(llc_hit_share(&l, 64, 0), 0.0);
        assert_eq!(llc_hit_share(&l, 64, 1 << 20), 1.0);
        assert_eq!(llc_hit_share(&[], 64, 1 << 20), 0.0);
    }
}
