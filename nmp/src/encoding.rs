//! The binary encoding of NMP instructions: what travels over the host link
//! and what an instruction stream file holds.
//!
//! Every instruction is a 16-byte header followed by a body; everything is
//! little-endian. The header carries the instruction's total length, so a
//! reader can skip an instruction without understanding its body, and a stream
//! is simply instructions back to back. The full layout is in `docs/nmp-isa.md`:
//!
//! ```text
//! offset  size  field
//! 0       1     opcode (u8): 0xA1 gather-reduce, 0xA2 load-gradient,
//!               0xA3 casted-gather-reduce, 0xA4 load-coalesced, 0xA5 scatter,
//!               0xA6 gather, 0xA7 tt-gather-reduce, 0xA8 tt-write
//! 1       1     flags (u8): bit 0 = weights / scale present; bit 1 = reuse
//!               (tt-gather-reduce); other bits 0
//! 2       1     kind (u8): pooling (gather-reduce, tt-gather-reduce),
//!               optimizer (scatter), else 0
//! 3       1     reserved (u8) = 0
//! 4       4     table (u32)
//! 8       8     total_length (u64): header and body, in bytes
//! 16      ...   body: u32 / f32 scalars, then arrays as a u32 element count
//!               followed by the elements (u32 or f32, 4 bytes each)
//! ```
//!
//! [`decode`] validates the header and the structure of the body (counts that
//! fit the bytes, array lengths that agree with each other) but not what the
//! values mean: index ranges and CSR offsets are the pool's to check.

use nmpsim_kernels::{Optimizer, Pooling};

use crate::error::NmpError;
use crate::isa::Instruction;

/// Bytes of the fixed header every instruction starts with.
pub const HEADER_BYTES: usize = 16;

/// The high nibble every opcode byte carries, so that zeros or text are not
/// mistaken for instructions.
const OPCODE_MAGIC: u8 = 0xA0;
const OP_GATHER_REDUCE: u8 = OPCODE_MAGIC | 1;
const OP_LOAD_GRADIENT: u8 = OPCODE_MAGIC | 2;
const OP_CASTED_GATHER_REDUCE: u8 = OPCODE_MAGIC | 3;
const OP_LOAD_COALESCED: u8 = OPCODE_MAGIC | 4;
const OP_SCATTER: u8 = OPCODE_MAGIC | 5;
const OP_GATHER: u8 = OPCODE_MAGIC | 6;
const OP_TT_GATHER_REDUCE: u8 = OPCODE_MAGIC | 7;
const OP_TT_WRITE: u8 = OPCODE_MAGIC | 8;

/// Flags bit 0: the optional `weights` (gather-reduce) or `scale`
/// (casted-gather-reduce) array is present.
const FLAG_OPTIONAL: u8 = 1;
/// Flags bit 1: a tt-gather-reduce reuses its prefix products.
const FLAG_REUSE: u8 = 2;

const POOLING_SUM: u8 = 0;
const POOLING_MEAN: u8 = 1;
const POOLING_WEIGHTED_SUM: u8 = 2;

const OPT_SGD: u8 = 0;
const OPT_ADAGRAD: u8 = 1;
const OPT_ROW_WISE_ADAGRAD: u8 = 2;
const OPT_RMS_PROP: u8 = 3;

/// Bytes of one scalar or array element.
const WORD: u64 = 4;

fn opcode(instr: &Instruction) -> u8 {
    match instr {
        Instruction::GatherReduce { .. } => OP_GATHER_REDUCE,
        Instruction::LoadGradient { .. } => OP_LOAD_GRADIENT,
        Instruction::CastedGatherReduce { .. } => OP_CASTED_GATHER_REDUCE,
        Instruction::LoadCoalesced { .. } => OP_LOAD_COALESCED,
        Instruction::Scatter { .. } => OP_SCATTER,
        Instruction::Gather { .. } => OP_GATHER,
        Instruction::TtGatherReduce { .. } => OP_TT_GATHER_REDUCE,
        Instruction::TtWrite { .. } => OP_TT_WRITE,
    }
}

fn op_name(opcode: u8) -> &'static str {
    match opcode {
        OP_GATHER_REDUCE => "gather-reduce",
        OP_LOAD_GRADIENT => "load-gradient",
        OP_CASTED_GATHER_REDUCE => "casted-gather-reduce",
        OP_LOAD_COALESCED => "load-coalesced",
        OP_SCATTER => "scatter",
        OP_GATHER => "gather",
        OP_TT_GATHER_REDUCE => "tt-gather-reduce",
        _ => "tt-write",
    }
}

fn pooling_kind(pooling: Pooling) -> u8 {
    match pooling {
        Pooling::Sum => POOLING_SUM,
        Pooling::Mean => POOLING_MEAN,
        Pooling::WeightedSum => POOLING_WEIGHTED_SUM,
    }
}

fn optimizer_kind(optimizer: &Optimizer) -> u8 {
    match optimizer {
        Optimizer::Sgd { .. } => OPT_SGD,
        Optimizer::Adagrad { .. } => OPT_ADAGRAD,
        Optimizer::RowWiseAdagrad { .. } => OPT_ROW_WISE_ADAGRAD,
        Optimizer::RmsProp { .. } => OPT_RMS_PROP,
    }
}

/// The hyper-parameters of an optimizer, in encoding order.
fn optimizer_params(optimizer: &Optimizer) -> ([f32; 3], usize) {
    match *optimizer {
        Optimizer::Sgd { lr } => ([lr, 0.0, 0.0], 1),
        Optimizer::Adagrad {
            lr,
            eps,
            initial_accumulator,
        } => ([lr, eps, initial_accumulator], 3),
        Optimizer::RowWiseAdagrad { lr, eps } => ([lr, eps, 0.0], 2),
        Optimizer::RmsProp { lr, alpha, eps } => ([lr, alpha, eps], 3),
    }
}

