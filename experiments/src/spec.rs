//! The TOML sweep spec.
//!
//! ```toml
//! command = "dram"                 # the nmpsim command of every run
//! description = "free text"        # optional
//! metrics = ["runs.*.bandwidth_gbps"]  # optional: keep only these metric columns
//! [base]                           # flags every run gets
//! engine = "dramsim3"
//! [axes]                           # Cartesian product, first axis slowest
//! preset = ["DDR4-2400-x8", "DDR4-3200-x8"]
//! [[zip]]                          # axes that move together (equal lengths)
//! ranks = [1, 2, 4]
//! link-gbps = [25, 50, 100]
//! [repeat]
//! seeds = [1, 2, 3]                # every point once per --seed
//! ```
//!
//! Keys are the command's long flag names; `link_gbps` and `link-gbps` are the
//! same key. This module checks the spec's shape (what is a list, what is a
//! value, duplicate keys, zip lengths); whether a key is a flag of the command
//! and whether its values parse is [`crate::schema`]'s job.

use nmpsim_traces::line_at;
use toml_edit::{Document, Item, TableLike, Value};

use crate::error::{SpecError, SpecErrors};

/// Keys the sweep sets on every run itself.
pub const RESERVED_FLAGS: [&str; 3] = ["out", "json", "quiet"];

/// Top-level keys of a spec.
const TOP_LEVEL: [&str; 7] = [
    "command",
    "description",
    "metrics",
    "base",
    "axes",
    "zip",
    "repeat",
];

/// One value of a flag.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    /// The text the flag receives on the command line.
    pub fn render(&self) -> String {
        match self {
            Scalar::Str(s) => s.clone(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Scalar::Str(_) => "a string",
            Scalar::Int(_) => "an integer",
            Scalar::Float(_) => "a float",
            Scalar::Bool(_) => "a boolean",
        }
    }
}

/// A value with the line it was written on.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub value: Scalar,
    pub line: usize,
}

/// One key of `[base]`, `[axes]`, a `[[zip]]` group or `[repeat]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// As written in the spec (`link_gbps`).
    pub key: String,
    /// The long flag it names (`link-gbps`).
    pub flag: String,
    /// Line of the key.
    pub line: usize,
    /// One value for `[base]`, the swept values otherwise.
    pub values: Vec<Located>,
}

impl Entry {
    /// The column name of this key in `results.csv` (`link_gbps`).
    pub fn column(&self) -> String {
        self.flag.replace('-', "_")
    }
}

/// A group of axes that move together.
#[derive(Debug, Clone, PartialEq)]
pub struct Zip {
    pub line: usize,
    pub entries: Vec<Entry>,
}

impl Zip {
    /// Points along the group (all entries have this many values once checked).
    pub fn len(&self) -> usize {
        self.entries.first().map_or(0, |e| e.values.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A parsed, shape-checked spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The spec file as the user named it (for messages).
    pub file: String,
    /// The command path (`["nmp", "run"]`).
    pub command: Vec<String>,
    pub command_line: usize,
    pub description: Option<String>,
    /// Glob patterns (`*` matches anything) of metric columns to keep; empty keeps all.
    pub metrics: Vec<String>,
    pub base: Vec<Entry>,
    pub axes: Vec<Entry>,
    pub zips: Vec<Zip>,
    /// `[repeat] seeds`, swept as `--seed`.
    pub seeds: Option<Entry>,
}

struct Ctx<'a> {
    text: &'a str,
    file: &'a str,
    errors: Vec<SpecError>,
}

impl Ctx<'_> {
    fn line(&self, span: Option<std::ops::Range<usize>>) -> Option<usize> {
        span.map(|s| line_at(self.text, s.start))
    }

    fn err(&mut self, line: Option<usize>, key: Option<&str>, msg: impl Into<String>) {
        self.errors
            .push(SpecError::new(self.file, line, key, msg.into()));
    }

    fn key_line(&self, table: &dyn TableLike, key: &str) -> usize {
        self.line(table.key(key).and_then(|k| k.span()))
            .or_else(|| self.line(table.get(key).and_then(Item::span)))
            .unwrap_or(0)
    }

