//! The tidy `results.csv` of a sweep: one row per run, in run order.
//!
//! Columns: `run` (the run directory's name), the swept parameters in spec
//! order, `status`, `error`, `wall_s`, then the metrics in natural order
//! (`phases.2` before `phases.10`). Metrics are the run's JSON output
//! flattened into dotted names: objects by key, arrays by position; the
//! `build` and `command` fields are dropped and the `results` object is
//! unwrapped, so `{"results": {"runs": [{"bandwidth_gbps": 9.1}]}}` becomes the
//! column `runs.0.bandwidth_gbps`. A metric whose name collides with a
//! parameter or fixed column is prefixed with `result.`.
//!
//! The table is a function of the run directories alone, so a resumed,
//! re-ordered or sharded-and-merged sweep writes the same bytes. What differs
//! between two executions of the same sweep is only what measures the machine
//! rather than the model: see [`is_timing_column`].

use std::cmp::Ordering;
use std::collections::BTreeSet;

use serde_json::Value;

/// Fixed columns between the parameters and the metrics.
pub const FIXED_COLUMNS: [&str; 3] = ["status", "error", "wall_s"];

/// One run's row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub index: usize,
    /// The run directory's name.
    pub run: String,
    /// Values of the parameter columns, in column order.
    pub params: Vec<String>,
    /// `completed` or `failed`.
    pub status: String,
    /// Last line of the run's stderr when it failed.
    pub error: String,
    /// Wall-clock seconds of the run's process.
    pub wall_s: Option<f64>,
    /// Flattened metrics (name, value).
    pub metrics: Vec<(String, String)>,
}

impl Row {
    /// The value of the metric `name` (a flattened, dotted name).
    pub fn metric(&self, name: &str) -> Option<&str> {
        self.metrics
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The metrics of a command's JSON output, as (dotted name, value).
pub fn flatten_metrics(v: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match k.as_str() {
                    "build" | "command" => {}
                    "results" => flatten_into(x, "", &mut out),
                    _ => flatten_into(x, k, &mut out),
                }
            }
        }
        other => flatten_into(other, "value", &mut out),
    }
    out
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn flatten_into(v: &Value, prefix: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                // The run's own directory is already the `run` column, and its
                // absolute path would differ between a sweep and its shards.
                if k == "run_dir" {
                    continue;
                }
                flatten_into(x, &join(prefix, k), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                flatten_into(x, &join(prefix, &i.to_string()), out);
            }
        }
        Value::Null => out.push((prefix.to_string(), String::new())),
        Value::Bool(b) => out.push((prefix.to_string(), b.to_string())),
        Value::Number(n) => out.push((prefix.to_string(), n.to_string())),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
    }
}

/// Columns that measure this machine and this moment (the run's wall clock
/// and the simulator's own speed) rather than the modelled system: `wall_s`,
/// `wall_*`, `*_wall_s`, `sim_*_per_s`, and a training run's wall-clock
/// figures (`samples_per_second`, `dense_gflops`, the `host_share` of its
/// wall time, an emulation's `emulated_raw_ms_per_iteration`). Two
/// executions of one sweep differ in these and agree elsewhere, for
/// deterministic commands (`train --host`: every time modelled or
/// simulated).
pub fn is_timing_column(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    last == "wall_s"
        || last.starts_with("wall_")
        || last.ends_with("_wall_s")
        || (last.starts_with("sim_") && last.ends_with("_per_s"))
        || last == "samples_per_second"
        || last == "dense_gflops"
        || name
            .split('.')
            .any(|s| s == "host_share" || s == "emulated_raw_ms_per_iteration")
}

