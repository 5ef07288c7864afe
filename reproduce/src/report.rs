//! An item's markdown report: the paper beside ours, the checks, the notes.

use crate::*;

/// The item's markdown report.
pub fn markdown(
    item: &Item,
    size: Size,
    engine: Option<&str>,
    out: &Outcome,
    files: &[String],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n", item.title);
    let _ = writeln!(s, "Paper: {}.\n", item.paper);
    let _ = writeln!(
        s,
        "Produced by `nmpsim reproduce {} --{}{}`.\n",
        item.id,
        size.as_str(),
        engine.map_or(String::new(), |e| format!(" --engine {e}"))
    );
    let _ = writeln!(s, "{}", out.table_md);
    if !out.checks.is_empty() {
        let held = out.checks.iter().filter(|c| c.holds).count();
        let identities = out
            .checks
            .iter()
            .filter(|c| c.kind == CheckKind::Identity)
            .count();
        let _ = writeln!(
            s,
            "## Checks ({held} of {} hold{})\n",
            out.checks.len(),
            match identities {
                0 => String::new(),
                n => format!("; {n} of them identities"),
            }
        );
        let rows: Vec<Vec<String>> = out
            .checks
            .iter()
            .map(|c| {
                vec![
                    c.claim.clone(),
                    c.paper.clone(),
                    c.threshold.clone(),
                    c.ours.clone(),
                    match (c.holds, c.kind) {
                        (true, CheckKind::Finding) => "yes".into(),
                        (false, CheckKind::Finding) => "**no**".into(),
                        (true, CheckKind::Identity) => "yes (identity)".into(),
                        (false, CheckKind::Identity) => "**no** (identity)".into(),
                    },
                ]
            })
            .collect();
        let _ = writeln!(
            s,
            "{}",
            md_table(&["claim", "paper", "holds when", "nmpsim", "holds"], &rows)
        );
        let _ = writeln!(
            s,
            "Thresholds are the paper's numbers with the tolerance of one rule, fixed before any result (docs/reproducing.md, \"Thresholds\"). An identity's outcome is fixed by construction and is not a finding.\n"
        );
    }
    if !out.notes.is_empty() {
        let _ = writeln!(s, "## Setup and sources\n");
        for n in &out.notes {
            let _ = writeln!(s, "- {n}");
        }
        s.push('\n');
    }
    if !files.is_empty() {
        let _ = writeln!(s, "Files: {}.", files.join(", "));
    }
    s
}
