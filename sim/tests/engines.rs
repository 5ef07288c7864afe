//! The physical facts and cross-checks every engine must satisfy.

use std::collections::HashSet;

mod common;

use common::few_lines;

use nmpsim_sim::source::{StreamKind, StreamSpec, synthetic};
use nmpsim_sim::{
    Completion, Coord, DramConfig, DramStats, EngineKind, MemOp, Request, RunOptions, SimError,
    create_engine, on_fresh_thread, simulate,
};

fn preset(name: &str) -> DramConfig {
    DramConfig::preset(name).unwrap()
}

fn run_stream(
    engine: EngineKind,
    cfg: &DramConfig,
    kind: StreamKind,
    n: u64,
    write_fraction: f64,
) -> DramStats {
    let spec = StreamSpec {
        write_fraction,
        seed: 7,
        ..StreamSpec::new(kind, n)
    };
    let src = synthetic(&spec, cfg.capacity_bytes()).unwrap().map(Ok);
    simulate(engine, cfg, src, &RunOptions::default(), None).unwrap()
}

fn run_ops(engine: EngineKind, cfg: &DramConfig, ops: Vec<MemOp>) -> Result<DramStats, SimError> {
    simulate(
        engine,
        cfg,
        ops.into_iter().map(Ok),
        &RunOptions::default(),
        None,
    )
}

#[test]
fn sequential_reads_reach_90_percent_of_peak_on_dramsim3() {
    let cfg = preset("DDR4-3200-x8");
    assert!((cfg.peak_bandwidth_gbps() - 25.6).abs() < 1e-9);
    let s = run_stream(
        EngineKind::Dramsim3,
        &cfg,
        StreamKind::Sequential,
        100_000,
        0.0,
    );
    assert_eq!(s.reads, 100_000);
    assert!(
        s.bandwidth_gbps >= 0.9 * 25.6,
        "sequential bandwidth {:.2} GB/s is below 90% of 25.6 GB/s",
        s.bandwidth_gbps
    );
    assert!(s.bandwidth_gbps <= 25.6);
    let rate = s.row_hit_rate.expect("column commands issued");
    assert!(rate > 0.95, "row hit rate {rate}");
}

/// The activation-rate bound for random 64 B reads, derived here from the
/// preset's timing: four ACTs per tFAW, one per tRRD_S, `banks` per tRC, and
/// no ACT during the tRFC of every tREFI.
fn activation_bound_gbps(cfg: &DramConfig) -> f64 {
    let t = &cfg.timing;
    let per_cycle = [
        4.0 / t["tFAW"] as f64,
        1.0 / t["tRRD_S"] as f64,
        cfg.org.banks() as f64 / t["tRC"] as f64,
    ]
    .into_iter()
    .fold(f64::INFINITY, f64::min);
    per_cycle * 64.0 / t.tck_ns * (1.0 - t["tRFC"] as f64 / t["tREFI"] as f64)
}

#[test]
fn random_reads_stay_under_the_activation_bound() {
    let cfg = preset("DDR4-3200-x8");
    let bound = activation_bound_gbps(&cfg);
    assert!((bound - cfg.activation_bound_gbps()).abs() < 1e-9);
    assert!(bound > 11.0 && bound < 12.1, "bound {bound}");
    for engine in EngineKind::ALL {
        let s = run_stream(engine, &cfg, StreamKind::Random, 40_000, 0.0);
        assert!(
            s.bandwidth_gbps < bound,
            "{engine}: {:.3} GB/s exceeds the activation bound {bound:.3}",
            s.bandwidth_gbps
        );
        assert!(
            s.bandwidth_gbps > 0.75 * bound,
            "{engine}: {:.3} GB/s is below 75% of the activation bound {bound:.3}",
            s.bandwidth_gbps
        );
        // One line per activation.
        assert!(s.activations as f64 > 0.99 * s.reads as f64);
    }
    // tFAW, tRRD and tRC hold per rank: two ranks go past one rank's bound,
    // and stay under the channel's.
    let two = preset("DDR4-2400-x8-2R");
    let s = run_stream(EngineKind::Native, &two, StreamKind::Random, 40_000, 0.0);
    assert!(
        s.bandwidth_gbps > two.rank_activation_bound_gbps(),
        "{:.3} GB/s",
        s.bandwidth_gbps
    );
    assert!(
        s.bandwidth_gbps < two.activation_bound_gbps(),
        "{:.3} GB/s exceeds {:.3}",
        s.bandwidth_gbps,
        two.activation_bound_gbps()
    );
}

