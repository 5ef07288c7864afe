//! Request sources: where the memory operations fed to a DRAM engine come from.
//!
//! - [`synthetic`]: sequential, strided and uniformly random streams of 64 B
//!   accesses, reproducible from a seed;
//! - [`AddressTrace`]: a text file with one `ADDRESS R|W` request per line, read
//!   lazily (see `docs/dram-traces.md` for the grammar);
//! - [`EmbeddingRequests`]: the row reads (and, for the update pass, the row
//!   read-modify-writes) implied by an embedding index trace (`.nmpt`).
//!
//! Every source yields 64 B aligned addresses below the configured capacity.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use nmpsim_traces::{Batch, Rng, TraceError, TraceReader};
use serde::{Deserialize, Serialize};

use crate::{Access, BURST_BYTES, MemOp, SimError};

/// Alignment of every table base in an [`EmbeddingLayout`].
pub const TABLE_ALIGN_BYTES: u64 = 4096;

/// Bytes per embedding element (f32).
const ELEMENT_BYTES: u64 = 4;

/// `x` rounded up to a multiple of `align` (a power of two), or `None` on overflow.
fn align_up(x: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    x.checked_add(align - 1).map(|v| v & !(align - 1))
}

fn align_down(x: u64) -> u64 {
    x & !(BURST_BYTES - 1)
}

// ---------------------------------------------------------------------------
// Synthetic streams
// ---------------------------------------------------------------------------

/// The address pattern of a synthetic stream.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum StreamKind {
    /// Consecutive 64 B lines from the base, wrapping at the end of the footprint.
    Sequential,
    /// Uniformly random 64 B lines of the footprint.
    Random,
    /// Advances by `stride_bytes` (a positive multiple of 64), wrapping modulo
    /// the footprint.
    Strided { stride_bytes: u64 },
}

const STREAM_FORMS: &str = "`sequential` (or `seq`), `random` (or `rand`), `strided:BYTES` (BYTES a positive multiple of 64, e.g. `strided:4096`)";

fn check_stride(stride_bytes: u64) -> Result<(), SimError> {
    if stride_bytes == 0 || stride_bytes % BURST_BYTES != 0 {
        return Err(SimError::param(
            "stride_bytes",
            format!("{stride_bytes}; expected a positive multiple of {BURST_BYTES}"),
        ));
    }
    Ok(())
}

/// Parses a decimal or `0x`-prefixed hexadecimal `u64`.
pub fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(hex, 16).ok()
        }
        Some(_) => None,
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        None => None,
    }
}

impl FromStr for StreamKind {
    type Err = SimError;

    /// Accepts `sequential` | `seq`, `random` | `rand`, `strided:BYTES`
    /// (case-insensitive; BYTES decimal or `0x` hex).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "sequential" | "seq" => return Ok(StreamKind::Sequential),
            "random" | "rand" => return Ok(StreamKind::Random),
            _ => {}
        }
        if let Some(arg) = lower.strip_prefix("strided:") {
            let stride_bytes = parse_u64(arg.trim()).ok_or_else(|| {
                SimError::param(
                    "stream",
                    format!("`{s}`: stride `{arg}` is not a number; expected {STREAM_FORMS}"),
                )
            })?;
            check_stride(stride_bytes).map_err(|_| {
                SimError::param("stream", format!("`{s}`: expected {STREAM_FORMS}"))
            })?;
            return Ok(StreamKind::Strided { stride_bytes });
        }
        Err(SimError::param(
            "stream",
            format!("`{s}` is not a stream kind; expected {STREAM_FORMS}"),
        ))
    }
}

impl fmt::Display for StreamKind {
    /// The form [`StreamKind::from_str`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamKind::Sequential => f.write_str("sequential"),
            StreamKind::Random => f.write_str("random"),
            StreamKind::Strided { stride_bytes } => write!(f, "strided:{stride_bytes}"),
        }
    }
}

/// Everything that defines a synthetic stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StreamSpec {
    pub kind: StreamKind,
    /// Number of requests, > 0.
    pub requests: u64,
    /// Probability that a request is a write, in `0.0..=1.0`.
    pub write_fraction: f64,
    /// Seed of the random address and read/write draws.
    pub seed: u64,
    /// First byte of the region the stream touches; 64 B aligned.
    pub base: u64,
    /// Size of the region in bytes (a multiple of 64, at least 64); `None` means
    /// everything from `base` to the capacity (rounded down to 64 B).
    pub footprint_bytes: Option<u64>,
}

impl StreamSpec {
    /// `requests` reads of `kind` over the whole memory, seed 0.
    pub fn new(kind: StreamKind, requests: u64) -> Self {
        StreamSpec {
            kind,
            requests,
            write_fraction: 0.0,
            seed: 0,
            base: 0,
            footprint_bytes: None,
        }
    }
}

/// Sub-stream of the spec's seed used for addresses of random streams.
const ADDR_STREAM: u64 = 0;
/// Sub-stream used for read/write decisions, independent of the address draws.
const RW_STREAM: u64 = 1;

/// Checks `spec` against a memory of `capacity_bytes` and returns its stream.
pub fn synthetic(spec: &StreamSpec, capacity_bytes: u64) -> Result<SyntheticStream, SimError> {
    if spec.requests == 0 {
        return Err(SimError::param("requests", "0; expected at least 1"));
    }
    if !(0.0..=1.0).contains(&spec.write_fraction) {
        return Err(SimError::param(
            "write_fraction",
            format!("{}; expected a value in 0.0..=1.0", spec.write_fraction),
        ));
    }
    if spec.base % BURST_BYTES != 0 {
        return Err(SimError::param(
            "base",
            format!(
                "{:#x} is not {BURST_BYTES} B aligned; expected a multiple of {BURST_BYTES}",
                spec.base
            ),
        ));
    }
    if spec.base >= capacity_bytes {
        return Err(SimError::param(
            "base",
            format!(
                "{:#x} is at or past the capacity of {capacity_bytes} bytes ({capacity_bytes:#x})",
                spec.base
            ),
        ));
    }
    let footprint = match spec.footprint_bytes {
        None => align_down(capacity_bytes - spec.base),
        Some(f) => {
            if f % BURST_BYTES != 0 {
                return Err(SimError::param(
                    "footprint_bytes",
                    format!("{f}; expected a multiple of {BURST_BYTES}"),
                ));
            }
            if f > capacity_bytes - spec.base {
                return Err(SimError::param(
                    "footprint_bytes",
                    format!(
                        "{f}: base {:#x} + footprint ends past the capacity of {capacity_bytes} bytes",
                        spec.base
                    ),
                ));
            }
            f
        }
    };
    if footprint < BURST_BYTES {
        return Err(SimError::param(
            "footprint_bytes",
            format!("{footprint}; expected at least {BURST_BYTES}"),
        ));
    }
    let step = match spec.kind {
        StreamKind::Sequential => BURST_BYTES,
        StreamKind::Random => 0,
        StreamKind::Strided { stride_bytes } => {
            check_stride(stride_bytes)?;
            stride_bytes % footprint
        }
    };
    let root = Rng::new(spec.seed);
    Ok(SyntheticStream {
        random: matches!(spec.kind, StreamKind::Random),
        base: spec.base,
        footprint,
        step,
        offset: 0,
        remaining: spec.requests,
        write_fraction: spec.write_fraction,
        addr_rng: root.fork(ADDR_STREAM),
        rw_rng: root.fork(RW_STREAM),
    })
}