    fn scalar(&mut self, v: &Value, key: &str, fallback_line: usize) -> Option<Located> {
        let line = self.line(v.span()).unwrap_or(fallback_line);
        let value = match v {
            Value::String(s) => Scalar::Str(s.value().clone()),
            Value::Integer(i) => Scalar::Int(*i.value()),
            Value::Float(f) => Scalar::Float(*f.value()),
            Value::Boolean(b) => Scalar::Bool(*b.value()),
            other => {
                self.err(
                    Some(line),
                    Some(key),
                    format!(
                        "expected a string, number or boolean, found {}",
                        article(other.type_name())
                    ),
                );
                return None;
            }
        };
        Some(Located { value, line })
    }

    /// The entries of a table: one value each when `lists` is false, a
    /// non-empty list each otherwise.
    fn entries(&mut self, table: &dyn TableLike, section: &str, lists: bool) -> Vec<Entry> {
        self.entries_of(table, section, lists, |_| true)
    }

    /// [`Ctx::entries`] of the keys `keep` accepts (the others are left to
    /// the caller, which reports them).
    fn entries_of(
        &mut self,
        table: &dyn TableLike,
        section: &str,
        lists: bool,
        keep: impl Fn(&str) -> bool,
    ) -> Vec<Entry> {
        let mut out = Vec::new();
        for (key, item) in table.iter().filter(|(k, _)| keep(k)) {
            let line = self.key_line(table, key);
            let flag = key.replace('_', "-");
            let mut values = Vec::new();
            match item {
                Item::Value(Value::Array(a)) if lists => {
                    if a.is_empty() {
                        self.err(
                            Some(line),
                            Some(key),
                            format!("{section}: axis has no values (expected a non-empty list, e.g. {key} = [1, 2])"),
                        );
                        continue;
                    }
                    for v in a.iter() {
                        if let Some(l) = self.scalar(v, key, line) {
                            values.push(l);
                        }
                    }
                }
                Item::Value(Value::Array(_)) => {
                    self.err(
                        Some(line),
                        Some(key),
                        format!("{section} takes one value per key, found a list (put swept values under [axes])"),
                    );
                    continue;
                }
                Item::Value(v) if !lists => {
                    if let Some(l) = self.scalar(v, key, line) {
                        values.push(l);
                    }
                }
                Item::Value(v) => {
                    self.err(
                        Some(line),
                        Some(key),
                        format!(
                            "{section}: expected a list of values (e.g. {key} = [1, 2]), found {}",
                            article(v.type_name())
                        ),
                    );
                    continue;
                }
                _ => {
                    self.err(
                        Some(line),
                        Some(key),
                        format!("{section}: expected a flag value, found a table (keys are flag names, not dotted paths)"),
                    );
                    continue;
                }
            }
            out.push(Entry {
                key: key.to_string(),
                flag,
                line,
                values,
            });
        }
        out
    }
}

fn article(type_name: &str) -> String {
    match type_name.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {type_name}"),
        _ => format!("a {type_name}"),
    }
}

impl Spec {
    /// Parses `text` (the contents of `file`) and checks its shape.
    pub fn parse(text: &str, file: &str) -> Result<Spec, SpecErrors> {
        let (spec, errors) = Spec::parse_partial(text, file);
        errors.into_result()?;
        spec.ok_or_else(|| SpecErrors(Vec::new()))
    }

