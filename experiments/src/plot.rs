//! Charts of sweep results, written as SVG and PNG.
//!
//! A [`Chart`] is a title, axis labels, a [`ChartKind`] and a list of
//! [`Series`]: [`ChartKind::Lines`] draws one line with markers per series
//! over a numeric x axis, [`ChartKind::Bars`] draws grouped bars (one colour
//! per series) over categories in first-appearance order. Either axis may be
//! logarithmic; horizontal reference lines (`hlines`, e.g. a figure from a
//! paper) are drawn dashed and listed in the legend.
//!
//! [`chart_from_csv`] builds a chart from a tidy CSV such as a sweep's
//! `results.csv`: one x column, one or more y columns, optional group columns.
//! [`write_chart`] writes `<stem>.svg` and `<stem>.png`.
//!
//! Text is drawn with DejaVu Sans, embedded in the binary (the `dejavu`
//! crate) and registered with plotters' `ab_glyph` text renderer: charts
//! render the same on a machine without fonts, fontconfig or freetype. The
//! SVG names the generic `sans-serif` family, so a viewer uses its own.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::combinators::WithKeyPoints;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use nmpsim_traces::staged::StagedFile;

use crate::results::parse_csv_lines;

/// Pixel size of [`write_chart`]'s images (the SVG's nominal size too).
pub const DEFAULT_SIZE: (u32, u32) = (900, 560);

/// How the series are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChartKind {
    /// Numeric x: one line with markers per series, points in x order.
    #[default]
    Lines,
    /// Categorical x: grouped bars, one colour per series, categories in
    /// first-appearance order.
    Bars,
}

/// An x value: a number (lines, or a bar category shown as the number) or a
/// category.
#[derive(Debug, Clone, PartialEq)]
pub enum XValue {
    Num(f64),
    Cat(String),
}

impl XValue {
    /// The text of this value as a category (numbers as [`format_value`]).
    pub fn label(&self) -> String {
        match self {
            XValue::Num(v) => format_value(*v),
            XValue::Cat(s) => s.clone(),
        }
    }
}

impl From<f64> for XValue {
    fn from(v: f64) -> Self {
        XValue::Num(v)
    }
}

impl From<&str> for XValue {
    fn from(s: &str) -> Self {
        XValue::Cat(s.to_string())
    }
}

impl From<String> for XValue {
    fn from(s: String) -> Self {
        XValue::Cat(s)
    }
}

/// One named series of (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(XValue, f64)>,
}

impl Series {
    pub fn new(name: impl Into<String>) -> Self {
        Series {
            name: name.into(),
            points: Vec::new(),
        }
    }

    /// Adds a point (builder style).
    pub fn point(mut self, x: impl Into<XValue>, y: f64) -> Self {
        self.points.push((x.into(), y));
        self
    }
}

/// A chart: what [`write_chart`] draws.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub kind: ChartKind,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
    /// optional horizontal reference lines, e.g. ("paper: 600 GB/s", 600.0)
    pub hlines: Vec<(String, f64)>,
    /// A bar chart's categories in this order (any others follow, series by
    /// series); empty: in the order the series hold them.
    pub category_order: Vec<String>,
}

impl Chart {
    /// An empty chart; fill in labels, series and options with the builders
    /// or the public fields.
    pub fn new(title: impl Into<String>, kind: ChartKind) -> Self {
        Chart {
            title: title.into(),
            kind,
            ..Chart::default()
        }
    }

    pub fn labels(mut self, x: impl Into<String>, y: impl Into<String>) -> Self {
        self.x_label = x.into();
        self.y_label = y.into();
        self
    }

    pub fn log_axes(mut self, log_x: bool, log_y: bool) -> Self {
        self.log_x = log_x;
        self.log_y = log_y;
        self
    }

    pub fn with_series(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }

    pub fn hline(mut self, label: impl Into<String>, y: f64) -> Self {
        self.hlines.push((label.into(), y));
        self
    }

    /// Checks that the chart can be drawn: some finite point, numeric x for
    /// lines, and positive values on a log axis.
    pub fn validate(&self) -> Result<(), PlotError> {
        if self.series.iter().all(|s| s.points.is_empty()) {
            return Err(PlotError::Invalid(format!(
                "chart `{}` has no points to draw",
                self.title
            )));
        }
        for s in &self.series {
            for (x, y) in &s.points {
                if !y.is_finite() {
                    return Err(PlotError::Invalid(format!(
                        "series `{}` has a non-finite y ({y}) at x = {}",
                        s.name,
                        x.label()
                    )));
                }
                match (self.kind, x) {
                    (ChartKind::Lines, XValue::Cat(c)) => {
                        return Err(PlotError::Invalid(format!(
                            "a line chart needs numeric x, but series `{}` has x = `{c}` \
                             (draw it as bars)",
                            s.name
                        )));
                    }
                    (ChartKind::Lines, XValue::Num(v)) if !v.is_finite() => {
                        return Err(PlotError::Invalid(format!(
                            "series `{}` has a non-finite x ({v})",
                            s.name
                        )));
                    }
                    _ => {}
                }
                if self.log_y && *y <= 0.0 {
                    return Err(PlotError::LogAxis {
                        axis: "y",
                        what: format!("series `{}` has y = {} at x = {}", s.name, y, x.label()),
                    });
                }
                if self.log_x {
                    match x {
                        XValue::Num(v) if *v <= 0.0 => {
                            return Err(PlotError::LogAxis {
                                axis: "x",
                                what: format!("series `{}` has x = {v}", s.name),
                            });
                        }
                        XValue::Cat(_) => {}
                        XValue::Num(_) => {}
                    }
                }
            }
        }
        if self.log_x && self.kind == ChartKind::Bars {
            return Err(PlotError::Invalid(
                "a log x axis needs a line chart (bars have categories on x)".into(),
            ));
        }
        for (label, y) in &self.hlines {
            if !y.is_finite() {
                return Err(PlotError::Invalid(format!(
                    "reference line `{label}` is not finite ({y})"
                )));
            }
            if self.log_y && *y <= 0.0 {
                return Err(PlotError::LogAxis {
                    axis: "y",
                    what: format!("reference line `{label}` is at {y}"),
                });
            }
        }
        Ok(())
    }
}

/// What went wrong reading data for a chart or drawing it.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// (The I/O error is part of the message, not a separate source, so
    /// that printing the error with its chain names it once.)
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot write {}: {message}", path.display())]
    Write { path: PathBuf, message: String },
    #[error("{file}: no column `{column}`{hint}; its columns are: {}", available.join(", "))]
    MissingColumn {
        file: String,
        column: String,
        /// ` (did you mean ...?)` or empty.
        hint: String,
        available: Vec<String>,
    },
    #[error("{file}: {message}")]
    Csv { file: String, message: String },
    #[error(
        "{file}: nothing to plot: none of its {rows} rows has a numeric {ys} \
         ({skipped} skipped: empty or non-numeric, e.g. failed runs or statistics a run has none of)"
    )]
    NoData {
        file: String,
        ys: String,
        rows: usize,
        skipped: usize,
    },
    #[error("a log {axis} axis needs positive values, but {what}")]
    LogAxis { axis: &'static str, what: String },
    #[error("{0}")]
    Invalid(String),
}

// ---------------------------------------------------------------------------
// From CSV

/// Options of [`chart_from_csv`]; the default is a line chart when x is
/// numeric, linear axes, and titles and labels made from the column names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CsvChartOptions {
    /// Draw bars even when every x value is a number.
    pub bars: bool,
    pub log_x: bool,
    pub log_y: bool,
    /// Default: `<y> vs <x>`, plus ` by <group>` when grouped.
    pub title: Option<String>,
    /// Default: the x column's name.
    pub x_label: Option<String>,
    /// Default: the y column's name, or `value` for several.
    pub y_label: Option<String>,
}

/// A chart read from a CSV, with what was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvChart {
    pub chart: Chart,
    /// Data rows in the file.
    pub rows: usize,
    /// Per y column, in the order given: rows that gave it no point (an
    /// empty x, or an empty or non-numeric value in that column). A row
    /// skipped for one y column still gives its points of the others.
    pub skipped: Vec<usize>,
    /// Rows skipped for an empty x (counted in every `skipped` too).
    pub empty_x: usize,
}

/// Builds a chart from a tidy CSV (as written by `nmpsim sweep`'s
/// `results.csv`): `x` column, one or more `ys` columns, optional `group`
/// columns. Series are the group values (first appearance order), or the y
/// columns when several, or both combined (`<y> (<group>)`). See
/// [`chart_from_csv_text`] for the rules; [`read_csv_chart`] also returns how
/// many rows were skipped.
pub fn chart_from_csv(
    csv_path: &Path,
    x: &str,
    ys: &[String],
    group: &[String],
    opts: &CsvChartOptions,
) -> Result<Chart, PlotError> {
    read_csv_chart(csv_path, x, ys, group, opts).map(|c| c.chart)
}

/// [`chart_from_csv`], with the counts of rows read and skipped.
pub fn read_csv_chart(
    csv_path: &Path,
    x: &str,
    ys: &[String],
    group: &[String],
    opts: &CsvChartOptions,
) -> Result<CsvChart, PlotError> {
    let text = fs::read_to_string(csv_path).map_err(|error| PlotError::Read {
        path: csv_path.to_path_buf(),
        error,
    })?;
    chart_from_csv_text(&text, &csv_path.display().to_string(), x, ys, group, opts)
}

