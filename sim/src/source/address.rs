//! Address trace files: one `ADDRESS R|W` request per line, read lazily.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::{Access, MemOp, SimError};

use super::{align_down, parse_u64};

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
    pub(super) fn parse_line(
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
    pub(super) fn parse_line_general(
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
pub(super) const MAX_LINE_BYTES: usize = 1 << 16;

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
pub(super) fn parse_plain(b: &[u8]) -> Option<(u64, Access)> {
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