    /// Like [`Spec::parse`], but also returns what could be read of a spec
    /// with shape errors (entries in error left out), so that the command
    /// checks can report their problems in the same pass. `None` only when
    /// the text is not TOML.
    pub fn parse_partial(text: &str, file: &str) -> (Option<Spec>, SpecErrors) {
        let doc = match Document::parse(text) {
            Ok(d) => d,
            Err(e) => {
                let line = e.span().map(|s| line_at(text, s.start));
                // What the error points at (a duplicate key, say), when short.
                let at = e
                    .span()
                    .and_then(|s| text.get(s))
                    .map(str::trim)
                    .filter(|t| !t.is_empty() && t.len() <= 60 && !t.contains('\n'))
                    .map(|t| format!(" (at `{t}`)"))
                    .unwrap_or_default();
                return (
                    None,
                    SpecErrors(vec![SpecError::new(
                        file,
                        line,
                        None,
                        format!("not valid TOML: {}{at}", e.message().trim()),
                    )]),
                );
            }
        };
        let mut cx = Ctx {
            text,
            file,
            errors: Vec::new(),
        };
        let root = doc.as_table();
        let mut spec = Spec {
            file: file.to_string(),
            command: Vec::new(),
            command_line: 0,
            description: None,
            metrics: Vec::new(),
            base: Vec::new(),
            axes: Vec::new(),
            zips: Vec::new(),
            seeds: None,
        };
        for (key, item) in root.iter() {
            let line = cx.key_line(root, key);
            match key {
                "command" => {
                    spec.command_line = line;
                    match item.as_str() {
                        Some(s) if !s.trim().is_empty() => {
                            spec.command = s.split_whitespace().map(str::to_string).collect();
                        }
                        _ => cx.err(
                            Some(line),
                            Some(key),
                            "expected the command as a string, e.g. command = \"nmp run\"",
                        ),
                    }
                }
                "description" => match item.as_str() {
                    Some(s) => spec.description = Some(s.to_string()),
                    None => cx.err(Some(line), Some(key), "expected a string"),
                },
                "metrics" => match item.as_array() {
                    Some(a) if a.iter().all(|v| v.as_str().is_some()) => {
                        spec.metrics = a.iter().filter_map(|v| v.as_str()).map(str::to_string).collect();
                    }
                    _ => cx.err(
                        Some(line),
                        Some(key),
                        "expected a list of column patterns, e.g. metrics = [\"runs.*.bandwidth_gbps\"]",
                    ),
                },
                "base" | "axes" => match item.as_table_like() {
                    Some(t) => {
                        let section = format!("[{key}]");
                        let entries = cx.entries(t, &section, key == "axes");
                        if key == "base" {
                            spec.base = entries;
                        } else {
                            spec.axes = entries;
                        }
                    }
                    None => cx.err(Some(line), Some(key), format!("expected a table: [{key}]")),
                },
                "zip" => {
                    let tables: Vec<&dyn TableLike> = match item {
                        Item::ArrayOfTables(a) => a.iter().map(|t| t as &dyn TableLike).collect(),
                        Item::Value(Value::Array(a))
                            if a.iter().all(|v| v.as_inline_table().is_some()) =>
                        {
                            a.iter()
                                .filter_map(|v| v.as_inline_table())
                                .map(|t| t as &dyn TableLike)
                                .collect()
                        }
                        _ => {
                            cx.err(
                                Some(line),
                                Some(key),
                                "expected [[zip]] tables of equally long lists",
                            );
                            Vec::new()
                        }
                    };
                    for t in tables {
                        let entries = cx.entries(t, "[[zip]]", true);
                        if entries.is_empty() && !t.is_empty() {
                            // Every key of the group had an error, said.
                            continue;
                        }
                        let zline = entries.first().map_or(line, |e| e.line);
                        spec.zips.push(Zip {
                            line: zline,
                            entries,
                        });
                    }
                }
                "repeat" => match item.as_table_like() {
                    Some(t) => {
                        for (k, _) in t.iter() {
                            if k != "seeds" {
                                let l = cx.key_line(t, k);
                                cx.err(
                                    Some(l),
                                    Some(k),
                                    "unknown key in [repeat] (expected: seeds = [1, 2, 3])",
                                );
                            }
                        }
                        // (An unknown key's value is not judged too: no
                        // shape of it would make the key valid.)
                        let mut entries = cx.entries_of(t, "[repeat]", true, |k| k == "seeds");
                        if let Some(pos) = entries.iter().position(|e| e.key == "seeds") {
                            let mut e = entries.swap_remove(pos);
                            e.flag = "seed".to_string();
                            spec.seeds = Some(e);
                        }
                    }
                    None => cx.err(Some(line), Some(key), "expected a table: [repeat]"),
                },
                other => cx.err(
                    Some(line),
                    Some(other),
                    format!("unknown top-level key (expected one of: {})", TOP_LEVEL.join(", ")),
                ),
            }
        }
        if spec.command.is_empty()
            && !cx
                .errors
                .iter()
                .any(|e| e.key.as_deref() == Some("command"))
        {
            cx.err(
                None,
                None,
                "missing `command = \"...\"` (the nmpsim command of every run: dram, nmp run, train)",
            );
        }
        spec.check_zips(&mut cx);
        spec.check_keys(&mut cx);
        spec.check_repeats(&mut cx);
        (Some(spec), SpecErrors(cx.errors))
    }

    fn check_zips(&self, cx: &mut Ctx<'_>) {
        for z in &self.zips {
            let Some(first) = z.entries.first() else {
                cx.err(Some(z.line), None, "[[zip]] group with no keys");
                continue;
            };
            for e in &z.entries[1..] {
                if e.values.len() != first.values.len() {
                    cx.err(
                        Some(e.line),
                        Some(&e.key),
                        format!(
                            "[[zip]] lists must be equally long: '{}' has {} values, '{}' has {}",
                            first.key,
                            first.values.len(),
                            e.key,
                            e.values.len()
                        ),
                    );
                }
            }
        }
    }

