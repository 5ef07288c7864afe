//! The versioned binary trace format (`.nmpt`), little-endian. Layout in
//! `docs/trace-format.md`; in short:
//!
//! ```text
//! magic "NMPTRACE" | version u32 | header_len u32 | header | header_crc u32
//! { tag u8 = 1 | len u32 | batch payload | crc u32 }*      one record per batch
//! tag u8 = 2 | len u32 = 12 | batch_count u64 | stream_crc u32 | crc u32
//! ```
//!
//! Every record carries a CRC32 of its tag, length and payload; the end record also
//! holds the batch count and a CRC over all batch records (in version 2, over their
//! tags, lengths and payloads in order, so reordered or duplicated records are caught
//! too), so truncation at a record boundary, dropped records and corruption are all
//! detected. Readers stream (one batch in memory) and never allocate more than the
//! bytes left in the file; they also read version 1, whose weaker end record they
//! verify as version 1 defined it.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::until_done;
use crate::r#gen::GenSpec;
use crate::staged::{StageError, StageErrorKind, StagedFile};
use crate::{Batch, TableBatch, TraceError};

/// First eight bytes of every trace.
pub const MAGIC: [u8; 8] = *b"NMPTRACE";
/// The version this build writes. It also reads [`VERSION_1`].
pub const VERSION: u32 = 2;
/// The first version: the same layout, but its end record's `stream_crc` is a CRC32
/// over whole batch records, each of which ends with its own CRC32. A CRC over a
/// message followed by its own CRC always leaves the same residue, so that sum
/// depends only on the records' count and lengths: it catches a dropped record but
/// not reordered, duplicated or swapped ones of equal length. Still read, and
/// verified as it was defined.
pub const VERSION_1: u32 = 1;
const TAG_BATCH: u8 = 1;
const TAG_END: u8 = 2;
/// The end record: tag, payload length, batch count, stream CRC, CRC.
const END_RECORD_BYTES: u64 = 1 + 4 + END_PAYLOAD_BYTES as u64 + 4;
const END_PAYLOAD_BYTES: u32 = 12;
const TABLE_WEIGHTED: u8 = 1;
const HAS_DENSE: u8 = 1;
const HAS_LABELS: u8 = 2;
/// The most rows a table may have: row ids are u32.
pub const MAX_TABLE_ROWS: u64 = 1 << 32;

/// The most payload bytes one record holds: its length field is a u32.
pub const MAX_RECORD_PAYLOAD: u64 = u32::MAX as u64;

/// Payload bytes of the batch record of `batch_size` samples whose tables
/// have `(lookups, weighted)` each, with `num_dense` dense features per sample
/// and labels when asked (the layout of `docs/trace-format.md`). In u128, so
/// that any request can be compared with [`MAX_RECORD_PAYLOAD`] (or with the
/// memory that holds the batch's arrays, which take the same bytes).
pub fn batch_payload_bytes(
    batch_size: u64,
    tables: impl IntoIterator<Item = (u64, bool)>,
    num_dense: Option<u32>,
    labels: bool,
) -> u128 {
    let b = u128::from(batch_size);
    let tables: u128 = tables
        .into_iter()
        .map(|(n, weighted)| 4 + (b + 1) * 4 + u128::from(n) * if weighted { 8 } else { 4 })
        .sum();
    let dense = b * u128::from(num_dense.unwrap_or(0)) * 4;
    4 + tables + dense + if labels { b * 4 } else { 0 }
}

/// What every batch of a trace looks like, plus free-form metadata (the CLI stores
/// the resolved generator spec or conversion options there as JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceHeader {
    /// Row count of each table.
    pub table_rows: Vec<u64>,
    /// Whether each table's batches carry per-lookup weights.
    pub weighted: Vec<bool>,
    /// Dense features per sample, if batches carry dense features.
    pub num_dense: Option<u32>,
    /// Whether batches carry labels.
    pub labels: bool,
    pub metadata: String,
}

impl TraceHeader {
    /// The header matching `batch`'s shape.
    pub fn for_batch(batch: &Batch, metadata: impl Into<String>) -> Self {
        TraceHeader {
            table_rows: batch.tables.iter().map(|t| t.num_rows).collect(),
            weighted: batch.tables.iter().map(|t| t.weights.is_some()).collect(),
            num_dense: batch.dense.as_ref().map(|_| batch.num_dense as u32),
            labels: batch.labels.is_some(),
            metadata: metadata.into(),
        }
    }

    /// The header of traces generated from `spec`.
    pub fn for_spec(spec: &GenSpec, metadata: impl Into<String>) -> Self {
        TraceHeader {
            table_rows: spec.tables.iter().map(|t| t.rows).collect(),
            weighted: spec.tables.iter().map(|t| t.weighted).collect(),
            num_dense: None,
            labels: false,
            metadata: metadata.into(),
        }
    }

    /// Checks that `batch` has the shape this header promises.
    pub fn check_batch(&self, batch: &Batch) -> Result<(), TraceError> {
        let bad = |table: usize, what: String| Err(TraceError::InvalidBatch { table, what });
        if batch.tables.len() != self.table_rows.len() {
            return bad(
                0,
                format!(
                    "batch has {} tables; the trace has {}",
                    batch.tables.len(),
                    self.table_rows.len()
                ),
            );
        }
        for (t, tb) in batch.tables.iter().enumerate() {
            if tb.num_rows != self.table_rows[t] {
                return bad(
                    t,
                    format!(
                        "{} rows; the trace header says {}",
                        tb.num_rows, self.table_rows[t]
                    ),
                );
            }
            if tb.weights.is_some() != self.weighted[t] {
                return bad(
                    t,
                    format!(
                        "weights present = {}; the trace header says {}",
                        tb.weights.is_some(),
                        self.weighted[t]
                    ),
                );
            }
        }
        let dense = batch.dense.as_ref().map(|_| batch.num_dense as u64);
        if dense != self.num_dense.map(u64::from) {
            return bad(
                0,
                format!(
                    "dense features {dense:?}; the trace header says {:?}",
                    self.num_dense
                ),
            );
        }
        if batch.labels.is_some() != self.labels {
            return bad(
                0,
                format!(
                    "labels present = {}; the trace header says {}",
                    batch.labels.is_some(),
                    self.labels
                ),
            );
        }
        batch.validate()
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_u32(&mut out, self.table_rows.len() as u32);
        for (rows, &w) in self.table_rows.iter().zip(&self.weighted) {
            out.extend_from_slice(&rows.to_le_bytes());
            out.push(if w { TABLE_WEIGHTED } else { 0 });
        }
        let flags = if self.num_dense.is_some() {
            HAS_DENSE
        } else {
            0
        } | if self.labels { HAS_LABELS } else { 0 };
        out.push(flags);
        put_u32(&mut out, self.num_dense.unwrap_or(0));
        put_u32(&mut out, self.metadata.len() as u32);
        out.extend_from_slice(self.metadata.as_bytes());
        out
    }