/// Orders dotted names segment by segment, numeric segments by value.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let mut x = a.split('.');
    let mut y = b.split('.');
    loop {
        match (x.next(), y.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) => {
                let o = match (p.parse::<u64>(), q.parse::<u64>()) {
                    (Ok(m), Ok(n)) => m.cmp(&n).then_with(|| p.cmp(q)),
                    _ => p.cmp(q),
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

/// `*` matches any run of characters (dots included); everything else is literal.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// One CSV field, quoted when it holds a comma, quote or line break.
pub fn csv_field(s: &str) -> String {
    match s {
        "" => String::new(),
        _ => csv_line([s]).trim_end_matches('\n').to_string(),
    }
}

/// One CSV record and its newline, quoted as [`csv_field`] says (the `csv`
/// crate's writer).
fn csv_line(fields: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .flexible(true)
        .from_writer(Vec::new());
    w.write_record(fields.into_iter().map(|f| f.as_ref().as_bytes().to_vec()))
        .expect("a CSV record written to memory");
    String::from_utf8(w.into_inner().expect("written to memory")).expect("UTF-8 in, UTF-8 out")
}

/// A CSV table: the header line, then one line per row. Every CSV nmpsim
/// writes goes through here or [`results_csv`], so one quoting rule holds.
///
/// Panics if a row has other than one field per column: such a row would put
/// values under the wrong names without a sound.
pub fn csv_text(header: &[&str], rows: &[Vec<String>]) -> String {
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(
            r.len(),
            header.len(),
            "CSV row {} has {} fields for the {} columns {header:?}",
            i + 1,
            r.len(),
            header.len()
        );
    }
    let mut out = csv_line(header);
    for r in rows {
        out.push_str(&csv_line(r));
    }
    out
}

/// A `metrics` pattern of the spec that keeps no column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmatchedPattern {
    pub pattern: String,
    /// The nearest metric names (or, with array indices as `*`, patterns),
    /// closest first; empty when nothing is near.
    pub near: Vec<String>,
}

/// The `metric_patterns` that match no metric of any completed run in `rows`
/// (a misspelt pattern silently leaves its columns out of `results.csv`).
/// Without a completed run nothing is known to be missing: empty.
pub fn unmatched_metric_patterns(
    param_columns: &[String],
    rows: &[Row],
    metric_patterns: &[String],
) -> Vec<UnmatchedPattern> {
    // Metric names, and the column names of those renamed `result.<name>`:
    // a pattern may give either.
    let rename = column_renamer(param_columns);
    let keys: BTreeSet<String> = rows
        .iter()
        .filter(|r| r.status == "completed")
        .flat_map(|r| r.metrics.iter().map(|(k, _)| k.as_str()))
        .flat_map(|k| [k.to_string(), rename(k)])
        .collect();
    if !rows.iter().any(|r| r.status == "completed") {
        return Vec::new();
    }
    // Candidates: every metric name, and each with its array indices as `*`
    // (`runs.*.bandwidth_gbps`), the form patterns are usually written in.
    let starred = |k: &str| -> String {
        k.split('.')
            .map(|c| {
                if !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) {
                    "*"
                } else {
                    c
                }
            })
            .collect::<Vec<_>>()
            .join(".")
    };
    let candidates: BTreeSet<String> = keys
        .iter()
        .flat_map(|k| [k.to_string(), starred(k)])
        .collect();
    metric_patterns
        .iter()
        .filter(|p| !keys.iter().any(|k| glob_match(p, k)))
        .map(|p| {
            let limit = (p.chars().count() / 4).clamp(2, 6);
            let mut near: Vec<(usize, &String)> = candidates
                .iter()
                .map(|c| (crate::schema::edit_distance(p, c), c))
                .filter(|&(d, _)| d <= limit)
                .collect();
            near.sort();
            let best = near.first().map(|&(d, _)| d);
            UnmatchedPattern {
                pattern: p.clone(),
                near: near
                    .into_iter()
                    .take_while(|&(d, _)| Some(d) == best)
                    .take(3)
                    .map(|(_, c)| c.clone())
                    .collect(),
            }
        })
        .collect()
}

/// A metric's column name: the metric's own, or `result.<name>` where a
/// parameter or fixed column has that name.
fn column_renamer(param_columns: &[String]) -> impl Fn(&str) -> String + '_ {
    move |m: &str| {
        if m == "run" || FIXED_COLUMNS.contains(&m) || param_columns.iter().any(|c| c == m) {
            format!("result.{m}")
        } else {
            m.to_string()
        }
    }
}

/// The text of `results.csv`. `rows` may come in any order; they are written
/// in run order. `metric_patterns` (globs) keep only matching metric columns;
/// empty keeps all.
pub fn results_csv(param_columns: &[String], rows: &[Row], metric_patterns: &[String]) -> String {
    let rename = column_renamer(param_columns);
    // A pattern may name a metric or its column (`result.status`).
    let keep = |m: &str| {
        metric_patterns.is_empty()
            || metric_patterns
                .iter()
                .any(|p| glob_match(p, m) || glob_match(p, &rename(m)))
    };
    let mut metrics: Vec<String> = rows
        .iter()
        .flat_map(|r| r.metrics.iter().map(|(k, _)| k))
        .filter(|k| keep(k))
        .map(|k| rename(k))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    metrics.sort_by(|a, b| natural_cmp(a, b));

    let mut out = csv_line(
        std::iter::once("run")
            .chain(param_columns.iter().map(String::as_str))
            .chain(FIXED_COLUMNS)
            .chain(metrics.iter().map(String::as_str)),
    );
    let mut ordered: Vec<&Row> = rows.iter().collect();
    ordered.sort_by_key(|r| r.index);
    for r in ordered {
        let by_name: std::collections::HashMap<String, &str> = r
            .metrics
            .iter()
            .map(|(k, v)| (rename(k), v.as_str()))
            .collect();
        let wall = r.wall_s.map(|w| format!("{w:.3}")).unwrap_or_default();
        let mut fields: Vec<&str> = vec![r.run.as_str()];
        fields.extend((0..param_columns.len()).map(|i| r.params.get(i).map_or("", String::as_str)));
        fields.extend([r.status.as_str(), r.error.as_str(), wall.as_str()]);
        fields.extend(
            metrics
                .iter()
                .map(|m| by_name.get(m).copied().unwrap_or("")),
        );
        out.push_str(&csv_line(fields));
    }
    out
}

