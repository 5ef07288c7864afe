//! NumPy `.npy` files (format version 1.0): writing a trace's arrays so that
//! any tool with NumPy (`numpy.load`, nothing else) reads exactly the lookups
//! nmpsim ran, and reading them back.
//!
//! A trace exports as a directory: per batch `k` and table `t`,
//! `b{k:05}_t{t:03}_offsets.npy` (int64, `B + 1` CSR bag boundaries, as
//! PyTorch's `EmbeddingBag` takes them with `include_last_offset=True`),
//! `b{k:05}_t{t:03}_indices.npy` (int64 row ids) and, for weighted tables,
//! `b{k:05}_t{t:03}_weights.npy` (float32 per-lookup weights); per batch
//! `b{k:05}_dense.npy` (float32, `B x num_dense`) and `b{k:05}_labels.npy`
//! (float32) when the trace has them; and `manifest.json`, which lists
//! every table's rows and every file.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Batch, TraceError, TraceHeader};

/// The element types nmpsim writes and reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// Little-endian int64 (`<i8`).
    I64,
    /// Little-endian float32 (`<f4`).
    F32,
}

impl Dtype {
    fn descr(self) -> &'static str {
        match self {
            Dtype::I64 => "<i8",
            Dtype::F32 => "<f4",
        }
    }
}

/// The header of a `.npy` file: magic, version 1.0, and the dict, padded
/// with spaces and a newline so the data starts on a 64-byte boundary.
fn header(dtype: Dtype, shape: &[usize]) -> Vec<u8> {
    let dims = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {dims}, }}",
        dtype.descr()
    );
    let unpadded = 10 + dict.len() + 1;
    let total = unpadded.next_multiple_of(64);
    let mut h = Vec::with_capacity(total);
    h.extend_from_slice(b"\x93NUMPY\x01\x00");
    h.extend_from_slice(&((total - 10) as u16).to_le_bytes());
    h.extend_from_slice(dict.as_bytes());
    h.resize(total - 1, b' ');
    h.push(b'\n');
    h
}

/// Writes `data` (the values' little-endian bytes, row-major `shape`) as a
/// `.npy` file of `dtype`.
fn write_array(path: &Path, dtype: Dtype, shape: &[usize], data: &[u8]) -> Result<(), TraceError> {
    let io = |e| TraceError::io(path, e);
    let mut f = fs::File::create(path).map_err(io)?;
    f.write_all(&header(dtype, shape)).map_err(io)?;
    f.write_all(data).map_err(io)?;
    f.sync_all().map_err(io)
}

/// Writes u32 values widened to a 1-D int64 array (NumPy's and PyTorch's
/// usual index type).
pub fn write_u32_as_i64(path: &Path, values: &[u32]) -> Result<(), TraceError> {
    let data: Vec<u8> = values
        .iter()
        .flat_map(|&v| i64::from(v).to_le_bytes())
        .collect();
    write_array(path, Dtype::I64, &[values.len()], &data)
}

/// Writes f32 values as a float32 array of `shape` (row-major).
pub fn write_f32(path: &Path, shape: &[usize], values: &[f32]) -> Result<(), TraceError> {
    if shape.iter().product::<usize>() != values.len() {
        return Err(TraceError::param(
            "shape",
            format!("{shape:?} does not hold {} values", values.len()),
        ));
    }
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_array(path, Dtype::F32, shape, &data)
}

/// A `.npy` array read back: its type, shape and raw little-endian values.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    data: Vec<u8>,
}

impl NpyArray {
    /// The values as i64, if the array is int64.
    pub fn as_i64(&self) -> Option<Vec<i64>> {
        self.values(Dtype::I64, i64::from_le_bytes)
    }

    /// The values as f32, if the array is float32.
    pub fn as_f32(&self) -> Option<Vec<f32>> {
        self.values(Dtype::F32, f32::from_le_bytes)
    }

