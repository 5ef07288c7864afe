//! A digest of the native engine's behaviour over 60 fixed cases: five presets
//! (1, 2 and 4 ranks), six streams (random with 0, 30% and 90% writes,
//! sequential with 0 and 50%, strided with 10%; 40 000 requests, seed 7) and
//! two front ends (window 32 at one request per cycle, window 256 at four).
//! Each case hashes every completion (id and cycle), the final cycle and the
//! command log; the last line is a digest of all of them.
//!
//! Run it before and after a change meant to make the engine faster without
//! changing what it does; the `TOTAL` lines must match:
//!
//! ```sh
//! cargo run --release -p nmpsim-sim --example native_digest
//! ```
use nmpsim_sim::native::NativeEngine;
use nmpsim_sim::source::{StreamKind, StreamSpec, synthetic};
use nmpsim_sim::{Completion, DramConfig, DramEngine, Request};
use std::collections::HashSet;

fn fnv(h: &mut u64, x: u64) {
    for b in x.to_le_bytes() {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x100000001b3);
    }
}

fn run(cfg: &DramConfig, spec: &StreamSpec, window: usize, per_cycle: usize) -> u64 {
    let mut e = NativeEngine::with_command_log(cfg).unwrap();
    let mut src = synthetic(spec, cfg.capacity_bytes()).unwrap();
    let mut h = 0xcbf29ce484222325u64;
    let mut inflight: HashSet<u64> = HashSet::new();
    let mut done: Vec<Completion> = Vec::new();
    let mut next = None;
    let mut exhausted = false;
    let mut id = 0u64;
    loop {
        let mut issued = 0;
        while !exhausted && issued < per_cycle && inflight.len() < window {
            if next.is_none() {
                next = src.next();
            }
            let Some(op) = next else {
                exhausted = true;
                break;
            };
            let op: nmpsim_sim::MemOp = op;
            if !e
                .try_send(Request {
                    id,
                    addr: op.addr,
                    access: op.access,
                })
                .unwrap()
            {
                break;
            }
            inflight.insert(id);
            id += 1;
            next = None;
            issued += 1;
        }
        if !inflight.is_empty() && (exhausted || inflight.len() >= window) {
            let limit = e.cycle() + 1_000_001;
            e.tick_until_done(limit, &mut done);
        } else {
            e.tick(&mut done);
        }
        for c in done.drain(..) {
            assert!(inflight.remove(&c.id));
            fnv(&mut h, c.id);
            fnv(&mut h, c.cycle);
        }
        if exhausted && inflight.is_empty() && !e.draining() {
            break;
        }
    }
    fnv(&mut h, e.cycle());
    for r in e.command_log() {
        fnv(&mut h, r.cycle);
        fnv(&mut h, ((r.rank as u64) << 32) | r.bank as u64);
        fnv(&mut h, r.command as u64);
    }
    h
}

fn main() {
    let presets = [
        "DDR4-3200-x8",
        "DDR4-2400-x4",
        "DDR4-2400-x16-2R",
        "DDR4-3200-x8-4R",
        "DDR4-2400-x8-2R",
    ];
    let streams: Vec<(StreamKind, f64, Option<u64>)> = vec![
        (StreamKind::Random, 0.0, None),
        (StreamKind::Random, 0.3, None),
        (StreamKind::Random, 0.9, Some(1 << 20)),
        (StreamKind::Sequential, 0.0, None),
        (StreamKind::Sequential, 0.5, None),
        (StreamKind::Strided { stride_bytes: 8192 }, 0.1, None),
    ];
    let mut total = 0xcbf29ce484222325u64;
    for p in presets {
        let cfg = DramConfig::preset(p).unwrap();
        for (k, w, f) in &streams {
            for (win, pc) in [(32, 1), (256, 4)] {
                let mut spec = StreamSpec::new(*k, 40_000);
                spec.write_fraction = *w;
                spec.seed = 7;
                spec.footprint_bytes = *f;
                let d = run(&cfg, &spec, win, pc);
                println!("{p:18} {k:14} w={w:.1} win={win:3} {d:016x}");
                fnv(&mut total, d);
            }
        }
    }
    println!("TOTAL {total:016x}");
}