/// A synthetic request stream; see [`synthetic`]. Deterministic for a given spec.
#[derive(Clone, Debug)]
pub struct SyntheticStream {
    random: bool,
    base: u64,
    /// Region size in bytes, a multiple of 64.
    footprint: u64,
    /// Offset advance per request (`< footprint`) for the walking kinds.
    step: u64,
    /// Offset of the next walking request from `base`, `< footprint`.
    offset: u64,
    remaining: u64,
    write_fraction: f64,
    addr_rng: Rng,
    rw_rng: Rng,
}

impl SyntheticStream {
    /// First byte of the region the stream touches.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Size of the region in bytes.
    pub fn footprint_bytes(&self) -> u64 {
        self.footprint
    }
}

impl Iterator for SyntheticStream {
    type Item = MemOp;

    fn next(&mut self) -> Option<MemOp> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let offset = if self.random {
            self.addr_rng.below(self.footprint / BURST_BYTES) * BURST_BYTES
        } else {
            let o = self.offset;
            // offset + step modulo footprint, without overflowing near 2^64.
            self.offset = if o >= self.footprint - self.step {
                o - (self.footprint - self.step)
            } else {
                o + self.step
            };
            o
        };
        let addr = self.base + offset;
        // All reads or all writes need no draw (`next_f64` is in [0, 1)).
        let write = match self.write_fraction {
            f if f <= 0.0 => false,
            f if f >= 1.0 => true,
            f => self.rw_rng.next_f64() < f,
        };
        Some(if write {
            MemOp::write(addr)
        } else {
            MemOp::read(addr)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match usize::try_from(self.remaining) {
            Ok(n) => (n, Some(n)),
            Err(_) => (usize::MAX, None),
        }
    }
}

impl ExactSizeIterator for SyntheticStream {}

impl std::iter::FusedIterator for SyntheticStream {}

// ---------------------------------------------------------------------------
// Address trace files
// ---------------------------------------------------------------------------

/// A text trace of `ADDRESS OP` lines, parsed lazily, one line at a time.
///
/// Yields one [`MemOp`] per request line, with the address aligned down to 64 B.
/// The first error (I/O, malformed line, address at or past the capacity) is
/// yielded once and ends the iteration.
pub struct AddressTrace {
    name: PathBuf,
    reader: Box<dyn BufRead + Send>,
    capacity: u64,
    line: u64,
    buf: Vec<u8>,
    done: bool,
}

impl fmt::Debug for AddressTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressTrace")
            .field("name", &self.name)
            .field("capacity", &self.capacity)
            .field("line", &self.line)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

const ADDR_FORMS: &str = "expected \"ADDRESS R|W\"";

/// The UTF-8 byte order mark, skipped at the start of a text trace.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

impl AddressTrace {
    /// Opens `path` for a memory of `capacity_bytes`.
    pub fn open(path: &Path, capacity_bytes: u64) -> Result<Self, SimError> {
        let file = File::open(path).map_err(|e| SimError::io(path, e))?;
        Ok(Self::from_reader(
            path,
            BufReader::with_capacity(1 << 16, file),
            capacity_bytes,
        ))
    }

    /// Reads a trace from `reader`; `name` is the file named in error messages.
    pub fn from_reader(
        name: impl Into<PathBuf>,
        reader: impl BufRead + Send + 'static,
        capacity_bytes: u64,
    ) -> Self {
        AddressTrace {
            name: name.into(),
            reader: Box::new(reader),
            capacity: capacity_bytes,
            line: 0,
            buf: Vec::new(),
            done: false,
        }
    }

    /// The file name used in error messages.
    pub fn name(&self) -> &Path {
        &self.name
    }

    /// Number of lines read so far (the 1-based number of the last line read).
    pub fn lines_read(&self) -> u64 {
        self.line
    }

    /// Parses line `line` of trace `name`: `Ok(None)` for blank and comment lines.
    ///
    /// The usual line (`0x1f40 R`: an address, blanks, an operation) takes
    /// [`parse_plain`], which neither allocates nor validates UTF-8; anything
    /// else (comments, commas, other whitespace, errors) takes the general
    /// parser, which gives the same result for every line `parse_plain` reads.
    #[inline]
    fn parse_line(
        name: &Path,
        line: u64,
        capacity: u64,
        raw: &[u8],
    ) -> Result<Option<MemOp>, SimError> {
        // A UTF-8 byte order mark (as some editors write) is no part of the
        // first line's address.
        let raw = if line == 1 {
            raw.strip_prefix(UTF8_BOM).unwrap_or(raw)
        } else {
            raw
        };
        match parse_plain(raw) {
            Some((addr, access)) if addr < capacity => Ok(Some(MemOp {
                addr: align_down(addr),
                access,
            })),
            _ => Self::parse_line_general(name, line, capacity, raw),
        }
    }