    /// The values, made by `from` of each `N` bytes, if the array is `dtype`.
    fn values<T, const N: usize>(&self, dtype: Dtype, from: fn([u8; N]) -> T) -> Option<Vec<T>> {
        (self.dtype == dtype).then(|| {
            self.data
                .chunks_exact(N)
                .map(|c| from(c.try_into().unwrap()))
                .collect()
        })
    }
}

/// Reads a version 1.0 `.npy` file of int64 or float32, C order (what
/// [`write_u32_as_i64`] and [`write_f32`] write, and what NumPy writes for such
/// arrays). Anything else is refused with the reason.
pub fn read(path: &Path) -> Result<NpyArray, TraceError> {
    let bad = |what: String| TraceError::Format {
        path: path.to_path_buf(),
        what,
    };
    let mut f = fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)
        .map_err(|e| TraceError::io(path, e))?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("not a .npy file (no \\x93NUMPY magic)".into()));
    }
    if bytes[6] != 1 {
        return Err(bad(format!(
            ".npy format version {}.{}; expected 1.0",
            bytes[6], bytes[7]
        )));
    }
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let dict = bytes
        .get(10..10 + hlen)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| bad("truncated or non-text header".into()))?;
    let field = |key: &str| -> Result<&str, TraceError> {
        let at = dict
            .find(&format!("'{key}':"))
            .ok_or_else(|| bad(format!("header has no '{key}'")))?;
        Ok(dict[at + key.len() + 3..].trim_start())
    };
    let descr = field("descr")?;
    let dtype = if descr.starts_with("'<i8'") {
        Dtype::I64
    } else if descr.starts_with("'<f4'") {
        Dtype::F32
    } else {
        return Err(bad(format!(
            "dtype {}; expected '<i8' (int64) or '<f4' (float32)",
            descr.split(',').next().unwrap_or(descr)
        )));
    };
    if !field("fortran_order")?.starts_with("False") {
        return Err(bad("Fortran-ordered array; expected C order".into()));
    }
    let shape_text = field("shape")?;
    let close = shape_text
        .find(')')
        .ok_or_else(|| bad("unterminated shape".into()))?;
    let shape = shape_text[1..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| bad(format!("shape entry `{s}` is not a count")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let width = match dtype {
        Dtype::I64 => 8,
        Dtype::F32 => 4,
    };
    let data = bytes.split_off(10 + hlen);
    let want = shape.iter().product::<usize>() * width;
    if data.len() != want {
        return Err(bad(format!(
            "{} data bytes; the shape {shape:?} needs {want}",
            data.len()
        )));
    }
    Ok(NpyArray { dtype, shape, data })
}

/// One table of an exported trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestTable {
    pub rows: u64,
    pub weighted: bool,
}

/// The files of one exported batch (names relative to the directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestBatch {
    pub batch_size: usize,
    /// Per table: offsets, indices and (weighted tables) weights.
    pub tables: Vec<ManifestFiles>,
    pub dense: Option<String>,
    pub labels: Option<String>,
}

/// One table's files in one batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestFiles {
    pub offsets: String,
    pub indices: String,
    pub weights: Option<String>,
}

/// `manifest.json` of an exported trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// `nmpsim-npy/1`.
    pub format: String,
    /// The trace file exported.
    pub source: String,
    pub tables: Vec<ManifestTable>,
    pub num_dense: Option<u32>,
    pub batches: Vec<ManifestBatch>,
}

/// The format tag of [`Manifest::format`].
pub const MANIFEST_FORMAT: &str = "nmpsim-npy/1";