/// Bytes of an array: its u32 count and its elements.
fn array_len(elements: usize) -> u64 {
    WORD + WORD * elements as u64
}

/// Encodes one instruction.
///
/// Refuses (before writing anything) an instruction that [`decode`] would
/// refuse once encoded: see [`check_encodable`].
pub fn encode(instr: &Instruction) -> Result<Vec<u8>, NmpError> {
    let mut out = Vec::new();
    encode_into(instr, &mut out)?;
    Ok(out)
}

/// Appends the encoding of one instruction to `out`; on an error `out` is
/// left as it was.
pub fn encode_into(instr: &Instruction, out: &mut Vec<u8>) -> Result<(), NmpError> {
    check_encodable(instr)?;
    let total = encoded_len(instr);
    let bytes = usize::try_from(total).map_err(|_| NmpError::Malformed {
        op: instr.op(),
        what: format!("its encoding of {total} bytes is larger than the address space"),
    })?;
    out.reserve(bytes);
    write_into(instr, total, out);
    Ok(())
}

/// Writes the encoding of `instr` (`total` bytes, [`encoded_len`]), whose
/// array counts fit their fields, as it is (whether or not [`decode`] would
/// accept it).
fn write_into(instr: &Instruction, total: u64, out: &mut Vec<u8>) {
    let start = out.len();
    let (flags, kind) = match instr {
        Instruction::GatherReduce {
            pooling, weights, ..
        } => (
            if weights.is_some() { FLAG_OPTIONAL } else { 0 },
            pooling_kind(*pooling),
        ),
        Instruction::CastedGatherReduce { scale, .. } => {
            (if scale.is_some() { FLAG_OPTIONAL } else { 0 }, 0)
        }
        Instruction::Scatter { optimizer, .. } => (0, optimizer_kind(optimizer)),
        Instruction::TtGatherReduce { pooling, reuse, .. } => {
            (if *reuse { FLAG_REUSE } else { 0 }, pooling_kind(*pooling))
        }
        Instruction::LoadGradient { .. }
        | Instruction::LoadCoalesced { .. }
        | Instruction::Gather { .. }
        | Instruction::TtWrite { .. } => (0, 0),
    };
    out.extend_from_slice(&[opcode(instr), flags, kind, 0]);
    out.extend_from_slice(&instr.table().to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    body_fields(instr, |field| match field {
        Field::Word(w) => out.extend_from_slice(&w),
        Field::U32s(v) => put_array(out, v.len(), v.iter().map(|x| x.to_le_bytes())),
        Field::F32s(v) => put_array(out, v.len(), v.iter().map(|x| x.to_le_bytes())),
    });
    debug_assert_eq!((out.len() - start) as u64, total);
}

/// Checks what the binary encoding requires of an instruction's fields, the
/// rules [`decode`] enforces: every array's count fits its `u32` field,
/// `weights` has one value per index, `casted_dst` and `scale` one per
/// `casted_src` entry, and gradients split into whole rows (`bags` rows for
/// load-gradient, one per entry of `rows` for load-coalesced). What depends
/// on the pool (tables, row counts, dimensions) is checked when the
/// instruction runs.
pub fn check_encodable(instr: &Instruction) -> Result<(), NmpError> {
    let op = instr.op();
    let malformed = |what: String| Err(NmpError::Malformed { op, what });
    let fits = |field: &str, len: usize| {
        if u32::try_from(len).is_ok() {
            Ok(())
        } else {
            malformed(format!(
                "`{field}` holds {len} values, more than the {} its u32 count can say",
                u32::MAX
            ))
        }
    };
    let same = |field: &str, len: usize, of: &str, want: usize| {
        if len == want {
            Ok(())
        } else {
            malformed(format!(
                "`{field}` holds {len} values but `{of}` holds {want}: one per entry is expected"
            ))
        }
    };
    let whole_rows = |field: &str, len: usize, rows_field: &str, rows: usize| {
        if splits_into_rows(len, rows) {
            Ok(())
        } else {
            malformed(format!(
                "`{field}` holds {len} values, not a whole number of rows for {rows_field} = {rows}"
            ))
        }
    };
    match instr {
        Instruction::GatherReduce {
            offsets,
            indices,
            weights,
            ..
        } => {
            fits("offsets", offsets.len())?;
            fits("indices", indices.len())?;
            if let Some(w) = weights {
                same("weights", w.len(), "indices", indices.len())?;
            }
        }
        Instruction::LoadGradient { bags, grads, .. } => {
            fits("grads", grads.len())?;
            whole_rows("grads", grads.len(), "bags", *bags as usize)?;
        }
        Instruction::CastedGatherReduce {
            casted_src,
            casted_dst,
            unique_rows,
            scale,
            ..
        } => {
            fits("casted_src", casted_src.len())?;
            fits("unique_rows", unique_rows.len())?;
            same(
                "casted_dst",
                casted_dst.len(),
                "casted_src",
                casted_src.len(),
            )?;
            if let Some(s) = scale {
                same("scale", s.len(), "casted_src", casted_src.len())?;
            }
        }
        Instruction::LoadCoalesced { rows, grads, .. } => {
            fits("rows", rows.len())?;
            fits("grads", grads.len())?;
            whole_rows("grads", grads.len(), "the count of `rows`", rows.len())?;
        }
        Instruction::Scatter { .. } => {}
        Instruction::Gather { rows, .. } => fits("rows", rows.len())?,
        Instruction::TtGatherReduce {
            offsets, indices, ..
        } => {
            fits("offsets", offsets.len())?;
            fits("indices", indices.len())?;
        }
        Instruction::TtWrite { slices, values, .. } => {
            fits("slices", slices.len())?;
            fits("values", values.len())?;
            whole_rows(
                "values",
                values.len(),
                "the count of `slices`",
                slices.len(),
            )?;
        }
    }
    Ok(())
}

/// Writes an array: its count ([`check_encodable`] has made sure it fits)
/// and its `len` elements.
fn put_array(out: &mut Vec<u8>, len: usize, elements: impl Iterator<Item = [u8; 4]>) {
    out.extend_from_slice(&(len as u32).to_le_bytes());
    for e in elements {
        out.extend_from_slice(&e);
    }
}

/// A field of an instruction's body: a scalar, or an array (its count, then
/// its elements).
enum Field<'a> {
    Word([u8; 4]),
    U32s(&'a [u32]),
    F32s(&'a [f32]),
}

/// Hands `each` the fields of `instr`'s body, in encoding order.
fn body_fields<'a>(instr: &'a Instruction, mut each: impl FnMut(Field<'a>)) {
    match instr {
        Instruction::GatherReduce {
            offsets,
            indices,
            weights,
            ..
        } => {
            each(Field::U32s(offsets));
            each(Field::U32s(indices));
            if let Some(weights) = weights {
                each(Field::F32s(weights));
            }
        }
        Instruction::LoadGradient { bags, grads, .. } => {
            each(Field::Word(bags.to_le_bytes()));
            each(Field::F32s(grads));
        }
        Instruction::CastedGatherReduce {
            num_bags,
            casted_src,
            casted_dst,
            unique_rows,
            scale,
            ..
        } => {
            each(Field::Word(num_bags.to_le_bytes()));
            each(Field::U32s(casted_src));
            each(Field::U32s(casted_dst));
            each(Field::U32s(unique_rows));
            if let Some(scale) = scale {
                each(Field::F32s(scale));
            }
        }
        Instruction::LoadCoalesced { rows, grads, .. } => {
            each(Field::U32s(rows));
            each(Field::F32s(grads));
        }
        Instruction::Scatter { optimizer, .. } => {
            let (params, n) = optimizer_params(optimizer);
            for p in &params[..n] {
                each(Field::Word(p.to_le_bytes()));
            }
        }
        Instruction::Gather { rows, .. } => each(Field::U32s(rows)),
        Instruction::TtGatherReduce {
            offsets, indices, ..
        } => {
            each(Field::U32s(offsets));
            each(Field::U32s(indices));
        }
        Instruction::TtWrite {
            core,
            slices,
            values,
            ..
        } => {
            each(Field::Word(core.to_le_bytes()));
            each(Field::U32s(slices));
            each(Field::F32s(values));
        }
    }
}

/// Exactly `encode(instr).len()`, computed without allocating (used to count
/// host-link bytes for large instructions).
pub fn encoded_len(instr: &Instruction) -> u64 {
    let mut len = HEADER_BYTES as u64;
    body_fields(instr, |field| {
        len += match field {
            Field::Word(_) => WORD,
            Field::U32s(v) => array_len(v.len()),
            Field::F32s(v) => array_len(v.len()),
        }
    });
    len
}

/// Decodes one instruction from the start of `bytes`; returns it and the bytes
/// consumed. Bytes after the instruction are left alone.
pub fn decode(bytes: &[u8]) -> Result<(Instruction, usize), NmpError> {
    decode_at(bytes, 0)
}

/// Decodes a concatenation of instructions (an instruction stream file). Error
/// offsets count from the start of `bytes`.
pub fn decode_all(bytes: &[u8]) -> Result<Vec<Instruction>, NmpError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let (instr, used) = decode_at(&bytes[pos..], pos)?;
        out.push(instr);
        pos += used;
    }
    Ok(out)
}

