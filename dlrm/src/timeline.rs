//! The iteration timeline: every primitive of a training step with its time,
//! where it ran, and how the time was obtained (measured on this machine,
//! simulated on the NMP pool, or modelled). Events are grouped in stages that
//! run one after another (Tensor Casting's Fig. 9); inside a stage, lanes run
//! in parallel (lane 0 is the main path; lane 1 holds work overlapped with it,
//! such as casting on the GPU during the forward gather-reduce). Lane 2
//! ([`BACKGROUND`]) holds work that runs beside the training steps for as
//! long as it takes, across iterations (cDLRM's prefetcher): it sets no
//! stage's time, and a step that has to wait for it carries the wait as an
//! event of its own on the main lane.

use serde::{Deserialize, Serialize};

/// How a time was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// Wall-clock time of the real computation on this machine.
    Measured,
    /// Cycle-level simulation of the NMP pool over the DRAM engine.
    Simulated,
    /// The NMP pool's effective bandwidth from earlier cycle-level batches,
    /// applied to this batch's bytes (the paper's emulation method).
    SimulatedProxy,
    /// An analytic model (GPU roofline, link bandwidth, a fixed NMP bandwidth).
    Modelled,
    /// GPU emulation of the NMP pool: the primitive's real CUDA kernels on
    /// the pool stream, held to the simulated pool time (`emulate`).
    Emulated,
    /// A CPU primitive's time on a modelled host (`--host`, `host`): the
    /// same on every machine. Reports name the host beside it.
    ModelledHost,
}

impl Source {
    pub const ALL: [Source; 6] = [
        Source::Measured,
        Source::Simulated,
        Source::SimulatedProxy,
        Source::Modelled,
        Source::Emulated,
        Source::ModelledHost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Measured => "measured",
            Source::Simulated => "simulated",
            Source::SimulatedProxy => "simulated-proxy",
            Source::Modelled => "modelled",
            Source::Emulated => "emulated",
            Source::ModelledHost => "modelled-host",
        }
    }

    /// The reports' short label: `meas`, `sim`, `proxy`, `model`, `emu`,
    /// `model(host)` (a report that knows the host names it there).
    pub fn short(self) -> &'static str {
        match self {
            Source::Measured => "meas",
            Source::Simulated => "sim",
            Source::SimulatedProxy => "proxy",
            Source::Modelled => "model",
            Source::Emulated => "emu",
            Source::ModelledHost => "model(host)",
        }
    }

    /// The source [`Source::as_str`] names.
    pub fn named(name: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// Where a primitive runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Resource {
    Cpu,
    Gpu,
    Nmp,
    /// Host CPU <-> GPU (PCIe).
    HostLink,
    /// NMP pool <-> GPU / host.
    PoolLink,
}

impl Resource {
    /// For a link, its index among the links (host, pool); `None` for a
    /// processor. A link carries one transfer at a time: two lanes' transfers
    /// on it in one stage go one after the other. (A stage's transfers on one
    /// link all go the same way, so the link is one resource, not one per
    /// direction.) Processors run the lanes' work side by side.
    pub fn link(self) -> Option<usize> {
        match self {
            Resource::HostLink => Some(0),
            Resource::PoolLink => Some(1),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Gpu => "gpu",
            Resource::Nmp => "nmp",
            Resource::HostLink => "host-link",
            Resource::PoolLink => "pool-link",
        }
    }
}

/// Stages of one iteration, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    ForwardEmbedding,
    ForwardTransfer,
    Dense,
    BackwardTransfer,
    BackwardEmbedding,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::ForwardEmbedding,
        Stage::ForwardTransfer,
        Stage::Dense,
        Stage::BackwardTransfer,
        Stage::BackwardEmbedding,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::ForwardEmbedding => "forward-embedding",
            Stage::ForwardTransfer => "forward-transfer",
            Stage::Dense => "dense",
            Stage::BackwardTransfer => "backward-transfer",
            Stage::BackwardEmbedding => "backward-embedding",
        }
    }
}