fn within(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.max(b)
}

#[test]
fn engines_agree_on_jedec_ddr4_2400() {
    let cfg = preset("DDR4-2400-x8");
    assert!(cfg.ramulator_timing_differences().is_empty());
    for kind in [StreamKind::Sequential, StreamKind::Random] {
        let a = run_stream(EngineKind::Dramsim3, &cfg, kind, 30_000, 0.0);
        let b = run_stream(EngineKind::Ramulator, &cfg, kind, 30_000, 0.0);
        assert!(
            within(a.bandwidth_gbps, b.bandwidth_gbps, 0.15),
            "{kind}: dramsim3 {:.3} GB/s vs ramulator {:.3} GB/s",
            a.bandwidth_gbps,
            b.bandwidth_gbps
        );
        assert!(
            within(
                a.read_latency_mean_ns.unwrap(),
                b.read_latency_mean_ns.unwrap(),
                0.15
            ),
            "{kind}: mean read latency dramsim3 {:.1} ns vs ramulator {:.1} ns",
            a.read_latency_mean_ns.unwrap(),
            b.read_latency_mean_ns.unwrap()
        );
        assert!(
            within(a.activations as f64, b.activations as f64, 0.15),
            "{kind}: activations {} vs {}",
            a.activations,
            b.activations
        );
    }
}

/// N reads to one open row, then N reads each to a new row of the same bank.
fn hand_countable_stream(cfg: &DramConfig, n: u64) -> Vec<MemOp> {
    let mut ops = Vec::new();
    for col in 0..n {
        ops.push(MemOp::read(cfg.encode(Coord {
            row: 0,
            column: col,
            ..Coord::default()
        })));
    }
    for row in 1..=n {
        ops.push(MemOp::read(cfg.encode(Coord {
            row,
            column: 0,
            ..Coord::default()
        })));
    }
    ops
}

#[test]
fn energy_of_a_hand_countable_stream() {
    let cfg = preset("DDR4-3200-x8");
    let n = 100u64;
    assert!(n <= cfg.org.bursts_per_row());
    for engine in EngineKind::ALL {
        let s = run_ops(engine, &cfg, hand_countable_stream(&cfg, n)).unwrap();
        // The run is shorter than tREFI, so no refresh.
        assert!(
            s.cycles < cfg.timing["tREFI"] as u64,
            "{engine}: {} cycles",
            s.cycles
        );
        assert_eq!(s.refreshes, 0, "{engine}");
        assert_eq!(s.activations, 1 + n, "{engine}");
        assert_eq!(s.read_cmds, 2 * n, "{engine}");
        assert_eq!(s.row_hits, n - 1, "{engine}");

        // By hand, from the datasheet currents of the preset: V x mA x ns = pJ.
        let p = &cfg.power;
        let t = &cfg.timing;
        let devices = 8.0;
        let tck = 0.625;
        let k = p.vdd_v * devices * tck;
        let e_act = k * (p.idd0_ma * 74.0 - (p.idd3n_ma * 52.0 + p.idd2n_ma * 22.0));
        let e_rd = k * (p.idd4r_ma - p.idd3n_ma) * 4.0;
        // Every new row waits tRP with the bank closed; otherwise a row is open.
        let precharged = n as f64 * t["tRP"] as f64;
        let active = s.cycles as f64 - precharged;
        let background = k * (p.idd3n_ma * active + p.idd2n_ma * precharged);
        let hand = (1 + n) as f64 * e_act + (2 * n) as f64 * e_rd + background;
        let rel = (s.energy.total_pj - hand).abs() / hand;
        assert!(
            rel < 0.02,
            "{engine}: simulated {:.0} pJ vs hand {hand:.0} pJ ({:.2}% off)",
            s.energy.total_pj,
            rel * 100.0
        );
    }
}

#[test]
fn dramsim3_energy_after_unit_conversion_equals_the_shared_model() {
    let cfg = preset("DDR4-2400-x8");
    let s = run_stream(EngineKind::Dramsim3, &cfg, StreamKind::Random, 20_000, 0.3);
    let own = s.engine_energy.clone().expect("DRAMsim3 reports energy");
    for (name, a, b) in [
        ("activate", own.activate_pj, s.energy.activate_pj),
        ("read", own.read_pj, s.energy.read_pj),
        ("write", own.write_pj, s.energy.write_pj),
        ("refresh", own.refresh_pj, s.energy.refresh_pj),
        ("background", own.background_pj, s.energy.background_pj),
        ("total", own.total_pj, s.energy.total_pj),
    ] {
        assert!(
            (a - b).abs() <= 1e-9 * b.max(1.0),
            "{name}: DRAMsim3 {a} pJ vs model {b} pJ"
        );
    }
    assert!(s.energy.write_pj > 0.0 && s.refreshes > 0);
}

