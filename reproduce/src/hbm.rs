//! HBM2 beside DDR4 (`pool-hbm`): Table I's pool of 32 DDR4-3200 ranks
//! beside three HBM2 pools: legacy channels with one NMP core each, as many
//! (32 channels, 4 stacks) and of the same capacity (256 channels, 32
//! stacks), and the 4 stacks' 64 pseudo-channels with a core each (the NMP
//! core per pseudo-channel against per channel, at one capacity): the
//! simulated gather-reduce bandwidth, per GB and per watt, and RM1's
//! training speedup on each.
//! Neither paper ran an HBM pool: the HBM2 rows have no paper values, and
//! the checks are the DDR4 pool's Table I bound and the direction Sec. II
//! gives (stacked DRAM trades capacity for bandwidth).

use crate::*;

/// One pool of the item.
struct Pool {
    preset: String,
    ranks: u32,
}

impl Pool {
    fn of(r: &RunResult) -> Result<Pool, String> {
        let ranks = r
            .param("ranks")
            .parse()
            .map_err(|_| format!("run `{}`: `ranks` is not a count", r.param("ranks")))?;
        Ok(Pool {
            preset: r.param("preset").to_string(),
            ranks,
        })
    }

    fn label(&self) -> String {
        let unit = if !self.is_hbm() {
            "ranks"
        } else if self.is_pseudo_channel() {
            "pseudo-channels"
        } else {
            "channels"
        };
        format!("{} {unit} of {}", self.ranks, self.preset)
    }

    fn is_pseudo_channel(&self) -> bool {
        self.preset
            .eq_ignore_ascii_case(nmpsim_sim::standard::hbm2::PSEUDO_CHANNEL)
    }

    fn is_hbm(&self) -> bool {
        self.preset.to_ascii_uppercase().starts_with("HBM")
    }

    /// The pool's capacity, GiB (the preset's channel times the units).
    fn capacity_gib(&self) -> Result<f64, String> {
        let c = nmpsim_sim::DramConfig::preset(&self.preset).map_err(|e| e.to_string())?;
        Ok(c.capacity_bytes() as f64 * self.ranks as f64 / (1u64 << 30) as f64)
    }

    fn same(&self, o: &Pool) -> bool {
        self.preset == o.preset && self.ranks == o.ranks
    }
}

/// RM1's tcast-nmp speedup over baseline-cpu and modelled ms per iteration
/// on `pool`, from the training sweep.
fn training_on(trains: &[&RunResult], pool: &Pool) -> Result<Option<(f64, f64)>, String> {
    for r in trains {
        if Pool::of(r)?.same(pool) {
            let modes = mode_runs(r)?;
            return Ok(find(&modes, "tcast-nmp").map(|m| (m.speedup, m.iter_ms)));
        }
    }
    Ok(None)
}

