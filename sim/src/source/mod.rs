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

//!
//! One file per kind: `stream.rs`, `address.rs`, `embedding.rs`.

use crate::BURST_BYTES;

mod address;
mod embedding;
mod stream;

pub use address::*;
pub use embedding::*;
pub use stream::*;

/// Alignment of every table base in an [`EmbeddingLayout`].
pub const TABLE_ALIGN_BYTES: u64 = 4096;

/// Bytes per embedding element (f32).
pub(crate) const ELEMENT_BYTES: u64 = 4;

/// `x` rounded up to a multiple of `align` (a power of two), or `None` on overflow.
pub(crate) fn align_up(x: u64, align: u64) -> Option<u64> {
    debug_assert!(align.is_power_of_two());
    x.checked_add(align - 1).map(|v| v & !(align - 1))
}

pub(crate) fn align_down(x: u64) -> u64 {
    x & !(BURST_BYTES - 1)
}

#[cfg(test)]
mod tests {
    use super::address::{MAX_LINE_BYTES, parse_plain};
    use super::*;
    use crate::{Access, MemOp, SimError};
    use nmpsim_traces::Batch;
    use nmpsim_traces::{TableBatch, TraceHeader, TraceWriter};
    use proptest::prelude::*;
    use std::io::Cursor;
    use std::path::{Path, PathBuf};

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
        tempfile::Builder::new()
            .prefix(&format!("nmpsim-source-{name}-"))
            .tempdir()
            .unwrap()
            .keep()
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