    /// [`parse_line`](Self::parse_line) for any line, with its errors.
    fn parse_line_general(
        name: &Path,
        line: u64,
        capacity: u64,
        raw: &[u8],
    ) -> Result<Option<MemOp>, SimError> {
        let err = |what: String| SimError::parse(name, line, what);
        if line == 1 && raw.starts_with(&nmpsim_traces::format::MAGIC) {
            return Err(err(
                "this is a binary embedding trace (.nmpt), not an address trace; replay it with --embedding-trace".into(),
            ));
        }
        let text = std::str::from_utf8(raw)
            .map_err(|_| err(format!("{ADDR_FORMS}, found bytes that are not UTF-8")))?;
        let content = match text.find('#') {
            Some(i) => &text[..i],
            None => text,
        }
        .trim();
        if content.is_empty() {
            return Ok(None);
        }
        let found = || format!("{ADDR_FORMS}, found \"{}\"", excerpt(content));
        let (addr_s, op_s) = match content.split_once(',') {
            Some((a, o)) => (a.trim(), o.trim()),
            None => {
                let mut it = content.split_whitespace();
                match (it.next(), it.next(), it.next()) {
                    (Some(a), Some(o), None) => (a, o),
                    _ => return Err(err(found())),
                }
            }
        };
        let bad_token =
            |t: &str| t.is_empty() || t.contains(|c: char| c.is_whitespace() || c == ',');
        if bad_token(addr_s) || bad_token(op_s) {
            return Err(err(found()));
        }
        let addr = parse_u64(addr_s).ok_or_else(|| {
            err(format!(
                "{}: address \"{}\" is not a decimal or 0x-prefixed hexadecimal 64-bit number",
                found(),
                excerpt(addr_s)
            ))
        })?;
        let access = match op_s.to_ascii_uppercase().as_str() {
            "R" | "READ" | "RD" => Access::Read,
            "W" | "WRITE" | "WR" => Access::Write,
            _ => {
                return Err(err(format!(
                    "{}: operation \"{}\" is not R, W, READ, WRITE, RD or WR",
                    found(),
                    excerpt(op_s)
                )));
            }
        };
        if addr >= capacity {
            return Err(SimError::AddressOutOfRange {
                addr,
                capacity,
                context: format!(" ({} line {})", name.display(), line),
            });
        }
        Ok(Some(MemOp {
            addr: align_down(addr),
            access,
        }))
    }
}

/// The longest address-trace line read (comments included).
const MAX_LINE_BYTES: usize = 1 << 16;

/// `s` for a message: control characters escaped, and cut after 60
/// characters (the length said).
fn excerpt(s: &str) -> String {
    let n = s.chars().count();
    let shown: String = s.chars().take(60).flat_map(char::escape_debug).collect();
    if n > 60 {
        format!("{shown}... ({n} characters)")
    } else {
        shown
    }
}

/// Reads the plain form of an address-trace line: optional blanks, an
/// address (decimal, or hexadecimal after `0x`/`0X`) that fits 64 bits, one
/// or more blanks, an operation (`R`, `W`, `RD`, `WR`, `READ`, `WRITE`, any
/// case), optional blanks and the line end; blanks are spaces and tabs. `None`
/// for any other line, which [`AddressTrace::parse_line_general`] then reads.
#[inline]
fn parse_plain(b: &[u8]) -> Option<(u64, Access)> {
    let mut end = b.len();
    while end > 0 && matches!(b[end - 1], b' ' | b'\t' | b'\r' | b'\n') {
        end -= 1;
    }
    let b = &b[..end];
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t') {
        i += 1;
    }
    let start;
    let mut addr = 0u64;
    if b.len() - i > 2 && b[i] == b'0' && b[i + 1] | 0x20 == b'x' {
        i += 2;
        start = i;
        while i < b.len() {
            let d = match b[i] {
                c @ b'0'..=b'9' => c - b'0',
                c @ (b'a'..=b'f' | b'A'..=b'F') => (c | 0x20) - b'a' + 10,
                _ => break,
            };
            if addr >> 60 != 0 {
                return None;
            }
            addr = addr << 4 | d as u64;
            i += 1;
        }
    } else {
        start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            addr = addr.checked_mul(10)?.checked_add((b[i] - b'0') as u64)?;
            i += 1;
        }
    }
    if i == start {
        return None;
    }
    let blanks = i;
    while i < b.len() && matches!(b[i], b' ' | b'\t') {
        i += 1;
    }
    if i == blanks {
        return None;
    }
    let op = &b[i..];
    let access = if op.eq_ignore_ascii_case(b"R")
        || op.eq_ignore_ascii_case(b"RD")
        || op.eq_ignore_ascii_case(b"READ")
    {
        Access::Read
    } else if op.eq_ignore_ascii_case(b"W")
        || op.eq_ignore_ascii_case(b"WR")
        || op.eq_ignore_ascii_case(b"WRITE")
    {
        Access::Write
    } else {
        return None;
    };
    Some((addr, access))
}

impl Iterator for AddressTrace {
    type Item = Result<MemOp, SimError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let result = match self.reader.fill_buf() {
                Ok([]) => {
                    self.done = true;
                    None
                }
                // A whole line in the reader's buffer: parsed where it lies.
                Ok(buf) => match buf.iter().position(|&b| b == b'\n') {
                    Some(end) => {
                        self.line += 1;
                        let r =
                            Self::parse_line(&self.name, self.line, self.capacity, &buf[..=end]);
                        self.reader.consume(end + 1);
                        r.transpose()
                    }
                    None => self.next_split_line(),
                },
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => Some(Err(SimError::io(&self.name, e))),
            };
            match result {
                None => {}
                Some(Ok(op)) => return Some(Ok(op)),
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

impl AddressTrace {
    /// A line that runs past the end of the reader's buffer, or the last line
    /// without a newline: gathered into `buf` first.
    #[cold]
    fn next_split_line(&mut self) -> Option<Result<MemOp, SimError>> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        // (At most one byte past the longest line: a file without line ends
        // is an error, not a line as long as the file.)
        let mut limited = std::io::Read::take(&mut *self.reader, MAX_LINE_BYTES as u64 + 1);
        let result = match limited.read_until(b'\n', &mut buf) {
            Ok(0) => {
                self.done = true;
                None
            }
            Ok(n) if n > MAX_LINE_BYTES => {
                self.line += 1;
                Some(Err(SimError::parse(
                    &self.name,
                    self.line,
                    format!(
                        "line is longer than {MAX_LINE_BYTES} bytes; {ADDR_FORMS}, found \"{}...\"",
                        String::from_utf8_lossy(&buf[..40])
                            .chars()
                            .flat_map(char::escape_debug)
                            .collect::<String>()
                    ),
                )))
            }
            Ok(_) => {
                self.line += 1;
                Self::parse_line(&self.name, self.line, self.capacity, &buf).transpose()
            }
            Err(e) => Some(Err(SimError::io(&self.name, e))),
        };
        self.buf = buf;
        result
    }
}

impl std::iter::FusedIterator for AddressTrace {}

/// Writes `ops` as an address trace (`0x<hex> R|W`, one per line) that
/// [`AddressTrace`] reads back unchanged. Returns the number of lines written.
pub fn write_address_trace(
    ops: impl IntoIterator<Item = MemOp>,
    out: impl Write,
) -> std::io::Result<u64> {
    let mut out = BufWriter::new(out);
    let mut n = 0u64;
    for op in ops {
        let c = match op.access {
            Access::Read => 'R',
            Access::Write => 'W',
        };
        writeln!(out, "{:#x} {c}", op.addr)?;
        n += 1;
    }
    out.flush()?;
    Ok(n)
}

// ---------------------------------------------------------------------------
// Embedding traces
// ---------------------------------------------------------------------------

/// Which pass of embedding training an [`EmbeddingRequests`] stream replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingPhase {
    /// The forward gather: every lookup reads its row.
    Forward,
    /// The sparse update: every unique row of a batch is read and written back.
    Update,
    /// Forward then update, batch by batch.
    Both,
}

impl FromStr for EmbeddingPhase {
    type Err = SimError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "forward" => Ok(EmbeddingPhase::Forward),
            "update" => Ok(EmbeddingPhase::Update),
            "both" => Ok(EmbeddingPhase::Both),
            _ => Err(SimError::param(
                "phase",
                format!("`{s}`; expected `forward`, `update` or `both`"),
            )),
        }
    }
}

