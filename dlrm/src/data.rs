//! Synthetic training data with a planted teacher, so that learning is
//! measurable: index batches from a `traces` generator, dense features drawn
//! uniformly in [0, 1), and labels drawn from a fixed logistic teacher whose
//! logit is a linear function of the dense features plus a per-row score for
//! every lookup. The teacher comes from one seed, the samples (indices, dense
//! features, label draws) from the generator's: two streams of one teacher,
//! such as a training and a test set, differ only in their samples.

use std::path::PathBuf;

use nmpsim_kernels::table::SplitMix64;
use nmpsim_traces::{Batch, CriteoBatcher, CriteoOptions, CriteoReader, GenSpec, Generator};

use crate::DlrmError;
use crate::trainer::DataSource;

/// A Criteo file read over and over (epochs), skipping the held-out test
/// batches at its start each time. A pipe or device is read once: its data
/// ends with the first pass (reopening a pipe would wait for another writer).
pub struct CriteoEpochs {
    rereadable: bool,
    path: PathBuf,
    opts: CriteoOptions,
    batch: usize,
    skip: usize,
    epoch: u64,
    it: Box<dyn Iterator<Item = Result<Batch, DlrmError>>>,
}

impl CriteoEpochs {
    /// Batches of `batch` samples from `path`, continuing from `first` (the
    /// first pass, already opened and past its `skip` held-out batches).
    pub fn new(
        path: PathBuf,
        opts: CriteoOptions,
        batch: usize,
        skip: usize,
        first: Box<dyn Iterator<Item = Result<Batch, DlrmError>>>,
    ) -> Self {
        CriteoEpochs {
            rereadable: std::fs::metadata(&path).is_ok_and(|m| m.is_file()),
            path,
            opts,
            batch,
            skip,
            epoch: 0,
            it: first,
        }
    }
}