/// CSV text that breaks RFC 4180 quoting, at the (1-based) line named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct CsvSyntaxError {
    pub line: usize,
    pub what: String,
}

/// Parses CSV text (RFC 4180 quoting) into records.
pub fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, CsvSyntaxError> {
    Ok(parse_csv_lines(text)?.into_iter().map(|(_, r)| r).collect())
}

/// [`parse_csv`], with the (1-based) line each record starts on.
///
/// A quote opens a quoted field only at the field's start (after blanks, if
/// any; blanks after the closing quote are dropped); a quote anywhere
/// else in an unquoted field, text between a closing quote and the next comma
/// or line end, and a quoted field still open at the end of the text are
/// errors (rather than a record that swallows the rest of the file).
///
/// The reader is nmpsim's own, not the `csv` crate's: that reader keeps a
/// stray quote as text and lets an unclosed quote run to the end of the
/// input, where a sweep's or a user's table must be refused at its line.
pub fn parse_csv_lines(text: &str) -> Result<Vec<(usize, Vec<String>)>, CsvSyntaxError> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    // The current field was quoted and its quote is closed.
    let mut closed = false;
    let mut chars = text.chars().peekable();
    let mut any = false;
    let (mut line, mut start, mut opened) = (1, 1, 1);
    let err = |line: usize, what: String| Err(CsvSyntaxError { line, what });
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => {
                    quoted = false;
                    closed = true;
                }
                _ => field.push(c),
            }
            if c == '\n' {
                line += 1;
            }
            continue;
        }
        let end_of_field = c == ',' || c == '\n' || (c == '\r' && chars.peek() == Some(&'\n'));
        if closed && (c == ' ' || c == '\t') {
            continue;
        }
        if closed && !end_of_field {
            return err(
                line,
                format!(
                    "field {}: `{c}` after the closing quote of a quoted field; expected a comma or the end of the line",
                    record.len() + 1
                ),
            );
        }
        match c {
            '"' if field.trim().is_empty() => {
                quoted = true;
                opened = line;
            }
            '"' => {
                return err(
                    line,
                    format!(
                        "field {}: stray quote in the unquoted field `{field}\"...`; a field holding a quote must be quoted whole, its quotes doubled (\"a\"\"b\")",
                        record.len() + 1
                    ),
                );
            }
            ',' => {
                record.push(std::mem::take(&mut field));
                closed = false;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                line += 1;
                record.push(std::mem::take(&mut field));
                records.push((start, std::mem::take(&mut record)));
                start = line;
                any = false;
                closed = false;
            }
            _ => field.push(c),
        }
    }
    if quoted {
        return err(
            opened,
            "unterminated quoted field: the quote opened on this line is never closed".into(),
        );
    }
    if any {
        record.push(field);
        records.push((start, record));
    }
    Ok(records)
}

