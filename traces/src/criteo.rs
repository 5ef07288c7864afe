//! Streaming reader for Criteo Display Advertising (Kaggle / Terabyte) TSV:
//! `label \t I1..I13 \t C1..C26`, one sample per line. Memory is bounded by one
//! line (capped at [`MAX_LINE_BYTES`]) plus one batch.
//!
//! Conventions follow the DLRM reference's preprocessing: empty integer and
//! categorical fields read as 0, negative integers are clamped to 0, dense features
//! become ln(x + 1), and categorical ids (32-bit hex) are optionally reduced
//! `% max_ind_range`. Fields in messages are numbered from 0 (label = field 0).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::until_done;
use crate::{Batch, TableBatch, TraceError};

pub const NUM_DENSE: usize = 13;
pub const NUM_CATS: usize = 26;
/// Fields per line: label, 13 integer, 26 categorical.
pub const NUM_FIELDS: usize = 1 + NUM_DENSE + NUM_CATS;
/// Longest line accepted; real lines are a few hundred bytes, and a cap keeps a
/// file without newlines from being read into memory whole.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// One parsed sample.
#[derive(Debug, Clone, PartialEq)]
pub struct CriteoSample {
    pub label: f32,
    /// ln(x + 1) of the clamped integer features.
    pub dense: [f32; NUM_DENSE],
    /// Categorical ids, reduced `% max_ind_range` when set.
    pub cats: [u32; NUM_CATS],
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CriteoOptions {
    /// Reduce categorical ids modulo this (the DLRM reference's `--max-ind-range`).
    pub max_ind_range: Option<u64>,
    /// Without `max_ind_range`: the row count of each of the 26 tables the
    /// raw ids index. An id at or past its table's rows is an error naming
    /// the line and field, and batches declare these row counts. `None`:
    /// 2^32 rows each (every id).
    pub table_rows: Option<Vec<u64>>,
}

impl CriteoOptions {
    /// Row count of categorical table `t`: `max_ind_range`, the given
    /// `table_rows`, or 2^32 raw ids.
    pub fn rows_of(&self, t: usize) -> u64 {
        match (self.max_ind_range, &self.table_rows) {
            (Some(m), _) => m,
            (None, Some(rows)) => rows[t],
            (None, None) => 1 << 32,
        }
    }
}

/// Files whose last line had no line end, with that line's number: a file
/// cut short can end inside a field, and still parse. Readers record them
/// here (once per file); commands say so ([`take_unterminated`]).
static UNTERMINATED: std::sync::Mutex<Vec<(PathBuf, u64)>> = std::sync::Mutex::new(Vec::new());

/// The files read so far whose last line had no line end (each once), and
/// that line's number; the list is emptied.
pub fn take_unterminated() -> Vec<(PathBuf, u64)> {
    std::mem::take(&mut *UNTERMINATED.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Iterates the samples of a Criteo TSV stream. Yields at most one error, then stops.
pub struct CriteoReader<R: BufRead = BufReader<File>> {
    input: R,
    name: PathBuf,
    opts: CriteoOptions,
    line_no: u64,
    buf: Vec<u8>,
    done: bool,
}

impl CriteoReader<BufReader<File>> {
    pub fn open(path: impl AsRef<Path>, opts: CriteoOptions) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let f = File::open(path).map_err(|e| TraceError::io(path, e))?;
        CriteoReader::from_reader(BufReader::with_capacity(1 << 20, f), path, opts)
    }
}

impl<R: BufRead> CriteoReader<R> {
    /// Reads from any buffered input; `name` stands for it in messages.
    pub fn from_reader(
        input: R,
        name: impl Into<PathBuf>,
        opts: CriteoOptions,
    ) -> Result<Self, TraceError> {
        if let Some(m) = opts.max_ind_range {
            if m == 0 || m > 1 << 32 {
                return Err(TraceError::param(
                    "max_ind_range",
                    format!("{m}; expected 1 ..= 2^32"),
                ));
            }
        }
        if let Some(rows) = &opts.table_rows {
            if rows.len() != NUM_CATS {
                return Err(TraceError::param(
                    "table_rows",
                    format!("{} tables; expected {NUM_CATS}", rows.len()),
                ));
            }
        }
        Ok(CriteoReader {
            input,
            name: name.into(),
            opts,
            line_no: 0,
            buf: Vec::new(),
            done: false,
        })
    }

    pub fn options(&self) -> &CriteoOptions {
        &self.opts
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> u64 {
        self.line_no
    }

    fn parse_err(&self, what: String) -> TraceError {
        TraceError::Parse {
            path: self.name.clone(),
            line: self.line_no,
            what,
        }
    }

    fn read_sample(&mut self) -> Result<Option<CriteoSample>, TraceError> {
        self.buf.clear();
        let n = (&mut self.input)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| TraceError::io(&self.name, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.line_no += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
        } else if n > MAX_LINE_BYTES {
            return Err(self.parse_err(format!(
                "line is longer than {MAX_LINE_BYTES} bytes; is this a Criteo TSV file?"
            )));
        } else {
            let mut u = UNTERMINATED.lock().unwrap_or_else(|e| e.into_inner());
            if !u.iter().any(|(p, _)| p == &self.name) {
                u.push((self.name.clone(), self.line_no));
            }
        }
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        // A UTF-8 byte order mark (as some editors write) is no part of the
        // first label.
        if self.line_no == 1 && self.buf.starts_with(b"\xEF\xBB\xBF") {
            self.buf.drain(..3);
        }
        parse_line(&self.buf, &self.opts)
            .map(Some)
            .map_err(|what| self.parse_err(what))
    }
}

fn field_name(i: usize) -> String {
    match i {
        0 => "field 0 (label)".to_string(),
        1..=NUM_DENSE => format!("field {i} (integer I{i})"),
        _ => format!("field {i} (categorical C{})", i - NUM_DENSE),
    }
}

/// Parses one line (without its newline); the error text names the field.
fn parse_line(line: &[u8], opts: &CriteoOptions) -> Result<CriteoSample, String> {
    let count = line.split(|&b| b == b'\t').count();
    if count != NUM_FIELDS {
        return Err(format!(
            "{count} tab-separated fields; expected {NUM_FIELDS} (label, 13 integer, 26 categorical)"
        ));
    }
    let mut s = CriteoSample {
        label: 0.0,
        dense: [0.0; NUM_DENSE],
        cats: [0; NUM_CATS],
    };
    for (i, f) in line.split(|&b| b == b'\t').enumerate() {
        // (Escaped: a control byte in the file must not reach the terminal
        // as itself, where a NUL hides and an ESC sequence acts.)
        let text = || {
            let shown: String = String::from_utf8_lossy(f)
                .chars()
                .take(60)
                .flat_map(char::escape_debug)
                .collect();
            if String::from_utf8_lossy(f).chars().count() > 60 {
                format!("{shown}...")
            } else {
                shown
            }
        };
        match i {
            0 => {
                s.label = match f {
                    b"0" => 0.0,
                    b"1" => 1.0,
                    _ => {
                        return Err(format!(
                            "{}: '{}' is not a click label; expected 0 or 1",
                            field_name(i),
                            text()
                        ));
                    }
                }
            }
            1..=NUM_DENSE => {
                let v: i64 = if f.is_empty() {
                    0
                } else {
                    std::str::from_utf8(f)
                        .ok()
                        .and_then(|t| t.parse().ok())
                        .ok_or_else(|| {
                            let digits = f
                                .strip_prefix(b"-")
                                .or_else(|| f.strip_prefix(b"+"))
                                .unwrap_or(f);
                            if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                                format!(
                                    "{}: '{}' is an integer beyond the 64-bit range",
                                    field_name(i),
                                    text()
                                )
                            } else {
                                format!("{}: '{}' is not an integer", field_name(i), text())
                            }
                        })?
                };
                s.dense[i - 1] = (v.max(0) as f64).ln_1p() as f32;
            }
            _ => {
                let v = if f.is_empty() {
                    0
                } else if f.len() <= 8 && f.iter().all(u8::is_ascii_hexdigit) {
                    // All hex digits checked above, so this cannot fail; map anyway rather than unwrap.
                    u32::from_str_radix(&text(), 16)
                        .map_err(|_| format!("{}: '{}' is not hex", field_name(i), text()))?
                } else {
                    return Err(format!(
                        "{}: '{}' is not hex; expected up to 8 hex digits",
                        field_name(i),
                        text()
                    ));
                };
                let t = i - 1 - NUM_DENSE;
                s.cats[t] = match (opts.max_ind_range, &opts.table_rows) {
                    (Some(m), _) => (u64::from(v) % m) as u32,
                    (None, Some(rows)) if u64::from(v) >= rows[t] => {
                        return Err(format!(
                            "{}: '{}' is categorical value {v}, past table {t}'s {} rows; hash the values into the tables (--max-ind-range) or size the tables to the data",
                            field_name(i),
                            text(),
                            rows[t]
                        ));
                    }
                    (None, _) => v,
                };
            }
        }
    }
    Ok(s)
}

impl<R: BufRead> Iterator for CriteoReader<R> {
    type Item = Result<CriteoSample, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let step = (!self.done).then(|| self.read_sample());
        until_done(&mut self.done, step)
    }
}

/// Groups samples into [`Batch`]es of `batch_size`: 26 tables with one lookup per
/// bag, 13 dense features and labels. The last batch may be smaller.
pub struct CriteoBatcher<R: BufRead = BufReader<File>> {
    reader: CriteoReader<R>,
    batch_size: usize,
}

impl<R: BufRead> CriteoBatcher<R> {
    pub fn new(reader: CriteoReader<R>, batch_size: usize) -> Result<Self, TraceError> {
        if batch_size == 0 {
            return Err(TraceError::param("batch_size", "0; expected at least 1"));
        }
        // One lookup per bag: the bags' offsets are u32.
        if batch_size as u64 >= u64::from(u32::MAX) {
            return Err(TraceError::param(
                "batch_size",
                format!(
                    "{batch_size} samples; expected fewer than {} (the bags' offsets are u32)",
                    u32::MAX
                ),
            ));
        }
        Ok(CriteoBatcher { reader, batch_size })
    }

