//! Helpers every analysis shares: JSON numbers, markdown tables, number
//! formats, charts.

use crate::*;

pub(crate) fn num(v: &Value, path: &str) -> Option<f64> {
    let mut x = v;
    for k in path.split('.') {
        x = match k.parse::<usize>() {
            Ok(i) if x.is_array() => x.get(i)?,
            _ => x.get(k)?,
        };
    }
    x.as_f64()
}

pub(crate) fn bytes_of(v: &Value, key: &str) -> Result<(f64, f64), String> {
    let r = num(v, &format!("{key}.read_bytes"));
    let w = num(v, &format!("{key}.write_bytes"));
    match (r, w) {
        (Some(r), Some(w)) => Ok((r, w)),
        _ => Err(format!(
            "`kernels traffic` output has no `{key}` read/write bytes"
        )),
    }
}

fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = format!("| {} |\n|", header.join(" | "));
    for i in 0..header.len() {
        // Right-align the columns of numbers: every non-empty cell a number,
        // with at most a unit after it (`12.5%`, `3.41x`, `1.2-1.6x`).
        let is_number = |c: &str| {
            let c = c.trim_end_matches(['%', 'x']);
            !c.is_empty()
                && c.chars().next().is_some_and(|ch| ch.is_ascii_digit())
                && c.chars()
                    .all(|ch| ch.is_ascii_digit() || matches!(ch, '.' | '-' | ',' | 'e' | '+'))
        };
        let numeric = rows.iter().any(|r| r.get(i).is_some_and(|c| !c.is_empty()))
            && rows.iter().all(|r| {
                r.get(i)
                    .is_none_or(|c| c.is_empty() || c == "-" || is_number(c))
            });
        s.push_str(if i > 0 && numeric { "---:|" } else { "---|" });
    }
    s.push('\n');
    for r in rows {
        let _ = writeln!(s, "| {} |", r.join(" | "));
    }
    s
}

pub(crate) fn range(xs: &[f64]) -> String {
    if xs.is_empty() {
        return "none".into();
    }
    let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if (hi - lo).abs() < 0.005 * hi.abs() {
        format!("{lo:.2}x")
    } else {
        format!("{lo:.2}-{hi:.2}x")
    }
}

/// A time in ms with where it came from, for a report's cell: `3.416 ms
/// (meas+model)`; `sources` as a summary names them (`measured+modelled`).
pub(crate) fn ms_cell(ms: f64, sources: &str) -> Val {
    let s = sources
        .split('+')
        .filter(|x| !x.is_empty())
        .map(|x| nmpsim_dlrm::Source::named(x).map_or(x, |s| s.short()))
        .collect::<Vec<_>>()
        .join("+");
    if s.is_empty() {
        format!("{ms:.3} ms").into()
    } else {
        format!("{ms:.3} ms ({s})").into()
    }
}

pub(crate) fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

pub(crate) fn chart(title: &str, x: &str, y: &str, kind: ChartKind) -> Chart {
    Chart {
        title: title.to_string(),
        x_label: x.to_string(),
        y_label: y.to_string(),
        kind,
        log_x: false,
        log_y: false,
        series: Vec::new(),
        hlines: Vec::new(),
        category_order: Vec::new(),
    }
}

pub(crate) fn push_point(c: &mut Chart, series: &str, x: XValue, y: f64) {
    if !y.is_finite() {
        return;
    }
    if let Some(s) = c.series.iter_mut().find(|s| s.name == series) {
        s.points.push((x, y));
    } else {
        c.series.push(Series {
            name: series.to_string(),
            points: vec![(x, y)],
        });
    }
}

pub(crate) fn model_label(m: &str) -> String {
    m.to_ascii_uppercase()
}

/// One cell of a [`Table`]: text, or a number each rendering writes in its
/// column's [`Fmt`] (`None`: an empty cell).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Val {
    Text(String),
    Num(Option<f64>),
}