/// Writes every batch of `batches` (whose shape `header` describes) as
/// `.npy` files into `dir`, which must not exist yet (nor `dir.partial`):
/// the files are written into `dir.partial`, renamed to `dir` once complete,
/// so a failed export never looks like a short trace (and what it wrote is
/// removed). Returns the manifest.
pub fn export_dir<I>(
    header: &TraceHeader,
    source: &str,
    batches: I,
    dir: &Path,
) -> Result<Manifest, TraceError>
where
    I: IntoIterator<Item = Result<Batch, TraceError>>,
{
    let refuse_if_there = |path: &Path, what: &str| {
        if path.exists() {
            Err(TraceError::param(
                "dir",
                format!("{} {what}", path.display()),
            ))
        } else {
            Ok(())
        }
    };
    refuse_if_there(
        dir,
        "already exists; name a new directory (nothing is overwritten)",
    )?;
    let mut partial = dir.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    // Never removed here: it may be an interrupted export, or anything else.
    refuse_if_there(
        &partial,
        "exists (an interrupted export?); remove it or name another directory",
    )?;
    fs::create_dir_all(&partial).map_err(|e| TraceError::io(&partial, e))?;
    let result = write_batches(header, source, batches, &partial);
    match result {
        Ok(manifest) => {
            fs::rename(&partial, dir).map_err(|e| TraceError::io(dir, e))?;
            Ok(manifest)
        }
        Err(e) => {
            let _ = fs::remove_dir_all(&partial);
            Err(e)
        }
    }
}

