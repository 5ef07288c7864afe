//! The embedded sweep specs, one `.toml` file each under `reproduce/specs/`,
//! at the paper's sizes (each runs as it is with `nmpsim sweep`), and
//! `reproduce/specs/reproduce.toml`, how `nmpsim reproduce` runs them: per
//! spec, `max-jobs` (runs at a time, `"auto"` for the sweep's default) and
//! `quick`, what `--quick` changes (`max-jobs`, and keys of the spec's
//! `[base]` and `[axes]`). The overrides and the engine a reproduction asks
//! for are made on the parsed document (`toml_edit`), so that comments and
//! layout stay as written.

use toml_edit::{DocumentMut, Item, Key, TableLike, value};

use crate::{Size, SweepDef};

/// Every embedded spec, by sweep name.
const SPECS: [(&str, &str); 20] = [
    ("traffic-batch", include_str!("../specs/traffic-batch.toml")),
    ("traffic", include_str!("../specs/traffic.toml")),
    ("pool", include_str!("../specs/pool.toml")),
    ("pool-hbm", include_str!("../specs/pool-hbm.toml")),
    (
        "pool-hbm-train",
        include_str!("../specs/pool-hbm-train.toml"),
    ),
    ("models", include_str!("../specs/models.toml")),
    ("batch", include_str!("../specs/batch.toml")),
    ("dim", include_str!("../specs/dim.toml")),
    ("link", include_str!("../specs/link.toml")),
    ("hot", include_str!("../specs/hot.toml")),
    ("fae-profile", include_str!("../specs/fae-profile.toml")),
    ("scars-growth", include_str!("../specs/scars-growth.toml")),
    ("fae-curves", include_str!("../specs/fae-curves.toml")),
    (
        "scars-growth-cache",
        include_str!("../specs/scars-growth-cache.toml"),
    ),
    ("cdlrm-window", include_str!("../specs/cdlrm-window.toml")),
    (
        "cdlrm-accuracy",
        include_str!("../specs/cdlrm-accuracy.toml"),
    ),
    ("cdlrm-vs-nmp", include_str!("../specs/cdlrm-vs-nmp.toml")),
    (
        "elrec-accuracy",
        include_str!("../specs/elrec-accuracy.toml"),
    ),
    ("elrec-reuse", include_str!("../specs/elrec-reuse.toml")),
    ("elrec-table3", include_str!("../specs/elrec-table3.toml")),
];

/// How each spec is run.
const SETTINGS: &str = include_str!("../specs/reproduce.toml");

/// The sweep `name` at `size`. Panics on a name or a spec that is not
/// embedded well (the tests load every one at both sizes).
pub(crate) fn sweep(name: &'static str, size: Size) -> SweepDef {
    let text = SPECS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no embedded sweep spec `{name}`"))
        .1;
    load(name, text, SETTINGS, size)
        .unwrap_or_else(|e| panic!("reproduce/specs/{name}.toml with reproduce.toml: {e}"))
}

/// `max-jobs`: a count, or `"auto"` for none.
fn max_jobs(item: &Item) -> Result<Option<u32>, String> {
    if item.as_str() == Some("auto") {
        return Ok(None);
    }
    item.as_integer()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|&n| n > 0)
        .map(Some)
        .ok_or_else(|| {
            format!("max-jobs: expected a count of at least 1 or \"auto\", found `{item}`")
        })
}

/// Spec `name` (`text`) at `size`, run as `settings` (reproduce.toml's
/// text) says.
fn load(name: &'static str, text: &str, settings: &str, size: Size) -> Result<SweepDef, String> {
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("{e}"))?;
    let settings: DocumentMut = settings
        .parse()
        .map_err(|e| format!("reproduce.toml: {e}"))?;
    let mut jobs = None;
    if let Some(rep) = settings.get(name) {
        let rep = rep
            .as_table_like()
            .ok_or_else(|| format!("reproduce.toml: [{name}] is not a table"))?;
        if let Some(j) = rep.get("max-jobs") {
            jobs = max_jobs(j)?;
        }
        if let (Size::Quick, Some(q)) = (size, rep.get("quick")) {
            let q = q
                .as_table_like()
                .ok_or_else(|| format!("reproduce.toml: {name}.quick is not a table"))?;
            for (section, overrides) in q.iter() {
                if section == "max-jobs" {
                    jobs = max_jobs(overrides)?;
                    continue;
                }
                override_keys(&mut doc, section, overrides)?;
            }
        }
    }
    Ok(SweepDef {
        name,
        toml: doc.to_string(),
        max_jobs: jobs,
    })
}