impl fmt::Display for EmbeddingPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EmbeddingPhase::Forward => "forward",
            EmbeddingPhase::Update => "update",
            EmbeddingPhase::Both => "both",
        })
    }
}

/// Where the embedding tables live in memory: table `t`'s row `r` starts at
/// `table_bases[t] + r * row_bytes`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingLayout {
    /// Elements (f32) per row.
    pub dim: usize,
    /// Where the first table is placed (its base is `base` rounded up to 4096 B).
    pub base: u64,
    /// First byte of each table; each a multiple of 4096.
    pub table_bases: Vec<u64>,
    /// Bytes per row: `dim * 4` rounded up to a multiple of 64.
    pub row_bytes: u64,
    /// Bytes from `base` to the end of the last table.
    pub total_bytes: u64,
}

impl EmbeddingLayout {
    /// Lays out tables of `table_rows` rows each, one after the other from `base`,
    /// every table base aligned up to 4096 B.
    pub fn new(table_rows: &[u64], dim: usize, base: u64) -> Result<Self, SimError> {
        if dim == 0 {
            return Err(SimError::param("dim", "0; expected at least 1"));
        }
        let too_big = || {
            SimError::param(
                "dim / base",
                format!(
                    "dim {dim} from base {base:#x}: the {} tables do not fit in the 64-bit address space",
                    table_rows.len()
                ),
            )
        };
        let row_bytes = (dim as u64)
            .checked_mul(ELEMENT_BYTES)
            .and_then(|b| align_up(b, BURST_BYTES))
            .ok_or_else(too_big)?;
        let mut table_bases = Vec::with_capacity(table_rows.len());
        let mut end = base;
        for &rows in table_rows {
            let tb = align_up(end, TABLE_ALIGN_BYTES).ok_or_else(too_big)?;
            end = rows
                .checked_mul(row_bytes)
                .and_then(|size| tb.checked_add(size))
                .ok_or_else(too_big)?;
            table_bases.push(tb);
        }
        Ok(EmbeddingLayout {
            dim,
            base,
            table_bases,
            row_bytes,
            total_bytes: end - base,
        })
    }

    /// First byte of row `row` of table `table`. Panics if `table` is out of range.
    pub fn row_addr(&self, table: usize, row: u64) -> u64 {
        self.table_bases[table] + row * self.row_bytes
    }

    /// 64 B requests per row.
    pub fn bursts_per_row(&self) -> u64 {
        self.row_bytes / BURST_BYTES
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Forward,
    Update,
}

/// The 64 B requests of an embedding trace, streamed one batch at a time.
///
/// Per batch and table: [`EmbeddingPhase::Forward`] reads every lookup's row
/// (bags in order, each row as `row_bytes / 64` consecutive reads);
/// [`EmbeddingPhase::Update`] takes each unique row in ascending order and reads
/// it, then writes it back. [`EmbeddingPhase::Both`] does a batch's forward pass
/// for all tables, then its update pass. The first error ends the iteration.
pub struct EmbeddingRequests {
    reader: TraceReader,
    layout: EmbeddingLayout,
    phase: EmbeddingPhase,
    max_batches: Option<u64>,
    batches: u64,
    batch: Option<Batch>,
    pos: Position,
    done: bool,
}

/// Where an [`EmbeddingRequests`] stream is within its current batch.
#[derive(Debug, Default)]
struct Position {
    /// Stage of the current batch; `None` when it is used up.
    stage: Option<Stage>,
    table: usize,
    /// Lookup (forward) or unique-row (update) position within the table.
    item: usize,
    /// Burst within the row: `0..bursts` (forward), `0..2 * bursts` (update).
    burst: u64,
    /// The sorted unique rows of the current table (update stage).
    unique: Vec<u32>,
    unique_ready: bool,
}

impl Position {
    fn start_table(&mut self, table: usize) {
        self.table = table;
        self.item = 0;
        self.burst = 0;
        self.unique_ready = false;
    }
}

impl fmt::Debug for EmbeddingRequests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddingRequests")
            .field("path", &self.reader.path())
            .field("layout", &self.layout)
            .field("phase", &self.phase)
            .field("batches", &self.batches)
            .finish_non_exhaustive()
    }
}

impl EmbeddingRequests {
    /// Opens the trace at `path` with `dim`-element f32 rows laid out from `base`
    /// (see [`EmbeddingLayout`]), checks the tables fit in `capacity_bytes`, and
    /// replays `phase` for at most `max_batches` batches (all when `None`).
    pub fn open(
        path: &Path,
        dim: usize,
        base: u64,
        phase: EmbeddingPhase,
        capacity_bytes: u64,
        max_batches: Option<u64>,
    ) -> Result<Self, SimError> {
        let reader = TraceReader::open(path)?;
        let layout =
            EmbeddingLayout::new(&reader.header().table_rows, dim, base).map_err(|e| match e {
                SimError::Param { name, what } => SimError::Param {
                    name,
                    what: format!("{what} (the tables of {})", path.display()),
                },
                e => e,
            })?;
        let end = base.checked_add(layout.total_bytes);
        if end.is_none_or(|e| e > capacity_bytes) {
            return Err(SimError::AddressOutOfRange {
                addr: end.map_or(u64::MAX, |e| e.saturating_sub(1).max(base)),
                capacity: capacity_bytes,
                context: format!(
                    " (embedding tables of {}: {} tables of dim {dim} need {} bytes from base {base:#x})",
                    path.display(),
                    layout.table_bases.len(),
                    layout.total_bytes
                ),
            });
        }
        Ok(EmbeddingRequests {
            reader,
            layout,
            phase,
            max_batches,
            batches: 0,
            batch: None,
            pos: Position::default(),
            done: false,
        })
    }

    pub fn layout(&self) -> &EmbeddingLayout {
        &self.layout
    }

    pub fn phase(&self) -> EmbeddingPhase {
        self.phase
    }

    /// Batches started so far.
    pub fn batches_read(&self) -> u64 {
        self.batches
    }