/// The main lane of a stage.
pub const MAIN: u8 = 0;
/// Work overlapped with the main lane.
pub const OVERLAP: u8 = 1;
/// Work beside the training steps, across iterations: busy time and
/// energy, but no stage time (a wait for it is a main-lane event).
pub const BACKGROUND: u8 = 2;

/// One primitive (or transfer) of one iteration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// `gather-reduce`, `expand-coalesce`, `casting`, `casted-gather-reduce`,
    /// `scatter`, `mlp`, `interaction`, `transfer`, ...
    pub primitive: String,
    /// Finer label (e.g. `pooled to gpu`, `bottom forward`).
    pub detail: String,
    pub stage: Stage,
    pub lane: u8,
    pub resource: Resource,
    pub source: Source,
    pub time_ns: f64,
    /// Bytes the primitive moves (memory traffic, or link bytes for transfers).
    pub bytes: u64,
    /// Energy the primitive's own accounting gives, pJ: the NMP pool's
    /// simulated energy (DRAM commands and background, ALU, buffers, link)
    /// for its primitives; 0 where nothing computes it (CPU, GPU and link
    /// energy is modelled from power and busy time instead).
    #[serde(default)]
    pub energy_pj: f64,
}

/// The events of one iteration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepTimeline {
    pub events: Vec<Event>,
}