/// A finite number, or `None` (empty, text, `NaN`, `inf`).
fn parse_number(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// [`chart_from_csv`] on CSV text (RFC 4180 quoting); `file` names it in
/// errors.
///
/// - Rows whose x is empty, or whose y is empty or not a number (a failed
///   run's row), are skipped and counted, per y column.
/// - When every remaining x value is a number the chart is [`ChartKind::Lines`]
///   (points sorted by x) unless `opts.bars`; otherwise [`ChartKind::Bars`]
///   with categories in first-appearance order. Nothing is aggregated: two
///   rows of one category (or x) in one series are an error naming them
///   (bars drawn on top of each other, or a line zig-zagging at one x), to be
///   split by a group column.
/// - A column named by `x`, `ys` or `group` must appear once in the header.
/// - A group column whose value is a number is shown as `column=value` in the
///   series name; several group columns are joined with `, `.
pub fn chart_from_csv_text(
    text: &str,
    file: &str,
    x: &str,
    ys: &[String],
    group: &[String],
    opts: &CsvChartOptions,
) -> Result<CsvChart, PlotError> {
    if ys.is_empty() {
        return Err(PlotError::Invalid("no y column given".into()));
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut records = parse_csv_lines(text)
        .map_err(|e| PlotError::Csv {
            file: file.to_string(),
            message: e.to_string(),
        })?
        .into_iter()
        .filter(|(_, r)| !(r.len() == 1 && r[0].trim().is_empty()));
    let (_, header) = records.next().ok_or_else(|| PlotError::Csv {
        file: file.to_string(),
        message: "empty file (no header line)".into(),
    })?;
    let header: Vec<String> = header.into_iter().map(|h| h.trim().to_string()).collect();
    let column = |name: &str| -> Result<usize, PlotError> {
        let at: Vec<usize> = (0..header.len()).filter(|&i| header[i] == name).collect();
        match at[..] {
            [] => Err(missing_column(file, name, &header)),
            [i] => Ok(i),
            _ => Err(PlotError::Csv {
                file: file.to_string(),
                message: format!(
                    "the header has {} columns named `{name}` (columns {}): which one to plot \
                     is ambiguous; rename them apart",
                    at.len(),
                    at.iter()
                        .map(|i| (i + 1).to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    };
    let xi = column(x)?;
    let yis = ys
        .iter()
        .map(|y| column(y))
        .collect::<Result<Vec<_>, _>>()?;
    let gis = group
        .iter()
        .map(|g| column(g))
        .collect::<Result<Vec<_>, _>>()?;

    // Observations: (line, x text, y index, group index, y).
    let mut groups: Vec<String> = Vec::new();
    let mut group_index: HashMap<String, usize> = HashMap::new();
    let mut obs: Vec<(usize, String, usize, usize, f64)> = Vec::new();
    let (mut rows, mut empty_x) = (0, 0);
    let mut skipped = vec![0; ys.len()];
    for (line, rec) in records {
        if rec.len() != header.len() {
            return Err(PlotError::Csv {
                file: file.to_string(),
                message: format!(
                    "line {line}: {} fields; the header has {}",
                    rec.len(),
                    header.len()
                ),
            });
        }
        rows += 1;
        let field = |i: usize| rec.get(i).map_or("", |s| s.trim());
        let xv = field(xi);
        if xv.is_empty() {
            empty_x += 1;
            skipped.iter_mut().for_each(|n| *n += 1);
            continue;
        }
        let label = group
            .iter()
            .zip(&gis)
            .map(|(name, &i)| {
                let v = field(i);
                if parse_number(v).is_some() {
                    format!("{name}={v}")
                } else if v.is_empty() {
                    format!("{name}=(empty)")
                } else {
                    v.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        for (k, &yi) in yis.iter().enumerate() {
            match parse_number(field(yi)) {
                Some(y) => {
                    let g = *group_index.entry(label.clone()).or_insert_with(|| {
                        groups.push(label.clone());
                        groups.len() - 1
                    });
                    obs.push((line, xv.to_string(), k, g, y));
                }
                None => skipped[k] += 1,
            }
        }
    }
    if obs.is_empty() {
        return Err(PlotError::NoData {
            file: file.to_string(),
            ys: ys
                .iter()
                .map(|y| format!("`{y}`"))
                .collect::<Vec<_>>()
                .join(" or "),
            rows,
            skipped: rows,
        });
    }

    let not_numeric = obs.iter().find(|(_, xv, ..)| parse_number(xv).is_none());
    if let (true, Some((line, xv, ..))) = (opts.log_x, not_numeric) {
        return Err(PlotError::Csv {
            file: file.to_string(),
            message: format!(
                "line {line}: {x} = `{xv}` is not a number, and a log x axis needs numbers on x"
            ),
        });
    }
    let numeric = not_numeric.is_none();
    let kind = if numeric && !opts.bars {
        ChartKind::Lines
    } else {
        ChartKind::Bars
    };
    let series_name = |k: usize, g: usize| match (ys.len(), group.is_empty()) {
        (_, true) => ys[k].clone(),
        (1, false) => groups[g].clone(),
        _ => format!("{} ({})", ys[k], groups[g]),
    };
    {
        // One bar per category and series, one point per x and series: rows
        // that share both would be bars drawn on top of each other (the
        // tallest hiding the rest), or a line zig-zagging up and down at one
        // x. (Numbers are compared as numbers: `256` and `256.0` are one x.)
        // Per (y column, group, numeric x, category): the rows' lines, and
        // the first one's x as written.
        type Rows<'a> = (Vec<usize>, &'a str);
        let mut lines: HashMap<(usize, usize, u64, &str), Rows> = HashMap::new();
        let mut order = Vec::new();
        for (line, xv, k, g, _) in &obs {
            let id = match kind {
                // (+ 0.0 makes -0 and 0 one x.)
                ChartKind::Lines => (
                    *k,
                    *g,
                    parse_number(xv).map_or(0, |v| (v + 0.0).to_bits()),
                    "",
                ),
                ChartKind::Bars => (*k, *g, 0, xv.as_str()),
            };
            let (at, first) = lines.entry(id).or_insert_with(|| (Vec::new(), xv.as_str()));
            if at.len() == 1 {
                order.push((id, *first));
            }
            at.push(*line);
        }
        if let Some(&(id, xv)) = order.first() {
            let (k, g) = (id.0, id.1);
            let at = &lines[&id].0;
            let mut shown = at
                .iter()
                .take(4)
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            if at.len() > 4 {
                shown.push_str(", ...");
            }
            let (pair, why) = match kind {
                ChartKind::Bars => (
                    "category",
                    "a bar chart draws one bar per category and series, so they would hide \
                     each other",
                ),
                ChartKind::Lines => (
                    "x",
                    "a line chart joins one point per x in each series, so the line would \
                     zig-zag between them at one x",
                ),
            };
            let more = match order.len() - 1 {
                0 => String::new(),
                1 => format!(" (and so does 1 more {pair} and series pair)"),
                n => format!(" (and so do {n} more {pair} and series pairs)"),
            };
            return Err(PlotError::Csv {
                file: file.to_string(),
                message: format!(
                    "{} rows (lines {shown}) have {x} = `{xv}` in series `{}`{more}: {why}; \
                     split them into series by the column that tells them apart (plot's \
                     --group COLUMN, a sweep's --plot-group COLUMN; e.g. seed) or filter the \
                     table to one row per {pair}",
                    at.len(),
                    series_name(k, g),
                ),
            });
        }
    }
    // Bars: categories in the order they first appear in the file.
    let mut category_order: Vec<String> = Vec::new();
    if kind == ChartKind::Bars {
        let mut seen = std::collections::HashSet::new();
        for (_, xv, ..) in &obs {
            if seen.insert(xv.as_str()) {
                category_order.push(xv.clone());
            }
        }
    }
    let mut points: Vec<Vec<Vec<(XValue, f64)>>> = vec![vec![Vec::new(); groups.len()]; ys.len()];
    for (_, xv, k, g, y) in obs {
        let xval = match kind {
            ChartKind::Lines => XValue::Num(parse_number(&xv).unwrap_or_default()),
            ChartKind::Bars => XValue::Cat(xv),
        };
        points[k][g].push((xval, y));
    }
    let mut series = Vec::new();
    for (k, per_group) in points.into_iter().enumerate() {
        for (g, mut pts) in per_group.into_iter().enumerate() {
            if pts.is_empty() {
                continue;
            }
            if kind == ChartKind::Lines {
                pts.sort_by(|a, b| x_num(&a.0).total_cmp(&x_num(&b.0)));
            }
            series.push(Series {
                name: series_name(k, g),
                points: pts,
            });
        }
    }

    let mut title = opts
        .title
        .clone()
        .unwrap_or_else(|| format!("{} vs {x}", ys.join(", ")));
    if opts.title.is_none() && !group.is_empty() {
        title.push_str(&format!(" by {}", group.join(", ")));
    }
    let chart = Chart {
        title,
        x_label: opts.x_label.clone().unwrap_or_else(|| x.to_string()),
        y_label: opts.y_label.clone().unwrap_or_else(|| {
            if ys.len() == 1 {
                ys[0].clone()
            } else {
                "value".to_string()
            }
        }),
        kind,
        log_x: opts.log_x,
        log_y: opts.log_y,
        series,
        hlines: Vec::new(),
        category_order,
    };
    chart.validate()?;
    Ok(CsvChart {
        chart,
        rows,
        skipped,
        empty_x,
    })
}

fn x_num(x: &XValue) -> f64 {
    match x {
        XValue::Num(v) => *v,
        XValue::Cat(_) => f64::NAN,
    }
}

fn missing_column(file: &str, name: &str, header: &[String]) -> PlotError {
    // `bandwidth_gbps` for `runs.0.bandwidth_gbps`, or a different case.
    // (Spec keys may be spelt with dashes, where columns have underscores:
    // names compare with either, in any case.)
    let norm = |s: &str| s.to_lowercase().replace('-', "_");
    let lower = norm(name);
    let near: Vec<&str> = header
        .iter()
        .filter(|h| {
            norm(h) == lower
                || h.rsplit('.').next().is_some_and(|last| norm(last) == lower)
                || h.rsplit('.').next().is_some_and(|last| last == name)
                || h.ends_with(&format!(".{name}"))
        })
        .map(String::as_str)
        .collect();
    let hint = if near.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", near.join(" or "))
    };
    PlotError::MissingColumn {
        file: file.to_string(),
        column: name.to_string(),
        hint,
        available: header.to_vec(),
    }
}

// ---------------------------------------------------------------------------
// Numbers on axes
//
// The axes are plotters' (a log one is its `LogCoord`), but their ticks and
// labels are ours, handed to it with `with_key_points` and the mesh's label
// formatters: plotters labels an f64 with `Debug` (`256.0`, `1.5e9` as
// `1500000000.0`), its linear key points never return over data wider than
// f64's range (-1e308 to 1e308), and its log key points are the powers of
// the base only: none over 11.5 to 27, only 10 and 100 over 1.5 to 700.

/// A number as a person writes it: integers without a fraction, at most four
/// significant decimals, scientific notation for very large or small values.
pub fn format_value(v: f64) -> String {
    format_significant(v, 4)
}

/// [`format_value`] with `sig` significant digits (at least 1).
fn format_significant(v: f64, sig: usize) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let sig = sig.max(1);
    if !(1e-3..1e7).contains(&a) {
        let m = sig - 1;
        return trim_exp(&format!("{v:.m$e}"));
    }
    if v.fract() == 0.0 {
        return format!("{v:.0}");
    }
    let decimals = (sig as i32 - 1 - a.log10().floor() as i32).clamp(0, 17) as usize;
    trim_zeros(&format!("{v:.decimals$}"))
}

/// Labels of axis ticks (distinct values, in order): [`format_value`]'s,
/// with as many more significant digits as it takes for neighbouring ticks
/// to read differently (ticks 13,038,000 to 13,044,000 are `1.3038e7` ...
/// `1.3044e7`, not five times `1.304e7`).
fn tick_labels(values: &[f64]) -> Vec<String> {
    for sig in 4..=17 {
        let labels: Vec<String> = values.iter().map(|&v| format_significant(v, sig)).collect();
        if labels.windows(2).all(|w| w[0] != w[1]) {
            return labels;
        }
    }
    values.iter().map(|v| format!("{v:e}")).collect()
}

fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// `1.500e6` -> `1.5e6`.
fn trim_exp(s: &str) -> String {
    match s.split_once('e') {
        Some((m, e)) => format!("{}e{e}", trim_zeros(m)),
        None => s.to_string(),
    }
}

/// Round ticks about `target` apart over [lo, hi], labelled with the
/// step's precision.
fn linear_ticks(lo: f64, hi: f64, target: usize) -> Vec<(f64, String)> {
    let span = hi - lo;
    if span <= 0.0 || !(lo.is_finite() && hi.is_finite()) {
        return vec![(lo, format_value(lo))];
    }
    // (A span beyond f64's range, as from -1e308 to 1e308, in halves.)
    let raw = if span.is_finite() {
        span / target.max(1) as f64
    } else {
        (hi / 2.0 - lo / 2.0) / target.max(1) as f64 * 2.0
    };
    let step = nice_step(raw);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    let big = lo.abs().max(hi.abs());
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let values: Vec<f64> = (first..=last).map(|i| i as f64 * step).collect();
    if !(1e-3..1e7).contains(&big) {
        // Scientific notation, with the digits the step needs.
        let labels = tick_labels(&values);
        return values
            .into_iter()
            .zip(labels)
            .map(|(v, l)| (v, if v == 0.0 { "0".to_string() } else { l }))
            .collect();
    }
    values
        .into_iter()
        .map(|v| {
            let label = if v == 0.0 {
                "0".to_string()
            } else {
                format!("{v:.decimals$}")
            };
            (v, label)
        })
        .collect()
}

/// The 1, 2, 5 or 10 times a power of ten nearest above `raw` (> 0).
fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// `m`·10^`e`, as exactly as f64 holds it (`3e-1` is 0.3, not 0.30000000000000004).
fn decimal(m: u32, e: i64) -> f64 {
    format!("{m}e{e}").parse().unwrap_or(f64::NAN)
}

/// A log axis over data in [min, max] (both positive): its range in data
/// units and its ticks. The range reaches out to the ticks next to the data,
/// so that a tick lies at or below the smallest value and at or above the
/// largest. The ticks are powers of two when the data are powers of two, else
/// the finest of 1-2-3-...-9 (at most 6 ticks) and 1-2-5 (at most 10) per
/// decade, else decades; every k-th power when there are too many; linear
/// ticks when the data lie between two neighbouring 1-2-3-...-9 ticks.
fn log_ticks(min: f64, max: f64, pow2: bool) -> ((f64, f64), Vec<(f64, String)>) {
    const MAX: usize = 10;
    const EPS: f64 = 1e-9;
    // Data near the ends of f64 are kept finite and positive, so that the
    // decades (or powers of two) stay a few hundred (or thousand) at most.
    let clamp = |v: f64| v.clamp(f64::MIN_POSITIVE, f64::MAX);
    let (mut min, mut max) = (clamp(min.min(max)), clamp(max.max(min)));
    if max <= min * (1.0 + EPS) {
        // One value: an octave either side.
        (min, max) = (clamp(min / 2.0), clamp(max * 2.0));
    }
    let (below, above) = (min * (1.0 + EPS), max * (1.0 - EPS));
    // Every k-th power of `base`, from the last at or below min to the first
    // at or above max, k the smallest that gives at most MAX ticks.
    let powers = |base: u32| -> Vec<f64> {
        let pow = |e: i64| {
            if base == 10 {
                decimal(1, e)
            } else {
                2f64.powi(e as i32)
            }
        };
        let log = |v: f64| v.ln() / f64::from(base).ln();
        let (mut a, mut b) = (log(min).floor() as i64, log(max).ceil() as i64);
        while pow(a) > below {
            a -= 1;
        }
        while pow(a + 1) <= below {
            a += 1;
        }
        while pow(b) < above {
            b += 1;
        }
        while pow(b - 1) >= above {
            b -= 1;
        }
        let mut k = 1;
        let (a, b) = loop {
            let (a, b) = (a.div_euclid(k) * k, -(-b).div_euclid(k) * k);
            if (b - a) / k < MAX as i64 {
                break (a, b);
            }
            k += 1;
        };
        (0..=(b - a) / k)
            .map(|i| pow(a + i * k))
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect()
    };
    // The values m·10^e for m in `ms` from the last at or below min to the
    // first at or above max.
    let mantissas = |ms: &[u32]| -> Vec<f64> {
        let (a, b) = (
            min.log10().floor() as i64 - 1,
            max.log10().ceil() as i64 + 1,
        );
        let all: Vec<f64> = (a..=b)
            .flat_map(|e| ms.iter().map(move |&m| decimal(m, e)))
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        match (
            all.iter().rposition(|&t| t <= below),
            all.iter().position(|&t| t >= above),
        ) {
            (Some(i), Some(j)) => all[i..=j].to_vec(),
            _ => Vec::new(),
        }
    };
    let ticks: Vec<f64> = if pow2 {
        powers(2)
    } else if max / min > 1e5 {
        // More than five decades: over 10 ticks of 1-2-5.
        powers(10)
    } else {
        let fine = mantissas(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let coarse = mantissas(&[1, 2, 5]);
        if (3..=6).contains(&fine.len()) {
            fine
        } else if (3..=MAX).contains(&coarse.len()) {
            coarse
        } else if coarse.len() > MAX {
            powers(10)
        } else {
            // Within one 1-2-3-...-9 step: linear ticks, the nearest outside
            // the data included (steps of at most 2/5 of the span, so the
            // lowest stays positive).
            let step = nice_step((max - min) / 5.0);
            let (a, b) = (
                (min / step * (1.0 + EPS)).floor() as i64,
                (max / step * (1.0 - EPS)).ceil() as i64,
            );
            (a..=b)
                .map(|i| i as f64 * step)
                .filter(|v| *v > 0.0)
                .collect()
        }
    };
    let lo = ticks.first().map_or(min, |t| t.min(min));
    let hi = ticks.last().map_or(max, |t| t.max(max));
    let labels = tick_labels(&ticks);
    ((lo, hi), ticks.into_iter().zip(labels).collect())
}

fn is_pow2(v: f64) -> bool {
    v >= 1.0 && v.fract() == 0.0 && (v as u64).is_power_of_two()
}

/// The drawing range of data in [lo, hi] on a linear axis, with some room
/// around it; `zero` keeps 0 inside it (bars grow from it).
fn padded(lo: f64, hi: f64, zero: bool) -> (f64, f64) {
    let (lo, hi) = if zero {
        (lo.min(0.0), hi.max(0.0))
    } else {
        (lo, hi)
    };
    let span = hi - lo;
    if !span.is_finite() && lo.is_finite() && hi.is_finite() {
        // Data spanning more than f64's range: no room around it.
        return (lo, hi);
    }
    // (A span within rounding of the values, as 1 and 1.0000000000000002,
    // is one value: no ticks fit inside it.)
    if span <= lo.abs().max(hi.abs()) * 1e-12 {
        let pad = (lo.abs() * 0.1).max(1.0);
        return (lo - pad, hi + pad);
    }
    let pad = span * 0.06;
    let start = if lo >= 0.0 {
        (lo - pad).max(0.0)
    } else {
        lo - pad
    };
    let end = if zero && hi == 0.0 { 0.0 } else { hi + pad };
    (start, end)
}

/// The range (in data units) and the ticks of an axis over data in [lo, hi].
/// A linear axis has some room around the data (and 0 inside it for bars,
/// which grow from it) and about `target` ticks; a log axis reaches to the
/// ticks next to the data ([`log_ticks`]), and for bars starts at the lowest,
/// which the bars grow from.
fn axis_layout(
    log: bool,
    lo: f64,
    hi: f64,
    pow2: bool,
    bars: bool,
    target: usize,
) -> ((f64, f64), Vec<(f64, String)>) {
    if !log {
        let range = padded(lo, hi, bars);
        return (range, linear_ticks(range.0, range.1, target));
    }
    let (data_lo, hi_data) = (lo.min(hi), hi.max(lo));
    let ((mut lo, mut hi), mut ticks) = log_ticks(lo, hi, pow2);
    if bars && lo >= data_lo * (1.0 - 1e-9) {
        // Bars grow from the lowest tick: one at the smallest value would
        // leave that bar no height, so the axis starts a tick lower.
        ((lo, hi), ticks) = log_ticks(data_lo * (1.0 - 1e-6), hi_data, pow2);
    }
    // Room for the markers of points on the first or last tick: 3% of the
    // axis either side (within f64).
    let pad = 10f64.powf((hi.log10() - lo.log10()) * 0.03);
    let start = if bars {
        lo
    } else {
        (lo / pad).max(f64::MIN_POSITIVE)
    };
    ((start, (hi * pad).min(f64::MAX)), ticks)
}

/// An axis's coordinate: plotters' log coordinate, or a linear one of ours
/// (plotters' `RangedCoordf64` maps through `end - start`, which overflows
/// for data wider than f64's range, as from -1e308 to 1e308, and then puts
/// every point at one end). Ticks come from [`axis_layout`], bound with
/// plotters' `with_key_points`.
enum Scale {
    Linear(f64, f64),
    Log(LogCoord<f64>),
}

impl Scale {
    fn new(log: bool, (a, b): (f64, f64), ticks: &[(f64, String)]) -> WithKeyPoints<Scale> {
        let scale = if log {
            Scale::Log((a..b).log_scale().into())
        } else {
            Scale::Linear(a, b)
        };
        scale.with_key_points(ticks.iter().map(|t| t.0).collect())
    }
}

impl Ranged for Scale {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        match self {
            Scale::Linear(a, b) => {
                // (In halves, so that a range wider than f64's still maps.)
                let f = (value / 2.0 - a / 2.0) / (b / 2.0 - a / 2.0);
                limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
            }
            Scale::Log(log) => log.map(value, limit),
        }
    }

    fn key_points<Hint: KeyPointHint>(&self, _: Hint) -> Vec<f64> {
        // (Those of `with_key_points`, which wraps every `Scale`.)
        Vec::new()
    }

    fn range(&self) -> std::ops::Range<f64> {
        match self {
            Scale::Linear(a, b) => *a..*b,
            Scale::Log(log) => log.range(),
        }
    }
}

/// The label of `v`, one of `ticks` (plotters' mesh asks for the labels of
/// the key points it was given).
fn tick_label(ticks: &[(f64, String)], v: f64) -> String {
    ticks
        .iter()
        .find(|t| t.0 == v)
        .map_or_else(String::new, |t| t.1.clone())
}

// ---------------------------------------------------------------------------
// Drawing

/// Okabe & Ito's colour-blind-safe palette, darkest and most distinct first
/// (yellow last: weak on white).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(230, 159, 0),   // orange
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(0, 0, 0),       // black
    RGBColor(240, 228, 66),  // yellow
];
const REFERENCE: RGBColor = RGBColor(90, 90, 90);
const GRID: RGBColor = RGBColor(226, 226, 226);
const FONT: FontFamily<'static> = FontFamily::SansSerif;

/// Series i's colour and marker: every (colour, marker) pair differs for the
/// first 32 series, and markers tell series apart without colour too.
fn series_style(i: usize) -> (RGBColor, Marker) {
    let markers = [
        Marker::Circle,
        Marker::Square,
        Marker::Triangle,
        Marker::Cross,
    ];
    (
        PALETTE[i % PALETTE.len()],
        markers[(i + i / PALETTE.len()) % 4],
    )
}

#[derive(Debug, Clone, Copy)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Cross,
}

/// Registers the embedded font with plotters once per process.
fn ensure_fonts() -> Result<(), PlotError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        let family = FONT.as_str();
        register_font(family, FontStyle::Normal, dejavu::sans::regular()).is_ok()
            && register_font(family, FontStyle::Bold, dejavu::sans::bold()).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::Invalid(
            "the embedded DejaVu Sans font could not be loaded".into(),
        ))
    }
}

/// `stem` with `.ext` appended (not replacing: stems often hold dots, as in
/// `results-runs.0.bandwidth_gbps-vs-preset`).
fn with_suffix(stem: &Path, ext: &str) -> PathBuf {
    let mut s = stem.as_os_str().to_owned();
    s.push(".");
    s.push(ext);
    PathBuf::from(s)
}

/// Writes `<stem>.svg` and `<stem>.png` ([`DEFAULT_SIZE`]) and returns both
/// paths, creating `stem`'s directory if needed.
pub fn write_chart(chart: &Chart, stem: &Path) -> Result<Vec<PathBuf>, PlotError> {
    write_chart_sized(chart, stem, DEFAULT_SIZE)
}

/// [`write_chart`] at `size` pixels (width, height).
pub fn write_chart_sized(
    chart: &Chart,
    stem: &Path,
    size: (u32, u32),
) -> Result<Vec<PathBuf>, PlotError> {
    chart.validate()?;
    if size.0 < 300 || size.1 < 200 || size.0 > 10_000 || size.1 > 10_000 {
        return Err(PlotError::Invalid(format!(
            "chart size {}x{} is out of range (300x200 to 10000x10000)",
            size.0, size.1
        )));
    }
    ensure_fonts()?;
    let svg = with_suffix(stem, "svg");
    let png = with_suffix(stem, "png");
    if stem.is_dir() || stem.as_os_str().to_string_lossy().ends_with('/') {
        let what = if stem.is_dir() {
            "is a directory"
        } else {
            "ends in /, naming a directory"
        };
        return Err(PlotError::Invalid(format!(
            "{} {what}; name the charts' file stem (the path without .svg/.png), e.g. {}",
            stem.display(),
            stem.join("chart").display()
        )));
    }
    if let Some(dir) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| PlotError::Write {
            path: dir.to_path_buf(),
            message: e.to_string(),
        })?;
    }
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |message: String| PlotError::Write { path, message }
    };
    // Both charts are drawn in memory, then written through temporary files
    // renamed into place: a failure (a full disk) leaves the earlier pair
    // as it was, never a half-written file.
    let mut svg_text = String::new();
    {
        let root = SVGBackend::with_string(&mut svg_text, size).into_drawing_area();
        draw(chart, &root).map_err(failed(&svg))?;
        root.present().map_err(|e| failed(&svg)(e.to_string()))?;
    }
    let (w, h) = size;
    let mut pixels = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
        draw(chart, &root).map_err(failed(&png))?;
        root.present().map_err(|e| failed(&png)(e.to_string()))?;
    }
    let mut png_bytes = Vec::new();
    {
        let mut enc = ::png::Encoder::new(&mut png_bytes, w, h);
        enc.set_color(::png::ColorType::Rgb);
        enc.set_depth(::png::BitDepth::Eight);
        let mut writer = enc
            .write_header()
            .map_err(|e| failed(&png)(e.to_string()))?;
        writer
            .write_image_data(&pixels)
            .map_err(|e| failed(&png)(e.to_string()))?;
    }
    let stage = |path: &Path, bytes: &[u8]| {
        let mut f = StagedFile::create(path, 1 << 16).map_err(|e| failed(path)(e.to_string()))?;
        f.write_all(bytes)
            .map_err(|e| failed(path)(e.to_string()))?;
        Ok::<_, PlotError>(f)
    };
    // (Both written before either is renamed into place.)
    let staged = [stage(&svg, svg_text.as_bytes())?, stage(&png, &png_bytes)?];
    for (f, path) in staged.into_iter().zip([&svg, &png]) {
        f.commit(false).map_err(|e| failed(path)(e.to_string()))?;
    }
    Ok(vec![svg, png])
}