    /// A value twice in one axis (or a `[[zip]]` point twice in its group)
    /// would give two runs of the same configuration: the same hash, so one
    /// finished run would stand for both. Values are compared as the flag
    /// receives them (`1` and `"1"` are the same value).
    fn check_repeats(&self, cx: &mut Ctx<'_>) {
        let single = self
            .axes
            .iter()
            .map(|e| (e, "[axes]"))
            .chain(self.seeds.iter().map(|e| (e, "[repeat]")));
        for (e, section) in single {
            for (k, v) in e.values.iter().enumerate() {
                let r = v.value.render();
                if let Some(first) = e.values[..k].iter().find(|w| w.value.render() == r) {
                    cx.err(
                        Some(v.line),
                        Some(&e.key),
                        format!(
                            "{section}: value {r:?} is listed twice (first on line {}): two runs would have the same configuration; list each value once",
                            first.line
                        ),
                    );
                }
            }
        }
        for z in &self.zips {
            let Some(head) = z.entries.first() else {
                continue;
            };
            let n = z.entries.iter().map(|e| e.values.len()).min().unwrap_or(0);
            let point = |j: usize| -> Vec<String> {
                z.entries
                    .iter()
                    .map(|e| e.values[j].value.render())
                    .collect()
            };
            for k in 0..n {
                let pk = point(k);
                if let Some(j) = (0..k).find(|&j| point(j) == pk) {
                    let shown: Vec<String> = z
                        .entries
                        .iter()
                        .zip(&pk)
                        .map(|(e, v)| format!("{}={v}", e.key))
                        .collect();
                    cx.err(
                        Some(head.values[k].line),
                        Some(&head.key),
                        format!(
                            "[[zip]]: point {} ({}) repeats point {} (line {}): two runs would have the same configuration; list each point once",
                            k + 1,
                            shown.join(", "),
                            j + 1,
                            head.values[j].line
                        ),
                    );
                }
            }
        }
    }

    fn check_keys(&self, cx: &mut Ctx<'_>) {
        let mut seen: Vec<(&str, &str, usize)> = Vec::new();
        let places = self
            .base
            .iter()
            .map(|e| (e, "[base]"))
            .chain(self.axes.iter().map(|e| (e, "[axes]")))
            .chain(
                self.zips
                    .iter()
                    .flat_map(|z| z.entries.iter().map(|e| (e, "[[zip]]"))),
            )
            .chain(self.seeds.iter().map(|e| (e, "[repeat] seeds")));
        for (e, place) in places {
            if RESERVED_FLAGS.contains(&e.flag.as_str()) {
                cx.err(
                    Some(e.line),
                    Some(&e.key),
                    format!(
                        "--{} is set by the sweep itself (every run gets --out RUNDIR --json --quiet); remove it",
                        e.flag
                    ),
                );
                continue;
            }
            if let Some((_, other, l)) = seen.iter().find(|(f, _, _)| *f == e.flag) {
                let what = if e.flag == "seed"
                    && (place.starts_with("[repeat]") || other.starts_with("[repeat]"))
                {
                    "--seed is swept by [repeat] seeds".to_string()
                } else {
                    format!("--{}", e.flag)
                };
                cx.err(
                    Some(e.line),
                    Some(&e.key),
                    format!("{what}: set twice, in {other} (line {l}) and in {place}; keep one"),
                );
                continue;
            }
            seen.push((&e.flag, place, e.line));
        }
    }

    /// Every entry with its section, in spec order: base, axes, zip groups, seeds.
    pub fn all_entries(&self) -> impl Iterator<Item = &Entry> {
        self.base
            .iter()
            .chain(self.axes.iter())
            .chain(self.zips.iter().flat_map(|z| z.entries.iter()))
            .chain(self.seeds.iter())
    }

    /// The swept entries in column order: axes, zip groups, seeds.
    pub fn swept_entries(&self) -> impl Iterator<Item = &Entry> {
        self.axes
            .iter()
            .chain(self.zips.iter().flat_map(|z| z.entries.iter()))
            .chain(self.seeds.iter())
    }

    /// The parameter columns of `results.csv`.
    pub fn param_columns(&self) -> Vec<String> {
        self.swept_entries().map(Entry::column).collect()
    }