pub(crate) fn analyse_pool_hbm(inp: &Inputs) -> Result<Outcome, String> {
    let runs = inp.completed("pool-hbm")?;
    let trains = inp.completed("pool-hbm-train")?;
    let mut table = Table::new(&[
        col("pool", Fmt::Plain, "pool", Fmt::Plain),
        col("primitive", Fmt::Plain, "primitive", Fmt::Plain),
        col("placement", Fmt::Plain, "placement", Fmt::Plain),
        col("capacity_gib", Fmt::Fixed(0), "GiB", Fmt::Fixed(0)),
        col("peak_gbps", Fmt::Fixed(1), "peak GB/s", Fmt::Fixed(1)),
        col(
            "effective_gbps",
            Fmt::Fixed(3),
            "effective GB/s (sim)",
            Fmt::Fixed(1),
        ),
        col("fraction_of_peak", Fmt::Fixed(4), "of peak", Fmt::Pct(0)),
        col("gbps_per_gib", Fmt::Fixed(4), "GB/s per GiB", Fmt::Fixed(2)),
        col("pool_power_w", Fmt::Fixed(3), "pool W (sim)", Fmt::Fixed(1)),
        col("dram_power_w", Fmt::Fixed(3), "DRAM W (sim)", Fmt::Fixed(1)),
        col("gbps_per_w", Fmt::Fixed(3), "GB/s per W", Fmt::Fixed(1)),
        col(
            "rm1_tcast_nmp_speedup",
            Fmt::Fixed(3),
            "RM1 tcast-nmp speedup (sim+meas)",
            Fmt::Unit(2, "x"),
        ),
        col(
            "rm1_tcast_nmp_ms",
            Fmt::Fixed(3),
            "RM1 tcast-nmp ms/it (sim+model)",
            Fmt::Fixed(2),
        ),
    ]);
    let mut c = chart(
        "Simulated gather-reduce bandwidth: DDR4-3200 ranks and HBM2 channels",
        "pool",
        "GB/s",
        ChartKind::Bars,
    );
    // (pool, primitive, effective, per GiB, capacity)
    let mut rows: Vec<(Pool, String, f64, f64, f64)> = Vec::new();
    for r in &runs {
        let pool = Pool::of(r)?;
        let res = pool_results(r)?;
        let rep = &primary_phase(&res)?.report;
        let eff = rep.effective_bandwidth_gbps;
        let cap = pool.capacity_gib()?;
        // pJ / ns = mW.
        let watts = |pj: f64| {
            if rep.time_ns > 0.0 {
                pj / rep.time_ns / 1e3
            } else {
                f64::NAN
            }
        };
        let (pool_w, dram_w) = (watts(rep.energy.total_pj), watts(rep.energy.dram_pj));
        let train = training_on(&trains, &pool)?;
        let prim = r.param("primitive").to_string();
        table.push(vec![
            pool.label().into(),
            prim.clone().into(),
            r.param("placement").into(),
            cap.into(),
            rep.peak_bandwidth_gbps.into(),
            eff.into(),
            (eff / rep.peak_bandwidth_gbps).into(),
            (eff / cap).into(),
            pool_w.into(),
            dram_w.into(),
            (eff / pool_w).into(),
            train.map(|t| t.0).into(),
            train.map(|t| t.1).into(),
        ]);
        rows.push((pool, prim, eff, eff / cap, cap));
    }
    table.plot(&mut c, "pool", "primitive", "effective_gbps");
    table.paper_row(&[
        "paper: 32 ranks of DDR4-3200 (Ramulator)",
        "",
        "",
        "",
        "819.2",
        "over 600",
        "over 73%",
        "",
        "",
        "",
        "",
        "",
        "",
    ]);
    c.hlines.push(("paper: 600 GB/s".into(), 600.0));

    // Each pool's gather-reduce at its better placement (Table I takes the
    // best configuration too).
    let mut gathers: Vec<&(Pool, String, f64, f64, f64)> = Vec::new();
    for r in rows.iter().filter(|r| r.1 == "gather-reduce") {
        match gathers.iter_mut().find(|g| g.0.same(&r.0)) {
            Some(g) if g.2 < r.2 => *g = r,
            Some(_) => {}
            None => gathers.push(r),
        }
    }
    let ddr4 = gathers
        .iter()
        .find(|r| !r.0.is_hbm())
        .ok_or("no DDR4 gather-reduce run in sweep `pool-hbm`")?;
    let hbm: Vec<&&(Pool, String, f64, f64, f64)> =
        gathers.iter().filter(|r| r.0.is_hbm()).collect();
    if hbm.is_empty() {
        return Err("no HBM2 gather-reduce run in sweep `pool-hbm`".into());
    }
    let per_gb_holds = hbm.iter().all(|h| h.3 > ddr4.3);
    let per_gb = hbm
        .iter()
        .map(|h| format!("{}: {:.2}", h.0.label(), h.3))
        .collect::<Vec<_>>()
        .join("; ");
    let same_capacity = hbm
        .iter()
        .find(|h| (h.4 - ddr4.4).abs() < 1e-9)
        .map(|h| h.0.ranks);
    let capacity_holds = same_capacity == Some(8 * ddr4.0.ranks);
    Ok(Outcome {
        csv: table.csv(),
        charts: vec![("bandwidth".into(), c)],
        table_md: table.md(),
        checks: vec![
            check(
                "pool-hbm.ddr4",
                format!("{:.0} GB/s ({})", ddr4.2, ddr4.0.label()),
                passes("pool-hbm.ddr4", &[ddr4.2]),
            ),
            check(
                "pool-hbm.per-gb",
                format!(
                    "GB/s per GiB: {}: {:.2}; {per_gb}",
                    ddr4.0.label(),
                    ddr4.3
                ),
                per_gb_holds,
            ),
            check(
                "pool-hbm.capacity",
                match same_capacity {
                    Some(n) => format!(
                        "{:.0} GiB: {} DDR4 ranks or {n} HBM2 channels",
                        ddr4.4, ddr4.0.ranks
                    ),
                    None => format!("no HBM2 pool of the DDR4 pool's {:.0} GiB", ddr4.4),
                },
                capacity_holds,
            ),
        ],
        notes: vec![
            format!(
                "Simulated, cycle by cycle: each rank's or channel's request stream through its own {} engine (`nmpsim nmp run`), one trace batch of RM1 (batch {}, {} rows per table), placements vector-sliced (Table I's) and row-interleaved (the trainer's), mapping ro-ra-ba-bg-co; the checks take each pool's better placement.",
                inp.engine_name(),
                quick_full(inp.size, 256, 2048),
                quick_full(inp.size, "100,000", "1,000,000")
            ),
            "HBM2-2000 is one legacy HBM2 channel (128 bits at 2 Gb/s, 32 GB/s, 1 GiB; docs/dram.md, HBM2), with one NMP core a channel, as the pool places one a DDR4 rank. HBM2-2000-PC is one pseudo-channel (64 bits, 32 B bursts, 16 GB/s, 512 MiB), with one NMP core each: a 64 B request is two bursts of one row. The 64 pseudo-channels are the 32 channels' stacks, so those two pools compare a core per pseudo-channel (as Samsung's HBM-PIM computes within each pseudo-channel) with a core per channel, at one capacity.".into(),
            "More NMP units than the batch has work for cost link time: row-interleaved, every unit returns a partial sum of every bag (the link's MB grow with the units), and vector-sliced, RM1's 64-value rows split over 256 units are narrower than a 64 B burst. So the capacity-matched HBM2 pool (256 channels, a core each) is not the fastest: its NMP units are the same count as its channels, where a stack's logic die could host one core for its 8 channels (not modelled).".into(),
            "Power: the pool's simulated energy (DRAM commands and background, the NMP cores' ALUs and buffers, the link) over the primitive's time; DRAM W is the DRAM's share. HBM2's currents are those of DRAMsim3's HBM2_8Gb_x128.ini.".into(),
            format!(
                "RM1 training (`nmpsim train --model rm1 --mode baseline-cpu,tcast-nmp`, batch {}, {} iterations, the first a warm-up): tcast-nmp's pool simulated in every iteration ({}), its speedup over baseline-cpu measured on this machine's CPU in the same run. Neither paper trained on an HBM pool: those rows have no paper value.",
                quick_full(inp.size, 512, 2048),
                quick_full(inp.size, 4, 8),
                inp.train_engine_name()
            ),
        ],
    })
}