impl From<&str> for Val {
    fn from(s: &str) -> Self {
        Val::Text(s.to_string())
    }
}

impl From<String> for Val {
    fn from(s: String) -> Self {
        Val::Text(s)
    }
}

impl From<&String> for Val {
    fn from(s: &String) -> Self {
        Val::Text(s.clone())
    }
}

impl From<f64> for Val {
    fn from(x: f64) -> Self {
        Val::Num(Some(x))
    }
}

impl From<Option<f64>> for Val {
    fn from(x: Option<f64>) -> Self {
        Val::Num(x)
    }
}

/// How a column writes its numbers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fmt {
    /// As Rust prints the value (`{}`): every digit a CSV needs.
    Plain,
    /// `n` decimals.
    Fixed(usize),
    /// A share as a percentage with `n` decimals and `%`.
    Pct(usize),
    /// `n` decimals and a unit after them (`12.5%` of a value already in
    /// percent, `3.41x`, `2.000 ms`).
    Unit(usize, &'static str),
}

impl Fmt {
    fn write(self, v: &Val) -> String {
        match (v, self) {
            (Val::Text(s), _) => s.clone(),
            (Val::Num(None), _) => String::new(),
            (Val::Num(Some(x)), Fmt::Plain) => format!("{x}"),
            (Val::Num(Some(x)), Fmt::Fixed(n)) => format!("{x:.n$}"),
            (Val::Num(Some(x)), Fmt::Pct(n)) => format!("{:.n$}%", 100.0 * x),
            (Val::Num(Some(x)), Fmt::Unit(n, unit)) => format!("{x:.n$}{unit}"),
        }
    }
}

/// A column of a [`Table`]: its CSV header (empty: not in the CSV) and
/// format, and its markdown header (empty: not in the report) and format.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Col {
    /// What [`Table::plot`] calls it: the CSV header, or the markdown one
    /// for a column of the report only.
    pub(crate) name: &'static str,
    pub(crate) csv: &'static str,
    pub(crate) csv_fmt: Fmt,
    pub(crate) md: &'static str,
    pub(crate) md_fmt: Fmt,
}

/// A column in both renderings.
pub(crate) const fn col(csv: &'static str, csv_fmt: Fmt, md: &'static str, md_fmt: Fmt) -> Col {
    Col {
        name: if csv.is_empty() { md } else { csv },
        csv,
        csv_fmt,
        md,
        md_fmt,
    }
}

impl Col {
    /// The column under another name (for [`Table::plot`] and
    /// [`Table::pivot`]): a report column that shows a CSV column's value
    /// another way (`RM1` for `rm1`) needs a name of its own.
    pub(crate) const fn named(self, name: &'static str) -> Col {
        Col { name, ..self }
    }
}

/// A column of the CSV only.
pub(crate) const fn csv_col(csv: &'static str, fmt: Fmt) -> Col {
    col(csv, fmt, "", fmt)
}

/// A column of the markdown report only.
pub(crate) const fn md_col(md: &'static str, fmt: Fmt) -> Col {
    col("", fmt, md, fmt)
}

/// A column of neither rendering: a value the chart reads (a series'
/// label).
pub(crate) const fn chart_col(name: &'static str) -> Col {
    Col {
        name,
        ..csv_col("", Fmt::Plain)
    }
}