/// `csv` without the columns whose header `drop` selects (e.g.
/// [`is_timing_column`], to compare two executions of a sweep).
pub fn without_columns(csv: &str, drop: impl Fn(&str) -> bool) -> Result<String, CsvSyntaxError> {
    let records = parse_csv(csv)?;
    let Some(header) = records.first() else {
        return Ok(String::new());
    };
    let keep: Vec<usize> = (0..header.len()).filter(|&i| !drop(&header[i])).collect();
    Ok(records
        .iter()
        .map(|r| csv_line(keep.iter().map(|&i| r.get(i).map_or("", String::as_str))))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(index: usize, params: &[&str], metrics: &[(&str, &str)]) -> Row {
        Row {
            index,
            run: format!("{index:04}-00000000"),
            params: params.iter().map(|s| s.to_string()).collect(),
            status: "completed".into(),
            error: String::new(),
            wall_s: Some(0.25),
            metrics: metrics
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// A run's JSON floats reach results.csv as the same doubles (serde_json's
    /// default float parser may be off by one in the last place).
    #[test]
    fn floats_read_back_from_json_are_the_doubles_written() {
        for x in [
            1806.0481558179886_f64,
            1655.3600000000001,
            0.1 + 0.2,
            5e-324,
            1.7976931348623157e308,
        ] {
            let text =
                serde_json::to_string(&serde_json::json!({ "results": { "x": x } })).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let cell = &flatten_metrics(&v)[0].1;
            assert_eq!(
                cell.parse::<f64>().unwrap().to_bits(),
                x.to_bits(),
                "{x:?} -> {cell}"
            );
        }
    }

    #[test]
    fn flattening_unwraps_results_and_indexes_arrays() {
        let v = json!({
            "build": {"git_rev": "x"},
            "command": "dram",
            "results": {
                "runs": [{"bandwidth_gbps": 9.5, "engine": "dramsim3", "energy": {"total_pj": 3}}],
                "row_conflicts": null,
                "ok": true,
                "run_dir": "/tmp/x"
            }
        });
        let m = flatten_metrics(&v);
        assert_eq!(
            m,
            vec![
                ("ok".to_string(), "true".to_string()),
                ("row_conflicts".to_string(), String::new()),
                ("runs.0.bandwidth_gbps".to_string(), "9.5".to_string()),
                ("runs.0.energy.total_pj".to_string(), "3".to_string()),
                ("runs.0.engine".to_string(), "dramsim3".to_string()),
            ]
        );
        assert_eq!(
            flatten_metrics(&json!(3)),
            vec![("value".to_string(), "3".to_string())]
        );
    }

    #[test]
    fn timing_columns() {
        for t in [
            "wall_s",
            "runs.0.wall_s",
            "simulation_wall_s",
            "modes.0.wall_ms_per_iteration",
            "runs.0.sim_requests_per_s",
        ] {
            assert!(is_timing_column(t), "{t}");
        }
        for t in [
            "modes.0.samples_per_second",
            "modes.1.dense_gflops",
            "modes.0.host_share.2.1",
        ] {
            assert!(is_timing_column(t), "{t}");
        }
        for t in [
            "bandwidth_gbps",
            "runs.0.cycles",
            "sim_time_ns",
            "status",
            "modes.0.modelled_samples_per_second",
            "modes.0.modelled_ms_per_iteration",
        ] {
            assert!(!is_timing_column(t), "{t}");
        }
    }

    #[test]
    fn natural_order_of_columns() {
        let mut v = vec!["p.10.x", "p.2.x", "p.2", "a", "p.1.y", "b.c"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["a", "b.c", "p.1.y", "p.2", "p.2.x", "p.10.x"]);
    }

    #[test]
    fn globs() {
        assert!(glob_match("runs.*.bandwidth_gbps", "runs.0.bandwidth_gbps"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("a*b*c", "a.x.b.y.c"));
        assert!(!glob_match("a*b*c", "a.x.c"));
        assert!(!glob_match("runs.*", "run"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
    }

    #[test]
    fn csv_quoting_and_round_trip() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        let text = csv_line(["x", "a,b", "q\"", "l\nm", ""]);
        assert_eq!(
            parse_csv(&text).unwrap(),
            vec![vec!["x", "a,b", "q\"", "l\nm", ""]]
        );
    }

    #[test]
    fn csv_tables_quote_their_cells() {
        let rows = vec![
            vec!["1".to_string(), "a,b".to_string()],
            vec!["2".to_string(), String::new()],
        ];
        let text = csv_text(&["n", "name"], &rows);
        assert_eq!(text, "n,name\n1,\"a,b\"\n2,\n");
        assert_eq!(parse_csv(&text).unwrap()[1], vec!["1", "a,b"]);
        let lines: Vec<usize> = parse_csv_lines("a,b\n\"x\ny\",1\n\n2,3\n")
            .unwrap()
            .iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(lines, [1, 2, 4, 5]);
    }

    /// Broken quoting is an error naming the line, not records that swallow
    /// the rest of the file or split where they should not.
    #[test]
    fn broken_csv_quoting_is_named() {
        let e = parse_csv_lines("x,y\n1,2\n2,\"3\n3,4\n4,5\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(
            e.to_string()
                .starts_with("line 3: unterminated quoted field"),
            "{e}"
        );
        // Quoted line breaks before the open quote count toward its line.
        let e = parse_csv_lines("a,b\n\"x\ny\",1\n\"open,2\n").unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        let e = parse_csv_lines("x,y\n1,2\"3\n3,4\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.to_string()
                .contains("field 2: stray quote in the unquoted field `2\"...`"),
            "{e}"
        );
        let e = parse_csv_lines("x,y\n\"1\"2,3\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("line 2: field 1: `2` after the closing quote"),
            "{e}"
        );
        // Well-formed quoting, blanks around a quoted field, CRLF line ends and
        // an unterminated last line still read.
        assert_eq!(
            parse_csv("x,y\r\n\"a\"\"b\",\"\"\r\n1, \"2\" \n3,4").unwrap(),
            vec![
                vec!["x", "y"],
                vec!["a\"b", ""],
                vec!["1", " 2"],
                vec!["3", "4"]
            ]
        );
    }

    #[test]
    #[should_panic(expected = "CSV row 2 has 3 fields for the 2 columns")]
    fn a_csv_row_out_of_step_with_its_header_is_refused() {
        let rows = vec![
            vec!["1".to_string(), "x".to_string()],
            vec!["2".to_string(), "y".to_string(), "z".to_string()],
        ];
        csv_text(&["n", "name"], &rows);
    }

    #[test]
    fn table_layout_order_and_collisions() {
        let cols = vec!["batch".to_string(), "seed".to_string()];
        let mut failed = row(1, &["256", "2"], &[]);
        failed.status = "failed".into();
        failed.error = "error: bad, really".into();
        failed.wall_s = None;
        let rows = vec![
            failed,
            row(
                0,
                &["256", "1"],
                &[
                    ("phases.10.t", "1"),
                    ("phases.2.t", "2"),
                    ("batch", "256"),
                    ("status", "ok"),
                ],
            ),
        ];
        let t = results_csv(&cols, &rows, &[]);
        assert_eq!(
            t,
            "run,batch,seed,status,error,wall_s,phases.2.t,phases.10.t,result.batch,result.status\n\
             0000-00000000,256,1,completed,,0.250,2,1,256,ok\n\
             0001-00000000,256,2,failed,\"error: bad, really\",,,,,\n"
        );
        let filtered = results_csv(&cols, &rows, &["phases.*".to_string()]);
        assert!(
            filtered.starts_with("run,batch,seed,status,error,wall_s,phases.2.t,phases.10.t\n")
        );
    }

    #[test]
    fn metric_patterns_that_match_nothing_are_listed_with_near_names() {
        let rows = vec![
            row(
                0,
                &["1"],
                &[("runs.0.bandwidth_gbps", "9"), ("runs.0.cycles", "7")],
            ),
            Row {
                status: "failed".into(),
                ..row(1, &["2"], &[("only_in_a_failed_run", "1")])
            },
        ];
        let pats = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let u = unmatched_metric_patterns(
            &pats(&["batch"]),
            &rows,
            &pats(&[
                "runs.*.bandwidth_gbs",
                "runs.*.cycles",
                "runs.0.cycle",
                "only_in_a_failed_run",
                "zzz",
            ]),
        );
        assert_eq!(
            u,
            vec![
                UnmatchedPattern {
                    pattern: "runs.*.bandwidth_gbs".into(),
                    near: vec!["runs.*.bandwidth_gbps".into()],
                },
                UnmatchedPattern {
                    pattern: "runs.0.cycle".into(),
                    near: vec!["runs.0.cycles".into()],
                },
                UnmatchedPattern {
                    pattern: "only_in_a_failed_run".into(),
                    near: vec![],
                },
                UnmatchedPattern {
                    pattern: "zzz".into(),
                    near: vec![],
                },
            ]
        );
        // No completed run: nothing is known to be missing.
        assert!(unmatched_metric_patterns(&[], &rows[1..], &pats(&["zzz"])).is_empty());
        // A metric named as a parameter column is `result.<name>` in the
        // table: either name selects it.
        let rows = vec![row(0, &["1"], &[("batch", "64"), ("status", "ok")])];
        let cols = pats(&["batch"]);
        let pats2 = pats(&["result.batch", "status"]);
        assert!(unmatched_metric_patterns(&cols, &rows, &pats2).is_empty());
        let t = results_csv(&cols, &rows, &pats2);
        assert!(
            t.starts_with("run,batch,status,error,wall_s,result.batch,result.status\n"),
            "{t}"
        );
    }

    #[test]
    fn dropping_timing_columns() {
        let t = "run,wall_s,x,runs.0.sim_cycles_per_s\n0,1.5,\"a,b\",9\n";
        assert_eq!(
            without_columns(t, is_timing_column).unwrap(),
            "run,x\n0,\"a,b\"\n"
        );
    }
}
