//! Trains the tiny model with two embedding strategies on identical data,
//! through the library alone: the run's records go to a directory of their
//! own, and its report (Fig. 12 breakdown, Fig. 13 throughput) is printed.
//!
//! ```text
//! cargo run -p nmpsim-dlrm --example train_tiny [-- OUT_DIR]
//! ```

use std::path::PathBuf;

use nmpsim_dlrm::report::{self, ReportHeader};
use nmpsim_dlrm::run::{self, Monitor, RecordFiles, Synthetic, TrainRun};
use nmpsim_dlrm::{GpuPreset, TrainConfig, preset, strategy};

/// The log lines on standard error.
struct Print;
impl Monitor for Print {
    fn line(&mut self, line: &str) {
        eprintln!("{line}");
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("nmpsim-train-tiny-{}", std::process::id()))
        });
    std::fs::create_dir_all(&dir)?;
    let p = preset("tiny", &Default::default())?;
    let batch = 128;
    let mut config = TrainConfig::sgd(p.config.clone(), batch, 200, 0.5);
    config.print_every = 100;
    let run = TrainRun::new(
        strategy::select("baseline-cpu,tcast-cpu")?,
        config,
        GpuPreset::named("v100")?,
    );
    // The preset's planted-teacher data, the same for both strategies, and
    // the dense path on this machine's CPU.
    let mut driver = Synthetic {
        preset: p.clone(),
        batch,
        seed: 7,
        test_batches: 2,
    };
    let mut files = RecordFiles::create(&dir)?;
    let out = run::train_modes(&run, &mut files, &mut Print, &mut driver)?;
    if let Some(f) = out.failure {
        return Err(format!("{} failed: {}", f.mode, f.error).into());
    }
    let header = ReportHeader {
        model: &p.name,
        batch,
        tables: p.config.table_rows.len(),
        dim: p.config.dim,
        gpu: &run.gpu.name,
        device_name: None,
        pool: None,
    };
    print!("{}", report::report_text(&header, &out.summaries, &dir));
    // The tiny model learns its planted teacher: the test AUC is well above
    // chance for both strategies, which compute the same numbers.
    for s in &out.summaries {
        let auc = s.final_eval.as_ref().and_then(|e| e.auc).unwrap_or(0.0);
        if auc < 0.6 {
            return Err(format!("{}: test AUC {auc:.3}, no better than chance", s.mode).into());
        }
    }
    Ok(())
}