/// An item's rows, written once: the tidy CSV (full precision, snake_case
/// headers), the markdown report (rounded, with the paper's rows after
/// ours) and the chart's points all come from them.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    cols: Vec<Col>,
    rows: Vec<Vec<Val>>,
    /// Rows of the report only (the paper's values), one cell per markdown
    /// column.
    paper: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(cols: &[Col]) -> Self {
        Table {
            cols: cols.to_vec(),
            rows: Vec::new(),
            paper: Vec::new(),
        }
    }

    /// Adds a row, one value per column.
    pub(crate) fn push(&mut self, row: Vec<Val>) {
        assert_eq!(row.len(), self.cols.len(), "a row of {row:?}");
        self.rows.push(row);
    }

    /// Adds a row of the report only, one cell per markdown column.
    pub(crate) fn paper_row(&mut self, cells: &[&str]) {
        assert_eq!(
            cells.len(),
            self.md_cols().count(),
            "a paper row of {cells:?}"
        );
        self.paper
            .push(cells.iter().map(|c| c.to_string()).collect());
    }

    fn md_cols(&self) -> impl Iterator<Item = (usize, &Col)> {
        self.cols
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.md.is_empty())
    }

    fn csv_cols(&self) -> impl Iterator<Item = (usize, &Col)> {
        self.cols
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.csv.is_empty())
    }

    /// The column named `name`.
    fn index(&self, name: &str) -> usize {
        self.cols
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("no column `{name}`"))
    }

    pub(crate) fn csv(&self) -> String {
        let header: Vec<&str> = self.csv_cols().map(|(_, c)| c.csv).collect();
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                self.csv_cols()
                    .map(|(i, c)| c.csv_fmt.write(&r[i]))
                    .collect()
            })
            .collect();
        csv_text(&header, &rows)
    }

    pub(crate) fn md(&self) -> String {
        let header: Vec<&str> = self.md_cols().map(|(_, c)| c.md).collect();
        let mut rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| self.md_cols().map(|(i, c)| c.md_fmt.write(&r[i])).collect())
            .collect();
        rows.extend(self.paper.iter().cloned());
        md_table(&header, &rows)
    }

    /// The report's table of a pivot of these rows: a row per value of the
    /// columns `keys` (in the order first seen), a column per value in
    /// `cols` of column `col`, each cell column `value` as the report writes
    /// it (`-` where no row has that pair), then the columns `carry` (their
    /// value in the first row of each). Headers: the markdown ones of `keys`
    /// and `carry`, and the values of `cols`. The result's own rows are the
    /// pivot's, so the paper's rows can follow them ([`Table::paper_row`]).
    pub(crate) fn pivot(
        &self,
        keys: &[&str],
        col: &str,
        cols: &[&'static str],
        value: &str,
        carry: &[&str],
    ) -> Table {
        let (ci, vi) = (self.index(col), self.index(value));
        let ki: Vec<usize> = keys.iter().map(|c| self.index(c)).collect();
        let carry: Vec<usize> = carry.iter().map(|c| self.index(c)).collect();
        let md = |i: usize, v: &Val| self.cols[i].md_fmt.write(v);
        let key_of = |r: &[Val]| -> Vec<String> { ki.iter().map(|&i| md(i, &r[i])).collect() };
        let mut out_cols: Vec<Col> = ki
            .iter()
            .map(|&i| md_col(self.cols[i].md, Fmt::Plain))
            .collect();
        out_cols.extend(cols.iter().map(|c| md_col(c, Fmt::Plain)));
        out_cols.extend(carry.iter().map(|&i| md_col(self.cols[i].md, Fmt::Plain)));
        let mut out = Table::new(&out_cols);
        let mut seen: Vec<Vec<String>> = Vec::new();
        for r in &self.rows {
            let key = key_of(r);
            if !seen.contains(&key) {
                seen.push(key);
            }
        }
        for key in seen {
            let of_key: Vec<&Vec<Val>> = self.rows.iter().filter(|r| key_of(r) == key).collect();
            let mut line: Vec<Val> = key.into_iter().map(Val::from).collect();
            for c in cols {
                let cell = of_key
                    .iter()
                    .find(|r| Fmt::Plain.write(&r[ci]) == *c)
                    .map_or("-".to_string(), |r| md(vi, &r[vi]));
                line.push(cell.into());
            }
            line.extend(carry.iter().map(|&i| Val::from(md(i, &of_key[0][i]))));
            out.push(line);
        }
        out
    }

    /// Every row as a point of `c`: column `series` names the series,
    /// column `x` is the x value (a number, or a category for text), and
    /// column `y` the value (rows whose `x` or `y` is empty, or whose `y`
    /// is not finite, are left out).
    pub(crate) fn plot(&self, c: &mut Chart, series: &str, x: &str, y: &str) {
        let (s, xi, yi) = (self.index(series), self.index(x), self.index(y));
        for r in &self.rows {
            let Val::Num(Some(v)) = r[yi] else { continue };
            let x = match &r[xi] {
                Val::Text(t) => XValue::Cat(t.clone()),
                Val::Num(Some(n)) => XValue::Num(*n),
                Val::Num(None) => continue,
            };
            push_point(c, &Fmt::Plain.write(&r[s]), x, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(&[
            col("name", Fmt::Plain, "name", Fmt::Plain),
            csv_col("bytes", Fmt::Plain),
            col("share", Fmt::Fixed(4), "share", Fmt::Pct(1)),
            md_col("label", Fmt::Plain),
            chart_col("series"),
        ]);
        t.push(vec![
            "a".into(),
            1024.0.into(),
            0.12345.into(),
            "A".into(),
            "s1".into(),
        ]);
        t.push(vec![
            "b,c".into(),
            Val::Num(None),
            Val::Num(None),
            "B".into(),
            "s2".into(),
        ]);
        t.paper_row(&["paper", "about 10%", ""]);
        t
    }

    #[test]
    fn a_table_writes_each_column_where_it_belongs_in_its_format() {
        let t = table();
        assert_eq!(t.csv(), "name,bytes,share\na,1024,0.1235\n\"b,c\",,\n");
        let md = t.md();
        assert!(md.starts_with("| name | share | label |\n"), "{md}");
        assert!(md.contains("| a | 12.3% | A |\n"), "{md}");
        // The paper's row comes after ours, in the report only.
        assert!(md.ends_with("| paper | about 10% |  |\n"), "{md}");
        assert!(!t.csv().contains("paper"));
    }

    #[test]
    fn a_table_plots_its_rows_and_skips_empty_values() {
        let mut c = chart("t", "x", "y", ChartKind::Bars);
        table().plot(&mut c, "series", "name", "share");
        assert_eq!(c.series.len(), 1, "the row without a share is no point");
        assert_eq!(c.series[0].name, "s1");
        assert_eq!(c.series[0].points, vec![(XValue::Cat("a".into()), 0.12345)]);
    }

    #[test]
    fn a_pivot_has_a_row_per_key_and_a_column_per_value_in_the_report_format() {
        let mut t = Table::new(&[
            csv_col("model", Fmt::Plain),
            md_col("model", Fmt::Plain).named("label"),
            col("mode", Fmt::Plain, "mode", Fmt::Plain),
            col("speedup", Fmt::Fixed(4), "speedup", Fmt::Unit(2, "x")),
            md_col("paper", Fmt::Plain),
        ]);
        for (m, mode, x, paper) in [
            ("rm1", "base", 1.0, "p1"),
            ("rm1", "fast", 2.345, "p1"),
            ("rm3", "fast", 3.0, "p3"),
        ] {
            t.push(vec![
                m.into(),
                m.to_uppercase().into(),
                mode.into(),
                x.into(),
                paper.into(),
            ]);
        }
        let mut p = t.pivot(&["label"], "mode", &["base", "fast"], "speedup", &["paper"]);
        p.paper_row(&["paper", "1x", "2x", ""]);
        assert_eq!(
            p.md(),
            "| model | base | fast | paper |\n|---|---:|---:|---|\n\
             | RM1 | 1.00x | 2.35x | p1 |\n\
             | RM3 | - | 3.00x | p3 |\n\
             | paper | 1x | 2x |  |\n"
        );
    }

    #[test]
    #[should_panic(expected = "a row of")]
    fn a_row_of_the_wrong_width_is_refused() {
        table().push(vec!["x".into()]);
    }
}