/// Category order of a bar chart: first appearance over all series.
fn categories(chart: &Chart) -> Vec<String> {
    let mut seen = HashMap::new();
    let mut cats = Vec::new();
    let series_order = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|(x, _)| x.label()));
    let present: std::collections::HashSet<String> = series_order.clone().collect();
    let ordered = chart
        .category_order
        .iter()
        .filter(|c| present.contains(*c))
        .cloned();
    for l in ordered.chain(series_order) {
        if !seen.contains_key(&l) {
            seen.insert(l.clone(), cats.len());
            cats.push(l);
        }
    }
    cats
}

/// `text` cut to at most `max` pixels wide in `style`, with an ellipsis in
/// the middle: sweep labels often differ only at their end.
fn fit_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    style: &TextStyle,
    max: u32,
) -> String {
    let width = |t: &str| area.estimate_text_size(t, style).map_or(0, |(w, _)| w);
    if width(text) <= max {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    for keep in (1..chars.len()).rev() {
        let head = keep.div_ceil(2);
        let tail = keep - head;
        let t: String = chars[..head]
            .iter()
            .chain(['…'].iter())
            .chain(chars[chars.len() - tail..].iter())
            .collect();
        if width(&t) <= max {
            return t;
        }
    }
    "…".to_string()
}

fn draw<DB: DrawingBackend>(chart: &Chart, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (width, _) = root.dim_in_pixel();
    let title_style = TextStyle::from((FONT, 22).into_font().style(FontStyle::Bold)).color(&BLACK);
    let label_style = TextStyle::from((FONT, 14).into_font()).color(&BLACK);
    let desc_style = TextStyle::from((FONT, 16).into_font()).color(&BLACK);

    let title = fit_text(root, &chart.title, &title_style, width.saturating_sub(20));
    let body = root.titled(&title, title_style.clone()).map_err(e)?;
    let (body_w, body_h) = body.dim_in_pixel();

    // Legend entries: the series with points, then the reference lines; a
    // lone series named like the y axis needs none. They go in a panel at
    // the right of the plot, in rows 1.25 times the font size (plotters'
    // layout), which shrinks to fit them all.
    let shown = chart.series.iter().filter(|s| !s.points.is_empty());
    let lone = chart.hlines.is_empty()
        && shown.clone().count() == 1
        && shown.clone().all(|s| s.name == chart.y_label);
    let rows = shown.count() + chart.hlines.len();
    let legend_size = ((body_h as f64 - 24.0) / (1.25 * rows.max(1) as f64)).clamp(8.0, 14.0);
    let legend_style = TextStyle::from((FONT, legend_size).into_font()).color(&BLACK);
    let max_text = (body_w as f64 * 0.36) as u32;
    let fit = |l: &str| fit_text(root, l, &legend_style, max_text);
    let series_labels: Vec<Option<String>> = chart
        .series
        .iter()
        .map(|s| (!lone && !s.points.is_empty()).then(|| fit(&s.name)))
        .collect();
    let hline_labels: Vec<String> = chart.hlines.iter().map(|(l, _)| fit(l)).collect();
    let legend_w = series_labels
        .iter()
        .flatten()
        .chain(&hline_labels)
        .map(|l| body.estimate_text_size(l, &legend_style).map_or(0, |s| s.0))
        .max()
        .map_or(0, |w| w + 60);
    let (plot_area, legend_area) = body.split_horizontally(body_w - legend_w);

    // Ranges and ticks.
    let all_y: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(chart.hlines.iter().map(|h| h.1))
        .collect();
    let (ymin, ymax) = min_max(&all_y);
    let bars = chart.kind == ChartKind::Bars;
    let (y_range, y_ticks) = axis_layout(
        chart.log_y,
        ymin,
        ymax,
        all_y.iter().all(|&v| is_pow2(v)),
        bars,
        (body_h / 70).clamp(4, 10) as usize,
    );
    let cats = if bars { categories(chart) } else { Vec::new() };
    let (x_range, x_ticks) = if bars {
        let n = cats.len().max(1) as f64;
        let ticks = cats
            .iter()
            .enumerate()
            .map(|(i, c)| (i as f64, c.clone()))
            .collect::<Vec<_>>();
        ((-0.5, n - 0.5), ticks)
    } else {
        let xs: Vec<f64> = chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| x_num(&p.0)))
            .collect();
        let (lo, hi) = min_max(&xs);
        axis_layout(
            chart.log_x,
            lo,
            hi,
            xs.iter().all(|&v| is_pow2(v)),
            false,
            ((body_w - legend_w) / 110).clamp(3, 10) as usize,
        )
    };

    // Label areas: wide enough for the widest tick label; category labels
    // turn vertical when they do not fit side by side.
    let text_w = |t: &str| body.estimate_text_size(t, &label_style).map_or(0, |s| s.0);
    let y_label_w = y_ticks.iter().map(|(_, l)| text_w(l)).max().unwrap_or(0);
    let plot_w = (body_w - legend_w).saturating_sub(y_label_w + 60);
    let per_tick = plot_w / x_ticks.len().max(1) as u32;
    let widest_x = x_ticks.iter().map(|(_, l)| text_w(l)).max().unwrap_or(0);
    let vertical = bars && widest_x + 8 > per_tick;
    let x_ticks: Vec<(f64, String)> = if vertical {
        let max = (body_h as f64 * 0.3) as u32;
        x_ticks
            .into_iter()
            .map(|(v, l)| (v, fit_text(root, &l, &label_style, max)))
            .collect()
    } else {
        x_ticks
    };
    let x_area = if vertical {
        x_ticks.iter().map(|(_, l)| text_w(l)).max().unwrap_or(0) + 44
    } else {
        48
    };

    let mut cc = ChartBuilder::on(&plot_area)
        .margin(12)
        .margin_right(24)
        .x_label_area_size(x_area)
        .y_label_area_size(y_label_w + 44)
        .build_cartesian_2d(
            Scale::new(chart.log_x, x_range, &x_ticks),
            Scale::new(chart.log_y, y_range, &y_ticks),
        )
        .map_err(e)?;
    let x_label = |v: &f64| {
        if vertical {
            String::new()
        } else {
            tick_label(&x_ticks, *v)
        }
    };
    let y_label = |v: &f64| tick_label(&y_ticks, *v);
    let mut mesh = cc.configure_mesh();
    mesh.x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .x_label_style(label_style.clone())
        .y_label_style(label_style.clone())
        .axis_desc_style(desc_style)
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .axis_style(BLACK);
    if bars {
        mesh.disable_x_mesh();
    }
    mesh.draw().map_err(e)?;
    if vertical {
        // plotters misplaces rotated tick labels: draw them top-down from
        // below the axis, centred on their tick.
        let style = label_style
            .pos(Pos::new(HPos::Left, VPos::Center))
            .transform(FontTransform::Rotate90);
        for (t, l) in &x_ticks {
            let (px, py) = cc.backend_coord(&(*t, y_range.0));
            root.draw(&Text::new(l.clone(), (px, py + 8), style.clone()))
                .map_err(e)?;
        }
    }

    // The series, each with its legend entry. plotters lists the labels of
    // a chart's series inside its plotting area (whatever the position, the
    // legend's points are clamped into it), where the legend would cover
    // data: so the labels go with series of no points on a chart of their
    // own, over the legend's panel. Each swatch is drawn by the closure given
    // to `legend`, from the left middle of its row.
    let mut lc = ChartBuilder::on(&legend_area)
        .build_cartesian_2d(0.0..1.0, 0.0..1.0)
        .map_err(e)?;
    let none = || std::iter::empty::<Circle<(f64, f64), i32>>();
    match chart.kind {
        ChartKind::Lines => {
            for (i, (s, label)) in chart.series.iter().zip(series_labels).enumerate() {
                let (color, m) = series_style(i);
                let pts = s.points.iter().map(|(x, y)| (x_num(x), *y));
                let line = color.stroke_width(2);
                cc.draw_series(LineSeries::new(pts.clone(), line))
                    .map_err(e)?;
                if let Some(label) = label {
                    let anno = lc.draw_series(none()).map_err(e)?;
                    anno.label(label).legend(move |at| {
                        EmptyElement::at(at)
                            + PathElement::new([(0, 0), (32, 0)], line)
                            + marker(m, color, (16, 0))
                    });
                }
                cc.draw_series(pts.map(|p| EmptyElement::at(p) + marker(m, color, (0, 0))))
                    .map_err(e)?;
            }
        }
        ChartKind::Bars => {
            let index: HashMap<&str, usize> = cats
                .iter()
                .enumerate()
                .map(|(i, c)| (c.as_str(), i))
                .collect();
            let k = chart.series.len().max(1) as f64;
            // On a log axis the range starts at its lowest tick, at or
            // below every value ([`axis_layout`]).
            let (group_w, base) = (0.8, if chart.log_y { y_range.0 } else { 0.0 });
            let bar_w = group_w / k;
            for (j, (s, label)) in chart.series.iter().zip(series_labels).enumerate() {
                let (color, _) = series_style(j);
                let rects = s.points.iter().map(|(x, y)| {
                    let c = index[x.label().as_str()] as f64;
                    let x0 = c - group_w / 2.0 + j as f64 * bar_w;
                    let gap = if k > 1.0 { bar_w * 0.06 } else { 0.0 };
                    Rectangle::new([(x0 + gap, base), (x0 + bar_w - gap, *y)], color.filled())
                });
                cc.draw_series(rects).map_err(e)?;
                if let Some(label) = label {
                    let anno = lc.draw_series(none()).map_err(e)?;
                    anno.label(label).legend(move |(x, y)| {
                        Rectangle::new([(x + 4, y - 6), (x + 28, y + 6)], color.filled())
                    });
                }
            }
        }
    }
    let dashed = REFERENCE.stroke_width(2);
    for ((_, y), label) in chart.hlines.iter().zip(hline_labels) {
        cc.draw_series(DashedLineSeries::new(
            [(x_range.0, *y), (x_range.1, *y)],
            9,
            6,
            dashed,
        ))
        .map_err(e)?;
        lc.draw_series(none())
            .map_err(e)?
            .label(label)
            .legend(move |(x, y)| DashedPathElement::new([(x, y), (x + 33, y)], 7, 6, dashed));
    }

    // The legend, its first row level with the top of the plot.
    if legend_w > 0 {
        lc.configure_series_labels()
            .position(SeriesLabelPosition::Coordinate(0, 6))
            .margin(6)
            .legend_area_size(40)
            .label_font(legend_style)
            .draw()
            .map_err(e)?;
    }
    Ok(())
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        })
}

