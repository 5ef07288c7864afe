//! DRAM configurations as data: a TOML file (a preset and overrides, or a
//! standard's part written out in full), and the overrides of the shared
//! command-line flags (`--timing tRCD=24`, `--org rows=32768`).
//!
//! ```toml
//! preset = "DDR4-3200-x8"        # the base; or `standard = "DDR4"` and every field below
//! name = "DDR4-3200-x8-slow-rcd" # optional; default: the preset's name and the file's
//! ranks = 2                      # optional: ranks of the channel
//! mapping = "ro-ra-ba-co-bg"     # optional
//! transaction_queue = 32         # optional
//! command_queue = 8              # optional
//!
//! [timing]                       # cycles; tCK in ns
//! tRCD = 24
//!
//! [org]                          # density_gbit, device_width, bankgroups, banks_per_group,
//! rows = 65536                   # rows, columns, bus_width, burst_length
//!
//! [power]                        # vdd_v, idd0_ma, idd2p_ma, ... idd6_ma
//! idd0_ma = 60.0
//!
//! [[constraint]]                 # added to the standard's table
//! rule = "tRTP+"
//! level = "bank"                 # channel, rank, bankgroup or bank
//! preceding = ["RD", "RDA"]
//! following = ["PRE"]
//! latency = "tRTP + 2"
//! window = 1                     # optional (default 1)
//! sibling = false                # optional (default false)
//! ```
//!
//! Every error names the file, the line and the field, and what was
//! expected.

use std::path::Path;

use toml_edit::{Document, Item};

use crate::SimError;
use crate::config::{AddressMapping, DramConfig, Organisation, Power};
use crate::request::BURST_BYTES;
use crate::standard::{self, ConstraintSpec, Level};

const TOP: &[&str] = &[
    "preset",
    "standard",
    "name",
    "ranks",
    "mapping",
    "transaction_queue",
    "command_queue",
    "timing",
    "org",
    "power",
    "constraint",
];

const ORG: &[&str] = &[
    "density_gbit",
    "device_width",
    "bankgroups",
    "banks_per_group",
    "rows",
    "columns",
    "bus_width",
    "burst_length",
];

const POWER: &[&str] = &[
    "vdd_v", "idd0_ma", "idd2p_ma", "idd2n_ma", "idd3p_ma", "idd3n_ma", "idd4r_ma", "idd4w_ma",
    "idd5b_ma", "idd6_ma",
];

const CONSTRAINT: &[&str] = &[
    "rule",
    "level",
    "preceding",
    "following",
    "latency",
    "window",
    "sibling",
];

/// Where errors of one file point.
struct Src<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Src<'_> {
    fn line(&self, item: Option<&Item>) -> u64 {
        item.and_then(Item::span)
            .map(|s| nmpsim_traces::line_at(self.text, s.start) as u64)
            .unwrap_or(1)
    }

    fn err(&self, item: Option<&Item>, field: &str, what: impl std::fmt::Display) -> SimError {
        SimError::parse(
            self.path,
            self.line(item),
            format!("field `{field}`: {what}"),
        )
    }
}

fn shown(i: &Item) -> String {
    i.to_string().trim().to_string()
}

fn whole(src: &Src, i: &Item, field: &str, min: u64) -> Result<u64, SimError> {
    let v = i.as_integer().ok_or_else(|| {
        src.err(
            Some(i),
            field,
            format!("`{}` is not a whole number", shown(i)),
        )
    })?;
    u64::try_from(v)
        .ok()
        .filter(|&v| v >= min)
        .ok_or_else(|| src.err(Some(i), field, format!("{v}; expected at least {min}")))
}

fn number(src: &Src, i: &Item, field: &str) -> Result<f64, SimError> {
    let v = i
        .as_float()
        .or_else(|| i.as_integer().map(|x| x as f64))
        .ok_or_else(|| src.err(Some(i), field, format!("`{}` is not a number", shown(i))))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(src.err(
            Some(i),
            field,
            format!("{v}; expected a finite number at least 0"),
        ))
    }
}

