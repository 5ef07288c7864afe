//! A spec file read, checked against the command's clap definition and
//! expanded into its runs.

use std::path::{Path, PathBuf};

use super::{IoContext, Launcher, SweepError};
use crate::expand::{self, MAX_RUNS, Run};
use crate::schema::{CommandSchema, check_runs, check_spec};
use crate::shard::Shard;
use crate::spec::Spec;
use crate::{SpecError, SpecErrors};

/// A sweep ready to run: its spec, the command's flags, and every run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The spec file, as the caller named it.
    pub path: PathBuf,
    pub spec: Spec,
    /// The spec's text, copied into the sweep directory.
    pub text: String,
    pub schema: CommandSchema,
    /// Every run of the spec, in index order (all shards).
    pub runs: Vec<Run>,
}

impl Plan {
    /// Reads the spec at `path`, resolves its command in `launcher`'s
    /// definition and expands it. Every problem the spec has (its shape, its
    /// command, its flags and their values) is reported at once, each with
    /// the file, line and key at fault.
    pub fn load(path: &Path, launcher: &dyn Launcher) -> Result<Plan, SweepError> {
        let text =
            std::fs::read_to_string(path).io(|| format!("cannot read spec {}", path.display()))?;
        let file = path.display().to_string();
        // Shape errors and command errors are reported together, so one edit
        // of the spec can fix them all.
        let (spec, mut errors) = Spec::parse_partial(&text, &file);
        let Some(spec) = spec else {
            return Err(errors.into());
        };
        let schema = if spec.command.is_empty() {
            Err(String::new())
        } else if let Some(why) = launcher.refuse(&spec.command) {
            Err(why)
        } else {
            CommandSchema::resolve(&launcher.cli(), &spec.command)
        };
        let schema = match schema {
            Ok(s) => Some(s),
            Err(e) => {
                if !e.is_empty() {
                    errors.0.push(SpecError::new(
                        &file,
                        Some(spec.command_line),
                        Some("command"),
                        e,
                    ));
                }
                None
            }
        };
        if let Some(schema) = &schema
            && let Err(e) = check_spec(&spec, schema)
        {
            errors.0.extend(e.0);
        }
        errors.into_result()?;
        let whole = |message: String| SpecErrors(vec![SpecError::new(&file, None, None, message)]);
        let Some(schema) = schema else {
            return Err(whole("missing `command = \"...\"`".into()).into());
        };
        let count = expand::run_count(&spec);
        if count > MAX_RUNS {
            return Err(whole(format!(
                "the spec expands to {count} runs (the product of its axes', zips' and seeds' lengths), more than the {MAX_RUNS} a sweep may have; split it into several sweeps"
            ))
            .into());
        }
        let runs = expand::expand(&spec);
        check_runs(&spec, &schema, &runs)?;
        Ok(Plan {
            path: path.to_path_buf(),
            spec,
            text,
            schema,
            runs,
        })
    }

    /// The runs of `shard`, in index order.
    pub fn selected(&self, shard: Shard) -> Vec<&Run> {
        self.runs
            .iter()
            .filter(|r| shard.selects(r.index))
            .collect()
    }
}