/// Marker `m` centred `at` pixels from the point it is added to (as in
/// `EmptyElement::at(point) + marker(...)`): on the chart and in the legend.
fn marker<DB: DrawingBackend>(
    m: Marker,
    color: RGBColor,
    at: (i32, i32),
) -> DynElement<'static, DB, (i32, i32)> {
    let (fill, line) = (color.filled(), color.stroke_width(2));
    match m {
        Marker::Circle => Circle::new(at, 4, fill).into_dyn(),
        Marker::Square => {
            Rectangle::new([(at.0 - 4, at.1 - 4), (at.0 + 4, at.1 + 4)], fill).into_dyn()
        }
        Marker::Triangle => TriangleMarker::new(at, 5, fill).into_dyn(),
        Marker::Cross => Cross::new(at, 4, line).into_dyn(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn from_text(
        text: &str,
        x: &str,
        ys: &[&str],
        group: &[&str],
        opts: &CsvChartOptions,
    ) -> Result<CsvChart, PlotError> {
        chart_from_csv_text(text, "t.csv", x, &s(ys), &s(group), opts)
    }

    /// The default options, changed by `set`.
    fn options(set: impl FnOnce(&mut CsvChartOptions)) -> CsvChartOptions {
        let mut o = CsvChartOptions::default();
        set(&mut o);
        o
    }

    /// The chart of `text` with the default options.
    fn chart(text: &str, x: &str, ys: &[&str], group: &[&str]) -> CsvChart {
        from_text(text, x, ys, group, &Default::default()).unwrap()
    }

    /// Why `text` makes no chart with the default options.
    fn refusal(text: &str, x: &str, ys: &[&str], group: &[&str]) -> String {
        from_text(text, x, ys, group, &Default::default())
            .unwrap_err()
            .to_string()
    }

    fn series_names(c: &Chart) -> Vec<&str> {
        c.series.iter().map(|s| s.name.as_str()).collect()
    }

    fn point_counts(c: &Chart) -> Vec<usize> {
        c.series.iter().map(|s| s.points.len()).collect()
    }

    fn labels_of(ticks: &[(f64, String)]) -> Vec<&str> {
        ticks.iter().map(|x| x.1.as_str()).collect()
    }

    const SWEEP: &str = "\
run,engine,batch,status,error,wall_s,sim_gbps,note
0000-aa,dramsim3,512,completed,,0.1,20.5,\"fast, \"\"really\"\"\"
0001-bb,dramsim3,256,completed,,0.1,10.25,x
0002-cc,ramulator,256,completed,,0.1,9.5,y
0003-dd,ramulator,512,failed,\"error: bad, really\",0.1,,z
0004-ee,ramulator,1024,completed,,0.1,30,w
0005-ff,dramsim3,1024,completed,,0.1,41,v
";

    #[test]
    fn lines_grouped_sorted_and_failed_rows_skipped() {
        let c = chart(SWEEP, "batch", &["sim_gbps"], &["engine"]);
        assert_eq!(c.rows, 6);
        assert_eq!((c.skipped, c.empty_x), (vec![1], 0));
        let ch = &c.chart;
        assert_eq!(ch.kind, ChartKind::Lines);
        assert_eq!(ch.title, "sim_gbps vs batch by engine");
        assert_eq!(
            (ch.x_label.as_str(), ch.y_label.as_str()),
            ("batch", "sim_gbps")
        );
        let names = series_names(ch);
        assert_eq!(names, ["dramsim3", "ramulator"]);
        assert_eq!(
            ch.series[0].points,
            vec![
                (XValue::Num(256.0), 10.25),
                (XValue::Num(512.0), 20.5),
                (XValue::Num(1024.0), 41.0)
            ]
        );
        assert_eq!(
            ch.series[1].points,
            vec![(XValue::Num(256.0), 9.5), (XValue::Num(1024.0), 30.0)]
        );
    }

    #[test]
    fn quoted_fields_and_categorical_x_make_bars_in_first_appearance_order() {
        let text =
            "name,gbps,run\n\"b, second\",2,1\n\"a \"\"first\"\"\",1,1\nc,3,1\n\"b, second\",4,2\n";
        let c = chart(text, "name", &["gbps"], &["run"]);
        assert_eq!(c.chart.kind, ChartKind::Bars);
        assert_eq!(c.chart.series.len(), 2);
        assert_eq!(c.chart.series[0].name, "run=1");
        let xs: Vec<String> = c.chart.series[0]
            .points
            .iter()
            .map(|p| p.0.label())
            .collect();
        assert_eq!(xs, ["b, second", "a \"first\"", "c"]);
        assert_eq!(c.chart.series[1].points, [(XValue::from("b, second"), 4.0)]);
        assert_eq!(categories(&c.chart), ["b, second", "a \"first\"", "c"]);
        // Numeric x drawn as bars on request: categories keep file order.
        let opts = options(|o| o.bars = true);
        let c = from_text(SWEEP, "batch", &["sim_gbps"], &["engine"], &opts).unwrap();
        assert_eq!(c.chart.kind, ChartKind::Bars);
        assert_eq!(categories(&c.chart), ["512", "256", "1024"]);
    }

    /// `msg` refuses SWEEP's two engines at batch 256 (and at one more
    /// `place`, x or category) in one place, pointing to --group.
    fn refuses_two_engines_at_one_batch(msg: &str, place: &str) {
        assert!(
            msg.starts_with("t.csv: 2 rows (lines 3, 4) have batch = `256`"),
            "{msg}"
        );
        let more = format!("(and so does 1 more {place} and series pair)");
        assert!(msg.contains(&more), "{msg}");
        assert!(msg.contains("--group COLUMN"), "{msg}");
    }

    #[test]
    fn bars_of_one_category_and_series_are_refused_not_stacked() {
        // Two engines per batch size: without --group engine, the bars of a
        // batch would be drawn at one place, the taller hiding the other.
        let opts = options(|o| o.bars = true);
        let err = from_text(SWEEP, "batch", &["sim_gbps"], &[], &opts).unwrap_err();
        let msg = err.to_string();
        refuses_two_engines_at_one_batch(&msg, "category");
        assert!(msg.contains("in series `sim_gbps`"), "{msg}");
        // Categorical x, replicates of a category (a sweep's seeds).
        let mut text = String::from("stream,seed,gbps\n");
        for (i, stream) in ["random", "sequential"].iter().enumerate() {
            for seed in 1..=8 {
                text.push_str(&format!("{stream},{seed},{}\n", i * 10 + seed));
            }
        }
        let msg = refusal(&text, "stream", &["gbps"], &[]);
        assert!(
            msg.contains("8 rows (lines 2, 3, 4, 5, ...) have stream = `random` in series `gbps`"),
            "{msg}"
        );
        // Per series: with several y columns the same category is one bar of each.
        let msg = refusal(&text, "stream", &["gbps", "seed"], &[]);
        assert!(msg.contains("in series `gbps`"), "{msg}");
        // Grouped by what tells them apart, every bar has its own place.
        let c = chart(&text, "stream", &["gbps"], &["seed"]);
        assert_eq!(c.chart.series.len(), 8);
        assert!(c.chart.series.iter().all(|s| s.points.len() == 2));
    }

    #[test]
    fn lines_with_two_points_at_one_x_are_refused_not_zigzagged() {
        // Two engines per batch size: without --group engine, one line
        // would jump up and down at each batch.
        let msg = refusal(SWEEP, "batch", &["sim_gbps"], &[]);
        refuses_two_engines_at_one_batch(&msg, "x");
        assert!(msg.contains("a line chart joins one point per x"), "{msg}");
        // Numbers are compared as numbers.
        let msg = refusal("x,y\n256,1\n256.0,2\n", "x", &["y"], &[]);
        assert!(msg.contains("2 rows (lines 2, 3) have x = `256`"), "{msg}");
        // Per series: grouped by what tells them apart, each line has one
        // point per x.
        let c = chart(SWEEP, "batch", &["sim_gbps"], &["engine"]);
        let points = point_counts(&c.chart);
        assert_eq!(points, [3, 2]);
    }

    #[test]
    fn an_ambiguous_column_name_is_an_error() {
        let err = refusal("x,y,y\n1,2,3\n", "x", &["y"], &[]);
        assert_eq!(
            err,
            "t.csv: the header has 2 columns named `y` (columns 2, 3): which one to plot is \
             ambiguous; rename them apart"
        );
        for (x, group) in [("y", &[][..]), ("x", &["y"][..])] {
            let err = refusal("x,y,z,y\n1,2,3,4\n", x, &["z"], group);
            assert!(err.contains("columns named `y` (columns 2, 4)"), "{err}");
        }
        // A repeated name that is not plotted is no matter.
        let c = from_text("x,y,z,z\n1,2,3,4\n", "x", &["y"], &[], &Default::default());
        assert!(c.is_ok(), "{c:?}");
    }

    #[test]
    fn several_ys_and_groups_name_series() {
        let c = chart(SWEEP, "run", &["sim_gbps", "wall_s"], &[]);
        let names = series_names(&c.chart);
        assert_eq!(names, ["sim_gbps", "wall_s"]);
        assert_eq!(c.chart.y_label, "value");
        // Counted per y column: the failed row still has a wall_s point.
        assert_eq!(c.skipped, [1, 0]);
        assert_eq!(c.chart.series[1].points.len(), 6);
        // A row with an empty x counts for every y column.
        let text = "x,a,b\n1,1,\n2,2,\n3,3,\n4,4,4\n,5,5\n6,,6\n";
        let c = chart(text, "x", &["a", "b"], &[]);
        assert_eq!((c.rows, c.skipped.clone(), c.empty_x), (6, vec![2, 4], 1));
        let points = point_counts(&c.chart);
        assert_eq!(points, [4, 2]);

        let c = chart(SWEEP, "batch", &["sim_gbps", "wall_s"], &["engine"]);
        let names = series_names(&c.chart);
        assert_eq!(
            names,
            [
                "sim_gbps (dramsim3)",
                "sim_gbps (ramulator)",
                "wall_s (dramsim3)",
                "wall_s (ramulator)"
            ]
        );

        // Numeric group values carry their column's name; several are joined.
        let c = chart(SWEEP, "engine", &["sim_gbps"], &["batch", "status"]);
        let names = series_names(&c.chart);
        assert_eq!(
            names,
            [
                "batch=512, completed",
                "batch=256, completed",
                "batch=1024, completed"
            ]
        );
    }

    #[test]
    fn rows_of_another_width_than_the_header_are_errors_naming_the_line() {
        for (text, want) in [
            ("x,y\n1,2,3\n3,4\n", "line 2: 3 fields; the header has 2"),
            ("x,y\n1,2\n\n2\n", "line 4: 1 fields; the header has 2"),
            (
                "x,y,n\n1,2,\"a\nb\"\n3,4\n",
                "line 4: 2 fields; the header has 3",
            ),
        ] {
            let msg = refusal(text, "x", &["y"], &[]);
            assert!(msg.contains(want), "{text:?}: {msg}");
        }
    }

    #[test]
    fn errors_name_the_missing_column_and_list_the_others() {
        let err = from_text(SWEEP, "batch", &["gbps"], &[], &Default::default()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, PlotError::MissingColumn { .. }), "{msg}");
        assert!(msg.contains("no column `gbps`"), "{msg}");
        assert!(
            msg.contains("did you mean sim_gbps?") || msg.contains("run, engine, batch"),
            "{msg}"
        );
        assert!(
            msg.contains("run, engine, batch, status, error, wall_s, sim_gbps, note"),
            "{msg}"
        );

        let text = "run,runs.0.bandwidth_gbps\na,1\n";
        let msg = refusal(text, "run", &["bandwidth_gbps"], &[]);
        assert!(msg.contains("did you mean runs.0.bandwidth_gbps?"), "{msg}");

        let msg = refusal(SWEEP, "batch", &["sim_gbps"], &["engin"]);
        assert!(msg.contains("no column `engin`"), "{msg}");
        let msg = refusal(SWEEP, "bach", &["sim_gbps"], &[]);
        assert!(msg.contains("no column `bach`"), "{msg}");
    }

    #[test]
    fn empty_results_are_errors() {
        let err = from_text("", "a", &["b"], &[], &Default::default()).unwrap_err();
        assert!(err.to_string().contains("empty file"), "{err}");
        let err = from_text("a,b\n", "a", &["b"], &[], &Default::default()).unwrap_err();
        assert!(matches!(err, PlotError::NoData { rows: 0, .. }), "{err}");
        let err =
            from_text("a,b\n1,\n2,oops\n", "a", &["b"], &[], &Default::default()).unwrap_err();
        assert!(
            matches!(
                err,
                PlotError::NoData {
                    rows: 2,
                    skipped: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("`b`"), "{err}");
        let err = from_text("a,b\n1,2\n", "a", &[], &[], &Default::default()).unwrap_err();
        assert!(err.to_string().contains("no y column"), "{err}");
        let err = Chart::new("nothing", ChartKind::Lines)
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("no points"), "{err}");
    }

    #[test]
    fn log_axes_reject_non_positive_values() {
        let text = "x,y\n0,1\n1,2\n2,0\n";
        let log_y = options(|o| o.log_y = true);
        let err = from_text(text, "x", &["y"], &[], &log_y).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, PlotError::LogAxis { axis: "y", .. }), "{msg}");
        assert!(msg.contains("log y axis needs positive values"), "{msg}");
        assert!(msg.contains("y = 0 at x = 2"), "{msg}");
        let log_x = options(|o| o.log_x = true);
        let err = from_text(text, "x", &["y"], &[], &log_x).unwrap_err();
        assert!(matches!(err, PlotError::LogAxis { axis: "x", .. }), "{err}");
        let chart = Chart::new("ref", ChartKind::Lines)
            .log_axes(false, true)
            .with_series(Series::new("s").point(1.0, 2.0))
            .hline("zero", 0.0);
        assert!(matches!(
            chart.validate(),
            Err(PlotError::LogAxis { axis: "y", .. })
        ));
        let bars = Chart::new("b", ChartKind::Bars)
            .log_axes(true, false)
            .with_series(Series::new("s").point("a", 1.0));
        assert!(bars.validate().is_err());
        let lines_of_text =
            Chart::new("l", ChartKind::Lines).with_series(Series::new("s").point("a", 1.0));
        assert!(
            lines_of_text
                .validate()
                .unwrap_err()
                .to_string()
                .contains("numeric x")
        );
    }

    #[test]
    fn data_wider_than_f64s_range_still_spread_over_the_axis() {
        let (a, b) = padded(-1e308, 1e308, false);
        assert_eq!((a, b), (-1e308, 1e308));
        let t = linear_ticks(a, b, 5);
        assert!(t.len() >= 3, "{t:?}");
        assert!(t.iter().all(|x| x.0.is_finite() && x.0 >= a && x.0 <= b));
        let ticked = Scale::new(false, (a, b), &t);
        assert_eq!(ticked.map(&-1e308, (0, 100)), 0);
        assert_eq!(ticked.map(&5.0, (0, 100)), 50);
        assert_eq!(ticked.map(&1e308, (0, 100)), 100);
    }

    #[test]
    fn tick_labels_carry_the_digits_that_tell_them_apart() {
        // Large values that differ in the fifth digit (byte counts of a
        // sweep): the labels show it.
        let t = linear_ticks(13_038_000.0, 13_044_000.0, 4);
        let labels = labels_of(&t);
        assert_eq!(labels, ["1.3038e7", "1.304e7", "1.3042e7", "1.3044e7"]);
        let t = linear_ticks(12_345_600.0, 12_345_800.0, 4);
        let labels = labels_of(&t);
        assert_eq!(labels.len(), 5, "{labels:?}");
        assert!(labels.windows(2).all(|w| w[0] != w[1]), "{labels:?}");
        // Log axes over a narrow range take linear ticks: also distinct.
        for (min, max) in [
            (5000.1, 5000.5),
            (12_345_600.0, 12_345_800.0),
            (1.3038e7, 1.3044e7),
        ] {
            let (_, t) = log_ticks(min, max, false);
            let labels = labels_of(&t);
            assert!(
                labels.windows(2).all(|w| w[0] != w[1]),
                "{min}..{max}: {labels:?}"
            );
        }
        let (_, t) = log_ticks(5000.1, 5000.5, false);
        assert_eq!((t[0].1.as_str(), t[1].1.as_str()), ("5000.1", "5000.2"));
        // Usual values keep their short labels.
        assert_eq!(tick_labels(&[1e6, 2e7, 5e9]), ["1000000", "2e7", "5e9"]);
    }

    #[test]
    fn data_one_rounding_apart_is_drawn_as_one_value() {
        let (a, b) = padded(1.0, 1.0000000000000002, false);
        assert!(a <= 0.5 && b >= 1.5, "{a}..{b}");
        let t = linear_ticks(a, b, 5);
        let labels = labels_of(&t);
        assert!(labels.windows(2).all(|w| w[0] != w[1]), "{labels:?}");
    }

    #[test]
    fn bar_categories_come_in_file_order_across_series() {
        let c = chart("x,g,y\nc1,B,1\nc2,A,2\nc3,B,3\n", "x", &["y"], &["g"]);
        assert_eq!(categories(&c.chart), ["c1", "c2", "c3"]);
    }

    #[test]
    fn a_log_x_axis_over_text_names_the_value_and_line() {
        let opts = options(|o| o.log_x = true);
        let e = from_text("x,y\n1,2\n2,3\nn/a,4\n", "x", &["y"], &[], &opts)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 4: x = `n/a` is not a number"), "{e}");
        // A dashed spelling of a column suggests the column.
        let e = from_text(
            "write_fraction,y\n1,2\n",
            "write-fraction",
            &["y"],
            &[],
            &opts,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("did you mean write_fraction?"), "{e}");
        // Either spelling, any case, finds a dashed column too.
        for typed in ["Read-Gbps", "read_gbps"] {
            let e = refusal("x,read-gbps\n1,2\n", "x", &[typed], &[]);
            assert!(e.contains("did you mean read-gbps?"), "{typed}: {e}");
        }
    }

    #[test]
    fn number_formats_and_ticks() {
        assert_eq!(format_value(256.0), "256");
        assert_eq!(format_value(0.25), "0.25");
        assert_eq!(format_value(11.286648), "11.29");
        assert_eq!(format_value(1.5e9), "1.5e9");
        assert_eq!(format_value(-3.0), "-3");
        let t = linear_ticks(0.0, 10.0, 5);
        let labels = labels_of(&t);
        assert_eq!(labels, ["0", "2", "4", "6", "8", "10"]);
        let t = linear_ticks(0.05, 0.42, 4);
        let labels = labels_of(&t);
        assert_eq!(labels, ["0.1", "0.2", "0.3", "0.4"]);
        // Log ticks reach out to the tick next to the data at either end.
        let labels = |min: f64, max: f64, pow2: bool| -> Vec<String> {
            let ((lo, hi), t) = log_ticks(min, max, pow2);
            assert!(lo <= min && hi >= max, "{min}..{max}: range {lo}..{hi}");
            assert_eq!((lo, hi), (t[0].0, t[t.len() - 1].0), "{t:?}");
            t.into_iter().map(|x| x.1).collect()
        };
        assert_eq!(
            labels(256.0, 16384.0, true),
            ["256", "512", "1024", "2048", "4096", "8192", "16384"]
        );
        assert_eq!(
            labels(200.0, 20000.0, true),
            [
                "128", "256", "512", "1024", "2048", "4096", "8192", "16384", "32768"
            ]
        );
        // Every k-th power of two when there are many, aligned.
        assert_eq!(
            labels(1.0, 1048576.0, true),
            ["1", "8", "64", "512", "4096", "32768", "262144", "2097152"]
        );
        // Few ticks of 1-2-3-...-9 when they cover the data, else 1-2-5.
        assert_eq!(labels(11.5, 27.0, false), ["10", "20", "30"]);
        assert_eq!(labels(23.6, 100.0, false), ["20", "50", "100"]);
        assert_eq!(labels(0.31, 0.9, false), ["0.2", "0.5", "1"]);
        assert_eq!(
            labels(1.5, 700.0, false),
            ["1", "2", "5", "10", "20", "50", "100", "200", "500", "1000"]
        );
        // Decades past ten 1-2-5 ticks, every k-th past ten decades.
        assert_eq!(
            labels(0.9, 1100.0, false),
            ["0.1", "1", "10", "100", "1000", "10000"]
        );
        assert_eq!(
            labels(3.0, 3e12, false),
            [
                "1", "100", "10000", "1000000", "1e8", "1e10", "1e12", "1e14"
            ]
        );
        // Within one step of 1-2-3-...-9: linear ticks, from one at or below
        // the data to one at or above.
        assert_eq!(
            labels(11.0, 19.0, false),
            ["10", "12", "14", "16", "18", "20"]
        );
        assert_eq!(labels(1.012, 1.049, false).first().unwrap(), "1.01");
        // One value: an octave either side.
        assert_eq!(labels(10.0, 10.0, false), ["5", "10", "20"]);
        assert_eq!(labels(256.0, 256.0, true), ["128", "256", "512"]);
        // Data at the ends of f64 give a few finite ticks, not billions.
        for (lo, hi, pow2) in [
            (f64::MIN_POSITIVE, f64::MAX, false),
            (1e-300, 1e300, false),
            (5e-324, 1.0, true),
            (1.0, f64::MAX, true),
        ] {
            let (range, t) = log_ticks(lo, hi, pow2);
            assert!(!t.is_empty() && t.len() <= 10, "{lo}..{hi}: {}", t.len());
            assert!(t.iter().all(|(v, _)| v.is_finite() && *v > 0.0), "{t:?}");
            assert!(range.0 > 0.0 && range.1.is_finite(), "{range:?}");
        }
    }

    fn sample_chart(kind: ChartKind) -> Chart {
        let mut c = Chart::new("Bandwidth vs batch", kind)
            .labels("batch", "GB/s")
            .with_series(
                Series::new("dramsim3")
                    .point(256.0, 10.0)
                    .point(512.0, 20.0)
                    .point(1024.0, 40.0),
            )
            .with_series(
                Series::new("ramulator")
                    .point(256.0, 9.0)
                    .point(512.0, 18.0)
                    .point(1024.0, 33.0),
            )
            .hline("paper: 35 GB/s", 35.0);
        if kind == ChartKind::Bars {
            for s in &mut c.series {
                for p in &mut s.points {
                    p.0 = XValue::Cat(format!("DDR4-{}", p.0.label()));
                }
            }
        }
        c
    }

    fn distinct_png_colours(path: &Path) -> (u32, u32, usize) {
        let decoder = png::Decoder::new(std::io::BufReader::new(fs::File::open(path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let bpp = info.color_type.samples();
        let colours: std::collections::HashSet<&[u8]> =
            buf[..info.buffer_size()].chunks(bpp).collect();
        (info.width, info.height, colours.len())
    }

    #[test]
    fn writes_svg_and_png() {
        let dir = tempfile::tempdir().unwrap();
        for (kind, log) in [
            (ChartKind::Lines, false),
            (ChartKind::Lines, true),
            (ChartKind::Bars, false),
            (ChartKind::Bars, true),
        ] {
            let mut chart = sample_chart(kind);
            chart.log_y = log;
            chart.log_x = log && kind == ChartKind::Lines;
            let stem = dir.path().join(format!("sub/chart.{kind:?}-{log}"));
            let paths = write_chart(&chart, &stem).unwrap();
            assert_eq!(
                paths,
                vec![with_suffix(&stem, "svg"), with_suffix(&stem, "png")]
            );
            let svg = fs::read_to_string(&paths[0]).unwrap();
            assert!(svg.starts_with("<svg"), "{}", &svg[..100.min(svg.len())]);
            for text in [
                "Bandwidth vs batch",
                "dramsim3",
                "ramulator",
                "paper: 35 GB/s",
                "GB/s",
                "batch",
            ] {
                // plotters writes each text on a line of its own.
                assert!(
                    svg.lines().any(|l| l.trim() == text),
                    "{kind:?} {log}: no text `{text}` in {svg}"
                );
            }
            let png = fs::read(&paths[1]).unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
            assert!(png.len() > 5000, "{} bytes", png.len());
            let (w, h, colours) = distinct_png_colours(&paths[1]);
            assert_eq!((w, h), DEFAULT_SIZE);
            // Palette colours, greys of the grid and anti-aliased text.
            assert!(colours > 10, "{colours} colours");
        }
    }

    /// The number in `attr="..."` of an SVG element's line.
    fn svg_attr(line: &str, attr: &str) -> Option<f64> {
        let start = line.find(&format!(" {attr}=\""))? + attr.len() + 3;
        line[start..].split('"').next()?.parse().ok()
    }

    /// The y axis's tick labels of an SVG from [`write_chart`]: (pixel y,
    /// value), top to bottom. (plotters writes a text's content on the line
    /// after its `<text ...>`; only the y labels are right-aligned.)
    fn svg_y_ticks(svg: &str) -> Vec<(f64, f64)> {
        let lines: Vec<&str> = svg.lines().collect();
        let mut ticks = lines
            .windows(2)
            .filter(|w| w[0].starts_with("<text") && w[0].contains("text-anchor=\"end\""))
            .map(|w| {
                let y = svg_attr(w[0], "y").unwrap();
                (y, w[1].trim().parse::<f64>().expect(w[1]))
            })
            .collect::<Vec<_>>();
        ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        ticks
    }

    #[test]
    fn log_axes_have_ticks_around_the_data_and_log_bars_start_on_one() {
        let dir = tempfile::tempdir().unwrap();
        let values = [11.5, 14.0, 27.0];
        // (Named like the y axis: no legend, whose marker would be a circle too.)
        let mut series = Series::new("GB/s");
        for (i, v) in values.iter().enumerate() {
            series = series.point(i as f64 + 1.0, *v);
        }
        let lines = Chart::new("lines", ChartKind::Lines)
            .labels("x", "GB/s")
            .log_axes(false, true)
            .with_series(series);
        let paths = write_chart(&lines, &dir.path().join("lines")).unwrap();
        let svg = fs::read_to_string(&paths[0]).unwrap();
        let ticks = svg_y_ticks(&svg);
        let labels: Vec<f64> = ticks.iter().map(|t| t.1).collect();
        assert_eq!(labels, [30.0, 20.0, 10.0], "{ticks:?}");
        // Every marker lies between the lowest and the highest tick.
        let (top, bottom) = (ticks[0].0, ticks[ticks.len() - 1].0);
        let marks: Vec<f64> = svg
            .lines()
            .filter(|l| l.starts_with("<circle"))
            .map(|l| svg_attr(l, "cy").unwrap())
            .collect();
        assert_eq!(marks.len(), 3, "{svg}");
        assert!(
            marks.iter().all(|&y| y > top && y < bottom),
            "{marks:?} {ticks:?}"
        );

        let mut bars = Chart::new("bars", ChartKind::Bars)
            .labels("c", "GB/s")
            .log_axes(false, true)
            .with_series(
                Series::new("GB/s")
                    .point("a", 23.6)
                    .point("b", 60.0)
                    .point("c", 100.0),
            );
        let paths = write_chart(&bars, &dir.path().join("bars")).unwrap();
        let svg = fs::read_to_string(&paths[0]).unwrap();
        let ticks = svg_y_ticks(&svg);
        let labels: Vec<f64> = ticks.iter().map(|t| t.1).collect();
        assert_eq!(labels, [100.0, 50.0, 20.0], "{ticks:?}");
        let base = ticks[ticks.len() - 1].0;
        let rects: Vec<(f64, f64)> = svg
            .lines()
            .filter(|l| l.starts_with("<rect") && l.contains("#0072B2"))
            .map(|l| {
                let y = svg_attr(l, "y").unwrap();
                (y, y + svg_attr(l, "height").unwrap())
            })
            .collect();
        assert_eq!(rects.len(), 3, "{svg}");
        // The bars grow from the tick labelled 20, below the smallest value.
        for (top, bottom) in &rects {
            assert!(
                (bottom - base).abs() <= 1.0,
                "bar ends at {bottom}, tick 20 at {base}"
            );
            assert!(top < bottom);
        }
        // Pure powers of two keep power-of-two ticks; bars start a tick below
        // the smallest value when it is a tick itself, so its bar shows.
        let heights = |svg: &str| -> Vec<f64> {
            svg.lines()
                .filter(|l| l.starts_with("<rect") && l.contains("#0072B2"))
                .map(|l| svg_attr(l, "height").unwrap())
                .collect()
        };
        bars.series[0].points = vec![("a".into(), 256.0), ("b".into(), 4096.0)];
        let paths = write_chart(&bars, &dir.path().join("pow2")).unwrap();
        let svg = fs::read_to_string(&paths[0]).unwrap();
        let ticks = svg_y_ticks(&svg);
        let labels: Vec<f64> = ticks.iter().map(|t| t.1).collect();
        assert_eq!(
            labels,
            [4096.0, 2048.0, 1024.0, 512.0, 256.0, 128.0],
            "{ticks:?}"
        );
        let h = heights(&svg);
        assert!(h.len() == 2 && h.iter().all(|&h| h > 1.0), "{h:?}");
        bars.series[0].points = vec![("a".into(), 1.0), ("b".into(), 10.0), ("c".into(), 100.0)];
        let paths = write_chart(&bars, &dir.path().join("decades")).unwrap();
        let h = heights(&fs::read_to_string(&paths[0]).unwrap());
        assert!(h.len() == 3 && h.iter().all(|&h| h > 1.0), "{h:?}");
    }

    #[test]
    fn chart_from_a_file_and_long_categories() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("results.csv");
        let mut text = String::from("config,gbps\n");
        for i in 0..12 {
            text.push_str(&format!(
                "\"a rather long configuration name, number {i}\",{}\n",
                i + 1
            ));
        }
        fs::write(&csv, text).unwrap();
        let chart =
            chart_from_csv(&csv, "config", &s(&["gbps"]), &[], &Default::default()).unwrap();
        assert_eq!(chart.kind, ChartKind::Bars);
        let paths = write_chart_sized(&chart, &dir.path().join("long"), (640, 400)).unwrap();
        let (w, h, colours) = distinct_png_colours(&paths[1]);
        assert_eq!((w, h), (640, 400));
        assert!(colours > 2);
        let err = chart_from_csv(
            &dir.path().join("nope.csv"),
            "a",
            &s(&["b"]),
            &[],
            &Default::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("nope.csv"), "{err}");
        assert!(write_chart_sized(&chart, &dir.path().join("tiny"), (10, 10)).is_err());
    }
}