/// Sends every op with its own id straight to the engine and returns the ids
/// that completed, in order.
fn completions(engine: EngineKind, cfg: &DramConfig, ops: &[MemOp]) -> (Vec<u64>, u64) {
    let dir = common::process_dir(&format!("nmpsim-sim-test-{}", engine.name()));
    let out = on_fresh_thread(|| {
        let mut e = create_engine(engine, cfg, &dir).unwrap();
        let mut done: Vec<Completion> = Vec::new();
        let mut ids = Vec::new();
        let mut next = 0usize;
        let mut cycles = 0u64;
        while ids.len() < ops.len() || e.draining() {
            if next < ops.len() {
                let op = ops[next];
                let req = Request {
                    id: 1000 + next as u64,
                    addr: op.addr,
                    access: op.access,
                };
                if e.try_send(req).unwrap() {
                    next += 1;
                }
            }
            e.tick(&mut done);
            ids.extend(done.drain(..).map(|c| c.id));
            cycles += 1;
            assert!(cycles < 10_000_000, "{engine}: no progress");
        }
        assert_eq!(e.pending(), 0);
        let report = e.finish().unwrap();
        (ids, report.counts.read_cmds)
    });
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn every_request_completes_exactly_once_even_when_reads_merge() {
    let cfg = preset("DDR4-3200-x8");
    // 3000 requests over only 6 lines: many reads to one address are queued
    // together (DRAMsim3 serves them with one READ) and some reads hit
    // queued writes.
    let ops = few_lines(3000, |i| i % 10 == 9);
    for engine in EngineKind::ALL {
        let (ids, read_cmds) = completions(engine, &cfg, &ops);
        assert_eq!(ids.len(), ops.len(), "{engine}");
        let unique: HashSet<u64> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ops.len(), "{engine}: an id completed twice");
        assert!(
            unique
                .iter()
                .all(|&id| (1000..1000 + ops.len() as u64).contains(&id))
        );
        let reads = ops.iter().filter(|o| !o.access.is_write()).count() as u64;
        // Merged reads and reads served from the write queue issue no READ.
        assert!(
            read_cmds < reads,
            "{engine}: {read_cmds} READs for {reads} reads: nothing merged"
        );
    }
}

#[test]
fn mixed_streams_finish_with_all_writes_issued() {
    let cfg = preset("DDR4-2400-x8");
    for engine in EngineKind::ALL {
        let s = run_stream(engine, &cfg, StreamKind::Random, 10_000, 0.5);
        assert_eq!(s.reads + s.writes, 10_000, "{engine}");
        assert!(
            s.writes > 4_500 && s.writes < 5_500,
            "{engine}: {}",
            s.writes
        );
        // DRAMsim3 drains its write buffer only when it holds more than 8
        // writes with idle command queues, or is full: when traffic stops, up
        // to a buffer's worth may stay unissued. Ramulator runs are drained.
        let left = match engine {
            EngineKind::Dramsim3 => cfg.transaction_queue as u64,
            EngineKind::Ramulator | EngineKind::Native => 0,
        };
        assert!(
            s.write_cmds + left >= s.writes && s.write_cmds <= s.writes,
            "{engine}: {} WRITEs for {} writes",
            s.write_cmds,
            s.writes
        );
    }
}

#[test]
fn an_address_beyond_capacity_is_an_error() {
    let cfg = preset("DDR4-3200-x8");
    let cap = cfg.capacity_bytes();
    for engine in EngineKind::ALL {
        let err = run_ops(engine, &cfg, vec![MemOp::read(0), MemOp::read(cap)]).unwrap_err();
        match err {
            SimError::AddressOutOfRange { addr, capacity, .. } => {
                assert_eq!((addr, capacity), (cap, cap));
            }
            e => panic!("{engine}: expected AddressOutOfRange, got {e}"),
        }
        let msg = run_ops(engine, &cfg, vec![MemOp::write(cap + 4096)])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("beyond the configured capacity"), "{msg}");
        assert!(msg.contains("request #0"), "{msg}");
    }
}