fn string<'i>(src: &Src, i: &'i Item, field: &str) -> Result<&'i str, SimError> {
    i.as_str()
        .ok_or_else(|| src.err(Some(i), field, format!("`{}` is not a string", shown(i))))
}

/// The keys of a table, each refused unless in `known`.
fn table<'i>(
    src: &Src,
    i: &'i Item,
    field: &str,
    known: &[&str],
) -> Result<Vec<(&'i str, &'i Item)>, SimError> {
    let t = i.as_table_like().ok_or_else(|| {
        src.err(
            Some(i),
            field,
            format!("expected a table of {}", known.join(", ")),
        )
    })?;
    let mut out = Vec::new();
    for (k, v) in t.iter() {
        let name = if field.is_empty() {
            k.to_string()
        } else {
            format!("{field}.{k}")
        };
        if !known.contains(&k) {
            return Err(src.err(
                Some(v),
                &name,
                format!(
                    "unknown; {} has {}",
                    if field.is_empty() {
                        "a DRAM configuration file".to_string()
                    } else {
                        format!("[{field}]")
                    },
                    known.join(", ")
                ),
            ));
        }
        out.push((k, v));
    }
    Ok(out)
}

fn set_org(org: &mut Organisation, key: &str, v: u64) {
    match key {
        "density_gbit" => org.density_gbit = v as u32,
        "device_width" => org.device_width = v as u32,
        "bankgroups" => org.bankgroups = v as u32,
        "banks_per_group" => org.banks_per_group = v as u32,
        "rows" => org.rows = v,
        "columns" => org.columns = v,
        "bus_width" => org.bus_width = v as u32,
        "burst_length" => org.burst_length = v as u32,
        _ => unreachable!("checked against ORG"),
    }
}

fn set_power(p: &mut Power, key: &str, v: f64) {
    match key {
        "vdd_v" => p.vdd_v = v,
        "idd0_ma" => p.idd0_ma = v,
        "idd2p_ma" => p.idd2p_ma = v,
        "idd2n_ma" => p.idd2n_ma = v,
        "idd3p_ma" => p.idd3p_ma = v,
        "idd3n_ma" => p.idd3n_ma = v,
        "idd4r_ma" => p.idd4r_ma = v,
        "idd4w_ma" => p.idd4w_ma = v,
        "idd5b_ma" => p.idd5b_ma = v,
        "idd6_ma" => p.idd6_ma = v,
        _ => unreachable!("checked against POWER"),
    }
}