fn write_batches(
    header: &TraceHeader,
    source: &str,
    batches: impl IntoIterator<Item = Result<Batch, TraceError>>,
    dir: &Path,
) -> Result<Manifest, TraceError> {
    let mut manifest = Manifest {
        format: MANIFEST_FORMAT.into(),
        source: source.into(),
        tables: header
            .table_rows
            .iter()
            .zip(&header.weighted)
            .map(|(&rows, &weighted)| ManifestTable { rows, weighted })
            .collect(),
        num_dense: header.num_dense,
        batches: Vec::new(),
    };
    for (k, batch) in batches.into_iter().enumerate() {
        let batch = batch?;
        header.check_batch(&batch)?;
        let b = batch.batch_size();
        let mut tables = Vec::with_capacity(batch.tables.len());
        for (t, tb) in batch.tables.iter().enumerate() {
            let name = |what: &str| format!("b{k:05}_t{t:03}_{what}.npy");
            let files = ManifestFiles {
                offsets: name("offsets"),
                indices: name("indices"),
                weights: tb.weights.as_ref().map(|_| name("weights")),
            };
            write_u32_as_i64(&dir.join(&files.offsets), &tb.offsets)?;
            write_u32_as_i64(&dir.join(&files.indices), &tb.indices)?;
            if let (Some(w), Some(f)) = (&tb.weights, &files.weights) {
                write_f32(&dir.join(f), &[w.len()], w)?;
            }
            tables.push(files);
        }
        let dense = match &batch.dense {
            Some(d) => {
                let f = format!("b{k:05}_dense.npy");
                write_f32(&dir.join(&f), &[b, batch.num_dense], d)?;
                Some(f)
            }
            None => None,
        };
        let labels = match &batch.labels {
            Some(l) => {
                let f = format!("b{k:05}_labels.npy");
                write_f32(&dir.join(&f), &[l.len()], l)?;
                Some(f)
            }
            None => None,
        };
        manifest.batches.push(ManifestBatch {
            batch_size: b,
            tables,
            dense,
            labels,
        });
    }
    let path = dir.join("manifest.json");
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| TraceError::param("manifest", e.to_string()))?;
    fs::write(&path, format!("{text}\n")).map_err(|e| TraceError::io(&path, e))?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TableBatch;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nmpsim-npy-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn headers_are_aligned_and_name_dtype_and_shape() {
        let h = header(Dtype::I64, &[7]);
        assert_eq!(h.len() % 64, 0);
        assert_eq!(*h.last().unwrap(), b'\n');
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }"));
        let h = header(Dtype::F32, &[3, 4]);
        assert!(
            std::str::from_utf8(&h[10..])
                .unwrap()
                .contains("'shape': (3, 4)")
        );
    }

    #[test]
    fn arrays_round_trip() {
        let d = tmp("roundtrip");
        fs::create_dir_all(&d).unwrap();
        let p = d.join("a.npy");
        write_u32_as_i64(&p, &[0, 1, u32::MAX]).unwrap();
        let a = read(&p).unwrap();
        assert_eq!(a.shape, vec![3]);
        assert_eq!(a.as_i64().unwrap(), vec![0, 1, i64::from(u32::MAX)]);
        assert!(a.as_f32().is_none());
        write_f32(&p, &[2, 2], &[1.0, -2.5, 0.0, f32::MIN_POSITIVE]).unwrap();
        let a = read(&p).unwrap();
        assert_eq!(a.shape, vec![2, 2]);
        assert_eq!(a.as_f32().unwrap(), vec![1.0, -2.5, 0.0, f32::MIN_POSITIVE]);
        assert!(write_f32(&p, &[3], &[1.0]).is_err());
        fs::write(&p, b"not numpy").unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("magic"));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_trace_exports_every_table_and_batch() {
        let d = tmp("export");
        let batch = |s: u32| Batch {
            tables: vec![
                TableBatch::new(10, vec![0, 2, 3], vec![s, 1, 9], None).unwrap(),
                TableBatch::new(7, vec![0, 0, 1], vec![6], Some(vec![0.5])).unwrap(),
            ],
            dense: Some(vec![1.0, 2.0, 3.0, 4.0]),
            num_dense: 2,
            labels: Some(vec![0.0, 1.0]),
        };
        let batches = [batch(3), batch(4)];
        let header = TraceHeader::for_batch(&batches[0], "");
        let m = export_dir(&header, "t.nmpt", batches.iter().cloned().map(Ok), &d).unwrap();
        assert_eq!(m.batches.len(), 2);
        assert_eq!(
            m.tables[1],
            ManifestTable {
                rows: 7,
                weighted: true
            }
        );
        let f = &m.batches[1].tables[0];
        assert_eq!(
            read(&d.join(&f.indices)).unwrap().as_i64().unwrap(),
            vec![4, 1, 9]
        );
        assert_eq!(
            read(&d.join(&f.offsets)).unwrap().as_i64().unwrap(),
            vec![0, 2, 3]
        );
        assert!(f.weights.is_none());
        let w = m.batches[0].tables[1].weights.as_ref().unwrap();
        assert_eq!(read(&d.join(w)).unwrap().as_f32().unwrap(), vec![0.5]);
        let dense = read(&d.join(m.batches[0].dense.as_ref().unwrap())).unwrap();
        assert_eq!(dense.shape, vec![2, 2]);
        let back: Manifest =
            serde_json::from_str(&fs::read_to_string(d.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(back, m);
        // An existing directory is never overwritten, nor a `.partial` one removed.
        let e = export_dir(&header, "t.nmpt", batches.iter().cloned().map(Ok), &d)
            .unwrap_err()
            .to_string();
        assert!(e.contains("already exists"), "{e}");
        fs::remove_dir_all(&d).unwrap();
        let mut partial = d.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        fs::create_dir_all(&partial).unwrap();
        fs::write(partial.join("keep.txt"), "mine").unwrap();
        let e = export_dir(&header, "t.nmpt", batches.iter().cloned().map(Ok), &d)
            .unwrap_err()
            .to_string();
        assert!(e.contains("interrupted export"), "{e}");
        assert_eq!(
            fs::read_to_string(partial.join("keep.txt")).unwrap(),
            "mine"
        );
        fs::remove_dir_all(&partial).unwrap();
    }

    #[test]
    fn a_failed_export_leaves_nothing_behind() {
        let d = tmp("failed");
        let good = Batch {
            tables: vec![TableBatch::new(10, vec![0, 1], vec![3], None).unwrap()],
            dense: None,
            num_dense: 0,
            labels: None,
        };
        let header = TraceHeader::for_batch(&good, "");
        let batches = vec![
            Ok(good),
            Err(TraceError::param("batch", "corrupt on purpose")),
        ];
        let e = export_dir(&header, "t.nmpt", batches, &d).unwrap_err();
        assert!(e.to_string().contains("corrupt on purpose"));
        assert!(!d.exists());
        let mut partial = d.as_os_str().to_owned();
        partial.push(".partial");
        assert!(!PathBuf::from(partial).exists());
    }
}