#[test]
fn multi_rank_channels_run_on_both_engines() {
    let one = preset("DDR4-3200-x8");
    let two = preset("DDR4-3200-x8-2R");
    assert_eq!(two.capacity_bytes(), 2 * one.capacity_bytes());
    let mut bw = Vec::new();
    for engine in EngineKind::ALL {
        let s1 = run_stream(engine, &one, StreamKind::Random, 20_000, 0.0);
        let s2 = run_stream(engine, &two, StreamKind::Random, 20_000, 0.0);
        assert_eq!(s2.reads, 20_000);
        // Two ranks double the activation budget (tFAW is per rank).
        assert!(
            s2.bandwidth_gbps > 1.3 * s1.bandwidth_gbps,
            "{engine}: 2R {:.2} GB/s vs 1R {:.2} GB/s",
            s2.bandwidth_gbps,
            s1.bandwidth_gbps
        );
        assert!(s2.bandwidth_gbps < two.peak_bandwidth_gbps());
        bw.push(s2.bandwidth_gbps);
    }
    assert!(within(bw[0], bw[1], 0.15), "2R: {bw:?}");
}

#[test]
fn a_thread_hosts_one_ramulator_instance_and_fresh_threads_work() {
    let cfg = preset("DDR4-2400-x8");
    let dir = std::env::temp_dir().join(format!("nmpsim-sim-thread-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let second = on_fresh_thread(|| {
        let first = create_engine(EngineKind::Ramulator, &cfg, &dir);
        assert!(first.is_ok());
        create_engine(EngineKind::Ramulator, &cfg, &dir)
            .err()
            .map(|e| e.to_string())
    });
    let msg = second.expect("a second instance on one thread must be refused");
    assert!(msg.contains("fresh thread"), "{msg}");
    // Runs through `simulate` each get their own thread.
    for _ in 0..2 {
        let s = run_stream(
            EngineKind::Ramulator,
            &cfg,
            StreamKind::Sequential,
            2_000,
            0.0,
        );
        assert_eq!(s.reads, 2_000);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reads merged into a queued read of their address use no bus time: the
/// requests' bandwidth may pass the peak, the bus's may not.
#[test]
fn bus_bandwidth_counts_commands_and_stays_under_the_peak() {
    let cfg = preset("DDR4-3200-x8");
    // 400 reads of one 4 KB page over and over: most merge.
    let ops: Vec<MemOp> = (0..400u64).map(|i| MemOp::read((i % 8) * 64)).collect();
    for engine in [EngineKind::Dramsim3, EngineKind::Native] {
        let s = run_ops(engine, &cfg, ops.clone()).unwrap();
        let bus = (s.read_cmds + s.write_cmds) as f64 * 64.0 / s.sim_time_ns;
        assert!((s.bus_bandwidth_gbps - bus).abs() < 1e-9, "{engine}");
        assert!(s.read_cmds < s.reads, "{engine}: some reads merge");
        assert!(s.bandwidth_gbps > s.bus_bandwidth_gbps, "{engine}");
        assert!(s.bus_utilisation <= 1.0, "{engine}: {}", s.bus_utilisation);
        assert!(
            (s.bus_utilisation - s.bus_bandwidth_gbps / s.peak_bandwidth_gbps).abs() < 1e-12,
            "{engine}"
        );
    }
    // Without merges the two are the same.
    let s = run_stream(EngineKind::Native, &cfg, StreamKind::Sequential, 2000, 0.0);
    assert_eq!(s.bus_bandwidth_gbps, s.bandwidth_gbps);
}

/// Ramulator's configuration splits at spaces, tabs and `=`: a work
/// directory whose path holds them (or a line end) gets the same command
/// counts as a plain one, the traces land in it, and nothing is left behind.
#[test]
fn ramulator_work_directories_may_hold_spaces_and_equals_signs() {
    let cfg = preset("DDR4-2400-x8");
    let base = std::env::temp_dir().join(format!("nmpsim-sim-odd-{}", std::process::id()));
    let run = |dir: &std::path::Path| {
        let spec = StreamSpec {
            seed: 3,
            ..StreamSpec::new(StreamKind::Random, 1_000)
        };
        let src = synthetic(&spec, cfg.capacity_bytes()).unwrap().map(Ok);
        let opts = RunOptions {
            work_dir: Some(dir.to_path_buf()),
            keep_command_traces: true,
            ..RunOptions::default()
        };
        simulate(EngineKind::Ramulator, &cfg, src, &opts, None).unwrap()
    };
    let plain = run(&base.join("plain"));
    assert!(plain.activations > 0);
    for odd in ["a b", "a=b", "tab\there", "line\nend"] {
        let dir = base.join(odd);
        let s = run(&dir);
        assert_eq!(
            (s.cycles, s.activations, s.read_cmds, s.energy.total_pj),
            (
                plain.cycles,
                plain.activations,
                plain.read_cmds,
                plain.energy.total_pj
            ),
            "{odd:?}"
        );
        assert!(
            dir.join("ramulator-chan-0-rank-0.cmdtrace").is_file(),
            "{odd:?}"
        );
    }
    // Only the five work directories: no trace written beside them, and
    // no link left in the temporary directory.
    assert_eq!(std::fs::read_dir(&base).unwrap().count(), 5);
    let _ = std::fs::remove_dir_all(&base);
    let links = format!("nmpsim-ramulator-link-{}-", std::process::id());
    let left = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&links))
        .count();
    assert_eq!(left, 0);
}