    /// The next request of the current batch, if any is left.
    fn next_in_batch(&mut self) -> Option<MemOp> {
        let batch = self.batch.as_ref()?;
        let layout = &self.layout;
        let p = &mut self.pos;
        let bursts = layout.bursts_per_row();
        loop {
            let stage = p.stage?;
            let Some(tb) = batch.tables.get(p.table) else {
                p.stage = match (stage, self.phase) {
                    (Stage::Forward, EmbeddingPhase::Both) => Some(Stage::Update),
                    _ => None,
                };
                p.start_table(0);
                continue;
            };
            match stage {
                Stage::Forward => {
                    let Some(&row) = tb.indices.get(p.item) else {
                        p.start_table(p.table + 1);
                        continue;
                    };
                    let addr = layout.row_addr(p.table, u64::from(row)) + p.burst * BURST_BYTES;
                    p.burst += 1;
                    if p.burst == bursts {
                        p.burst = 0;
                        p.item += 1;
                    }
                    return Some(MemOp::read(addr));
                }
                Stage::Update => {
                    if !p.unique_ready {
                        p.unique.clear();
                        p.unique.extend_from_slice(&tb.indices);
                        p.unique.sort_unstable();
                        p.unique.dedup();
                        p.unique_ready = true;
                    }
                    let Some(&row) = p.unique.get(p.item) else {
                        p.start_table(p.table + 1);
                        continue;
                    };
                    let b = p.burst;
                    let addr =
                        layout.row_addr(p.table, u64::from(row)) + (b % bursts) * BURST_BYTES;
                    p.burst += 1;
                    if p.burst == 2 * bursts {
                        p.burst = 0;
                        p.item += 1;
                    }
                    return Some(if b < bursts {
                        MemOp::read(addr)
                    } else {
                        MemOp::write(addr)
                    });
                }
            }
        }
    }

    /// Loads the next batch; `Ok(false)` at the end of the trace or batch limit.
    fn load_batch(&mut self) -> Result<bool, SimError> {
        self.batch = None;
        if self.max_batches.is_some_and(|m| self.batches >= m) {
            // (Stopping at the trace's last batch still verifies it whole.)
            self.reader.verify_if_at_end()?;
            return Ok(false);
        }
        let Some(batch) = self.reader.next().transpose()? else {
            return Ok(false);
        };
        // The reader checks batches against the header the layout was built from;
        // this guards the layout's assumptions should that ever change.
        let rows = &self.reader.header().table_rows;
        if batch.tables.len() != rows.len()
            || batch.tables.iter().zip(rows).any(|(t, &r)| t.num_rows != r)
        {
            return Err(SimError::Trace(TraceError::Format {
                path: self.reader.path().to_path_buf(),
                what: format!(
                    "batch {}: table shapes differ from the trace header",
                    self.batches
                ),
            }));
        }
        self.batches += 1;
        self.batch = Some(batch);
        self.pos.stage = Some(match self.phase {
            EmbeddingPhase::Forward | EmbeddingPhase::Both => Stage::Forward,
            EmbeddingPhase::Update => Stage::Update,
        });
        self.pos.start_table(0);
        Ok(true)
    }
}

impl Iterator for EmbeddingRequests {
    type Item = Result<MemOp, SimError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            if let Some(op) = self.next_in_batch() {
                return Some(Ok(op));
            }
            match self.load_batch() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl std::iter::FusedIterator for EmbeddingRequests {}

#[cfg(test)]
mod tests {
    use super::*;
    use nmpsim_traces::{TableBatch, TraceHeader, TraceWriter};
    use proptest::prelude::*;
    use std::io::Cursor;

    /// What a line gives, errors included, as text (errors are not `PartialEq`).
    fn outcome(r: Result<Option<MemOp>, SimError>) -> String {
        match r {
            Ok(op) => format!("{op:?}"),
            Err(e) => format!("error: {e}"),
        }
    }

    fn both_parsers(line: &str) -> (String, String) {
        let (name, cap, raw) = (Path::new("t.txt"), 1 << 34, line.as_bytes());
        (
            outcome(AddressTrace::parse_line(name, 7, cap, raw)),
            outcome(AddressTrace::parse_line_general(name, 7, cap, raw)),
        )
    }

    #[test]
    fn the_plain_line_parser_reads_what_the_general_one_reads() {
        for line in [
            "0x40 R\n",
            "0X1F4c0 w\r\n",
            "  64\tREAD  \n",
            "128 write",
            "0x0000000000000000040 Rd\n",
            "18446744073709551615 R\n",
            "18446744073709551616 R\n",
            "0xffffffffffffffff W\n",
            "0x1ffffffffffffffff W\n",
            "0x400000000 R\n",
            "0x R\n",
            "0xg R\n",
            "00x5 R\n",
            "0x40\n",
            "0x40 R W\n",
            "0x40 X\n",
            "0x40 RE\n",
            "0x40 R # comment\n",
            "0x40,R\n",
            "# only a comment\n",
            "\n",
            "   \t \n",
            "0x40\u{a0}R\n",
            "-64 R\n",
            "+64 R\n",
            "0x40 READS\n",
        ] {
            let (plain, general) = both_parsers(line);
            assert_eq!(plain, general, "{line:?}");
        }
        // The plain parser does take the usual forms.
        for (line, addr, access) in [
            ("0x40 R\n", 0x40, Access::Read),
            ("0X1F4c0 w\r\n", 0x1f4c0, Access::Write),
            ("  64\tREAD  \n", 64, Access::Read),
            ("0xffffffffffffffff wr", u64::MAX, Access::Write),
        ] {
            assert_eq!(
                parse_plain(line.as_bytes()),
                Some((addr, access)),
                "{line:?}"
            );
        }
        for line in [
            "0x40 R # c",
            "0x40,R",
            "0x1ffffffffffffffff W",
            "0x40 X",
            "",
        ] {
            assert_eq!(parse_plain(line.as_bytes()), None, "{line:?}");
        }
    }

