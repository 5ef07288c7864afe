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

pub(crate) fn md_table(header: &[&str], rows: &[Vec<String>]) -> String {
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

pub(crate) fn f2(x: f64) -> String {
    format!("{x:.2}")
}

pub(crate) fn f1(x: f64) -> String {
    format!("{x:.1}")
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