impl StepTimeline {
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        primitive: &str,
        detail: impl Into<String>,
        stage: Stage,
        lane: u8,
        resource: Resource,
        source: Source,
        time_ns: f64,
        bytes: u64,
    ) {
        self.events.push(Event {
            primitive: primitive.to_string(),
            detail: detail.into(),
            stage,
            lane,
            resource,
            source,
            time_ns: time_ns.max(0.0),
            bytes,
            energy_pj: 0.0,
        });
    }

    /// Sets the energy of the event pushed last (see [`Event::energy_pj`]).
    pub fn set_last_energy(&mut self, energy_pj: f64) {
        if let Some(e) = self.events.last_mut() {
            e.energy_pj = energy_pj.max(0.0);
        }
    }

    /// Time `resource` is busy in this iteration: the sum of its events'
    /// times (a processor's events of one lane run one after another; the
    /// lanes of one stage never put the same processor to work twice at
    /// once in the trainer's timelines, so the sum is not double-counted).
    pub fn busy_ns(&self, resource: Resource) -> f64 {
        self.events
            .iter()
            .filter(|e| e.resource == resource)
            .map(|e| e.time_ns)
            .sum()
    }

    /// The events' own energy added up, pJ ([`Event::energy_pj`]).
    pub fn energy_pj(&self) -> f64 {
        self.events.iter().map(|e| e.energy_pj).sum()
    }

    /// Each lane's total time in a stage.
    fn lanes(&self, stage: Stage) -> [f64; 4] {
        let mut lanes = [0.0f64; 4];
        for e in self.events.iter().filter(|e| e.stage == stage) {
            lanes[(e.lane as usize).min(3)] += e.time_ns;
        }
        lanes
    }

    /// Time of a stage: when its last lane ends. Each lane runs its events
    /// in order; a link ([`Resource::link`]) carries one transfer at a
    /// time, and of the lanes waiting for it, the one whose transfer can
    /// start first goes first (the lower lane on a tie). Without two lanes'
    /// transfers on one link, that is the slowest lane's total. The
    /// [`BACKGROUND`] lane is left out.
    pub fn stage_ns(&self, stage: Stage) -> f64 {
        let mut lanes: [Vec<&Event>; 4] = Default::default();
        for e in self
            .events
            .iter()
            .filter(|e| e.stage == stage && e.lane != BACKGROUND)
        {
            lanes[(e.lane as usize).min(3)].push(e);
        }
        let mut next = [0usize; 4];
        let mut ready = [0.0f64; 4];
        // When each link is free (by `Resource::link`).
        let mut free = [0.0f64; 2];
        loop {
            let mut pick: Option<(f64, usize)> = None;
            for (l, events) in lanes.iter().enumerate() {
                let Some(e) = events.get(next[l]) else {
                    continue;
                };
                let start = match e.resource.link() {
                    Some(k) => ready[l].max(free[k]),
                    None => ready[l],
                };
                if pick.is_none_or(|(s, _)| start < s) {
                    pick = Some((start, l));
                }
            }
            let Some((start, l)) = pick else { break };
            let e = lanes[l][next[l]];
            let end = start + e.time_ns;
            ready[l] = end;
            if let Some(k) = e.resource.link() {
                free[k] = end;
            }
            next[l] += 1;
        }
        ready.iter().copied().fold(0.0, f64::max)
    }

    /// The iteration time: the stages one after another.
    pub fn iteration_ns(&self) -> f64 {
        Stage::ALL.iter().map(|&s| self.stage_ns(s)).sum()
    }

    /// Every event's time added up, overlap ignored.
    pub fn sum_ns(&self) -> f64 {
        self.events.iter().map(|e| e.time_ns).sum()
    }

    /// Time hidden by overlap: `sum_ns - iteration_ns`, up to rounding.
    ///
    /// Summed per stage as its lanes' totals less the stage's time, so that
    /// it is exactly 0 where nothing overlaps (the difference of the two
    /// totals, added up in different orders, may leave a rounding residue)
    /// and never negative.
    pub fn hidden_ns(&self) -> f64 {
        Stage::ALL
            .iter()
            .map(|&s| (self.lanes(s).iter().sum::<f64>() - self.stage_ns(s)).max(0.0))
            .sum()
    }

    /// Total time per primitive name, in first-seen order.
    pub fn by_primitive(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for e in &self.events {
            match out.iter_mut().find(|(p, _)| *p == e.primitive) {
                Some((_, t)) => *t += e.time_ns,
                None => out.push((e.primitive.clone(), e.time_ns)),
            }
        }
        out
    }

    /// Every source that contributed, for labels.
    pub fn sources(&self) -> Vec<Source> {
        let mut s: Vec<Source> = self.events.iter().map(|e| e.source).collect();
        s.sort();
        s.dedup();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_hides_the_shorter_lane() {
        let mut t = StepTimeline::default();
        t.push(
            "gather-reduce",
            "",
            Stage::ForwardEmbedding,
            MAIN,
            Resource::Cpu,
            Source::Measured,
            10.0,
            0,
        );
        t.push(
            "casting",
            "",
            Stage::ForwardEmbedding,
            OVERLAP,
            Resource::Gpu,
            Source::Modelled,
            4.0,
            0,
        );
        t.push(
            "mlp",
            "",
            Stage::Dense,
            MAIN,
            Resource::Gpu,
            Source::Modelled,
            5.0,
            0,
        );
        assert_eq!(t.iteration_ns(), 15.0);
        assert_eq!(t.sum_ns(), 19.0);
        assert_eq!(t.hidden_ns(), 4.0);
        // A longer overlapped lane becomes the critical path.
        t.push(
            "transfer",
            "",
            Stage::ForwardEmbedding,
            OVERLAP,
            Resource::HostLink,
            Source::Modelled,
            8.0,
            0,
        );
        assert_eq!(t.iteration_ns(), 17.0);
        assert_eq!(t.hidden_ns(), 10.0);
    }

    /// Two lanes' transfers on one link go one after the other; on
    /// different links, or beside work on a processor, they overlap.
    #[test]
    fn a_link_carries_one_transfer_at_a_time() {
        let ev = |t: &mut StepTimeline, lane, resource, ns| {
            t.push(
                "p",
                "",
                Stage::ForwardEmbedding,
                lane,
                resource,
                Source::Modelled,
                ns,
                0,
            )
        };
        // Lane 0: 3 on the pool link, then 10 on the pool. Lane 1: 1 on the
        // GPU, then 4 on the pool link, which waits until 3.
        let mut t = StepTimeline::default();
        ev(&mut t, MAIN, Resource::PoolLink, 3.0);
        ev(&mut t, MAIN, Resource::Nmp, 10.0);
        ev(&mut t, OVERLAP, Resource::Gpu, 1.0);
        ev(&mut t, OVERLAP, Resource::PoolLink, 4.0);
        assert_eq!(t.stage_ns(Stage::ForwardEmbedding), 13.0);
        let mut u = t.clone();
        ev(&mut u, OVERLAP, Resource::PoolLink, 7.0);
        // Lane 1's second transfer waits for nothing but its own lane: 14.
        assert_eq!(u.stage_ns(Stage::ForwardEmbedding), 14.0);
        // Both lanes on the link at once: 5 then 6 (lane 0 first on the tie).
        let mut t = StepTimeline::default();
        ev(&mut t, MAIN, Resource::PoolLink, 5.0);
        ev(&mut t, OVERLAP, Resource::PoolLink, 6.0);
        assert_eq!(t.stage_ns(Stage::ForwardEmbedding), 11.0);
        assert_eq!(t.hidden_ns(), 0.0);
        // The earlier start goes first: lane 1 is ready at 0, lane 0 at 2.
        let mut t = StepTimeline::default();
        ev(&mut t, MAIN, Resource::Cpu, 2.0);
        ev(&mut t, MAIN, Resource::PoolLink, 5.0);
        ev(&mut t, OVERLAP, Resource::PoolLink, 6.0);
        assert_eq!(t.stage_ns(Stage::ForwardEmbedding), 11.0);
        assert_eq!(t.hidden_ns(), 2.0);
        // Different links overlap.
        let mut t = StepTimeline::default();
        ev(&mut t, MAIN, Resource::PoolLink, 5.0);
        ev(&mut t, OVERLAP, Resource::HostLink, 6.0);
        assert_eq!(t.stage_ns(Stage::ForwardEmbedding), 6.0);
        assert_eq!(t.hidden_ns(), 5.0);
    }

    /// Without overlap nothing is hidden, exactly, even where the event
    /// order and the stage order add the times up differently: here
    /// `(0.1 + 0.1) + 0.4` exceeds `(0.1 + 0.4) + 0.1` by one rounding step.
    #[test]
    fn nothing_hidden_without_overlap_despite_rounding() {
        let mut t = StepTimeline::default();
        for (stage, ns) in [
            (Stage::ForwardEmbedding, 0.1),
            (Stage::Dense, 0.1),
            (Stage::ForwardEmbedding, 0.4),
        ] {
            t.push("p", "", stage, MAIN, Resource::Cpu, Source::Measured, ns, 0);
        }
        assert!(t.sum_ns() > t.iteration_ns(), "the case lost its rounding");
        assert_eq!(t.hidden_ns(), 0.0);
    }

    /// Background work sets no stage time, however long, but is busy time
    /// and hidden; a wait for it on the main lane is not hidden.
    #[test]
    fn background_work_sets_no_stage_time() {
        let mut t = StepTimeline::default();
        let ev = |t: &mut StepTimeline, lane, resource, ns| {
            t.push(
                "p",
                "",
                Stage::ForwardEmbedding,
                lane,
                resource,
                Source::Measured,
                ns,
                0,
            )
        };
        ev(&mut t, MAIN, Resource::Gpu, 3.0);
        ev(&mut t, BACKGROUND, Resource::Cpu, 100.0);
        ev(&mut t, BACKGROUND, Resource::PoolLink, 50.0);
        assert_eq!(t.iteration_ns(), 3.0);
        assert_eq!(t.busy_ns(Resource::Cpu), 100.0);
        assert_eq!(t.hidden_ns(), 150.0);
        // (A main-lane transfer does not wait for the background's link.)
        ev(&mut t, MAIN, Resource::PoolLink, 2.0);
        assert_eq!(t.iteration_ns(), 5.0);
    }
}