    pub fn reader(&self) -> &CriteoReader<R> {
        &self.reader
    }

    /// Row count of categorical table `t` (see [`CriteoOptions::rows_of`]).
    pub fn rows_of(&self, t: usize) -> u64 {
        self.reader.opts.rows_of(t)
    }
}

impl<R: BufRead> Iterator for CriteoBatcher<R> {
    type Item = Result<Batch, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let b = self.batch_size;
        // (Room for a usual batch up front; a larger one grows as the samples
        // come, so a batch size beyond the file costs nothing.)
        let room = b.min(1 << 16);
        let mut labels = Vec::with_capacity(room);
        let mut dense = Vec::with_capacity(room * NUM_DENSE);
        let mut cols: Vec<Vec<u32>> = (0..NUM_CATS).map(|_| Vec::with_capacity(room)).collect();
        for s in self.reader.by_ref().take(b) {
            let s = match s {
                Ok(s) => s,
                Err(e) => return Some(Err(e)),
            };
            labels.push(s.label);
            dense.extend_from_slice(&s.dense);
            cols.iter_mut().zip(s.cats).for_each(|(c, v)| c.push(v));
        }
        if labels.is_empty() {
            return None;
        }
        let n = labels.len();
        let tables = cols
            .into_iter()
            .enumerate()
            .map(|(t, indices)| TableBatch {
                num_rows: self.rows_of(t),
                offsets: (0..=n as u32).collect(),
                indices,
                weights: None,
            })
            .collect();
        Some(Ok(Batch {
            tables,
            dense: Some(dense),
            num_dense: NUM_DENSE,
            labels: Some(labels),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(label: &str, ints: &[&str], cats: &[&str]) -> String {
        let mut f = vec![label.to_string()];
        f.extend((0..NUM_DENSE).map(|i| ints.get(i).unwrap_or(&"").to_string()));
        f.extend((0..NUM_CATS).map(|i| cats.get(i).unwrap_or(&"").to_string()));
        f.join("\t")
    }

    fn read(text: &str, opts: CriteoOptions) -> Result<Vec<CriteoSample>, TraceError> {
        CriteoReader::from_reader(text.as_bytes(), "test.tsv", opts)?.collect()
    }

    #[test]
    fn parses_fields_with_dlrm_conventions() {
        let text = format!(
            "{}\n{}\r\n",
            line("1", &["0", "-5", "", "9"], &["68fd1e64", "", "ffffffff"]),
            line("0", &[], &[])
        );
        let s = read(&text, CriteoOptions::default()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].label, 1.0);
        assert_eq!(&s[0].dense[..4], &[0.0, 0.0, 0.0, (10f64).ln() as f32]);
        assert_eq!(&s[0].cats[..3], &[0x68fd1e64, 0, 0xffffffff]);
        assert_eq!(s[1].cats, [0; NUM_CATS]);
        // A UTF-8 byte order mark at the start of the file is skipped.
        assert_eq!(
            read(&format!("\u{feff}{text}"), CriteoOptions::default()).unwrap(),
            s
        );
        let e = read(
            &format!("{}\n\u{feff}{}\n", line("0", &[], &[]), line("1", &[], &[])),
            CriteoOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("test.tsv: line 2: field 0 (label)"), "{e}");
        let h = read(
            &text,
            CriteoOptions {
                max_ind_range: Some(1000),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(h[0].cats[0], 0x68fd1e64 % 1000);
        assert_eq!(h[0].cats[2], 0xffffffff % 1000);
    }

    #[test]
    fn errors_name_line_and_field() {
        let refused = |text: &str| {
            read(text, CriteoOptions::default())
                .unwrap_err()
                .to_string()
        };
        let good = line("0", &[], &[]);
        let bad_hex = line("1", &[], &["1", "zz12"]);
        let e = refused(&format!("{good}\n{bad_hex}\n"));
        assert_eq!(
            e,
            "test.tsv: line 2: field 15 (categorical C2): 'zz12' is not hex; expected up to 8 hex digits"
        );
        let e = refused(&line("0", &[], &["123456789"]));
        assert!(e.contains("field 14 (categorical C1)"), "{e}");
        let e = refused(&line("0", &["99999999999999999999"], &[]));
        assert!(
            e.contains("'99999999999999999999' is an integer beyond the 64-bit range"),
            "{e}"
        );
        let e = refused(&line("0", &["+99999999999999999999"], &[]));
        assert!(e.contains("beyond the 64-bit range"), "{e}");
        let e = refused(&line("0", &["1.5"], &[]));
        assert!(
            e.contains("line 1: field 1 (integer I1): '1.5' is not an integer"),
            "{e}"
        );
        let e = refused(&line("2", &[], &[]));
        assert!(e.contains("field 0 (label)"), "{e}");
        // Control bytes are escaped, long fields cut.
        let e = refused(&line("0", &["1\u{0}2"], &[]));
        assert!(e.contains(r"'1\02' is not an integer"), "{e}");
        let e = refused(&line("0", &[], &["\u{1b}[31mAB"]));
        assert!(e.contains(r"\u{1b}[31mAB") && !e.contains('\u{1b}'), "{e}");
        let e = refused(&line("0", &[&"9".repeat(200)], &[]));
        assert!(e.contains("99...'") && e.len() < 300, "{e}");
        // 31 two-byte characters: nothing cut, no "...".
        let e = refused(&line("0", &[], &[&"\u{e9}".repeat(31)]));
        assert!(e.contains(&format!("'{}'", "\u{e9}".repeat(31))), "{e}");
        let e = refused(&format!("{good}\ta\n"));
        assert!(
            e.contains("line 1: 41 tab-separated fields; expected 40"),
            "{e}"
        );
        let e = refused("\n");
        assert!(e.contains("1 tab-separated fields; expected 40"), "{e}");
        let long = "a".repeat(MAX_LINE_BYTES + 10);
        assert!(refused(&long).contains("longer than"));
        assert!(
            read(
                "",
                CriteoOptions {
                    max_ind_range: Some(0),
                    ..Default::default()
                }
            )
            .is_err()
        );
    }

    #[test]
    fn batcher_groups_samples_and_keeps_the_remainder() {
        let text: String = (0..5)
            .map(|i| {
                line(
                    &(i % 2).to_string(),
                    &[&i.to_string()],
                    &[&format!("{i:x}")],
                ) + "\n"
            })
            .collect();
        let r = CriteoReader::from_reader(
            text.as_bytes(),
            "t",
            CriteoOptions {
                max_ind_range: Some(100),
                ..Default::default()
            },
        )
        .unwrap();
        let batches: Vec<Batch> = CriteoBatcher::new(r, 2)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            batches.iter().map(Batch::batch_size).collect::<Vec<_>>(),
            vec![2, 2, 1]
        );
        for b in &batches {
            b.validate().unwrap();
            assert_eq!((b.tables.len(), b.num_dense), (NUM_CATS, NUM_DENSE));
            assert_eq!(b.tables[0].num_rows, 100);
        }
        assert_eq!(batches[1].tables[0].indices, vec![2, 3]);
        assert_eq!(batches[1].labels, Some(vec![0.0, 1.0]));
        assert_eq!(batches[2].dense.as_ref().unwrap()[0], (5f64).ln() as f32);
        let r = CriteoReader::from_reader(text.as_bytes(), "t", CriteoOptions::default()).unwrap();
        assert!(CriteoBatcher::new(r, 0).is_err());
    }

    #[test]
    fn raw_values_are_checked_against_given_table_sizes() {
        // Values 0..5 in table 0; tables of 5 rows take them all, and the
        // batches declare those rows.
        let text: String = (0..5)
            .map(|i| line("1", &[], &[&format!("{i:x}")]) + "\n")
            .collect();
        let opts = |rows: u64| CriteoOptions {
            table_rows: Some(vec![rows; NUM_CATS]),
            ..Default::default()
        };
        let r = CriteoReader::from_reader(text.as_bytes(), "t", opts(5)).unwrap();
        let b: Vec<Batch> = CriteoBatcher::new(r, 5)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(b[0].tables[0].num_rows, 5);
        assert_eq!(b[0].tables[0].indices, vec![0, 1, 2, 3, 4]);
        // Tables of 4 rows: line 5's value 4 is refused, by line and field.
        let r = CriteoReader::from_reader(text.as_bytes(), "t", opts(4)).unwrap();
        let e = CriteoBatcher::new(r, 2)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("t: line 5"), "{e}");
        assert!(
            e.contains("categorical value 4, past table 0's 4 rows"),
            "{e}"
        );
        // Hashing takes precedence; a wrong table count is refused.
        let both = CriteoOptions {
            max_ind_range: Some(3),
            table_rows: Some(vec![1; NUM_CATS]),
        };
        let r = CriteoReader::from_reader(text.as_bytes(), "t", both).unwrap();
        assert!(r.map(|s| s.unwrap().cats[0]).eq([0, 1, 2, 0, 1]));
        let bad = CriteoOptions {
            table_rows: Some(vec![1; 3]),
            ..Default::default()
        };
        assert!(CriteoReader::from_reader(text.as_bytes(), "t", bad).is_err());
    }
}