impl DramConfig {
    /// A configuration from a TOML file; see the [module documentation](self).
    /// `base` is the preset a file without `preset` or `standard` starts from.
    pub fn from_file(path: &Path, base: Option<&str>) -> Result<Self, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::io(path, e))?;
        Self::from_toml(&text, path, base)
    }

    /// [`from_file`](Self::from_file) on the file's text (`path` names it in
    /// errors).
    pub fn from_toml(text: &str, path: &Path, base: Option<&str>) -> Result<Self, SimError> {
        let src = Src { path, text };
        let doc = Document::parse(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| nmpsim_traces::line_at(text, s.start) as u64)
                .unwrap_or(1);
            SimError::parse(path, line, format!("not TOML: {}", e.message()))
        })?;
        let root = doc.as_item();
        let top = table(&src, root, "", TOP)?;
        let get = |k: &str| top.iter().find(|(n, _)| *n == k).map(|(_, i)| *i);
        let (mut cfg, full) = match (get("preset"), get("standard")) {
            (Some(p), None) => {
                let name = string(&src, p, "preset")?;
                let c = DramConfig::preset(name).map_err(|e| src.err(Some(p), "preset", e))?;
                (c, false)
            }
            (None, Some(s)) => {
                let name = string(&src, s, "standard")?;
                let st = standard::by_name(name).ok_or_else(|| {
                    src.err(
                        Some(s),
                        "standard",
                        format!(
                            "unknown standard `{name}`; nmpsim has {}",
                            standard::all().map(|s| s.name).join(", ")
                        ),
                    )
                })?;
                // The standard's first preset supplies the shape; every
                // field must then be given (`missing` below).
                let first = (st.preset_names)()[0].clone();
                let mut c = DramConfig::preset(&first).expect("a standard's presets resolve");
                c.speed = "custom".into();
                c.name = format!("{} custom", st.name);
                (c, true)
            }
            (Some(p), Some(_)) => {
                return Err(src.err(
                    Some(p),
                    "preset",
                    "give `preset` (and overrides) or `standard` (and every field), not both",
                ));
            }
            (None, None) => match base {
                Some(b) => (DramConfig::preset(b)?, false),
                None => {
                    return Err(src.err(
                        None,
                        "preset",
                        "missing; expected `preset = \"NAME\"` (see `nmpsim dram presets`) or `standard = \"DDR4\"` with every field",
                    ));
                }
            },
        };
        let std_ = cfg.standard();
        let mut given_timing: Vec<&str> = Vec::new();
        let mut given_org: Vec<&str> = Vec::new();
        let mut given_power: Vec<&str> = Vec::new();
        if let Some(t) = get("timing") {
            let mut names: Vec<&str> = std_.timings.iter().map(|t| t.name).collect();
            names.insert(0, "tCK");
            for (k, v) in table(&src, t, "timing", &names)? {
                let field = format!("timing.{k}");
                if k == "tCK" {
                    let ns = number(&src, v, &field)?;
                    if ns <= 0.0 {
                        return Err(src.err(
                            Some(v),
                            &field,
                            "0; expected the clock period in ns, above 0",
                        ));
                    }
                    cfg.timing.tck_ns = ns;
                } else {
                    let c = whole(&src, v, &field, 0)?;
                    let c = u32::try_from(c)
                        .map_err(|_| src.err(Some(v), &field, format!("{c} cycles is too many")))?;
                    cfg.timing
                        .set(k, c)
                        .map_err(|e| src.err(Some(v), &field, e))?;
                }
                given_timing.push(k);
            }
        }
        if !full {
            cfg.follow_derived(&given_timing);
        }
        if let Some(o) = get("org") {
            for (k, v) in table(&src, o, "org", ORG)? {
                set_org(&mut cfg.org, k, whole(&src, v, &format!("org.{k}"), 1)?);
                given_org.push(k);
            }
        }
        if let Some(p) = get("power") {
            for (k, v) in table(&src, p, "power", POWER)? {
                set_power(&mut cfg.power, k, number(&src, v, &format!("power.{k}"))?);
                given_power.push(k);
            }
        }
        if full {
            let missing = |what: &str, all: Vec<&str>, given: &[&str], item: Option<&Item>| {
                let m: Vec<&str> = all.into_iter().filter(|n| !given.contains(n)).collect();
                if m.is_empty() {
                    Ok(())
                } else {
                    Err(src.err(
                        item.or(get("standard")),
                        &format!("{what}.{}", m[0]),
                        format!(
                            "missing; a configuration without a preset gives every {what} field (missing: {})",
                            m.join(", ")
                        ),
                    ))
                }
            };
            let mut tn: Vec<&str> = vec!["tCK"];
            tn.extend(std_.timings.iter().map(|t| t.name));
            missing("timing", tn, &given_timing, get("timing"))?;
            missing("org", ORG.to_vec(), &given_org, get("org"))?;
            missing("power", POWER.to_vec(), &given_power, get("power"))?;
        }
        if let Some(v) = get("ranks") {
            cfg.ranks = whole(&src, v, "ranks", 1)? as u32;
        }
        if let Some(v) = get("mapping") {
            cfg.mapping = AddressMapping::parse(string(&src, v, "mapping")?)
                .map_err(|e| src.err(Some(v), "mapping", e))?;
        }
        if let Some(v) = get("transaction_queue") {
            cfg.transaction_queue = whole(&src, v, "transaction_queue", 1)? as u32;
        }
        if let Some(v) = get("command_queue") {
            cfg.command_queue = whole(&src, v, "command_queue", 1)? as u32;
        }
        if let Some(c) = get("constraint") {
            let arr = c
                .as_array_of_tables()
                .ok_or_else(|| src.err(Some(c), "constraint", "expected [[constraint]] tables"))?;
            for (i, t) in arr.iter().enumerate() {
                let field = format!("constraint[{}]", i + 1);
                let item = Item::Table(t.clone());
                let keys = table(&src, &item, &field, CONSTRAINT)?;
                let at = |k: &str| keys.iter().find(|(n, _)| *n == k).map(|(_, i)| *i);
                let need = |k: &str| {
                    at(k).ok_or_else(|| src.err(Some(&item), &format!("{field}.{k}"), "missing"))
                };
                let words = |k: &str| -> Result<Vec<String>, SimError> {
                    let v = need(k)?;
                    let f = format!("{field}.{k}");
                    if let Some(s) = v.as_str() {
                        return Ok(s.split_whitespace().map(str::to_string).collect());
                    }
                    let a = v.as_array().ok_or_else(|| {
                        src.err(
                            Some(v),
                            &f,
                            "expected a list of command names, e.g. [\"RD\", \"RDA\"]",
                        )
                    })?;
                    a.iter()
                        .map(|x| {
                            x.as_str().map(str::to_string).ok_or_else(|| {
                                src.err(Some(v), &f, format!("`{x}` is not a command name"))
                            })
                        })
                        .collect()
                };
                let lv = need("level")?;
                let level_name = string(&src, lv, &format!("{field}.level"))?;
                let level = Level::parse(level_name).ok_or_else(|| {
                    src.err(
                        Some(lv),
                        &format!("{field}.level"),
                        format!("`{level_name}`; expected channel, rank, bankgroup or bank"),
                    )
                })?;
                let spec = ConstraintSpec {
                    rule: string(&src, need("rule")?, &format!("{field}.rule"))?.to_string(),
                    level,
                    preceding: words("preceding")?,
                    following: words("following")?,
                    latency: string(&src, need("latency")?, &format!("{field}.latency"))?
                        .to_string(),
                    window: match at("window") {
                        Some(w) => whole(&src, w, &format!("{field}.window"), 1)? as u32,
                        None => 1,
                    },
                    sibling: match at("sibling") {
                        Some(s) => s.as_bool().ok_or_else(|| {
                            src.err(
                                Some(s),
                                &format!("{field}.sibling"),
                                "expected true or false",
                            )
                        })?,
                        None => false,
                    },
                };
                std_.constraint(&spec, &field).map_err(|e| {
                    // (The error names the key: `constraint[1].following: ...`.)
                    let rest = e.strip_prefix(&format!("{field}.")).unwrap_or(&e);
                    match rest.split_once(": ") {
                        Some((key, what)) if at(key).is_some() => {
                            src.err(at(key), &format!("{field}.{key}"), what)
                        }
                        _ => SimError::parse(path, src.line(Some(&item)), e.clone()),
                    }
                })?;
                cfg.constraints.push(spec);
            }
        }
        cfg.name = match get("name") {
            Some(n) => string(&src, n, "name")?.to_string(),
            None if full => cfg.name,
            None => format!(
                "{} ({})",
                cfg.name,
                path.file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_else(|| path.display().to_string())
            ),
        };
        cfg.validate().map_err(|e| match e {
            // At the field's line where the file gives it (`timing.tRC`).
            SimError::Param { name, what } => {
                let mut item = Some(root);
                for k in name.split('.') {
                    item = item.and_then(|i| i.get(k));
                }
                let item = item.or_else(|| get(name.split('.').next().unwrap_or("")));
                src.err(item, &name, what)
            }
            e => SimError::parse(path, 1, e.to_string()),
        })?;
        Ok(cfg)
    }

    /// Applies `--timing` and `--org` overrides (`NAME=VALUE`, several per
    /// flag separated by commas); each is a field of the standard's timing
    /// (cycles; `tCK` in ns) or of the organisation. The name records them.
    pub fn apply_overrides(&mut self, timing: &[String], org: &[String]) -> Result<(), SimError> {
        let mut changed = Vec::new();
        let mut given: Vec<String> = Vec::new();
        let pairs =
            |flag: &'static str, list: &[String]| -> Result<Vec<(String, String)>, SimError> {
                let mut out = Vec::new();
                for item in list.iter().flat_map(|s| s.split(',')) {
                    let item = item.trim();
                    if item.is_empty() {
                        continue;
                    }
                    let (k, v) = item.split_once('=').ok_or_else(|| {
                        SimError::param(
                            flag,
                            format!(
                                "`{item}`: expected NAME=VALUE, e.g. {}",
                                match flag {
                                    "--timing" => "tRCD=24",
                                    _ => "rows=32768",
                                }
                            ),
                        )
                    })?;
                    out.push((k.trim().to_string(), v.trim().to_string()));
                }
                Ok(out)
            };
        for (k, v) in pairs("--timing", timing)? {
            let bad = |what: String| SimError::param("--timing", format!("{k}={v}: {what}"));
            if k == "tCK" {
                let ns: f64 = v
                    .parse()
                    .ok()
                    .filter(|x: &f64| x.is_finite() && *x > 0.0)
                    .ok_or_else(|| bad("expected the clock period in ns, above 0".into()))?;
                self.timing.tck_ns = ns;
            } else {
                let c: u32 = v
                    .parse()
                    .map_err(|_| bad("expected a whole number of cycles".into()))?;
                self.timing.set(&k, c).map_err(bad)?;
            }
            given.push(k.clone());
            changed.push(format!("{k}={v}"));
        }
        let given: Vec<&str> = given.iter().map(String::as_str).collect();
        self.follow_derived(&given);
        for (k, v) in pairs("--org", org)? {
            let bad = |what: String| SimError::param("--org", format!("{k}={v}: {what}"));
            if !ORG.contains(&k.as_str()) {
                return Err(bad(format!(
                    "unknown field; expected one of {}",
                    ORG.join(", ")
                )));
            }
            let n: u64 = v
                .parse()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| bad("expected a whole number, at least 1".into()))?;
            set_org(&mut self.org, &k, n);
            changed.push(format!("{k}={v}"));
        }
        if !changed.is_empty() {
            self.name = format!("{} [{}]", self.name, changed.join(","));
        }
        self.validate()
    }

    /// The value of a derived timing (`Standard::derived`) from the others.
    fn derived_value(&self, expr: &str) -> u32 {
        let e = self.expr("derived timing", expr);
        self.timing
            .eval(&e, self.org.burst_length)
            .clamp(0, u32::MAX as i64) as u32
    }

    /// Sets every derived timing not in `given` from the others.
    fn follow_derived(&mut self, given: &[&str]) {
        for (name, expr) in self.standard().derived {
            if !given.contains(name) {
                let v = self.derived_value(expr);
                self.timing
                    .set(name, v)
                    .expect("a derived timing is the standard's");
            }
        }
    }

    /// The configuration of the shared DRAM flags: `preset`, then the file
    /// (`--dram-config`; its own `preset` if it names one, else `preset`),
    /// then `--org` and `--timing`.
    pub fn resolve(
        preset: &str,
        file: Option<&Path>,
        timing: &[String],
        org: &[String],
    ) -> Result<Self, SimError> {
        let mut c = match file {
            Some(f) => DramConfig::from_file(f, Some(preset))?,
            None => DramConfig::preset(preset)?,
        };
        c.apply_overrides(timing, org)?;
        Ok(c)
    }

    /// Checks what every engine relies on: power-of-two organisation fields
    /// (the address mapping takes bits of each), 64 B bursts, a positive
    /// clock and queues, and constraints the standard has.
    pub fn validate(&self) -> Result<(), SimError> {
        let o = &self.org;
        let pow2 = |name: &str, v: u64| {
            if v.is_power_of_two() {
                Ok(())
            } else {
                Err(SimError::param(
                    name,
                    format!(
                        "{v}; expected a power of two (the address mapping takes a whole number of bits of it)"
                    ),
                ))
            }
        };
        pow2("ranks", self.ranks as u64)?;
        pow2("org.bankgroups", o.bankgroups as u64)?;
        pow2("org.banks_per_group", o.banks_per_group as u64)?;
        pow2("org.rows", o.rows)?;
        pow2("org.columns", o.columns)?;
        pow2("org.burst_length", o.burst_length as u64)?;
        if o.device_width == 0 || o.bus_width % o.device_width != 0 {
            return Err(SimError::param(
                "org.device_width",
                format!(
                    "{}; expected a divisor of the bus width ({} bits)",
                    o.device_width, o.bus_width
                ),
            ));
        }
        if o.columns < o.burst_length as u64 {
            return Err(SimError::param(
                "org.columns",
                format!(
                    "{}; expected at least one burst ({} columns)",
                    o.columns, o.burst_length
                ),
            ));
        }
        // A request of BURST_BYTES is served as whole bursts (two of an
        // HBM2 pseudo-channel's 32 B), so a burst divides it.
        let burst = o.burst_bytes();
        if burst < 16 || BURST_BYTES % burst != 0 {
            return Err(SimError::param(
                "org.bus_width",
                format!(
                    "a {}-bit bus with bursts of {} moves {burst} B per burst; expected {BURST_BYTES} B, 32 B or 16 B (nmpsim's requests are {BURST_BYTES} B, served as whole bursts)",
                    o.bus_width, o.burst_length
                ),
            ));
        }
        if !(self.timing.tck_ns.is_finite() && self.timing.tck_ns > 0.0) {
            return Err(SimError::param(
                "timing.tCK",
                "expected the clock period in ns, above 0",
            ));
        }
        if self.transaction_queue == 0 || self.command_queue == 0 {
            return Err(SimError::param("queues", "expected at least one entry"));
        }
        let s = self.standard();
        for (name, expr) in s.derived {
            let want = self.derived_value(expr);
            if self.timing[*name] != want {
                return Err(SimError::param(
                    format!("timing.{name}"),
                    format!(
                        "{}; {} defines {name} = {expr} = {want} (DRAMsim3 derives it so; change the others, or leave {name} out to have it follow)",
                        self.timing[*name], s.name
                    ),
                ));
            }
        }
        for (i, spec) in self.constraints.iter().enumerate() {
            s.constraint(spec, &format!("constraint[{}]", i + 1))
                .map_err(|e| SimError::param("constraint", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<DramConfig, String> {
        DramConfig::from_toml(text, Path::new("mem.toml"), Some("DDR4-3200-x8"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_preset_with_overrides() {
        let c = load(
            "preset = \"DDR4-2400-x8\"\nranks = 2\n[timing]\ntRCD = 18\ntCK = 0.8\n[org]\nrows = 32768\n[power]\nidd0_ma = 50\n",
        )
        .unwrap();
        assert_eq!(c.timing["tRCD"], 18);
        assert_eq!(c.timing.tck_ns, 0.8);
        assert_eq!(c.org.rows, 32768);
        assert_eq!(c.ranks, 2);
        assert_eq!(c.power.idd0_ma, 50.0);
        assert_eq!(c.name, "DDR4-2400-x8 (mem.toml)");
        // Unchanged elsewhere.
        let p = DramConfig::preset("DDR4-2400-x8").unwrap();
        assert_eq!(c.timing["tRP"], p.timing["tRP"]);
        // A file without a preset starts from the base one.
        let b = load("[timing]\ntRCD = 30\n").unwrap();
        assert_eq!(b.timing["tRCD"], 30);
        assert_eq!(b.timing["CL"], 22);
        // A legacy HBM2 channel halved by hand is the pseudo-channel
        // preset's organisation: 32 B bursts are accepted.
        let pc = load(
            "preset = \"HBM2-2000\"\n[org]\ndensity_gbit = 4\ndevice_width = 64\nbus_width = 64\ncolumns = 128\n",
        )
        .unwrap();
        assert_eq!(pc.org, DramConfig::preset("HBM2-2000-PC").unwrap().org);
        assert_eq!(pc.burst_bytes(), 32);
    }

    #[test]
    fn a_configuration_written_in_full_equals_its_preset() {
        let p = DramConfig::preset("DDR4-3200-x8").unwrap();
        let mut text = String::from("standard = \"DDR4\"\nname = \"mine\"\n[timing]\n");
        text += &format!("tCK = {}\n", p.timing.tck_ns);
        for (n, v) in p.timing.iter() {
            text += &format!("{n} = {v}\n");
        }
        let o = &p.org;
        text += &format!(
            "[org]\ndensity_gbit = {}\ndevice_width = {}\nbankgroups = {}\nbanks_per_group = {}\nrows = {}\ncolumns = {}\nbus_width = {}\nburst_length = {}\n",
            o.density_gbit,
            o.device_width,
            o.bankgroups,
            o.banks_per_group,
            o.rows,
            o.columns,
            o.bus_width,
            o.burst_length
        );
        let w = &p.power;
        text += &format!(
            "[power]\nvdd_v = {}\nidd0_ma = {}\nidd2p_ma = {}\nidd2n_ma = {}\nidd3p_ma = {}\nidd3n_ma = {}\nidd4r_ma = {}\nidd4w_ma = {}\nidd5b_ma = {}\nidd6_ma = {}\n",
            w.vdd_v,
            w.idd0_ma,
            w.idd2p_ma,
            w.idd2n_ma,
            w.idd3p_ma,
            w.idd3n_ma,
            w.idd4r_ma,
            w.idd4w_ma,
            w.idd5b_ma,
            w.idd6_ma
        );
        let c = load(&text).unwrap();
        assert_eq!(c.timing, p.timing);
        assert_eq!(c.org, p.org);
        assert_eq!(c.power, p.power);
        assert_eq!((c.name.as_str(), c.speed.as_str()), ("mine", "custom"));
        // Without one timing, the error names it.
        let short = text.replace("tFAW = 34\n", "");
        let e = load(&short).unwrap_err();
        assert!(e.contains("field `timing.tFAW`: missing"), "{e}");
        assert!(e.starts_with("mem.toml: line 3:"), "{e}");
        // Ramulator cannot take a configuration without its speed bin.
        assert!(
            c.ramulator_cfg("x")
                .unwrap_err()
                .to_string()
                .contains("custom")
        );
    }

    #[test]
    fn bad_files_name_the_field_and_line() {
        for (text, says) in [
            (
                "preset = \"DDR4-3200-x8\"\nspeed = 3\n",
                "line 2: field `speed`: unknown; a DRAM configuration file has preset",
            ),
            (
                "[timing]\ntRDC = 22\n",
                "line 2: field `timing.tRDC`: unknown; [timing] has tCK, CL",
            ),
            (
                "[org]\nrow = 2\n",
                "field `org.row`: unknown; [org] has density_gbit",
            ),
            (
                "[timing]\ntRCD = -1\n",
                "field `timing.tRCD`: -1; expected at least 0",
            ),
            (
                "[timing]\ntRCD = \"x\"\n",
                "field `timing.tRCD`: `\"x\"` is not a whole number",
            ),
            (
                "preset = \"DDR5-4800\"\n",
                "field `preset`: unknown DRAM preset `DDR5-4800`",
            ),
            (
                "standard = \"LPDDR9\"\n",
                "field `standard`: unknown standard `LPDDR9`; nmpsim has DDR4",
            ),
            ("[org]\nrows = 1000\n", "org.rows"),
            ("[org]\nbus_width = 128\n", "128 B per burst"),
            (
                "[org]\nbus_width = 8\n",
                "8 B per burst; expected 64 B, 32 B or 16 B",
            ),
            ("timing = 3\n", "field `timing`: expected a table"),
            ("ranks = 0\n", "field `ranks`: 0; expected at least 1"),
            ("[timing\n", "line 1: not TOML"),
            (
                "[[constraint]]\nrule = \"tX\"\nlevel = \"bank\"\npreceding = [\"RD\"]\nfollowing = [\"REFSB\"]\nlatency = \"tRTP\"\n",
                "line 5: field `constraint[1].following`: DDR4 has no command `REFSB`; its commands are ACT",
            ),
            (
                "[[constraint]]\nrule = \"tX\"\nlevel = \"bank\"\npreceding = [\"RD\"]\nfollowing = [\"PRE\"]\nlatency = \"tRTPP\"\n",
                "line 6: field `constraint[1].latency`: `tRTPP`: unknown timing `tRTPP`",
            ),
            (
                "[[constraint]]\nrule = \"tX\"\nlevel = \"die\"\npreceding = [\"RD\"]\nfollowing = [\"PRE\"]\nlatency = \"1\"\n",
                "field `constraint[1].level`: `die`; expected channel, rank, bankgroup or bank",
            ),
            (
                "[[constraint]]\nrule = \"tX\"\nlevel = \"bank\"\nfollowing = [\"PRE\"]\nlatency = \"1\"\n",
                "field `constraint[1].preceding`: missing",
            ),
            (
                "[[constraint]]\nrule = \"tX\"\nlevel = \"bank\"\npreceding = \"RD\"\nfollowing = \"PRE\"\nlatency = \"1\"\nwhen = 2\n",
                "field `constraint[1].when`: unknown; [constraint[1]] has rule, level",
            ),
        ] {
            let e = load(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(e.starts_with("mem.toml"), "{e}");
        }
    }

    #[test]
    fn a_files_constraint_joins_the_rules() {
        let c = load(
            "[[constraint]]\nrule = \"tX\"\nlevel = \"bank\"\npreceding = \"RD RDA\"\nfollowing = [\"PRE\"]\nlatency = \"tRTP + 40\"\n",
        )
        .unwrap();
        let r = c.rules();
        let x = r.iter().find(|r| r.rule == "tX").unwrap();
        assert_eq!(x.cycles, 52);
        assert_eq!(
            crate::timing::TimingTable::of(&c).rd_to_pre,
            52,
            "the native engine's table takes the added rule"
        );
    }

    #[test]
    fn a_derived_timing_follows_unless_given() {
        // tRC = tRAS + tRP (JESD79-4; DRAMsim3 derives it so).
        let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
        c.apply_overrides(&["tRP=30".into()], &[]).unwrap();
        assert_eq!(c.timing["tRC"], 52 + 30);
        let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
        c.apply_overrides(&["tRAS=60,tRC=82".into()], &[]).unwrap();
        assert_eq!(c.timing["tRC"], 82);
        let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
        let e = c
            .apply_overrides(&["tRC=80".into()], &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("timing.tRC`: 80; DDR4 defines tRC = tRAS + tRP = 74"),
            "{e}"
        );
        // Likewise in a file: an override follows, a full file must keep it.
        let f = load("[timing]\ntRAS = 60\n").unwrap();
        assert_eq!(f.timing["tRC"], 60 + 22);
        let e = load("[timing]\ntRC = 90\n").unwrap_err();
        assert!(e.contains("timing.tRC`: 90; DDR4 defines tRC"), "{e}");
        // Every preset keeps it.
        for n in crate::config::preset_names() {
            DramConfig::preset(&n).unwrap().validate().unwrap();
        }
    }

    #[test]
    fn flag_overrides() {
        let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
        c.apply_overrides(
            &["tRCD=24,tRP=24".into(), "tCK=0.7".into()],
            &["rows=32768".into()],
        )
        .unwrap();
        assert_eq!(
            (c.timing["tRCD"], c.timing["tRP"], c.org.rows),
            (24, 24, 32768)
        );
        assert_eq!(c.timing.tck_ns, 0.7);
        assert_eq!(c.name, "DDR4-3200-x8 [tRCD=24,tRP=24,tCK=0.7,rows=32768]");
        let mut c = DramConfig::preset("DDR4-3200-x8").unwrap();
        for (t, o, says) in [
            ("tRDC=2", "", "--timing`: tRDC=2: unknown timing `tRDC`"),
            ("tRCD", "", "`tRCD`: expected NAME=VALUE"),
            ("tRCD=x", "", "expected a whole number of cycles"),
            ("", "rows=3", "org.rows`: 3; expected a power of two"),
            (
                "",
                "lanes=2",
                "lanes=2: unknown field; expected one of density_gbit",
            ),
        ] {
            let e = c
                .apply_overrides(&[t.to_string()], &[o.to_string()])
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{t} {o}: {e}");
            c = DramConfig::preset("DDR4-3200-x8").unwrap();
        }
    }
}