fn decode_error(offset: usize, what: String) -> NmpError {
    NmpError::Decode { offset, what }
}

/// Decodes the instruction at the start of `bytes`, which lie at `base` in the
/// caller's buffer (for error offsets).
fn decode_at(bytes: &[u8], base: usize) -> Result<(Instruction, usize), NmpError> {
    if bytes.len() < HEADER_BYTES {
        return Err(decode_error(
            base,
            format!(
                "header: needs {HEADER_BYTES} bytes, only {} left",
                bytes.len()
            ),
        ));
    }
    let header_error = |at: usize, field: &str, what: String| {
        decode_error(base + at, format!("header field {field}: {what}"))
    };
    let opcode = bytes[0];
    if !(OP_GATHER_REDUCE..=OP_TT_WRITE).contains(&opcode) {
        return Err(header_error(
            0,
            "opcode",
            format!(
                "unknown opcode {opcode:#04x} (expected {OP_GATHER_REDUCE:#04x} to {OP_TT_WRITE:#04x})"
            ),
        ));
    }
    let op = op_name(opcode);
    let flags = bytes[1];
    let allowed_flags = match opcode {
        OP_GATHER_REDUCE | OP_CASTED_GATHER_REDUCE => FLAG_OPTIONAL,
        OP_TT_GATHER_REDUCE => FLAG_REUSE,
        _ => 0,
    };
    if flags & !allowed_flags != 0 {
        return Err(header_error(
            1,
            "flags",
            format!("{op} flags {flags:#04x} set bits other than {allowed_flags:#04x}"),
        ));
    }
    let optional = flags & FLAG_OPTIONAL != 0;
    let kind = bytes[2];
    let pooling = if opcode == OP_GATHER_REDUCE || opcode == OP_TT_GATHER_REDUCE {
        Some(match kind {
            POOLING_SUM => Pooling::Sum,
            POOLING_MEAN => Pooling::Mean,
            POOLING_WEIGHTED_SUM => Pooling::WeightedSum,
            _ => {
                return Err(header_error(
                    2,
                    "kind",
                    format!(
                        "unknown pooling kind {kind} (expected 0 sum, 1 mean or 2 weighted-sum)"
                    ),
                ));
            }
        })
    } else {
        None
    };
    if opcode == OP_SCATTER && kind > OPT_RMS_PROP {
        return Err(header_error(
            2,
            "kind",
            format!(
                "unknown optimizer kind {kind} (expected 0 sgd, 1 adagrad, 2 row-wise-adagrad or 3 rms-prop)"
            ),
        ));
    }
    if opcode != OP_GATHER_REDUCE
        && opcode != OP_TT_GATHER_REDUCE
        && opcode != OP_SCATTER
        && kind != 0
    {
        return Err(header_error(
            2,
            "kind",
            format!("{op} has no kind but the byte is {kind}, not 0"),
        ));
    }
    if bytes[3] != 0 {
        return Err(header_error(
            3,
            "reserved",
            format!("is {}, not 0", bytes[3]),
        ));
    }
    let table = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    let mut total_bytes = [0u8; 8];
    total_bytes.copy_from_slice(&bytes[8..16]);
    let total = u64::from_le_bytes(total_bytes);
    if total < HEADER_BYTES as u64 {
        return Err(header_error(
            8,
            "total_length",
            format!("{total} is shorter than the {HEADER_BYTES}-byte header"),
        ));
    }
    let total = match usize::try_from(total) {
        Ok(t) if t <= bytes.len() => t,
        _ => {
            return Err(header_error(
                8,
                "total_length",
                format!("{op} of {total} bytes, only {} left", bytes.len()),
            ));
        }
    };

    let mut r = Reader {
        bytes: &bytes[..total],
        pos: HEADER_BYTES,
        base,
        op,
    };
    let instr = match opcode {
        OP_GATHER_REDUCE => {
            let offsets = r.u32s("offsets")?;
            let at = r.pos;
            let indices = r.u32s("indices")?;
            let of = (at, "indices", indices.len());
            let weights = optional.then(|| r.f32s_like("weights", of)).transpose()?;
            Instruction::GatherReduce {
                table,
                pooling: pooling.unwrap_or_default(),
                offsets,
                indices,
                weights,
            }
        }
        OP_LOAD_GRADIENT => {
            let bags = r.u32("bags")?;
            let grads = r.grads(bags as usize, "bags")?;
            Instruction::LoadGradient { table, bags, grads }
        }
        OP_CASTED_GATHER_REDUCE => {
            let num_bags = r.u32("num_bags")?;
            let at = r.pos;
            let casted_src = r.u32s("casted_src")?;
            let of = (at, "casted_src", casted_src.len());
            let casted_dst = r.array_like("casted_dst", u32::from_le_bytes, of)?;
            let unique_rows = r.u32s("unique_rows")?;
            let scale = optional.then(|| r.f32s_like("scale", of)).transpose()?;
            Instruction::CastedGatherReduce {
                table,
                num_bags,
                casted_src,
                casted_dst,
                unique_rows,
                scale,
            }
        }
        OP_LOAD_COALESCED => {
            let rows = r.u32s("rows")?;
            let grads = r.grads(rows.len(), "rows")?;
            Instruction::LoadCoalesced { table, rows, grads }
        }
        OP_GATHER => {
            let rows = r.u32s("rows")?;
            Instruction::Gather { table, rows }
        }
        OP_TT_GATHER_REDUCE => {
            let offsets = r.u32s("offsets")?;
            let indices = r.u32s("indices")?;
            Instruction::TtGatherReduce {
                table,
                pooling: pooling.unwrap_or_default(),
                reuse: flags & FLAG_REUSE != 0,
                offsets,
                indices,
            }
        }
        OP_TT_WRITE => {
            let core = r.u32("core")?;
            let slices = r.u32s("slices")?;
            let values = r.f32_rows("values", slices.len(), "slices")?;
            Instruction::TtWrite {
                table,
                core,
                slices,
                values,
            }
        }
        _ => {
            let lr = r.f32("lr")?;
            let optimizer = match kind {
                OPT_SGD => Optimizer::Sgd { lr },
                OPT_ADAGRAD => Optimizer::Adagrad {
                    lr,
                    eps: r.f32("eps")?,
                    initial_accumulator: r.f32("initial_accumulator")?,
                },
                OPT_ROW_WISE_ADAGRAD => Optimizer::RowWiseAdagrad {
                    lr,
                    eps: r.f32("eps")?,
                },
                _ => Optimizer::RmsProp {
                    lr,
                    alpha: r.f32("alpha")?,
                    eps: r.f32("eps")?,
                },
            };
            Instruction::Scatter { table, optimizer }
        }
    };
    if r.pos != total {
        return Err(decode_error(
            base + r.pos,
            format!(
                "{op}: content ends after {} bytes but header field total_length says {total} ({} bytes unaccounted for)",
                r.pos,
                total - r.pos
            ),
        ));
    }
    Ok((instr, total))
}