    proptest! {
        #[test]
        fn plain_and_general_parsers_agree_on_any_line(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just(" "), Just("\t"), Just("0x"), Just("0X"), Just("0"), Just("7"),
                    Just("f"), Just("F"), Just("123456789"), Just("ffffffffffffffff"),
                    Just("R"), Just("w"), Just("read"), Just("WRITE"), Just("Rd"), Just("wr"),
                    Just("#"), Just(","), Just("\r"), Just("x"), Just("\u{a0}"), Just("-"),
                ],
                0..8,
            ),
        ) {
            let line = parts.concat() + "\n";
            let (plain, general) = both_parsers(&line);
            prop_assert_eq!(plain, general, "{:?}", line);
        }
    }

    const CAP: u64 = 1 << 30;

    fn spec(kind: StreamKind, requests: u64) -> StreamSpec {
        StreamSpec::new(kind, requests)
    }

    fn addrs(s: SyntheticStream) -> Vec<u64> {
        s.map(|op| op.addr).collect()
    }

    #[test]
    fn stream_kinds_parse_and_print() {
        assert_eq!(
            "sequential".parse::<StreamKind>().unwrap(),
            StreamKind::Sequential
        );
        assert_eq!("SEQ".parse::<StreamKind>().unwrap(), StreamKind::Sequential);
        assert_eq!("rand".parse::<StreamKind>().unwrap(), StreamKind::Random);
        assert_eq!(
            "strided:4096".parse::<StreamKind>().unwrap(),
            StreamKind::Strided { stride_bytes: 4096 }
        );
        assert_eq!(
            "strided:0x80".parse::<StreamKind>().unwrap(),
            StreamKind::Strided { stride_bytes: 128 }
        );
        for k in [
            StreamKind::Sequential,
            StreamKind::Random,
            StreamKind::Strided { stride_bytes: 192 },
        ] {
            assert_eq!(k.to_string().parse::<StreamKind>().unwrap(), k);
        }
        for bad in [
            "zigzag",
            "strided:100",
            "strided:0",
            "strided:",
            "strided:x",
        ] {
            let e = bad.parse::<StreamKind>().unwrap_err().to_string();
            assert!(
                e.contains("sequential") && e.contains("strided:BYTES"),
                "{e}"
            );
        }
        let json = serde_json::to_string(&StreamKind::Strided { stride_bytes: 64 }).unwrap();
        assert_eq!(json, r#"{"kind":"strided","stride_bytes":64}"#);
    }

    #[test]
    fn sequential_walks_lines_and_wraps() {
        let mut s = spec(StreamKind::Sequential, 10);
        s.base = 4096;
        s.footprint_bytes = Some(4 * 64);
        let st = synthetic(&s, CAP).unwrap();
        assert_eq!(st.len(), 10);
        let got = addrs(st);
        let want: Vec<u64> = (0..10).map(|i| 4096 + (i % 4) * 64).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn strided_wraps_modulo_footprint() {
        let mut s = spec(StreamKind::Strided { stride_bytes: 192 }, 8);
        s.base = 1024;
        s.footprint_bytes = Some(512);
        let got = addrs(synthetic(&s, CAP).unwrap());
        // Offsets 0, 192, 384, 576 % 512 = 64, 256, 448, 640 % 512 = 128, 320.
        let want: Vec<u64> = [0, 192, 384, 64, 256, 448, 128, 320]
            .iter()
            .map(|o| 1024 + o)
            .collect();
        assert_eq!(got, want);
        // A stride larger than the footprint is taken modulo the footprint.
        s.kind = StreamKind::Strided {
            stride_bytes: 512 + 64,
        };
        let got = addrs(synthetic(&s, CAP).unwrap());
        assert_eq!(got[..3], [1024, 1088, 1152]);
        // Defaults: the whole memory from base, wrapping at the capacity.
        let mut s = spec(
            StreamKind::Strided {
                stride_bytes: 1 << 20,
            },
            6,
        );
        s.base = 0;
        let got = addrs(synthetic(&s, 4 << 20).unwrap());
        assert_eq!(got, [0, 1 << 20, 2 << 20, 3 << 20, 0, 1 << 20]);
    }

    #[test]
    fn random_is_in_range_reproducible_and_seeded() {
        let mut s = spec(StreamKind::Random, 5000);
        s.base = 64 * 100;
        s.footprint_bytes = Some(64 * 37);
        let a = addrs(synthetic(&s, CAP).unwrap());
        assert!(
            a.iter()
                .all(|&x| x % 64 == 0 && (6400..6400 + 64 * 37).contains(&x))
        );
        // Every one of the 37 lines is hit over 5000 draws.
        let mut lines: Vec<u64> = a.clone();
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(lines.len(), 37);
        assert_eq!(a, addrs(synthetic(&s, CAP).unwrap()));
        let mut other = s.clone();
        other.seed = 1;
        assert_ne!(a, addrs(synthetic(&other, CAP).unwrap()));
        // The address sequence does not depend on the write fraction.
        let mut w = s.clone();
        w.write_fraction = 0.5;
        let ops: Vec<MemOp> = synthetic(&w, CAP).unwrap().collect();
        assert_eq!(a, ops.iter().map(|o| o.addr).collect::<Vec<_>>());
        assert!(ops.iter().any(|o| o.access == Access::Write));
    }

    #[test]
    fn write_fraction_is_respected() {
        for f in [0.0, 0.3, 1.0] {
            let mut s = spec(StreamKind::Sequential, 100_000);
            s.write_fraction = f;
            s.seed = 7;
            let writes = synthetic(&s, CAP)
                .unwrap()
                .filter(|o| o.access.is_write())
                .count();
            let frac = writes as f64 / 100_000.0;
            assert!((frac - f).abs() < 0.01, "asked {f}, got {frac}");
        }
    }

    #[test]
    fn stream_specs_are_validated() {
        let field = |s: &StreamSpec, cap: u64| match synthetic(s, cap).unwrap_err() {
            SimError::Param { name, .. } => name,
            other => panic!("{other}"),
        };
        let ok = spec(StreamKind::Sequential, 1);
        assert_eq!(
            field(
                &StreamSpec {
                    requests: 0,
                    ..ok.clone()
                },
                CAP
            ),
            "requests"
        );
        for f in [-0.1, 1.5, f64::NAN] {
            let s = StreamSpec {
                write_fraction: f,
                ..ok.clone()
            };
            assert_eq!(field(&s, CAP), "write_fraction");
        }
        assert_eq!(
            field(
                &StreamSpec {
                    base: 32,
                    ..ok.clone()
                },
                CAP
            ),
            "base"
        );
        assert_eq!(
            field(
                &StreamSpec {
                    base: CAP,
                    ..ok.clone()
                },
                CAP
            ),
            "base"
        );
        let fp = |f: u64, base: u64| StreamSpec {
            footprint_bytes: Some(f),
            base,
            ..ok.clone()
        };
        assert_eq!(field(&fp(0, 0), CAP), "footprint_bytes");
        assert_eq!(field(&fp(100, 0), CAP), "footprint_bytes");
        assert_eq!(field(&fp(CAP, 64), CAP), "footprint_bytes");
        assert!(synthetic(&fp(CAP - 64, 64), CAP).is_ok());
        // Less than one line left between base and capacity.
        assert_eq!(
            field(
                &StreamSpec {
                    base: 64,
                    ..ok.clone()
                },
                100
            ),
            "footprint_bytes"
        );
        let s = spec(StreamKind::Strided { stride_bytes: 96 }, 1);
        assert_eq!(field(&s, CAP), "stride_bytes");
    }

    fn trace(text: &str, cap: u64) -> Vec<Result<MemOp, SimError>> {
        AddressTrace::from_reader("trace.txt", Cursor::new(text.to_string()), cap).collect()
    }

    fn ok_ops(text: &str) -> Vec<MemOp> {
        trace(text, CAP)
            .into_iter()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn err_of(text: &str, cap: u64) -> String {
        let got = trace(text, cap);
        let e = got.last().unwrap().as_ref().unwrap_err().to_string();
        assert!(got[..got.len() - 1].iter().all(Result::is_ok));
        e
    }

    #[test]
    fn address_traces_parse_all_accepted_forms() {
        let text = "# header comment\n\
                    \n\
                    0x40 R\n\
                    128 w   # trailing comment\n\
                    0X1000,READ\n\
                    \t 4096 ,  write \r\n\
                    0xC0\trd\n\
                    100 WR\n\
                       # indented comment\n\
                    0x0 r";
        assert_eq!(
            ok_ops(text),
            vec![
                MemOp::read(0x40),
                MemOp::write(128),
                MemOp::read(0x1000),
                MemOp::write(4096),
                MemOp::read(0xC0),
                MemOp::write(64), // 100 aligned down
                MemOp::read(0),
            ]
        );
        assert!(ok_ops("").is_empty());
        assert!(ok_ops("# nothing\n\n").is_empty());
        // A UTF-8 byte order mark before the first line is skipped (also
        // before a comment, and on a last line without a newline) ...
        assert_eq!(
            ok_ops("\u{feff}0x40 R\n0x80 W\n"),
            ok_ops("0x40 R\n0x80 W\n")
        );
        assert_eq!(ok_ops("\u{feff}# c\n0x40 R"), vec![MemOp::read(0x40)]);
        assert_eq!(ok_ops("\u{feff}0x40 R"), vec![MemOp::read(0x40)]);
        // ... but not elsewhere.
        let e = err_of("0x40 R\n\u{feff}0x80 W\n", CAP);
        assert!(e.starts_with("trace.txt: line 2: "), "{e}");
    }

    #[test]
    fn address_trace_errors_name_file_line_and_expectation() {
        let e = err_of(
            "0x0 R\n\n# c\n0x40 R\n0x80 W\n0xc0 R\n0x40 X\n0x80 R\n",
            CAP,
        );
        assert!(
            e.starts_with(r#"trace.txt: line 7: expected "ADDRESS R|W", found "0x40 X""#),
            "{e}"
        );
        assert!(e.contains("operation \"X\""), "{e}");
        let e = err_of("0x40\n", CAP);
        assert_eq!(
            e,
            r#"trace.txt: line 1: expected "ADDRESS R|W", found "0x40""#
        );
        let e = err_of("0x40 R W\n", CAP);
        assert!(e.starts_with("trace.txt: line 1: expected"), "{e}");
        let e = err_of("0x40,,R\n", CAP);
        assert!(e.starts_with("trace.txt: line 1: expected"), "{e}");
        let e = err_of("0x40 R\n0xZZ R\n", CAP);
        assert!(
            e.starts_with("trace.txt: line 2: expected") && e.contains("\"0xZZ\""),
            "{e}"
        );
        let e = err_of("-4 R\n", CAP);
        assert!(e.contains("line 1"), "{e}");
        let e = err_of("99999999999999999999999 R\n", CAP);
        assert!(e.contains("line 1") && e.contains("64-bit"), "{e}");
        // Out of range: the address, the capacity and where it came from.
        let got = trace("0 R\n# x\n4096 W\n", 4096);
        match got.last().unwrap() {
            Err(SimError::AddressOutOfRange {
                addr,
                capacity,
                context,
            }) => {
                assert_eq!((*addr, *capacity), (4096, 4096));
                assert_eq!(context, " (trace.txt line 3)");
            }
            other => panic!("{other:?}"),
        }
        assert!(trace("4095 W\n", 4096)[0].is_ok());
        // The first error ends the stream.
        assert_eq!(trace("1 X\n0 R\n", CAP).len(), 1);
        // Bytes that are not UTF-8.
        let mut it = AddressTrace::from_reader("b.txt", Cursor::new(vec![0xff, b'\n']), CAP);
        let e = it.next().unwrap().unwrap_err().to_string();
        assert!(e.starts_with("b.txt: line 1:"), "{e}");
        assert!(it.next().is_none());
        // A binary embedding trace given as an address trace.
        let mut bin = nmpsim_traces::format::MAGIC.to_vec();
        bin.extend([0u8, 1, 2, 0xff, b'\n']);
        let mut it = AddressTrace::from_reader("t.nmpt", Cursor::new(bin), CAP);
        let e = it.next().unwrap().unwrap_err().to_string();
        assert!(
            e.contains("t.nmpt: line 1:") && e.contains("--embedding-trace"),
            "{e}"
        );
        // A line beyond the limit (a file without line ends, say) is an
        // error, read no further than the limit; messages quote a short,
        // escaped excerpt.
        let mut long = b"0x0 R\n".to_vec();
        long.extend(std::iter::repeat_n(b'1', 3 * MAX_LINE_BYTES));
        let mut it = AddressTrace::from_reader("l.txt", Cursor::new(long), CAP);
        assert!(it.next().unwrap().is_ok());
        let e = it.next().unwrap().unwrap_err().to_string();
        assert!(
            e.starts_with("l.txt: line 2: line is longer than 65536 bytes") && e.len() < 200,
            "{e}"
        );
        let e = err_of(&format!("0x{} R\n", "f".repeat(500)), CAP);
        assert!(e.contains("... (") && e.len() < 400, "{e}");
        let e = err_of("0x1\u{1b}[31m R\n", CAP);
        assert!(e.contains(r"0x1\u{1b}[31m") && !e.contains('\u{1b}'), "{e}");
    }

    #[test]
    fn lines_across_the_readers_buffer_read_the_same() {
        let text =
            "# c\n0x40 R\n\n 128 w # x\n0X1000,READ\n0x3fffffc0 WRITE\r\n4096 R\n0x40 X\n0x80 R\n";
        let outcome = |it: AddressTrace| -> Vec<String> {
            it.map(|r| match r {
                Ok(op) => format!("{op:?}"),
                Err(e) => e.to_string(),
            })
            .collect()
        };
        let whole = outcome(AddressTrace::from_reader(
            "t.txt",
            Cursor::new(text.to_string()),
            CAP,
        ));
        assert_eq!(whole.len(), 6, "{whole:?}");
        assert!(whole[5].starts_with("t.txt: line 8:"), "{whole:?}");
        // Buffers from one byte up: lines split at every position.
        for cap in 1..=24 {
            let r = std::io::BufReader::with_capacity(cap, Cursor::new(text.to_string()));
            let got = outcome(AddressTrace::from_reader("t.txt", r, CAP));
            assert_eq!(got, whole, "buffer of {cap} bytes");
        }
        // The last line without a newline.
        let r = std::io::BufReader::with_capacity(4, Cursor::new("0x40 R\n0x80 W".to_string()));
        let got = outcome(AddressTrace::from_reader("t.txt", r, CAP));
        assert_eq!(
            got,
            [
                "MemOp { addr: 64, access: Read }",
                "MemOp { addr: 128, access: Write }"
            ]
        );
    }

    #[test]
    fn address_traces_round_trip_and_open_files() {
        let mut s = spec(StreamKind::Random, 500);
        s.write_fraction = 0.4;
        s.seed = 3;
        let ops: Vec<MemOp> = synthetic(&s, CAP).unwrap().collect();
        let mut out = Vec::new();
        assert_eq!(
            write_address_trace(ops.iter().copied(), &mut out).unwrap(),
            500
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("0x"));
        assert_eq!(ok_ops(&text), ops);

        let dir = tmpdir("addr");
        let path = dir.join("t.trace");
        std::fs::write(&path, &text).unwrap();
        let read: Vec<MemOp> = AddressTrace::open(&path, CAP)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(read, ops);
        let missing = dir.join("missing.trace");
        let e = AddressTrace::open(&missing, CAP).unwrap_err();
        assert!(matches!(e, SimError::Io { .. }), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tmpdir(name: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let d = std::env::temp_dir().join(format!(
            "nmpsim-source-{name}-{}-{nanos}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn embedding_layout_aligns_tables_and_rows() {
        let l = EmbeddingLayout::new(&[3, 100, 0, 2], 20, 100).unwrap();
        assert_eq!(l.row_bytes, 128); // 80 B rounded up to 64 B
        assert_eq!(l.bursts_per_row(), 2);
        // 4096 + 3*128 = 4480 -> 8192; 8192 + 100*128 = 20992 -> 24576; empty table.
        assert_eq!(l.table_bases, vec![4096, 8192, 24576, 24576]);
        assert_eq!(l.total_bytes, 24576 + 2 * 128 - 100);
        assert_eq!(l.row_addr(1, 5), 8192 + 5 * 128);
        let l = EmbeddingLayout::new(&[1], 16, 0).unwrap();
        assert_eq!((l.row_bytes, l.table_bases[0], l.total_bytes), (64, 0, 64));
        let l = EmbeddingLayout::new(&[1], 1, 8192).unwrap();
        assert_eq!((l.row_bytes, l.table_bases[0]), (64, 8192));
        assert!(matches!(
            EmbeddingLayout::new(&[1], 0, 0),
            Err(SimError::Param { ref name, .. }) if name == "dim"
        ));
        assert!(EmbeddingLayout::new(&[u64::MAX / 2], 64, 0).is_err());
        // A base near the top names the base beside the dim.
        let e = EmbeddingLayout::new(&[26], 16, u64::MAX - 615).unwrap_err();
        assert!(
            e.to_string().contains("dim / base") && e.to_string().contains("from base 0x"),
            "{e}"
        );
    }

    /// Two tables (5 and 3 rows), two batches.
    fn write_nmpt(path: &Path) {
        let b0 = Batch {
            tables: vec![
                TableBatch::new(5, vec![0, 2, 3], vec![4, 1, 4], None).unwrap(),
                TableBatch::new(3, vec![0, 1, 1], vec![2], Some(vec![0.5])).unwrap(),
            ],
            dense: None,
            num_dense: 0,
            labels: None,
        };
        let b1 = Batch {
            tables: vec![
                TableBatch::new(5, vec![0, 1], vec![0], None).unwrap(),
                TableBatch::new(3, vec![0, 0], vec![], Some(vec![])).unwrap(),
            ],
            dense: None,
            num_dense: 0,
            labels: None,
        };
        let mut w = TraceWriter::create(path, TraceHeader::for_batch(&b0, "")).unwrap();
        w.write_batch(&b0).unwrap();
        w.write_batch(&b1).unwrap();
        w.finish().unwrap();
    }

    fn collect(path: &Path, phase: EmbeddingPhase, max: Option<u64>) -> Vec<MemOp> {
        EmbeddingRequests::open(path, 32, 0, phase, CAP, max)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn embedding_traces_become_row_requests() {
        let dir = tmpdir("emb");
        let path = dir.join("t.nmpt");
        write_nmpt(&path);
        // dim 32: 128 B rows (two bursts); table 0 at 0 (5 rows = 640 B), table 1 at 4096.
        let reqs =
            EmbeddingRequests::open(&path, 32, 0, EmbeddingPhase::Forward, CAP, None).unwrap();
        assert_eq!(reqs.layout().table_bases, vec![0, 4096]);
        assert_eq!(reqs.layout().total_bytes, 4096 + 3 * 128);
        let t0 = |r: u64| r * 128;
        let t1 = |r: u64| 4096 + r * 128;
        let rd = |a: u64| vec![MemOp::read(a), MemOp::read(a + 64)];
        let rmw = |a: u64| {
            vec![
                MemOp::read(a),
                MemOp::read(a + 64),
                MemOp::write(a),
                MemOp::write(a + 64),
            ]
        };
        let fwd0: Vec<MemOp> = [t0(4), t0(1), t0(4), t1(2)]
            .into_iter()
            .flat_map(rd)
            .collect();
        let fwd1: Vec<MemOp> = rd(t0(0));
        let upd0: Vec<MemOp> = [t0(1), t0(4), t1(2)].into_iter().flat_map(rmw).collect();
        let upd1: Vec<MemOp> = rmw(t0(0));

        assert_eq!(
            collect(&path, EmbeddingPhase::Forward, None),
            [fwd0.clone(), fwd1.clone()].concat()
        );
        assert_eq!(
            collect(&path, EmbeddingPhase::Update, None),
            [upd0.clone(), upd1.clone()].concat()
        );
        assert_eq!(
            collect(&path, EmbeddingPhase::Both, None),
            [fwd0.clone(), upd0.clone(), fwd1, upd1].concat()
        );
        assert_eq!(
            collect(&path, EmbeddingPhase::Both, Some(1)),
            [fwd0, upd0].concat()
        );
        assert!(collect(&path, EmbeddingPhase::Forward, Some(0)).is_empty());

        // A base is rounded up to the table alignment.
        let reqs =
            EmbeddingRequests::open(&path, 32, 100, EmbeddingPhase::Forward, CAP, None).unwrap();
        assert_eq!(reqs.layout().table_bases, vec![4096, 8192]);

        // Tables that do not fit the capacity.
        let e =
            EmbeddingRequests::open(&path, 32, 0, EmbeddingPhase::Forward, 4096, None).unwrap_err();
        match &e {
            SimError::AddressOutOfRange {
                context, capacity, ..
            } => {
                assert_eq!(*capacity, 4096);
                assert!(
                    context.contains("t.nmpt") && context.contains("4480 bytes"),
                    "{e}"
                );
            }
            other => panic!("{other}"),
        }
        assert!(
            EmbeddingRequests::open(&path, 32, 0, EmbeddingPhase::Forward, 4096 + 384, None)
                .is_ok()
        );
        assert!(matches!(
            EmbeddingRequests::open(&path, 0, 0, EmbeddingPhase::Forward, CAP, None),
            Err(SimError::Param { .. })
        ));
        assert!(matches!(
            EmbeddingRequests::open(
                &dir.join("none.nmpt"),
                32,
                0,
                EmbeddingPhase::Forward,
                CAP,
                None
            ),
            Err(SimError::Trace(_))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn phases_parse() {
        for p in [
            EmbeddingPhase::Forward,
            EmbeddingPhase::Update,
            EmbeddingPhase::Both,
        ] {
            assert_eq!(p.to_string().parse::<EmbeddingPhase>().unwrap(), p);
        }
        let e = "backward"
            .parse::<EmbeddingPhase>()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("forward") && e.contains("update") && e.contains("both"),
            "{e}"
        );
        assert_eq!(
            serde_json::to_string(&EmbeddingPhase::Both).unwrap(),
            "\"both\""
        );
    }
}
