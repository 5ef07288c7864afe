//! What the engine tests share: a stream over a few lines, the streams every
//! command-log check runs, the "no violation" assertion and a planted tRCD
//! violation, and a scratch directory per process. (Each test crate, and
//! the engines' bench, uses some of them.)
#![allow(dead_code)]

use std::path::PathBuf;

use nmpsim_sim::MemOp;
use nmpsim_sim::jedec::{Command, CommandRecord, Violation};
use nmpsim_sim::source::StreamKind;

/// `n` requests over only 6 lines, drawn by a fixed generator: many reads
/// to one address queue together and reads hit queued writes. The `i`-th
/// request is a write where `is_write(i)`.
pub fn few_lines(n: u64, is_write: impl Fn(u64) -> bool) -> Vec<MemOp> {
    let lines: Vec<u64> = (0..6u64).map(|i| i * 64 * 4096 + 128).collect();
    let mut ops = Vec::new();
    let mut x = 12345u64;
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let addr = lines[(x >> 33) as usize % lines.len()];
        ops.push(if is_write(i) {
            MemOp::write(addr)
        } else {
            MemOp::read(addr)
        });
    }
    ops
}

/// Random and sequential mixes of reads and writes on x8 and x4 parts
/// (preset, stream, write fraction): the start of every log check's cases.
pub fn mixed_streams() -> [(&'static str, StreamKind, f64); 3] {
    [
        ("DDR4-2400-x8", StreamKind::Random, 0.3),
        ("DDR4-3200-x8", StreamKind::Random, 0.3),
        ("DDR4-3200-x4", StreamKind::Sequential, 0.5),
    ]
}

/// Fails, naming `what` and the first violations, unless `v` (found in a
/// log of `commands` commands) is empty.
pub fn assert_no_violation(v: &[Violation], commands: usize, what: &str) {
    assert!(
        v.is_empty(),
        "{what}: {} violations in {} commands, first: {}",
        v.len(),
        commands,
        v.iter()
            .take(5)
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    );
}

/// `log` with its first RD moved to one cycle after its bank's ACT: a tRCD
/// violation.
pub fn planted_trcd(log: &[CommandRecord]) -> Vec<CommandRecord> {
    let i = log.iter().position(|r| r.command == Command::Rd).unwrap();
    let act = log[..i]
        .iter()
        .rev()
        .find(|r| r.command == Command::Act && r.bank == log[i].bank && r.rank == log[i].rank)
        .unwrap()
        .cycle;
    let mut planted = log.to_vec();
    planted[i].cycle = act + 1;
    planted.sort_by_key(|r| r.cycle);
    planted
}

/// `<temp>/<name>-<process id>`, created.
pub fn process_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
