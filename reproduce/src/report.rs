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
        let mut t = Table::new(
            &["claim", "paper", "holds when", "nmpsim", "holds"].map(|h| md_col(h, Fmt::Plain)),
        );
        for c in &out.checks {
            t.push(vec![
                (&c.claim).into(),
                (&c.paper).into(),
                (&c.threshold).into(),
                (&c.ours).into(),
                match (c.holds, c.kind) {
                    (true, CheckKind::Finding) => "yes",
                    (false, CheckKind::Finding) => "**no**",
                    (true, CheckKind::Identity) => "yes (identity)",
                    (false, CheckKind::Identity) => "**no** (identity)",
                }
                .into(),
            ]);
        }
        let _ = writeln!(s, "{}", t.md());
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