/// Sets each key of `overrides` in the spec's `[section]`, which must
/// already hold it (an override of nothing is a typo).
fn override_keys(doc: &mut DocumentMut, section: &str, overrides: &Item) -> Result<(), String> {
    let overrides: &dyn TableLike = overrides
        .as_table_like()
        .ok_or_else(|| format!("quick.{section}: expected keys of [{section}]"))?;
    let target = doc
        .get_mut(section)
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| format!("quick overrides [{section}], which the spec lacks"))?;
    for (k, v) in overrides.iter() {
        let slot = target
            .get_mut(k)
            .ok_or_else(|| format!("quick overrides {section}.{k}, which the spec lacks"))?;
        let v = v
            .as_value()
            .ok_or_else(|| format!("quick.{section}.{k}: expected a value"))?;
        // (The override's value, with the spec's own spacing around it.)
        let decor = slot.as_value().map(|old| old.decor().clone());
        let mut v = v.clone();
        if let Some(d) = decor {
            *v.decor_mut() = d;
        }
        *slot = Item::Value(v);
    }
    Ok(())
}

/// The spec with `host = "<host>"` in its `[base]` when its command is
/// `train` (its CPU primitives then modelled on that host); `None` for
/// other specs.
pub(crate) fn with_host(toml: &str, host: &str) -> Result<Option<String>, String> {
    let mut doc: DocumentMut = toml.parse().map_err(|e| format!("{e}"))?;
    if doc.get("command").and_then(Item::as_str) != Some("train") {
        return Ok(None);
    }
    let base = doc
        .get_mut("base")
        .and_then(Item::as_table_mut)
        .ok_or("the spec has no [base] table")?;
    base.insert("host", value(host));
    Ok(Some(doc.to_string()))
}

/// The spec with `engine = "<engine>"` in its `[base]` when its command
/// simulates DRAM (`nmp run`, `train`); other specs are returned unchanged.
pub(crate) fn with_engine(toml: &str, engine: &str) -> Result<String, String> {
    let mut doc: DocumentMut = toml.parse().map_err(|e| format!("{e}"))?;
    let simulates = matches!(
        doc.get("command").and_then(Item::as_str),
        Some("nmp run" | "train")
    );
    if !simulates {
        return Ok(toml.to_string());
    }
    let base = doc
        .get_mut("base")
        .and_then(Item::as_table_mut)
        .ok_or("the spec has no [base] table")?;
    if let Some(e) = base.get_mut("engine") {
        *e = value(engine);
    } else {
        // First in [base], where a reader of the spec looks for it.
        let rest: Vec<(Key, Item)> = base
            .iter()
            .map(|(k, v)| (base.key(k).expect("present").clone(), v.clone()))
            .collect();
        base.clear();
        base.insert("engine", value(engine));
        for (k, v) in rest {
            base.insert_formatted(&k, v);
        }
    }
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmpsim_experiments::spec::Spec;

    #[test]
    fn every_spec_loads_at_both_sizes_and_quick_is_smaller() {
        let settings: DocumentMut = SETTINGS.parse().unwrap();
        for (name, _) in SPECS {
            assert!(
                settings.get(name).is_some(),
                "reproduce.toml has no [{name}]"
            );
            let full = sweep(name, Size::Full);
            let quick = sweep(name, Size::Quick);
            for d in [&full, &quick] {
                Spec::parse(&d.toml, name).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            // (A spec as fast at the paper's sizes may change only its jobs.)
            assert!(
                full.toml != quick.toml || full.max_jobs != quick.max_jobs,
                "{name}: quick changes nothing"
            );
        }
        // Every table of reproduce.toml is a spec's.
        for (name, _) in settings.iter() {
            assert!(
                SPECS.iter().any(|(n, _)| *n == name),
                "[{name}] names no spec"
            );
        }
    }

    #[test]
    fn overrides_of_keys_the_spec_lacks_are_refused() {
        let spec = "command = \"train\"\n[base]\nrows = 10\n[axes]\nmodel = [\"rm1\"]\n";
        let e = load("x", spec, "[x]\nquick.base.row = 5\n", Size::Quick).unwrap_err();
        assert!(e.contains("base.row"), "{e}");
        let e = load("x", spec, "[x]\nmax-jobs = 0\n", Size::Full).unwrap_err();
        assert!(e.contains("max-jobs"), "{e}");
        let ok = "[x]\nmax-jobs = 2\nquick.max-jobs = \"auto\"\nquick.base.rows = 5\nquick.axes.model = [\"rm2\"]\n";
        let full = load("x", spec, ok, Size::Full).unwrap();
        assert_eq!(full.max_jobs, Some(2));
        assert!(full.toml.contains("rows = 10"));
        let quick = load("x", spec, ok, Size::Quick).unwrap();
        assert_eq!(quick.max_jobs, None);
        assert!(quick.toml.contains("rows = 5") && quick.toml.contains("model = [\"rm2\"]"));
        // A spec without settings runs as it is.
        assert_eq!(load("x", spec, "", Size::Quick).unwrap().toml, spec);
    }
}
