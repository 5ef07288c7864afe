//! What bounds a random-row gather on this machine: the latency of one
//! dependent load, and how many loads a core keeps in flight.
//!
//! The forward gather-reduce of a table far larger than the caches reads
//! rows at random. Once its loop issues them as fast as it can (prefetch,
//! register accumulators), its speed is the memory's: rows per second per
//! core = loads in flight / latency. This probe measures both, on memory
//! advised for huge pages as the tables are ([`zeroed_huge`]):
//!
//! - **latency**: one chain of dependent loads through a random cyclic
//!   permutation of a region's 64-byte lines, for regions from 1 MiB up;
//! - **loads in flight**: `k` independent chains through one region (256
//!   MiB by default: one RM1 table of 1M rows of 64 f32), on one thread and
//!   on every thread of the pool: lines per second, as GB/s of 64-byte lines.
//!
//! ```sh
//! cargo run --release -p nmpsim-kernels --example memory_probe
//! cargo run --release -p nmpsim-kernels --example memory_probe -- --max-mib 256 --chains-mib 64
//! ```
//!
//! Every figure it prints is measured (wall clock over a few million loads);
//! `docs/performance.md` quotes a run and the command.

use std::time::Instant;

use nmpsim_kernels::table::{SplitMix64, zeroed_huge};
use rayon::prelude::*;

/// f32 words of a 64-byte line.
const LINE_WORDS: usize = 16;

/// A region of `lines` 64-byte lines whose first words form one random cycle
/// through every line (Sattolo's algorithm): following it visits them all.
/// A link is a line index stored as the bits of an f32, so that the region is
/// a [`zeroed_huge`] allocation like the tables.
fn cycle(lines: usize, seed: u64) -> Vec<f32> {
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..lines).rev() {
        let j = (rng.next_u64() % i as u64) as usize;
        order.swap(i, j);
    }
    let mut region = zeroed_huge(lines * LINE_WORDS);
    for i in 0..lines {
        region[order[i] as usize * LINE_WORDS] = f32::from_bits(order[(i + 1) % lines]);
    }
    region
}

/// Ns per step of `chains` independent walks of `steps` steps each, every
/// step one dependent load of a line (whose first word names the next).
fn walk(region: &[f32], chains: usize, steps: usize, start: usize) -> (f64, u32) {
    let lines = region.len() / LINE_WORDS;
    let mut at: Vec<usize> = (0..chains)
        .map(|c| (start + c * (lines / chains.max(1))) % lines)
        .collect();
    let t0 = Instant::now();
    for _ in 0..steps {
        for p in at.iter_mut() {
            *p = region[*p * LINE_WORDS].to_bits() as usize;
        }
    }
    let ns = t0.elapsed().as_nanos() as f64 / steps as f64;
    (ns, at.iter().fold(0, |a, &p| a ^ p as u32))
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .map(|i| {
            args.get(i + 1)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} takes a whole number"))
        })
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let max_mib = arg(&args, "--max-mib", 2048).max(1);
    let chains_mib = arg(&args, "--chains-mib", 256).max(1);
    let threads = rayon::current_num_threads();
    let mut sink = 0u32;
    println!("dependent-load latency: one chain, huge-page-advised memory (measured)");
    println!("{:>9}  {:>10}", "region", "ns / load");
    for mib in [1usize, 2, 4, 8, 16, 64, 256, 1024, 2048, 4096] {
        if mib > max_mib {
            break;
        }
        let (ns, s) = walk(&cycle(mib << 14, mib as u64), 1, 1_000_000, 0);
        sink ^= s;
        println!("{mib:>5} MiB  {ns:>10.1}");
    }
    let region = cycle(chains_mib << 14, 7);
    println!();
    println!(
        "loads in flight: k independent chains through {chains_mib} MiB, 64-byte lines (measured)"
    );
    println!(
        "{:>6}  {:>12}  {:>13}  {:>22}",
        "chains",
        "ns per step",
        "1 thread GB/s",
        format!("{threads} threads GB/s (sum)")
    );
    for k in [1usize, 2, 4, 8, 12, 16, 24, 32, 48] {
        let steps = (4_000_000 / k).max(1000);
        let (ns, s) = walk(&region, k, steps, 0);
        sink ^= s;
        let all: Vec<(f64, u32)> = (0..threads)
            .into_par_iter()
            .map(|t| walk(&region, k, steps, 1 + t * 7919))
            .collect();
        let total: f64 = all.iter().map(|&(ns, _)| k as f64 * 64.0 / ns).sum();
        sink ^= all.iter().fold(0, |a, &(_, s)| a ^ s);
        println!(
            "{k:>6}  {ns:>12.1}  {:>13.2}  {total:>22.2}",
            k as f64 * 64.0 / ns
        );
    }
    // Printed so that no walk is optimised away.
    println!("(checksum {sink:x})");
}