impl DataSource for CriteoEpochs {
    fn next_batch(&mut self) -> Option<Result<Batch, DlrmError>> {
        if let Some(b) = self.it.next() {
            return Some(b);
        }
        if !self.rereadable {
            return None;
        }
        let reader = match CriteoReader::open(&self.path, self.opts.clone()) {
            Ok(r) => r,
            Err(e) => return Some(Err(e.into())),
        };
        let b = match CriteoBatcher::new(reader, self.batch) {
            Ok(b) => b,
            Err(e) => return Some(Err(e.into())),
        };
        self.epoch += 1;
        self.it = Box::new(b.skip(self.skip).map(|r| r.map_err(DlrmError::from)));
        self.it.next()
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// A seeded stream of labelled batches.
pub struct TeacherData {
    generator: Generator,
    /// Dense features per sample.
    pub num_dense: usize,
    seed: u64,
    dense_w: Vec<f32>,
    /// Sharpness of the teacher: label ~ Bernoulli(sigmoid(sharpness * logit)).
    pub sharpness: f32,
    rng: SplitMix64,
}

fn row_score(seed: u64, table: usize, row: u32) -> f32 {
    let mut r = SplitMix64::new(seed ^ ((table as u64) << 40) ^ row as u64 ^ 0x5eed);
    r.next_f32() * 2.0 - 1.0
}

impl TeacherData {
    /// Batches of `spec` labelled by the teacher of `seed`. The samples
    /// (the indices, the dense features and the label draws) follow
    /// `spec.seed`; the teacher (dense weights, row scores) follows `seed`.
    pub fn new(spec: GenSpec, num_dense: usize, seed: u64) -> Result<Self, DlrmError> {
        let mut rng = SplitMix64::new(seed ^ 0xde05e);
        let dense_w = (0..num_dense).map(|_| rng.next_f32() * 2.0 - 1.0).collect();
        let samples = SplitMix64::new(spec.seed ^ 0x1abe1);
        Ok(TeacherData {
            generator: Generator::new(spec)?,
            num_dense,
            seed,
            dense_w,
            sharpness: 4.0,
            rng: samples,
        })
    }

    /// The teacher's weight of each dense feature.
    pub fn dense_weights(&self) -> &[f32] {
        &self.dense_w
    }

    /// The teacher's logit for sample `b` of `batch`.
    pub fn teacher_logit(&self, batch: &Batch, b: usize) -> f32 {
        let dense = batch.dense.as_deref().unwrap_or(&[]);
        let mut z: f32 = dense[b * self.num_dense..(b + 1) * self.num_dense]
            .iter()
            .zip(&self.dense_w)
            .map(|(x, w)| (x - 0.5) * w)
            .sum();
        for (t, tb) in batch.tables.iter().enumerate() {
            let (s, e) = (tb.offsets[b] as usize, tb.offsets[b + 1] as usize);
            let n = (e - s).max(1) as f32;
            z += tb.indices[s..e]
                .iter()
                .map(|&r| row_score(self.seed, t, r))
                .sum::<f32>()
                / n.sqrt();
        }
        z / (batch.tables.len() as f32 + 1.0).sqrt()
    }

    pub fn next_batch(&mut self) -> Batch {
        let mut batch = self.generator.next_batch();
        let b = batch.batch_size();
        let dense: Vec<f32> = (0..b * self.num_dense)
            .map(|_| self.rng.next_f32())
            .collect();
        batch.dense = Some(dense);
        batch.num_dense = self.num_dense;
        let labels = (0..b)
            .map(|i| {
                let p =
                    crate::loss::sigmoid((self.sharpness * self.teacher_logit(&batch, i)) as f64);
                if (self.rng.next_f32() as f64) < p {
                    1.0
                } else {
                    0.0
                }
            })
            .collect();
        batch.labels = Some(labels);
        batch
    }
}

/// Writes `samples` lines of Criteo-format TSV (label, 13 integer, 26
/// categorical fields) drawn from `data`, whose generator must have 26
/// tables and `num_dense` 13. Integer field `i` is `round(e^(8 u) - 1)` of
/// the teacher's dense value `u` in [0, 1), so the reader's `ln(x + 1)` gives
/// back `8 u` up to rounding; each categorical field is the row index in
/// 8-digit hex (read back unchanged when `--max-ind-range` is at least the
/// table's rows). Labels are the teacher's, so a model can learn them.
pub fn write_criteo_tsv(
    data: &mut TeacherData,
    samples: usize,
    out: &mut impl std::io::Write,
) -> Result<(), DlrmError> {
    use nmpsim_traces::criteo::{NUM_CATS, NUM_DENSE};
    if data.num_dense != NUM_DENSE || data.generator.spec().tables.len() != NUM_CATS {
        return Err(DlrmError::Config(format!(
            "a Criteo sample needs 13 dense features and 26 tables, found {} and {}",
            data.num_dense,
            data.generator.spec().tables.len()
        )));
    }
    let io = |source: std::io::Error| DlrmError::Write {
        what: "the sample".into(),
        source,
    };
    let mut left = samples;
    let mut line = String::new();
    while left > 0 {
        let batch = data.next_batch();
        let b = batch.batch_size().min(left);
        let dense = batch.dense.as_deref().unwrap_or(&[]);
        let labels = batch.labels.as_deref().unwrap_or(&[]);
        for s in 0..b {
            use std::fmt::Write as _;
            line.clear();
            let _ = write!(line, "{}", labels[s] as u8);
            for &u in &dense[s * NUM_DENSE..(s + 1) * NUM_DENSE] {
                let _ = write!(line, "\t{}", ((8.0 * u as f64).exp() - 1.0).round() as u64);
            }
            for tb in &batch.tables {
                let r = tb.indices[tb.offsets[s] as usize];
                let _ = write!(line, "\t{r:08x}");
            }
            line.push('\n');
            out.write_all(line.as_bytes()).map_err(io)?;
        }
        left -= b;
    }
    out.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PresetOverrides, preset};

    fn stream(stream_seed: u64, teacher_seed: u64) -> TeacherData {
        let p = preset("tiny", &PresetOverrides::default()).unwrap();
        let mut spec = p.data;
        spec.batch_size = 64;
        spec.seed = stream_seed;
        TeacherData::new(spec, p.config.bottom[0], teacher_seed).unwrap()
    }

    /// A writer that fails: the sample writer's error says what it was
    /// writing and keeps the I/O error as its source.
    #[test]
    fn a_failed_sample_write_is_a_write_error() {
        struct Full;
        impl std::io::Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::new(
                    std::io::ErrorKind::StorageFull,
                    "disk full",
                ))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let spec = nmpsim_traces::profile(
            "criteo-kaggle",
            &nmpsim_traces::ProfileOverrides {
                rows: Some(100),
                batch_size: Some(8),
                ..Default::default()
            },
        )
        .unwrap();
        let mut data = TeacherData::new(spec, 13, 1).unwrap();
        let e = write_criteo_tsv(&mut data, 4, &mut Full).unwrap_err();
        assert!(
            matches!(&e, DlrmError::Write { what, .. } if what == "the sample"),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "cannot write the sample: disk full");
        assert!(std::error::Error::source(&e).is_some());
    }

    /// A test set drawn on another stream seed shares the teacher but none of
    /// the samples: not the dense features, not the label draws.
    #[test]
    fn a_separate_stream_has_its_own_samples_and_the_same_teacher() {
        let mut train = stream(1, 1);
        let mut test = stream(1 ^ 0x07e5_75e7, 1);
        let (a, b) = (train.next_batch(), test.next_batch());
        assert_ne!(a.dense, b.dense, "dense features of the first batches");
        assert_eq!(train.dense_weights(), test.dense_weights());
        for i in 0..a.batch_size() {
            assert_eq!(train.teacher_logit(&a, i), test.teacher_logit(&a, i));
            assert_eq!(train.teacher_logit(&b, i), test.teacher_logit(&b, i));
        }
        // Indices with one row per table: only the dense features and the
        // label draws tell the streams apart, and they do.
        let one_row = |stream_seed| {
            let p = preset("tiny", &PresetOverrides::sized(Some(1), None)).unwrap();
            let mut spec = p.data;
            spec.batch_size = 256;
            spec.seed = stream_seed;
            TeacherData::new(spec, p.config.bottom[0], 1)
                .unwrap()
                .next_batch()
        };
        let (a, b) = (one_row(1), one_row(1 ^ 0x07e5_75e7));
        assert_eq!(a.tables[0].indices, b.tables[0].indices);
        assert_ne!(a.dense, b.dense);
        assert_ne!(a.labels, b.labels);
        // The same seeds give the same stream; another teacher another one.
        assert_eq!(
            stream(1, 1).next_batch().dense,
            stream(1, 1).next_batch().dense
        );
        assert_ne!(stream(1, 2).dense_weights(), stream(1, 1).dense_weights());
    }
}