/// Whether `len` values split into `rows` equal rows (none into no rows).
fn splits_into_rows(len: usize, rows: usize) -> bool {
    if rows == 0 { len == 0 } else { len % rows == 0 }
}

/// A cursor over the bytes of one instruction (header included).
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Where `bytes` starts in the caller's buffer.
    base: usize,
    op: &'static str,
}

impl Reader<'_> {
    fn error(&self, at: usize, field: &str, what: String) -> NmpError {
        decode_error(self.base + at, format!("{} field {field}: {what}", self.op))
    }

    /// Fails unless the array `field` (read at offset `at`, `n` entries)
    /// has as many entries as the array `of` read before it: each is
    /// `(offset, name, count)`.
    fn same_count(
        &self,
        (at, field, n): (usize, &str, usize),
        (of_at, of, of_n): (usize, &str, usize),
    ) -> Result<(), NmpError> {
        if n == of_n {
            return Ok(());
        }
        Err(self.error(
            at,
            field,
            format!(
                "count {n} differs from the count {of_n} of {of} (at offset {})",
                self.base + of_at
            ),
        ))
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn word(&mut self, field: &str) -> Result<[u8; 4], NmpError> {
        if self.left() < WORD as usize {
            return Err(self.error(
                self.pos,
                field,
                format!("needs {WORD} bytes, only {} left", self.left()),
            ));
        }
        let mut w = [0u8; 4];
        w.copy_from_slice(&self.bytes[self.pos..self.pos + 4]);
        self.pos += 4;
        Ok(w)
    }

    fn u32(&mut self, field: &str) -> Result<u32, NmpError> {
        self.word(field).map(u32::from_le_bytes)
    }

    fn f32(&mut self, field: &str) -> Result<f32, NmpError> {
        self.word(field).map(f32::from_le_bytes)
    }

    /// Reads an array's count and returns its elements' bytes.
    fn array(&mut self, field: &str) -> Result<&[u8], NmpError> {
        let at = self.pos;
        let count = self.u32(field)?;
        let need = WORD * u64::from(count);
        if need > self.left() as u64 {
            return Err(self.error(
                at,
                field,
                format!(
                    "count {count} needs {need} bytes, only {} left",
                    self.left()
                ),
            ));
        }
        let start = self.pos;
        self.pos += need as usize;
        Ok(&self.bytes[start..self.pos])
    }

    /// Reads an array of elements made by `from`.
    fn elements<T>(&mut self, field: &str, from: fn([u8; 4]) -> T) -> Result<Vec<T>, NmpError> {
        let raw = self.array(field)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| from([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    fn u32s(&mut self, field: &str) -> Result<Vec<u32>, NmpError> {
        self.elements(field, u32::from_le_bytes)
    }

    /// Reads an array that must have as many entries as the array `of`
    /// read before it (see [`same_count`](Self::same_count)).
    fn array_like<T>(
        &mut self,
        field: &str,
        from: fn([u8; 4]) -> T,
        of: (usize, &str, usize),
    ) -> Result<Vec<T>, NmpError> {
        let at = self.pos;
        let values = self.elements(field, from)?;
        self.same_count((at, field, values.len()), of)?;
        Ok(values)
    }

    fn f32s_like(&mut self, field: &str, of: (usize, &str, usize)) -> Result<Vec<f32>, NmpError> {
        self.array_like(field, f32::from_le_bytes, of)
    }

    /// Reads the f32 array `grads`, which must split into `rows` equal rows
    /// (`rows_field` names the count).
    fn grads(&mut self, rows: usize, rows_field: &str) -> Result<Vec<f32>, NmpError> {
        self.f32_rows("grads", rows, rows_field)
    }

    /// An f32 array `field` of whole rows, `rows` of them.
    fn f32_rows(
        &mut self,
        field: &'static str,
        rows: usize,
        rows_field: &str,
    ) -> Result<Vec<f32>, NmpError> {
        let at = self.pos;
        let grads = self.elements(field, f32::from_le_bytes)?;
        if splits_into_rows(grads.len(), rows) {
            return Ok(grads);
        }
        Err(self.error(
            at,
            field,
            format!(
                "count {} is not a multiple of {rows_field} = {rows}",
                grads.len()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Any f32 but NaN (which would defeat `PartialEq`; NaN payloads have
    /// their own test).
    fn value() -> impl Strategy<Value = f32> {
        any::<f32>().prop_map(|v| if v.is_nan() { 0.5 } else { v })
    }

    fn optimizer() -> impl Strategy<Value = Optimizer> {
        prop_oneof![
            value().prop_map(|lr| Optimizer::Sgd { lr }),
            (value(), value(), value()).prop_map(|(lr, eps, initial_accumulator)| {
                Optimizer::Adagrad {
                    lr,
                    eps,
                    initial_accumulator,
                }
            }),
            (value(), value()).prop_map(|(lr, eps)| Optimizer::RowWiseAdagrad { lr, eps }),
            (value(), value(), value()).prop_map(|(lr, alpha, eps)| Optimizer::RmsProp {
                lr,
                alpha,
                eps
            }),
        ]
    }

    fn u32s(max: usize) -> impl Strategy<Value = Vec<u32>> {
        prop::collection::vec(any::<u32>(), 0..max)
    }

    fn f32s(len: usize) -> impl Strategy<Value = Vec<f32>> {
        prop::collection::vec(value(), len)
    }

    fn instruction() -> impl Strategy<Value = Instruction> {
        let gather = (
            any::<u32>(),
            prop::sample::select(Pooling::ALL.to_vec()),
            u32s(6),
            u32s(10),
            any::<bool>(),
        )
            .prop_flat_map(|(table, pooling, offsets, indices, weighted)| {
                let n = indices.len();
                let weights = if weighted {
                    f32s(n).prop_map(Some).boxed()
                } else {
                    Just(None).boxed()
                };
                (Just((table, pooling, offsets, indices)), weights)
            })
            .prop_map(
                |((table, pooling, offsets, indices), weights)| Instruction::GatherReduce {
                    table,
                    pooling,
                    offsets,
                    indices,
                    weights,
                },
            );
        let load_gradient = (any::<u32>(), 0u32..5, 0usize..4)
            .prop_flat_map(|(table, bags, dim)| (Just((table, bags)), f32s(bags as usize * dim)))
            .prop_map(|((table, bags), grads)| Instruction::LoadGradient { table, bags, grads });
        let casted = (
            any::<u32>(),
            any::<u32>(),
            0usize..10,
            u32s(6),
            any::<bool>(),
        )
            .prop_flat_map(|(table, num_bags, n, unique_rows, scaled)| {
                let scale = if scaled {
                    f32s(n).prop_map(Some).boxed()
                } else {
                    Just(None).boxed()
                };
                (
                    Just((table, num_bags, unique_rows)),
                    prop::collection::vec(any::<u32>(), n),
                    prop::collection::vec(any::<u32>(), n),
                    scale,
                )
            })
            .prop_map(
                |((table, num_bags, unique_rows), casted_src, casted_dst, scale)| {
                    Instruction::CastedGatherReduce {
                        table,
                        num_bags,
                        casted_src,
                        casted_dst,
                        unique_rows,
                        scale,
                    }
                },
            );
        let load_coalesced = (any::<u32>(), u32s(5), 0usize..4)
            .prop_flat_map(|(table, rows, dim)| {
                let n = rows.len() * dim;
                (Just((table, rows)), f32s(n))
            })
            .prop_map(|((table, rows), grads)| Instruction::LoadCoalesced { table, rows, grads });
        let scatter = (any::<u32>(), optimizer())
            .prop_map(|(table, optimizer)| Instruction::Scatter { table, optimizer });
        let gather_rows =
            (any::<u32>(), u32s(8)).prop_map(|(table, rows)| Instruction::Gather { table, rows });
        let tt_gather = (
            any::<u32>(),
            prop::sample::select(Pooling::ALL.to_vec()),
            any::<bool>(),
            u32s(6),
            u32s(10),
        )
            .prop_map(|(table, pooling, reuse, offsets, indices)| {
                Instruction::TtGatherReduce {
                    table,
                    pooling,
                    reuse,
                    offsets,
                    indices,
                }
            });
        let tt_write = (any::<u32>(), 0u32..3, u32s(4), 0usize..5)
            .prop_flat_map(|(table, core, slices, len)| {
                let n = slices.len() * len;
                (Just((table, core, slices)), f32s(n))
            })
            .prop_map(|((table, core, slices), values)| Instruction::TtWrite {
                table,
                core,
                slices,
                values,
            });
        prop_oneof![
            gather,
            load_gradient,
            casted,
            load_coalesced,
            scatter,
            gather_rows,
            tt_gather,
            tt_write
        ]
    }

    /// Instructions whose array lengths are drawn independently: consistent
    /// or not.
    fn any_shape() -> impl Strategy<Value = Instruction> {
        let opt_f32s = |max: usize| prop::option::of(prop::collection::vec(value(), 0..max));
        let any_f32s = |max: usize| prop::collection::vec(value(), 0..max);
        prop_oneof![
            (u32s(4), u32s(5), opt_f32s(6)).prop_map(|(offsets, indices, weights)| {
                Instruction::GatherReduce {
                    table: 1,
                    pooling: Pooling::WeightedSum,
                    offsets,
                    indices,
                    weights,
                }
            }),
            (0u32..4, any_f32s(7)).prop_map(|(bags, grads)| Instruction::LoadGradient {
                table: 2,
                bags,
                grads
            }),
            (u32s(4), u32s(4), u32s(3), opt_f32s(5)).prop_map(
                |(casted_src, casted_dst, unique_rows, scale)| Instruction::CastedGatherReduce {
                    table: 3,
                    num_bags: 2,
                    casted_src,
                    casted_dst,
                    unique_rows,
                    scale,
                }
            ),
            (u32s(4), any_f32s(7)).prop_map(|(rows, grads)| Instruction::LoadCoalesced {
                table: 4,
                rows,
                grads
            }),
            (u32s(3), any_f32s(7)).prop_map(|(slices, values)| Instruction::TtWrite {
                table: 5,
                core: 1,
                slices,
                values
            }),
        ]
    }

    /// The bytes of `instr` as written, even where [`check_encodable`]
    /// refuses it (to test what `decode` says of such bytes).
    fn raw(instr: &Instruction) -> Vec<u8> {
        let mut out = Vec::new();
        write_into(instr, encoded_len(instr), &mut out);
        out
    }

    fn message(bytes: &[u8]) -> String {
        decode(bytes).unwrap_err().to_string()
    }

    fn example_gather() -> Instruction {
        Instruction::GatherReduce {
            table: 7,
            pooling: Pooling::WeightedSum,
            offsets: vec![0, 2, 3],
            indices: vec![4, 1, 9],
            weights: Some(vec![0.5, 1.0, 2.0]),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn round_trips(instr in instruction()) {
            let bytes = encode(&instr).unwrap();
            prop_assert_eq!(encoded_len(&instr), bytes.len() as u64);
            prop_assert_eq!(bytes.len() % 4, 0);
            let (back, used) = decode(&bytes).unwrap();
            prop_assert_eq!(used, bytes.len());
            prop_assert_eq!(&back, &instr);
            // Trailing bytes belong to the next instruction.
            let mut longer = bytes.clone();
            longer.extend_from_slice(&[0xFF; 5]);
            prop_assert_eq!(decode(&longer).unwrap(), (instr, bytes.len()));
        }

        #[test]
        fn streams_round_trip(instrs in prop::collection::vec(instruction(), 0..6)) {
            let mut bytes = Vec::new();
            for instr in &instrs {
                encode_into(instr, &mut bytes).unwrap();
            }
            let total: u64 = instrs.iter().map(encoded_len).sum();
            prop_assert_eq!(total, bytes.len() as u64);
            prop_assert_eq!(decode_all(&bytes).unwrap(), instrs);
        }

        #[test]
        fn every_truncation_is_an_error(instr in instruction()) {
            let bytes = encode(&instr).unwrap();
            for k in 0..bytes.len() {
                prop_assert!(decode(&bytes[..k]).is_err(), "prefix of {} bytes decoded", k);
                if k > 0 {
                    prop_assert!(decode_all(&bytes[..k]).is_err());
                }
            }
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..96)) {
            if let Ok((_, used)) = decode(&bytes) {
                prop_assert!(used <= bytes.len());
            }
            let _ = decode_all(&bytes);
        }

        #[test]
        fn random_bodies_never_panic(
            op in 1u8..=5,
            flags in 0u8..2,
            kind in 0u8..4,
            body in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            // A well-formed header over random bytes gets past the opcode check.
            let mut bytes = vec![OPCODE_MAGIC | op, flags, kind, 0, 1, 0, 0, 0];
            bytes.extend_from_slice(&((HEADER_BYTES + body.len()) as u64).to_le_bytes());
            bytes.extend_from_slice(&body);
            if let Ok((back, used)) = decode(&bytes) {
                prop_assert_eq!(used, bytes.len());
                prop_assert_eq!(encode(&back).unwrap(), bytes);
            }
        }

        #[test]
        fn encode_accepts_exactly_what_decode_accepts(instr in any_shape()) {
            let bytes = raw(&instr);
            let decoded = decode(&bytes);
            let mut out = vec![7u8; 3];
            match encode_into(&instr, &mut out) {
                Ok(()) => {
                    prop_assert_eq!(&out[3..], &bytes[..]);
                    prop_assert_eq!(decoded.unwrap().0, instr);
                }
                Err(e) => {
                    prop_assert!(decoded.is_err(), "encode refused what decode accepts: {}", e);
                    prop_assert_eq!(out, vec![7u8; 3], "a refused instruction wrote bytes");
                }
            }
        }

        #[test]
        fn corrupted_encodings_never_panic(
            instr in instruction(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let mut bytes = encode(&instr).unwrap();
            for (at, value) in edits {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            if let Ok((back, used)) = decode(&bytes) {
                prop_assert_eq!(used, encode(&back).unwrap().len());
            }
            let _ = decode_all(&bytes);
        }
    }

    #[test]
    fn header_layout() {
        let instr = Instruction::Scatter {
            table: 0x0102_0304,
            optimizer: Optimizer::RowWiseAdagrad { lr: 1.0, eps: 0.0 },
        };
        let bytes = encode(&instr).unwrap();
        let mut want = vec![0xA5, 0, OPT_ROW_WISE_ADAGRAD, 0, 4, 3, 2, 1];
        want.extend_from_slice(&24u64.to_le_bytes());
        want.extend_from_slice(&1.0f32.to_le_bytes());
        want.extend_from_slice(&0.0f32.to_le_bytes());
        assert_eq!(bytes, want);

        let bytes = encode(&example_gather()).unwrap();
        assert_eq!(&bytes[..4], &[0xA1, FLAG_OPTIONAL, POOLING_WEIGHTED_SUM, 0]);
        // Header, then three arrays of three elements each.
        assert_eq!(bytes.len(), HEADER_BYTES + 3 * 16);
        assert_eq!(&bytes[16..20], &3u32.to_le_bytes());
    }

    #[test]
    fn documented_example() {
        let instr = Instruction::Scatter {
            table: 3,
            optimizer: Optimizer::Sgd { lr: 0.5 },
        };
        let want = [
            0xa5, 0, 0, 0, 3, 0, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3f,
        ];
        assert_eq!(encode(&instr).unwrap(), want);
    }

    #[test]
    fn every_optimizer_and_pooling_round_trips() {
        for optimizer in Optimizer::examples() {
            let instr = Instruction::Scatter {
                table: 3,
                optimizer,
            };
            assert_eq!(decode(&encode(&instr).unwrap()).unwrap().0, instr);
        }
        for pooling in Pooling::ALL {
            let instr = Instruction::GatherReduce {
                table: 1,
                pooling,
                offsets: vec![0, 1],
                indices: vec![5],
                weights: None,
            };
            assert_eq!(decode(&encode(&instr).unwrap()).unwrap().0, instr);
        }
    }

    #[test]
    fn nan_payloads_survive() {
        let nan = f32::from_bits(0x7FC0_1234);
        let instr = Instruction::LoadGradient {
            table: 0,
            bags: 1,
            grads: vec![nan, -0.0],
        };
        let bytes = encode(&instr).unwrap();
        let Instruction::LoadGradient { grads, .. } = decode(&bytes).unwrap().0 else {
            panic!("wrong variant");
        };
        assert_eq!(grads[0].to_bits(), nan.to_bits());
        assert_eq!(grads[1].to_bits(), (-0.0f32).to_bits());
    }

    #[test]
    fn array_count_past_the_end_names_field_and_offset() {
        let instr = Instruction::LoadCoalesced {
            table: 2,
            rows: vec![1, 2, 3],
            grads: vec![0.0; 3],
        };
        let mut bytes = encode(&instr).unwrap();
        // rows count at 16: 3 -> 1000; 12 bytes of rows and 16 of grads follow.
        bytes[16..20].copy_from_slice(&1000u32.to_le_bytes());
        assert_eq!(
            message(&bytes),
            "instruction bytes at offset 16: load-coalesced field rows: count 1000 needs 4000 bytes, only 28 left"
        );

        // A gather-reduce's indices count (after offsets' 4 + 12 bytes) at 32.
        let mut bytes = encode(&example_gather()).unwrap();
        bytes[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = message(&bytes);
        assert!(
            e.starts_with("instruction bytes at offset 32: gather-reduce field indices: count 4294967295 needs 17179869180 bytes"),
            "{e}"
        );
    }

    /// One weight for two indices.
    fn short_weights() -> Instruction {
        Instruction::GatherReduce {
            table: 0,
            pooling: Pooling::WeightedSum,
            offsets: vec![0, 2],
            indices: vec![1, 2],
            weights: Some(vec![1.0]),
        }
    }

    /// Four gradient values for three bags.
    fn uneven_grads() -> Instruction {
        Instruction::LoadGradient {
            table: 0,
            bags: 3,
            grads: vec![0.0; 4],
        }
    }

    /// One `casted_dst` entry for two of `casted_src`.
    fn short_casted_dst() -> Instruction {
        Instruction::CastedGatherReduce {
            table: 0,
            num_bags: 2,
            casted_src: vec![0, 1],
            casted_dst: vec![0],
            unique_rows: vec![5],
            scale: None,
        }
    }

    #[test]
    fn encode_names_the_field_that_does_not_fit() {
        let e = |instr: Instruction| encode(&instr).unwrap_err().to_string();
        assert_eq!(
            e(short_weights()),
            "instruction gather-reduce: `weights` holds 1 values but `indices` holds 2: one per entry is expected"
        );
        assert_eq!(
            e(uneven_grads()),
            "instruction load-gradient: `grads` holds 4 values, not a whole number of rows for bags = 3"
        );
        assert_eq!(
            e(Instruction::LoadGradient {
                table: 0,
                bags: 0,
                grads: vec![0.0; 2],
            }),
            "instruction load-gradient: `grads` holds 2 values, not a whole number of rows for bags = 0"
        );
        assert_eq!(
            e(Instruction::CastedGatherReduce {
                table: 0,
                num_bags: 2,
                casted_src: vec![0, 1],
                casted_dst: vec![0, 1],
                unique_rows: vec![5],
                scale: Some(vec![1.0; 3]),
            }),
            "instruction casted-gather-reduce: `scale` holds 3 values but `casted_src` holds 2: one per entry is expected"
        );
        assert!(
            e(short_casted_dst()).contains("`casted_dst` holds 1 values but `casted_src` holds 2")
        );
        assert_eq!(
            e(Instruction::LoadCoalesced {
                table: 0,
                rows: vec![1, 2],
                grads: vec![0.0; 3],
            }),
            "instruction load-coalesced: `grads` holds 3 values, not a whole number of rows for the count of `rows` = 2"
        );
        // What decode accepts, encode does too: empty arrays, and no rows.
        for ok in [
            Instruction::LoadGradient {
                table: 0,
                bags: 0,
                grads: vec![],
            },
            Instruction::LoadCoalesced {
                table: 0,
                rows: vec![],
                grads: vec![],
            },
        ] {
            assert_eq!(decode(&encode(&ok).unwrap()).unwrap().0, ok);
        }
    }

    #[test]
    fn inconsistent_lengths_name_field_and_offset() {
        let instr = short_weights();
        // offsets 4 + 8, indices 4 + 8: weights count at 40.
        assert_eq!(
            message(&raw(&instr)),
            "instruction bytes at offset 40: gather-reduce field weights: count 1 differs from the count 2 of indices (at offset 28)"
        );

        let instr = uneven_grads();
        assert_eq!(
            message(&raw(&instr)),
            "instruction bytes at offset 20: load-gradient field grads: count 4 is not a multiple of bags = 3"
        );

        let instr = short_casted_dst();
        assert!(message(&raw(&instr)).starts_with(
            "instruction bytes at offset 32: casted-gather-reduce field casted_dst: count 1 differs"
        ),);
    }

    #[test]
    fn header_errors_name_field_and_offset() {
        let good = encode(&example_gather()).unwrap();

        let mut bytes = good.clone();
        bytes[0] = 0x07;
        assert_eq!(
            message(&bytes),
            "instruction bytes at offset 0: header field opcode: unknown opcode 0x07 (expected 0xa1 to 0xa8)"
        );

        let mut bytes = good.clone();
        bytes[2] = 9;
        assert!(message(&bytes).contains("offset 2: header field kind: unknown pooling kind 9"));

        let mut bytes = encode(&Instruction::Scatter {
            table: 0,
            optimizer: Optimizer::Sgd { lr: 0.1 },
        })
        .unwrap();
        bytes[2] = 4;
        assert!(message(&bytes).contains("offset 2: header field kind: unknown optimizer kind 4"));

        let mut bytes = good.clone();
        bytes[1] = 0x03;
        assert!(message(&bytes).contains("offset 1: header field flags"));

        let mut bytes = good.clone();
        bytes[3] = 1;
        assert!(message(&bytes).contains("offset 3: header field reserved"));

        assert_eq!(
            message(&good[..10]),
            "instruction bytes at offset 0: header: needs 16 bytes, only 10 left"
        );
        assert_eq!(
            message(&good[..40]),
            "instruction bytes at offset 8: header field total_length: gather-reduce of 64 bytes, only 40 left"
        );

        // A total length longer than the content: the extra bytes are reported.
        let mut bytes = good.clone();
        bytes[8..16].copy_from_slice(&68u64.to_le_bytes());
        bytes.extend_from_slice(&[0; 4]);
        assert_eq!(
            message(&bytes),
            "instruction bytes at offset 64: gather-reduce: content ends after 64 bytes but header field total_length says 68 (4 bytes unaccounted for)"
        );
        // Shorter than the content: the array that crosses it is reported.
        let mut bytes = good.clone();
        bytes[8..16].copy_from_slice(&60u64.to_le_bytes());
        assert!(message(&bytes).contains(
            "offset 48: gather-reduce field weights: count 3 needs 12 bytes, only 8 left"
        ));
    }

    #[test]
    fn stream_errors_count_from_the_stream_start() {
        let first = Instruction::Scatter {
            table: 0,
            optimizer: Optimizer::Sgd { lr: 0.1 },
        };
        let mut bytes = encode(&first).unwrap();
        let second_at = bytes.len();
        encode_into(&example_gather(), &mut bytes).unwrap();
        bytes[second_at + 2] = 7;
        let e = decode_all(&bytes).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!(
                "instruction bytes at offset {}: header field kind",
                second_at + 2
            )),
            "{e}"
        );
        assert!(decode_all(&[]).unwrap().is_empty());
    }
}