    fn decode(bytes: &[u8], path: &Path, version: u32) -> Result<Self, TraceError> {
        let mut c = Cursor {
            bytes,
            pos: 0,
            path,
            what: "header".into(),
        };
        let n = c.u32()? as usize;
        // Each table takes 9 bytes, so a hostile count cannot make us allocate more than the header holds.
        c.need(n.checked_mul(9))?;
        let mut table_rows = Vec::with_capacity(n);
        let mut weighted = Vec::with_capacity(n);
        for t in 0..n {
            let rows = c.u64()?;
            // Row ids are u32: a table has 1 ..= 2^32 rows (`trace convert`
            // without --max-ind-range writes 2^32).
            if rows == 0 || rows > MAX_TABLE_ROWS {
                return Err(format_err(
                    path,
                    format!(
                        "header: table {t}: rows is {rows}; expected 1 ..= 2^32 (row ids are u32)"
                    ),
                ));
            }
            table_rows.push(rows);
            let tflags = c.u8()?;
            if tflags & !TABLE_WEIGHTED != 0 {
                return Err(format_err(
                    path,
                    format!(
                        "header: table {t}: flags is {tflags:#04x}; expected only bit 0 (weighted), other bits are unknown to version {version}"
                    ),
                ));
            }
            weighted.push(tflags & TABLE_WEIGHTED != 0);
        }
        let flags = c.u8()?;
        if flags & !(HAS_DENSE | HAS_LABELS) != 0 {
            return Err(format_err(
                path,
                format!(
                    "header: flags is {flags:#04x}; expected only bits 0 (dense features) and 1 (labels), other bits are unknown to version {version}"
                ),
            ));
        }
        let num_dense = c.u32()?;
        if flags & HAS_DENSE == 0 && num_dense != 0 {
            return Err(format_err(
                path,
                format!(
                    "header: num_dense is {num_dense} but the dense-features flag (bit 0 of flags) is off; expected 0"
                ),
            ));
        }
        let meta_len = c.u32()? as usize;
        let meta = c.take(meta_len)?;
        let metadata = String::from_utf8(meta.to_vec())
            .map_err(|_| format_err(path, "header metadata is not valid UTF-8".into()))?;
        if c.pos != bytes.len() {
            return Err(format_err(
                path,
                format!("header has {} stray bytes at its end", bytes.len() - c.pos),
            ));
        }
        Ok(TraceHeader {
            table_rows,
            weighted,
            num_dense: (flags & HAS_DENSE != 0).then_some(num_dense),
            labels: flags & HAS_LABELS != 0,
            metadata,
        })
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn format_err(path: &Path, what: String) -> TraceError {
    TraceError::Format {
        path: path.to_path_buf(),
        what,
    }
}

/// Bounds-checked little-endian reads over one record's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: &'a Path,
    what: String,
}

impl<'a> Cursor<'a> {
    fn need(&self, n: Option<usize>) -> Result<(), TraceError> {
        match n {
            Some(n) if n <= self.bytes.len() - self.pos => Ok(()),
            _ => Err(format_err(
                self.path,
                format!(
                    "{}: record lengths inconsistent: needs {} more bytes at offset {} but the record holds {}",
                    self.what,
                    n.map_or("too many".to_string(), |n| n.to_string()),
                    self.pos,
                    self.bytes.len()
                ),
            )),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], TraceError> {
        self.need(Some(n))?;
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, TraceError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, TraceError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, TraceError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn u32s(&mut self, n: usize) -> Result<Vec<u32>, TraceError> {
        self.words(n, u32::from_le_bytes)
    }

    fn f32s(&mut self, n: usize) -> Result<Vec<f32>, TraceError> {
        self.words(n, f32::from_le_bytes)
    }

    /// `n` 4-byte values, each made by `from`.
    fn words<T>(&mut self, n: usize, from: fn([u8; 4]) -> T) -> Result<Vec<T>, TraceError> {
        self.need(n.checked_mul(4))?;
        let raw = self.take(n * 4)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| from([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// Writes a trace as a [`StagedFile`]: to a regular file through a temporary
/// file beside it, moved into place by [`TraceWriter::finish`]; dropping an
/// unfinished writer deletes the temporary, so an interrupted run never
/// leaves a complete-looking trace behind. A special file (a pipe, a device)
/// is written directly, and a link to a file writes that file.
pub struct TraceWriter {
    path: PathBuf,
    out: Option<StagedFile>,
    header: TraceHeader,
    batches: u64,
    stream: crc32fast::Hasher,
    buf: Vec<u8>,
}

/// A [`StageError`] as a [`TraceError`] naming the file concerned.
fn stage_err(path: &Path, e: StageError) -> TraceError {
    match e.kind {
        StageErrorKind::IsDirectory => format_err(
            path,
            "is a directory; expected the path of the trace file to write".into(),
        ),
        StageErrorKind::Resolve(io)
        | StageErrorKind::Create(io)
        | StageErrorKind::Write(io)
        | StageErrorKind::Rename(io) => TraceError::io(e.path, io),
    }
}

impl TraceWriter {
    pub fn create(path: impl AsRef<Path>, header: TraceHeader) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        if header.weighted.len() != header.table_rows.len() {
            return Err(TraceError::param(
                "header.weighted",
                format!(
                    "{} entries for {} tables",
                    header.weighted.len(),
                    header.table_rows.len()
                ),
            ));
        }
        if let Some((t, rows)) = header
            .table_rows
            .iter()
            .enumerate()
            .find(|&(_, &r)| r == 0 || r > MAX_TABLE_ROWS)
        {
            return Err(TraceError::param(
                format!("header.table_rows[{t}]"),
                format!("{rows}; expected 1 ..= 2^32 (row ids are u32)"),
            ));
        }
        let mut out = StagedFile::create(&path, 1 << 20).map_err(|e| stage_err(&path, e))?;
        let h = header.encode();
        let mut head = Vec::with_capacity(h.len() + 20);
        head.extend_from_slice(&MAGIC);
        put_u32(&mut head, VERSION);
        put_u32(&mut head, h.len() as u32);
        head.extend_from_slice(&h);
        put_u32(&mut head, crc32fast::hash(&h));
        out.write_all(&head).map_err(|e| stage_err(&path, e))?;
        Ok(TraceWriter {
            path,
            out: Some(out),
            header,
            batches: 0,
            stream: crc32fast::Hasher::new(),
            buf: Vec::new(),
        })
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// Appends one batch; it must match the header's shape.
    pub fn write_batch(&mut self, batch: &Batch) -> Result<(), TraceError> {
        self.header.check_batch(batch)?;
        let buf = &mut self.buf;
        buf.clear();
        buf.push(TAG_BATCH);
        put_u32(buf, 0); // length, patched below
        put_u32(buf, batch.batch_size() as u32);
        for tb in &batch.tables {
            put_u32(buf, tb.indices.len() as u32);
            tb.offsets.iter().for_each(|&o| put_u32(buf, o));
            tb.indices.iter().for_each(|&i| put_u32(buf, i));
            if let Some(w) = &tb.weights {
                w.iter()
                    .for_each(|x| buf.extend_from_slice(&x.to_le_bytes()));
            }
        }
        for v in [&batch.dense, &batch.labels].into_iter().flatten() {
            v.iter()
                .for_each(|x| buf.extend_from_slice(&x.to_le_bytes()));
        }
        let len = u32::try_from(buf.len() - 5).map_err(|_| {
            TraceError::param(
                "batch",
                format!(
                    "{} bytes; a record holds at most {MAX_RECORD_PAYLOAD} bytes",
                    buf.len() - 5,
                ),
            )
        })?;
        buf[1..5].copy_from_slice(&len.to_le_bytes());
        // The stream checksum covers the record without its own CRC: a CRC over
        // a message and its CRC would be the same for every record of a length.
        self.stream.update(buf);
        let crc = crc32fast::hash(buf);
        put_u32(buf, crc);
        self.write_raw()?;
        self.batches += 1;
        Ok(())
    }

    fn write_raw(&mut self) -> Result<(), TraceError> {
        let out = self
            .out
            .as_mut()
            .ok_or_else(|| format_err(&self.path, "writer already finished".into()))?;
        out.write_all(&self.buf)
            .map_err(|e| stage_err(&self.path, e))
    }

    pub fn batches_written(&self) -> u64 {
        self.batches
    }

    /// Writes the end record, syncs and moves the file into place. Returns the batch count.
    pub fn finish(mut self) -> Result<u64, TraceError> {
        let buf = &mut self.buf;
        buf.clear();
        buf.push(TAG_END);
        put_u32(buf, END_PAYLOAD_BYTES);
        buf.extend_from_slice(&self.batches.to_le_bytes());
        put_u32(buf, self.stream.clone().finalize());
        let crc = crc32fast::hash(buf);
        put_u32(buf, crc);
        self.write_raw()?;
        let out = self
            .out
            .take()
            .ok_or_else(|| format_err(&self.path, "writer already finished".into()))?;
        out.commit(true).map_err(|e| stage_err(&self.path, e))?;
        Ok(self.batches)
    }
}

/// Streams the batches of a trace, checking every checksum. Yields at most one
/// error, then stops.
pub struct TraceReader {
    path: PathBuf,
    input: BufReader<File>,
    header: TraceHeader,
    remaining: u64,
    /// The file's format version: [`VERSION`] or [`VERSION_1`].
    version: u32,
    batches: u64,
    stream: crc32fast::Hasher,
    done: bool,
}

impl TraceReader {
    /// Refuses what is not a regular file.
    fn check_type(path: &Path, meta: &std::fs::Metadata) -> Result<(), TraceError> {
        if meta.is_dir() {
            return Err(format_err(
                path,
                "is a directory; expected a trace file".into(),
            ));
        }
        if !meta.is_file() {
            // The reader bounds every length field by the bytes left, so it
            // needs the file's length: a pipe's is unknown.
            return Err(format_err(
                path,
                "is not a regular file (a pipe or a device); a binary trace is read from a file: save it to one first".into(),
            ));
        }
        Ok(())
    }

    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        // The type before opening: opening a pipe that has no writer waits
        // for one.
        let meta = std::fs::metadata(&path).map_err(|e| TraceError::io(&path, e))?;
        Self::check_type(&path, &meta)?;
        let file = File::open(&path).map_err(|e| TraceError::io(&path, e))?;
        // What was opened (the path may name another file by now).
        let meta = file.metadata().map_err(|e| TraceError::io(&path, e))?;
        Self::check_type(&path, &meta)?;
        let len = meta.len();
        let mut r = TraceReader {
            path,
            input: BufReader::with_capacity(1 << 20, file),
            header: TraceHeader {
                table_rows: vec![],
                weighted: vec![],
                num_dense: None,
                labels: false,
                metadata: String::new(),
            },
            remaining: len,
            version: VERSION,
            batches: 0,
            stream: crc32fast::Hasher::new(),
            done: false,
        };
        let mut magic = [0u8; 8];
        if len < 8 {
            return Err(format_err(
                &r.path,
                format!("not an nmpsim trace: {len} bytes, too short for the magic"),
            ));
        }
        r.read_exact(&mut magic, "magic")?;
        if magic != MAGIC {
            return Err(format_err(
                &r.path,
                "not an nmpsim trace (bad magic; expected \"NMPTRACE\")".into(),
            ));
        }
        let version = r.read_u32("version")?;
        if version != VERSION && version != VERSION_1 {
            return Err(format_err(
                &r.path,
                format!(
                    "unsupported trace format version {version}; this build reads versions {VERSION_1} and {VERSION}"
                ),
            ));
        }
        r.version = version;
        let hlen = r.read_u32("header length")?;
        let h = r.read_vec(u64::from(hlen), "header")?;
        let crc = r.read_u32("header checksum")?;
        if crc != crc32fast::hash(&h) {
            return Err(format_err(
                &r.path,
                "header checksum mismatch: the file is corrupt".into(),
            ));
        }
        r.header = TraceHeader::decode(&h, &r.path, version)?;
        Ok(r)
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's format version ([`VERSION`] or the older [`VERSION_1`]).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// For a reader that stops after some batches: whether those were all of
    /// them. If the end record comes next, it is read and verified (its batch
    /// count, and the stream checksum that catches reordered or duplicated
    /// records: an error if either fails) and the answer is `true`; if a batch
    /// comes next, nothing is read and the answer is `false`. So a trace read
    /// to its last batch is verified whole even when the reader stops there.
    pub fn verify_if_at_end(&mut self) -> Result<bool, TraceError> {
        if self.done {
            return Ok(true);
        }
        let next = self
            .input
            .fill_buf()
            .map_err(|e| TraceError::io(&self.path, e))?
            .first()
            .copied();
        // Another batch follows, unless what is left is just an end
        // record's length: an end record whose tag was damaged, read (and
        // refused) below.
        if next == Some(TAG_BATCH) && self.remaining != END_RECORD_BYTES {
            return Ok(false);
        }
        // The end record, or whatever error reading one gives (a truncated
        // file, an unknown tag).
        match self.next() {
            None => Ok(true),
            Some(Err(e)) => Err(e),
            Some(Ok(_)) => Ok(false),
        }
    }

    /// Batches read so far.
    pub fn batches_read(&self) -> u64 {
        self.batches
    }

    /// Where the last good batch was, for truncation and framing errors.
    fn where_now(&self) -> String {
        match self.batches {
            0 => "before the first batch".to_string(),
            n => format!("after batch {}", n - 1),
        }
    }

    fn truncated(&self, what: &str) -> TraceError {
        format_err(
            &self.path,
            format!(
                "truncated {} (while reading {what}); the writer did not finish",
                self.where_now()
            ),
        )
    }

    fn read_exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), TraceError> {
        if (buf.len() as u64) > self.remaining {
            return Err(self.truncated(what));
        }
        self.input.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => self.truncated(what),
            _ => TraceError::io(&self.path, e),
        })?;
        self.remaining -= buf.len() as u64;
        Ok(())
    }

    fn read_u32(&mut self, what: &str) -> Result<u32, TraceError> {
        let mut b = [0u8; 4];
        self.read_exact(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads `n` bytes (a length read from the file), refusing before
    /// allocating if the file cannot hold them.
    fn read_vec(&mut self, n: u64, what: &str) -> Result<Vec<u8>, TraceError> {
        if n > self.remaining {
            // A cut file and a damaged length field look the same here.
            return Err(format_err(
                &self.path,
                format!(
                    "truncated {} or corrupt: {what} of {n} bytes, but {} bytes are left; either the writer did not finish or a length field is damaged",
                    self.where_now(),
                    self.remaining
                ),
            ));
        }
        let mut v = vec![0u8; n as usize];
        self.read_exact(&mut v, what)?;
        Ok(v)
    }

    fn read_record(&mut self) -> Result<Option<Batch>, TraceError> {
        let k = self.batches;
        let mut head = [0u8; 5];
        self.read_exact(&mut head, "a record header")?;
        let tag = head[0];
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
        let payload = self.read_vec(u64::from(len), "a record")?;
        let crc = self.read_u32("a record checksum")?;
        let mut h = crc32fast::Hasher::new();
        h.update(&head);
        h.update(&payload);
        if h.finalize() != crc {
            // (A damaged tag still leaves the last record of the file, of an
            // end record's length, recognisable as one.)
            let last_of_its_size = self.remaining == 0 && len == END_PAYLOAD_BYTES;
            let which = if tag == TAG_END || last_of_its_size {
                "the end record".to_string()
            } else {
                format!("batch {k}")
            };
            return Err(format_err(
                &self.path,
                format!("checksum mismatch in {which}: the file is corrupt"),
            ));
        }
        match tag {
            TAG_BATCH => {
                self.stream.update(&head);
                self.stream.update(&payload);
                if self.version == VERSION_1 {
                    self.stream.update(&crc.to_le_bytes());
                }
                let batch = self.decode_batch(&payload, k)?;
                self.batches += 1;
                Ok(Some(batch))
            }
            TAG_END => {
                let mut c = Cursor {
                    bytes: &payload,
                    pos: 0,
                    path: &self.path,
                    what: "end record".into(),
                };
                if len != END_PAYLOAD_BYTES {
                    return Err(format_err(
                        &self.path,
                        format!("end record is {len} bytes; expected {END_PAYLOAD_BYTES}"),
                    ));
                }
                let count = c.u64()?;
                let stream_crc = c.u32()?;
                if count != k {
                    return Err(format_err(
                        &self.path,
                        format!("end record says {count} batches but {k} were read"),
                    ));
                }
                if stream_crc != self.stream.clone().finalize() {
                    return Err(format_err(
                        &self.path,
                        "checksum over all batch records does not match the end record: records were reordered, duplicated or replaced, or the file is corrupt".into(),
                    ));
                }
                if self.remaining != 0 {
                    return Err(format_err(
                        &self.path,
                        format!("{} stray bytes after the end record", self.remaining),
                    ));
                }
                Ok(None)
            }
            other => Err(format_err(
                &self.path,
                format!("unknown record tag {other} {}", self.where_now()),
            )),
        }
    }

    fn decode_batch(&self, payload: &[u8], k: u64) -> Result<Batch, TraceError> {
        let mut c = Cursor {
            bytes: payload,
            pos: 0,
            path: &self.path,
            what: format!("batch {k}"),
        };
        let b = c.u32()? as usize;
        let mut tables = Vec::with_capacity(self.header.table_rows.len());
        for (t, (&rows, &weighted)) in self
            .header
            .table_rows
            .iter()
            .zip(&self.header.weighted)
            .enumerate()
        {
            let nnz = c.u32()? as usize;
            let offsets = c.u32s(b.saturating_add(1))?;
            let indices = c.u32s(nnz)?;
            let weights = if weighted { Some(c.f32s(nnz)?) } else { None };
            let tb = TableBatch {
                num_rows: rows,
                offsets,
                indices,
                weights,
            };
            tb.validate_named(t)
                .map_err(|e| format_err(&self.path, format!("batch {k}: {e}")))?;
            tables.push(tb);
        }
        let dense = match self.header.num_dense {
            Some(d) => Some(c.f32s(b.saturating_mul(d as usize))?),
            None => None,
        };
        let labels = if self.header.labels {
            Some(c.f32s(b)?)
        } else {
            None
        };
        if c.pos != payload.len() {
            return Err(format_err(
                &self.path,
                format!(
                    "batch {k}: record lengths inconsistent: {} stray bytes after the batch",
                    payload.len() - c.pos
                ),
            ));
        }
        let batch = Batch {
            tables,
            dense,
            num_dense: self.header.num_dense.unwrap_or(0) as usize,
            labels,
        };
        batch
            .validate()
            .map_err(|e| format_err(&self.path, format!("batch {k}: {e}")))?;
        Ok(batch)
    }
}

impl Iterator for TraceReader {
    type Item = Result<Batch, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let step = (!self.done).then(|| self.read_record());
        until_done(&mut self.done, step)
    }
}

/// Writes every lookup as a CSV row `batch,table,bag,position,row,weight` (weight
/// empty for unweighted tables). Returns the number of rows written.
pub fn write_csv<I, W>(batches: I, out: W) -> Result<u64, TraceError>
where
    I: IntoIterator<Item = Result<Batch, TraceError>>,
    W: Write,
{
    let mut out = BufWriter::new(out);
    let io = |e| TraceError::io("CSV output", e);
    writeln!(out, "batch,table,bag,position,row,weight").map_err(io)?;
    let mut rows = 0u64;
    for (k, batch) in batches.into_iter().enumerate() {
        let batch = batch?;
        for (t, tb) in batch.tables.iter().enumerate() {
            for bag in 0..tb.batch_size() {
                let ws = tb.bag_weights(bag);
                for (p, r) in tb.bag(bag).iter().enumerate() {
                    match ws {
                        Some(w) => writeln!(out, "{k},{t},{bag},{p},{r},{}", w[p]),
                        None => writeln!(out, "{k},{t},{bag},{p},{r},"),
                    }
                    .map_err(io)?;
                    rows += 1;
                }
            }
        }
    }
    out.flush().map_err(io)?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A temporary directory, removed with what it holds when dropped.
    struct TmpDir(tempfile::TempDir);

    impl std::ops::Deref for TmpDir {
        type Target = Path;
        fn deref(&self) -> &Path {
            self.0.path()
        }
    }

    fn tmpdir(name: &str) -> TmpDir {
        TmpDir(
            tempfile::Builder::new()
                .prefix(&format!("nmpsim-format-{name}-"))
                .tempdir()
                .unwrap(),
        )
    }

    /// [`sample_batches`] written to `a.nmpt` in a fresh directory: the
    /// directory, the file and the file's bytes.
    fn sample_trace(name: &str) -> (TmpDir, PathBuf, Vec<u8>) {
        let d = tmpdir(name);
        let p = d.join("a.nmpt");
        write(&p, &sample_batches());
        let bytes = std::fs::read(&p).unwrap();
        (d, p, bytes)
    }

    fn sample_batches() -> Vec<Batch> {
        let mk = |seed: u32| Batch {
            tables: vec![
                TableBatch::new(10, vec![0, 2, 3], vec![seed % 10, 1, 9], None).unwrap(),
                TableBatch::new(7, vec![0, 0, 1], vec![6], Some(vec![0.5])).unwrap(),
            ],
            dense: Some(vec![1.0, 2.0, 3.0, 4.0]),
            num_dense: 2,
            labels: Some(vec![0.0, 1.0]),
        };
        vec![mk(1), mk(2), mk(3)]
    }

    fn write(path: &Path, batches: &[Batch]) {
        let mut w =
            TraceWriter::create(path, TraceHeader::for_batch(&batches[0], r#"{"x":1}"#)).unwrap();
        for b in batches {
            w.write_batch(b).unwrap();
        }
        assert_eq!(w.finish().unwrap(), batches.len() as u64);
    }

    fn read_all(path: &Path) -> Result<Vec<Batch>, TraceError> {
        TraceReader::open(path)?.collect()
    }

    #[test]
    fn round_trip_keeps_header_and_batches() {
        let d = tmpdir("rt");
        let p = d.join("a.nmpt");
        let bs = sample_batches();
        write(&p, &bs);
        assert!(!crate::staged::temporary_path(&p).exists());
        let r = TraceReader::open(&p).unwrap();
        assert_eq!(r.header().metadata, r#"{"x":1}"#);
        assert_eq!(r.header().num_dense, Some(2));
        assert_eq!(r.header().weighted, vec![false, true]);
        assert_eq!(read_all(&p).unwrap(), bs);
    }

    /// [`batch_payload_bytes`] is what the writer writes, for every shape.
    #[test]
    fn payload_bytes_are_the_records() {
        let d = tmpdir("payload");
        let p = d.join("a.nmpt");
        let mut shapes = sample_batches();
        let mut bare = shapes[0].clone();
        bare.dense = None;
        bare.num_dense = 0;
        bare.labels = None;
        shapes.push(bare);
        for b in shapes {
            write(&p, std::slice::from_ref(&b));
            let bytes = std::fs::read(&p).unwrap();
            let (_, recs) = batch_records(&bytes);
            let tables = b
                .tables
                .iter()
                .map(|t| (t.indices.len() as u64, t.weights.is_some()));
            let want = batch_payload_bytes(
                b.batch_size() as u64,
                tables,
                b.dense.as_ref().map(|_| b.num_dense as u32),
                b.labels.is_some(),
            );
            assert_eq!(recs[0].len() as u128 - 9, want);
        }
        // 2 x 10^9 samples of 2 lookups: past what a record holds.
        assert!(
            batch_payload_bytes(2_000_000_000, [(4_000_000_000, false)], None, false)
                > u128::from(MAX_RECORD_PAYLOAD)
        );
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let (d, _p, good) = sample_trace("flip");
        let q = d.join("b.nmpt");
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            std::fs::write(&q, &bad).unwrap();
            assert!(
                read_all(&q).is_err(),
                "flip at byte {i} of {} went unnoticed",
                good.len()
            );
        }
    }

    /// A flip that makes a length field run past the end of the file is
    /// reported as possibly corrupt, not as a writer that did not finish; a
    /// pipe is refused by name.
    #[test]
    fn damaged_lengths_and_pipes_are_named() {
        let (d, _p, mut bad) = sample_trace("length");
        // Bytes 12..16: the header's length.
        bad[15] ^= 0x80;
        let q = d.join("b.nmpt");
        std::fs::write(&q, &bad).unwrap();
        let e = TraceReader::open(&q)
            .err()
            .expect("a damaged header length")
            .to_string();
        assert!(
            e.contains("truncated before the first batch or corrupt")
                && e.contains("a length field is damaged"),
            "{e}"
        );
        let fifo = d.join("fifo");
        if std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success())
        {
            // No writer: the pipe is refused without being opened (opening
            // it would wait for one).
            let e = TraceReader::open(&fifo).err().expect("a pipe").to_string();
            assert!(e.contains("is not a regular file"), "{e}");
        }
    }

    #[test]
    fn every_truncation_is_detected() {
        let (d, p, good) = sample_trace("trunc");
        let q = d.join("b.nmpt");
        for len in 0..good.len() {
            std::fs::write(&q, &good[..len]).unwrap();
            let e = read_all(&q).expect_err("truncated file read as valid");
            let s = e.to_string();
            assert!(
                s.contains("truncated") || s.contains("not an nmpsim trace"),
                "len {len}: {s}"
            );
        }
        // Cut exactly after the second batch record: names the last good batch.
        let mut r = TraceReader::open(&p).unwrap();
        r.next().unwrap().unwrap();
        r.next().unwrap().unwrap();
        let cut = good.len() as u64 - r.remaining;
        std::fs::write(&q, &good[..cut as usize]).unwrap();
        let e = read_all(&q).unwrap_err().to_string();
        assert!(e.contains("truncated after batch 1"), "{e}");
        let mut extra = good.clone();
        extra.push(0);
        std::fs::write(&q, &extra).unwrap();
        assert!(
            read_all(&q)
                .unwrap_err()
                .to_string()
                .contains("stray bytes")
        );
    }

    /// Header fields the writer never produces are refused by name, even with
    /// a checksum that matches: row counts outside 1 ..= 2^32, unknown flag
    /// bits, dense features counted while the flag says there are none.
    #[test]
    fn impossible_header_fields_are_named() {
        let d = tmpdir("fields");
        let p = d.join("a.nmpt");
        let mut bs = sample_batches();
        bs.iter_mut().for_each(|b| {
            b.dense = None;
            b.num_dense = 0;
        });
        write(&p, &bs);
        let good = std::fs::read(&p).unwrap();
        let hlen = u32::from_le_bytes(good[12..16].try_into().unwrap()) as usize;
        // Header offsets: table 0 rows at 4, its flags at 12; table 1 rows at
        // 13, flags at 21; then flags at 22 and num_dense at 23.
        let patched = |edit: &dyn Fn(&mut [u8])| {
            let mut b = good.clone();
            edit(&mut b[16..16 + hlen]);
            let crc = crc32fast::hash(&b[16..16 + hlen]);
            b[16 + hlen..20 + hlen].copy_from_slice(&crc.to_le_bytes());
            let q = d.join("b.nmpt");
            std::fs::write(&q, &b).unwrap();
            q
        };
        let rows = |t: usize, v: u64| {
            move |h: &mut [u8]| h[4 + 9 * t..12 + 9 * t].copy_from_slice(&v.to_le_bytes())
        };
        let err = |q: PathBuf| TraceReader::open(&q).err().expect("refused").to_string();
        for (t, v) in [
            (0, 0u64),
            (1, 0),
            (1, (1 << 32) + 1),
            (0, 1 << 58),
            (0, u64::MAX),
        ] {
            let q = patched(&rows(t, v));
            let e = err(q.clone());
            assert!(
                e.starts_with(&q.display().to_string())
                    && e.contains(&format!("table {t}: rows is {v}; expected 1 ..= 2^32")),
                "{e}"
            );
        }
        // 2^32 rows (every u32 id) is what `trace convert` writes: accepted.
        let q = patched(&rows(0, 1 << 32));
        assert_eq!(
            TraceReader::open(&q).unwrap().header().table_rows[0],
            1 << 32
        );
        assert_eq!(read_all(&q).unwrap().len(), bs.len());
        let e = err(patched(&|h: &mut [u8]| h[21] = 0x81));
        assert!(
            e.contains("table 1: flags is 0x81; expected only bit 0"),
            "{e}"
        );
        let e = err(patched(&|h: &mut [u8]| h[22] = 0x04));
        assert!(
            e.contains("header: flags is 0x04; expected only bits 0"),
            "{e}"
        );
        let e = err(patched(&|h: &mut [u8]| {
            h[23..27].copy_from_slice(&3u32.to_le_bytes())
        }));
        assert!(
            e.contains("num_dense is 3 but the dense-features flag (bit 0 of flags) is off"),
            "{e}"
        );
        // The writer refuses such row counts rather than write what cannot be read.
        for r in [0, (1 << 32) + 1] {
            let mut h = TraceHeader::for_batch(&bs[0], "");
            h.table_rows[1] = r;
            let e = TraceWriter::create(d.join("c.nmpt"), h)
                .err()
                .unwrap()
                .to_string();
            assert!(
                e.contains("header.table_rows[1]") && e.contains("expected 1 ..= 2^32"),
                "{e}"
            );
        }
    }

    #[test]
    fn wrong_magic_and_version_say_so() {
        let (d, _p, good) = sample_trace("magic");
        let q = d.join("b.nmpt");
        std::fs::write(&q, b"hello world, not a trace").unwrap();
        let e = TraceReader::open(&q).err().unwrap().to_string();
        assert!(e.contains("not an nmpsim trace"), "{e}");
        let mut v3 = good.clone();
        v3[8..12].copy_from_slice(&3u32.to_le_bytes());
        std::fs::write(&q, &v3).unwrap();
        let e = TraceReader::open(&q).err().unwrap().to_string();
        assert!(
            e.contains("version 3") && e.contains("reads versions 1 and 2"),
            "{e}"
        );
    }

    /// The batch records of `bytes` (a whole trace), each from its tag to its CRC.
    fn batch_records(bytes: &[u8]) -> (usize, Vec<std::ops::Range<usize>>) {
        let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let start = 16 + hlen + 4;
        let mut at = start;
        let mut recs = vec![];
        while bytes[at] == TAG_BATCH {
            let len = u32::from_le_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
            recs.push(at..at + 9 + len);
            at += 9 + len;
        }
        (start, recs)
    }

    /// `bytes` with its batch records replaced by those of `order` (indices
    /// into its records), end record kept as written.
    fn rearranged(bytes: &[u8], order: &[usize]) -> Vec<u8> {
        let (start, recs) = batch_records(bytes);
        let end = recs.last().unwrap().end;
        let mut out = bytes[..start].to_vec();
        order
            .iter()
            .for_each(|&k| out.extend_from_slice(&bytes[recs[k].clone()]));
        out.extend_from_slice(&bytes[end..]);
        out
    }

    /// Equal-length batch records swapped, duplicated or replaced keep every
    /// record's own CRC and the batch count: the end record's stream checksum
    /// refuses them, naming the file.
    #[test]
    fn reordered_and_duplicated_records_are_refused() {
        let (d, _p, good) = sample_trace("order");
        let (_, recs) = batch_records(&good);
        assert_eq!(recs.len(), 3);
        assert!(recs.iter().all(|r| r.len() == recs[0].len()));
        assert_eq!(rearranged(&good, &[0, 1, 2]), good);
        let q = d.join("b.nmpt");
        for order in [
            [1, 0, 2],
            [0, 2, 1],
            [2, 1, 0],
            [0, 0, 2],
            [0, 1, 1],
            [2, 2, 2],
        ] {
            std::fs::write(&q, rearranged(&good, &order)).unwrap();
            let e = read_all(&q).expect_err("rearranged records read as valid");
            let s = e.to_string();
            assert!(
                s.starts_with(&q.display().to_string())
                    && s.contains("checksum over all batch records does not match the end record")
                    && s.contains("reordered, duplicated"),
                "{order:?}: {s}"
            );
        }
    }

    /// A reader that stops after some batches verifies the end record when
    /// they are all of them, and reads nothing more when they are not.
    #[test]
    fn a_reader_stopping_at_the_last_batch_still_verifies_the_end() {
        let (d, p, good) = sample_trace("stop");
        let q = d.join("swapped.nmpt");
        std::fs::write(&q, rearranged(&good, &[1, 0, 2])).unwrap();
        for (path, whole_ok) in [(&p, true), (&q, false)] {
            for stop in 0..=3u64 {
                let mut r = TraceReader::open(path).unwrap();
                for _ in 0..stop {
                    r.next().unwrap().unwrap();
                }
                let end = r.verify_if_at_end();
                match (stop, whole_ok) {
                    (3, true) => assert!(end.unwrap()),
                    (3, false) => {
                        let e = end.unwrap_err().to_string();
                        assert!(e.contains("reordered, duplicated"), "{e}");
                    }
                    // A batch follows: nothing read, and reading goes on.
                    _ => {
                        assert!(!end.unwrap(), "{stop}");
                        assert_eq!(r.batches_read(), stop);
                        assert!(r.next().unwrap().is_ok());
                    }
                }
            }
        }
        // An end record whose tag reads as a batch's is no batch to leave
        // unread: it is read, and refused.
        let mut bad = good.clone();
        let at = bad.len() - END_RECORD_BYTES as usize;
        assert_eq!(bad[at], TAG_END);
        bad[at] = TAG_BATCH;
        let b = d.join("tag.nmpt");
        std::fs::write(&b, &bad).unwrap();
        let mut r = TraceReader::open(&b).unwrap();
        for _ in 0..3 {
            r.next().unwrap().unwrap();
        }
        let e = r.verify_if_at_end().unwrap_err().to_string();
        assert!(e.contains("checksum mismatch in the end record"), "{e}");
        // An end record whose length field is short gets its own message
        // (its CRC made good, so that the length is what is read).
        let mut short = good.clone();
        let len_at = at + 1;
        short[len_at..len_at + 4].copy_from_slice(&4u32.to_le_bytes());
        let body = &short[at..at + 5 + 4];
        let crc = crc32fast::hash(body);
        short.truncate(at + 5 + 4);
        short.extend_from_slice(&crc.to_le_bytes());
        let b = d.join("short.nmpt");
        std::fs::write(&b, &short).unwrap();
        let mut r = TraceReader::open(&b).unwrap();
        let e = loop {
            match r.next() {
                Some(Ok(_)) => continue,
                Some(Err(e)) => break e.to_string(),
                None => panic!("a short end record was accepted"),
            }
        };
        assert!(e.contains("end record is 4 bytes; expected 12"), "{e}");
    }

    /// A version-1 file, written by the version-1 writer (`nmpsim trace gen
    /// --rows 10 --tables 2 --bag 3 --batch 4 --batches 3 --seed 5`), still
    /// reads, with the batches its spec generates; its end record is still
    /// checked as version 1 defined it.
    #[test]
    fn version_1_files_still_read() {
        let v1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/v1-gen.nmpt");
        let r = TraceReader::open(&v1).unwrap();
        assert_eq!(r.version(), VERSION_1);
        let meta: serde_json::Value = serde_json::from_str(&r.header().metadata).unwrap();
        let spec: GenSpec = serde_json::from_value(meta["spec"].clone()).unwrap();
        let batches = read_all(&v1).unwrap();
        assert_eq!(batches.len(), 3);
        let regenerated: Vec<Batch> = crate::Generator::new(spec).unwrap().take(3).collect();
        assert_eq!(batches, regenerated);

        // Its stream checksum, changed (and the end record's own CRC with it), is refused.
        let d = tmpdir("v1");
        let good = std::fs::read(&v1).unwrap();
        let n = good.len();
        let mut bad = good.clone();
        bad[n - 8] ^= 1;
        let crc = crc32fast::hash(&bad[n - 21..n - 4]);
        bad[n - 4..].copy_from_slice(&crc.to_le_bytes());
        let q = d.join("b.nmpt");
        std::fs::write(&q, &bad).unwrap();
        let e = read_all(&q).unwrap_err().to_string();
        assert!(
            e.contains("checksum over all batch records does not match"),
            "{e}"
        );
        // A version-2 writer given the same batches writes version 2.
        let p = d.join("v2.nmpt");
        let mut w = TraceWriter::create(&p, r.header().clone()).unwrap();
        batches.iter().for_each(|b| w.write_batch(b).unwrap());
        w.finish().unwrap();
        let r2 = TraceReader::open(&p).unwrap();
        assert_eq!(r2.version(), VERSION);
        assert_eq!(r2.collect::<Result<Vec<_>, _>>().unwrap(), batches);
    }

    #[test]
    fn hostile_lengths_do_not_allocate() {
        let (_d, p, mut bad) = sample_trace("hostile");
        let hlen = u32::from_le_bytes([bad[12], bad[13], bad[14], bad[15]]) as usize;
        // First batch record's length field, set to 4 GiB - 1.
        let rec = 16 + hlen + 4;
        bad[rec + 1..rec + 5].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&p, &bad).unwrap();
        let e = read_all(&p).unwrap_err().to_string();
        assert!(e.contains("truncated before the first batch"), "{e}");
    }

    #[test]
    fn writer_rejects_mismatched_batches_and_cleans_up() {
        let d = tmpdir("mismatch");
        let p = d.join("a.nmpt");
        let bs = sample_batches();
        let mut w = TraceWriter::create(&p, TraceHeader::for_batch(&bs[0], "")).unwrap();
        let mut odd = bs[0].clone();
        odd.tables[1].weights = None;
        assert!(
            w.write_batch(&odd)
                .unwrap_err()
                .to_string()
                .contains("weights present")
        );
        drop(w);
        assert!(!p.exists() && !crate::staged::temporary_path(&p).exists());
    }

    #[test]
    fn csv_lists_every_lookup() {
        let mut out = Vec::new();
        let n = write_csv(sample_batches().into_iter().take(1).map(Ok), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(n, 4);
        assert_eq!(
            text,
            "batch,table,bag,position,row,weight\n0,0,0,0,1,\n0,0,0,1,1,\n0,0,1,0,9,\n0,1,1,0,6,0.5\n"
        );
    }

    fn arb_batch() -> impl Strategy<Value = Batch> {
        (
            0usize..6,
            1usize..4,
            any::<bool>(),
            any::<bool>(),
            0usize..3,
        )
            .prop_flat_map(|(b, nt, dense, labels, nd)| {
                let table = (
                    1u64..1000,
                    proptest::collection::vec(0u32..5, b),
                    any::<bool>(),
                )
                    .prop_flat_map(move |(rows, sizes, weighted)| {
                        let n: usize = sizes.iter().map(|&s| s as usize).sum();
                        (
                            Just(rows),
                            Just(sizes),
                            proptest::collection::vec(0..rows as u32, n),
                            proptest::collection::vec(0.0f32..1.0, if weighted { n } else { 0 }),
                            Just(weighted),
                        )
                    });
                (
                    proptest::collection::vec(table, nt),
                    proptest::collection::vec(-1e3f32..1e3, if dense { b * nd } else { 0 }),
                    proptest::collection::vec(0.0f32..=1.0, if labels { b } else { 0 }),
                )
                    .prop_map(move |(ts, dv, lv)| Batch {
                        tables: ts
                            .into_iter()
                            .map(|(rows, sizes, indices, w, weighted)| {
                                let mut offsets = vec![0u32];
                                for s in sizes {
                                    offsets.push(offsets.last().copied().unwrap_or(0) + s);
                                }
                                TableBatch {
                                    num_rows: rows,
                                    offsets,
                                    indices,
                                    weights: weighted.then_some(w),
                                }
                            })
                            .collect(),
                        dense: dense.then_some(dv),
                        num_dense: if dense { nd } else { 0 },
                        labels: labels.then_some(lv),
                    })
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn random_batches_round_trip_exactly(first in arb_batch(), seeds in proptest::collection::vec(any::<u64>(), 0..4)) {
            // Later batches reuse the first one's shape with shuffled rows, as a trace must.
            let mut bs = vec![first.clone()];
            for s in seeds {
                let mut b = first.clone();
                for t in &mut b.tables {
                    let rows = t.num_rows;
                    t.indices.iter_mut().enumerate().for_each(|(i, r)| *r = ((s.wrapping_add(i as u64)) % rows) as u32);
                }
                bs.push(b);
            }
            let d = tmpdir("prop");
            let p = d.join(format!("{}.nmpt", bs.len()));
            write(&p, &bs);
            let back = read_all(&p).unwrap();
            std::fs::remove_file(&p).ok();
            prop_assert_eq!(back, bs);
        }
    }
}