    /// The command path as typed (`nmp run`).
    pub fn command_str(&self) -> String {
        self.command.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(text: &str) -> Vec<SpecError> {
        Spec::parse(text, "t.toml")
            .expect_err("should be rejected")
            .0
    }

    /// The one error of `text`, which is on `line` and names `key`.
    fn one_error(text: &str, line: usize, key: &str) -> SpecError {
        let mut e = errs(text);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].line, Some(line));
        assert_eq!(e[0].key.as_deref(), Some(key));
        e.remove(0)
    }

    #[test]
    fn a_duplicate_key_is_named() {
        let e = errs("command = \"dram\"\n[base]\nengine = \"native\"\nengine = \"dramsim3\"\n");
        let t = e[0].to_string();
        assert!(t.contains("duplicate key") && t.contains("`engine`"), "{t}");
        assert_eq!(e[0].line, Some(4), "{t}");
    }

    #[test]
    fn a_zip_group_of_empty_lists_is_not_said_to_have_no_keys() {
        let e = errs("command = \"dram\"\n[[zip]]\nwindow = []\nrequests = []\n");
        let text: Vec<String> = e.iter().map(|e| e.to_string()).collect();
        assert_eq!(e.len(), 2, "{text:?}");
        assert!(
            text.iter().all(|t| t.contains("axis has no values")),
            "{text:?}"
        );
        let e = errs("command = \"dram\"\n[[zip]]\n");
        assert!(
            e[0].to_string().contains("[[zip]] group with no keys"),
            "{e:?}"
        );
    }

    #[test]
    fn parses_all_sections_with_lines() {
        let s = Spec::parse(
            "command = \"nmp run\"\n[base]\nbatch = 256\ncheck = true\n[axes]\nplacement = [\"vector-sliced\",\n  \"row-interleaved\"]\n[[zip]]\nranks = [1, 2]\nlink_gbps = [25.5, 50]\n[repeat]\nseeds = [1, 2, 3]\n",
            "t.toml",
        )
        .expect("valid");
        assert_eq!(s.command, vec!["nmp", "run"]);
        assert_eq!(s.base.len(), 2);
        assert_eq!(s.base[0].values[0].value, Scalar::Int(256));
        assert_eq!(s.base[1].values[0].value, Scalar::Bool(true));
        assert_eq!(s.axes[0].line, 6);
        assert_eq!(s.axes[0].values[1].line, 7);
        assert_eq!(s.zips[0].entries[1].flag, "link-gbps");
        assert_eq!(s.zips[0].entries[1].column(), "link_gbps");
        assert_eq!(s.zips[0].entries[1].values[0].value.render(), "25.5");
        assert_eq!(s.zips[0].entries[1].values[1].value.render(), "50");
        assert_eq!(s.seeds.as_ref().map(|e| e.values.len()), Some(3));
        assert_eq!(
            s.param_columns(),
            vec!["placement", "ranks", "link_gbps", "seed"]
        );
    }

    #[test]
    fn empty_axis_names_key_and_line() {
        let e = one_error(
            "command = \"dram\"\n[axes]\nstream = [\"random\"]\npreset = []\n",
            4,
            "preset",
        );
        assert!(e.message.contains("no values"), "{e}");
    }

    #[test]
    fn unequal_zip_is_rejected() {
        let e = errs("command = \"nmp run\"\n[[zip]]\nranks = [1, 2, 4]\nlink-gbps = [25, 50]\n");
        assert_eq!(e[0].line, Some(4));
        assert!(e[0].message.contains("3 values"), "{}", e[0]);
    }

    #[test]
    fn a_value_twice_in_an_axis_is_rejected() {
        let e = one_error("command = \"train\"\n[axes]\nlr = [0.1,\n  0.1]\n", 4, "lr");
        assert!(
            e.message
                .contains("\"0.1\" is listed twice (first on line 3)"),
            "{e}"
        );
        assert!(
            e.to_string().starts_with("t.toml:4: key 'lr': [axes]"),
            "{e}"
        );
        // The value as the flag gets it: 1 and "1" are one value.
        let e = errs("command = \"dram\"\n[axes]\nwindow = [1, 2, \"1\"]\n");
        assert!(e[0].message.contains("\"1\" is listed twice"), "{}", e[0]);
        let e = errs("command = \"dram\"\n[repeat]\nseeds = [1, 2, 2]\n");
        assert!(
            e[0].message.starts_with("[repeat]: value \"2\""),
            "{}",
            e[0]
        );
        // Distinct values are fine, also equal values in different axes.
        Spec::parse(
            "command = \"dram\"\n[axes]\nwindow = [1, 2]\nseed = [1, 2]\n",
            "t.toml",
        )
        .expect("valid");
    }

    #[test]
    fn a_zip_point_twice_is_rejected() {
        let e = one_error(
            "command = \"nmp run\"\n[[zip]]\nranks = [1, 2, 1]\nbatch = [64, 64, 64]\n",
            3,
            "ranks",
        );
        assert!(
            e.message
                .contains("point 3 (ranks=1, batch=64) repeats point 1"),
            "{e}"
        );
        // A value may repeat within one list of a group when the points differ.
        Spec::parse(
            "command = \"nmp run\"\n[[zip]]\nranks = [1, 2, 1]\nbatch = [64, 64, 128]\n",
            "t.toml",
        )
        .expect("valid");
    }

    #[test]
    fn duplicate_keys_across_sections_and_spellings() {
        let e =
            errs("command = \"nmp run\"\n[base]\nlink_gbps = 25\n[axes]\nlink-gbps = [25, 50]\n");
        assert_eq!(e[0].line, Some(5));
        assert!(e[0].message.contains("set twice"), "{}", e[0]);
        let e = errs("command = \"dram\"\n[base]\nseed = 1\n[repeat]\nseeds = [1, 2]\n");
        assert!(e[0].message.contains("[repeat] seeds"), "{}", e[0]);
    }

    #[test]
    fn reserved_flags_and_unknown_sections() {
        let e = errs("command = \"dram\"\n[base]\nout = \"x\"\n");
        assert!(e[0].message.contains("set by the sweep"), "{}", e[0]);
        let e = errs("command = \"dram\"\n[axis]\nx = [1]\n");
        assert_eq!(e[0].key.as_deref(), Some("axis"));
        let e = errs("[base]\nx = 1\n");
        assert!(e[0].message.contains("missing `command"), "{}", e[0]);
    }

    #[test]
    fn an_unknown_repeat_key_is_one_error() {
        let e = errs("command = \"dram\"\n[repeat]\ncount = 3\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((e[0].line, e[0].key.as_deref()), (Some(3), Some("count")));
        assert!(e[0].message.contains("unknown key in [repeat]"), "{}", e[0]);
        let e = errs("command = \"dram\"\n[repeat]\ncount = [1, 2]\nseeds = 3\n");
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].message.contains("unknown key in [repeat]"), "{}", e[0]);
        assert!(
            e[1].message
                .contains("[repeat]: expected a list of values (e.g. seeds = [1, 2])"),
            "{}",
            e[1]
        );
    }

    #[test]
    fn shape_errors_say_what_was_expected() {
        let e = errs("command = \"dram\"\n[axes]\nrequests = 1000\n");
        assert!(e[0].message.contains("expected a list"), "{}", e[0]);
        let e = errs("command = \"dram\"\n[base]\nrequests = [1000]\n");
        assert!(e[0].message.contains("one value per key"), "{}", e[0]);
        let e = errs("command = \"dram\"\n[axes]\nrequests = [[1]]\n");
        assert!(e[0].message.contains("found an array"), "{}", e[0]);
        let e = errs("command = \"dram\"\n[axes\n");
        assert!(e[0].message.contains("not valid TOML"), "{}", e[0]);
        assert_eq!(e[0].line, Some(2));
    }

    #[test]
    fn partial_parse_keeps_good_entries_beside_errors() {
        let (spec, errors) = Spec::parse_partial(
            "command = \"dram\"\n[axes]\nstream = []\npreset = [\"A\"]\nwindow = 4\n",
            "t.toml",
        );
        let spec = spec.expect("TOML is valid");
        assert_eq!(spec.axes.len(), 1);
        assert_eq!(spec.axes[0].key, "preset");
        let lines: Vec<_> = errors.0.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![Some(3), Some(5)]);
        let (spec, errors) = Spec::parse_partial("[axes", "t.toml");
        assert!(spec.is_none());
        assert_eq!(errors.0.len(), 1);
    }

    #[test]
    fn inline_zip_form_is_accepted() {
        let s = Spec::parse(
            "command = \"nmp run\"\nzip = [{ ranks = [1, 2], link-gbps = [25, 50] }]\n",
            "t.toml",
        )
        .expect("valid");
        assert_eq!(s.zips.len(), 1);
        assert_eq!(s.zips[0].len(), 2);
    }
}