/// HBM2 (a legacy channel of 128 bits at 2 Gb/s a pin): sequential reads
/// near the channel's 32 GB/s peak (refresh takes tRFC of every tREFI, and
/// each 2 KB row ends in a row switch), random reads under the activation
/// bound derived above, on native and DRAMsim3 alike; Ramulator, which has
/// no HBM2, refuses it by name.
#[test]
fn hbm2_bandwidth_is_within_the_physics() {
    let cfg = preset("HBM2-2000");
    assert!((cfg.peak_bandwidth_gbps() - 32.0).abs() < 1e-9);
    let bound = activation_bound_gbps(&cfg);
    assert!((bound - cfg.activation_bound_gbps()).abs() < 1e-9);
    // Four ACTs per tFAW of 30 ns, 64 B each, less refresh's 260 of 3900.
    assert!((bound - 4.0 / 30.0 * 64.0 * (1.0 - 260.0 / 3900.0)).abs() < 1e-9);
    for engine in [EngineKind::Native, EngineKind::Dramsim3] {
        let s = run_stream(engine, &cfg, StreamKind::Sequential, 100_000, 0.0);
        assert!(
            s.bandwidth_gbps <= 32.0 * (1.0 - 260.0 / 3900.0) && s.bandwidth_gbps >= 0.88 * 32.0,
            "{engine}: sequential {:.3} GB/s",
            s.bandwidth_gbps
        );
        let r = run_stream(engine, &cfg, StreamKind::Random, 40_000, 0.0);
        assert!(
            r.bandwidth_gbps < bound && r.bandwidth_gbps > 0.9 * bound,
            "{engine}: random {:.3} GB/s against the bound {bound:.3}",
            r.bandwidth_gbps
        );
    }
    let e = run_stream_result(EngineKind::Ramulator, &cfg)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Ramulator 1 has no HBM2"), "{e}");
}

/// An HBM2 pseudo-channel (64 bits, BL4: 32 B bursts, 16 GB/s): each 64 B
/// request is served as two bursts of one row (one activation), so
/// sequential reads come near the pseudo-channel's peak and random reads
/// under the same activation bound as a legacy channel's; both engines
/// count the bursts and the requests' bytes alike; Ramulator refuses it.
#[test]
fn hbm2_pseudo_channels_serve_a_request_as_two_bursts_within_the_physics() {
    let cfg = preset("HBM2-2000-PC");
    assert_eq!(cfg.burst_bytes(), 32);
    assert_eq!(cfg.capacity_bytes(), 512 << 20);
    assert_eq!(cfg.org.rank_row_bytes(), 1024);
    assert!((cfg.peak_bandwidth_gbps() - 16.0).abs() < 1e-9);
    let bound = activation_bound_gbps(&cfg);
    assert!((bound - cfg.activation_bound_gbps()).abs() < 1e-9);
    assert!((bound - preset("HBM2-2000").activation_bound_gbps()).abs() < 1e-9);
    let n = 40_000;
    for engine in [EngineKind::Native, EngineKind::Dramsim3] {
        let s = run_stream(engine, &cfg, StreamKind::Sequential, 2 * n, 0.0);
        assert_eq!((s.reads, s.bytes), (4 * n, 128 * n), "{engine}: sequential");
        assert!(
            s.bandwidth_gbps <= 16.0 * (1.0 - 260.0 / 3900.0) && s.bandwidth_gbps >= 0.88 * 16.0,
            "{engine}: sequential {:.3} GB/s",
            s.bandwidth_gbps
        );
        let r = run_stream(engine, &cfg, StreamKind::Random, n, 0.0);
        assert_eq!((r.reads, r.read_cmds, r.bytes), (2 * n, 2 * n, 64 * n));
        assert!(
            r.bandwidth_gbps < bound && r.bandwidth_gbps > 0.9 * bound,
            "{engine}: random {:.3} GB/s against the bound {bound:.3}",
            r.bandwidth_gbps
        );
        // One activation a request, give or take the rows refresh closes.
        assert!(
            r.activations >= n && r.activations < n + n / 50,
            "{engine}: {} activations for {n} requests",
            r.activations
        );
    }
    let e = run_stream_result(EngineKind::Ramulator, &cfg)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Ramulator 1 has no HBM2"), "{e}");
}

