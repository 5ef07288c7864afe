//! `nmpsim train`'s data opened: the synthetic teacher's, or a Criteo file
//! read in epochs, with its test set.

use std::path::Path;

use anyhow::{Result, bail};
use nmpsim_dlrm::data::CriteoEpochs;
use nmpsim_dlrm::{DataSource, DlrmError, run};
use nmpsim_traces::{Batch, CriteoBatcher, CriteoOptions, CriteoReader};

use super::TrainArgs;
use super::resolve::Resolved;

/// Training data and test set for one mode (identical for every mode).
pub(crate) fn open_data(a: &TrainArgs, r: &Resolved) -> Result<(Box<dyn DataSource>, Vec<Batch>)> {
    match &a.data {
        None => Ok(run::teacher_data(
            &r.preset,
            a.batch,
            a.seed,
            a.test_batches,
        )?),
        Some(path) => {
            // Without hashing, the raw values must lie in the model's tables:
            // the reader refuses one that does not, naming its line.
            let opts = CriteoOptions {
                max_ind_range: a.max_ind_range,
                table_rows: a
                    .max_ind_range
                    .is_none()
                    .then(|| r.train.model.table_rows.clone()),
            };
            let open = |p: &Path| -> Result<_> {
                let reader = CriteoReader::open(p, opts.clone())?;
                let b = CriteoBatcher::new(reader, a.batch)?;
                Ok(b.map(|r| r.map_err(DlrmError::from)))
            };
            let mut train = open(path)?.peekable();
            let held_out = if a.test_data.is_some() {
                0
            } else {
                a.test_batches
            };
            let test: Vec<Batch> = match &a.test_data {
                Some(t) => {
                    let v: Vec<Batch> = open(t)?.take(a.test_batches).collect::<Result<_, _>>()?;
                    if v.is_empty() && a.test_batches > 0 {
                        bail!("--test-data {}: no samples to test on", t.display());
                    }
                    if train.peek().is_none() {
                        bail!("--data {}: no samples to train on", path.display());
                    }
                    v
                }
                None => {
                    let mut v = Vec::new();
                    for _ in 0..a.test_batches {
                        match train.next() {
                            Some(b) => v.push(b?),
                            None => break,
                        }
                    }
                    if v.is_empty() && train.peek().is_none() {
                        bail!("--data {}: no samples to train on", path.display());
                    }
                    if train.peek().is_none() {
                        bail!(
                            "{}: holding out {} test batches of {} leaves nothing to train on; pass fewer --test-batches, a smaller --batch, or --test-data",
                            path.display(),
                            a.test_batches,
                            a.batch
                        );
                    }
                    v
                }
            };
            let epochs =
                CriteoEpochs::new(path.to_path_buf(), opts, a.batch, held_out, Box::new(train));
            Ok((Box::new(epochs), test))
        }
    }
}