/// HBM (JESD235, a channel of 128 bits at 1 Gb/s a pin, BL4: 64 B bursts
/// in 2 cycles of 2 ns, 16 GB/s): the one HBM channel all three engines
/// run. Sequential reads fill a 2 KB row (32 bursts), then the next bank
/// of the same group (the preset's row : bank group : bank : column
/// mapping): a read a tCCD_L of 3 cycles (2/3 of the peak, less refresh) is
/// what one bank group allows, and the scheduler beats it only while its
/// window straddles two groups, where reads alternate at tCCD_S = 2, so the
/// bus (16 GB/s less refresh) bounds them from above and 85% of the
/// one-group rate from below; random reads stay under the activation bound.
/// Native equals DRAMsim3 to the cycle, and Ramulator, whose timing table is
/// the preset's and whose controller issues one command a cycle, is within
/// 15% of DRAMsim3 in bandwidth, mean read latency and activations.
#[test]
fn hbm_runs_on_all_three_engines_and_the_references_agree_within_15_percent() {
    let cfg = preset("HBM-1000");
    assert_eq!(cfg.burst_bytes(), 64);
    assert_eq!(cfg.capacity_bytes(), 512 << 20);
    assert!((cfg.peak_bandwidth_gbps() - 16.0).abs() < 1e-9);
    assert!(cfg.ramulator_timing_differences().is_empty());
    let refresh = 1.0 - 130.0 / 1950.0;
    let bound = activation_bound_gbps(&cfg);
    assert!((bound - cfg.activation_bound_gbps()).abs() < 1e-9);
    // Four ACTs per tFAW of 20 cycles of 2 ns, 64 B each, less refresh.
    assert!((bound - 4.0 / 40.0 * 64.0 * refresh).abs() < 1e-9);
    let column_bound = 64.0 / (3.0 * 2.0) * refresh;
    for kind in [StreamKind::Sequential, StreamKind::Random] {
        let n = 30_000;
        let [d, r, native] = EngineKind::ALL.map(|e| run_stream(e, &cfg, kind, n, 0.0));
        assert_eq!(
            [d.engine, r.engine, native.engine],
            [
                EngineKind::Dramsim3,
                EngineKind::Ramulator,
                EngineKind::Native
            ]
        );
        for s in [&d, &r, &native] {
            assert_eq!((s.reads, s.bytes), (n, 64 * n), "{}: {kind}", s.engine);
            let (lo, hi) = match kind {
                StreamKind::Sequential => (0.85 * column_bound, 16.0 * refresh),
                _ => (0.85 * bound, bound),
            };
            assert!(
                s.bandwidth_gbps > lo && s.bandwidth_gbps < hi,
                "{} {kind}: {:.3} GB/s outside ({lo:.3}, {hi:.3})",
                s.engine,
                s.bandwidth_gbps
            );
        }
        assert_eq!(
            (native.cycles, native.activations, native.read_cmds),
            (d.cycles, d.activations, d.read_cmds),
            "{kind}: native against DRAMsim3"
        );
        let pairs = [
            ("bandwidth GB/s", d.bandwidth_gbps, r.bandwidth_gbps),
            (
                "mean read latency ns",
                d.read_latency_mean_ns.unwrap(),
                r.read_latency_mean_ns.unwrap(),
            ),
            ("activations", d.activations as f64, r.activations as f64),
        ];
        for (what, a, b) in pairs {
            assert!(
                within(a, b, 0.15),
                "{kind}: {what}: dramsim3 {a:.3} vs ramulator {b:.3}"
            );
        }
    }
}

fn run_stream_result(engine: EngineKind, cfg: &DramConfig) -> Result<DramStats, SimError> {
    let spec = StreamSpec::new(StreamKind::Random, 100);
    let src = synthetic(&spec, cfg.capacity_bytes()).unwrap().map(Ok);
    simulate(engine, cfg, src, &RunOptions::default(), None)
}
