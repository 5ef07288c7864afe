use super::*;
use clap::Parser;
use nmpsim_dlrm::SystemMode;
use nmpsim_dlrm::summary::{ModeAgg, summarize};
use std::path::Path;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    train: TrainArgs,
}

fn results(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

fn summary_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("summary.txt")).unwrap()
}

/// The summary written after a mode of `--mode tcast` says the run is still
/// going and which modes are left: a run killed between modes is not
/// taken for a completed one.
#[test]
fn the_summary_after_a_mode_says_the_run_is_still_going() {
    let a = Cli::parse_from(["train", "--mode", "tcast", "--nmp-bandwidth", "100"]).train;
    let r = resolve(&a).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let rd = RunDir::create(Some(&dir), "train").unwrap();
    let mode = |m| {
        summarize(
            m,
            Status::Completed,
            Vec::new(),
            &ModeAgg::default(),
            0.0,
            Vec::new(),
        )
    };
    let summaries = vec![mode(SystemMode::BaselineCpu.as_str())];
    write_summary(&rd, &r, &summaries, RunState::Running).unwrap();
    let v = results(&dir);
    assert_eq!(v["results"]["status"], "running");
    assert_eq!(
        v["results"]["modes_not_run"],
        serde_json::json!(["tcast-cpu", "baseline-nmp", "tcast-nmp"])
    );
    let text = summary_text(&dir);
    assert!(
        text.starts_with("run in progress")
            && text
                .lines()
                .next()
                .unwrap()
                .ends_with("; not run yet: tcast-cpu, baseline-nmp, tcast-nmp"),
        "{text}"
    );

    // Stopped there: the modes left were not run.
    write_summary(&rd, &r, &summaries, RunState::Ended(Status::Interrupted)).unwrap();
    assert_eq!(results(&dir)["results"]["status"], "interrupted");
    assert!(
        summary_text(&dir)
            .starts_with("run interrupted; not run: tcast-cpu, baseline-nmp, tcast-nmp\n")
    );

    // Every mode ran: completed, nothing listed.
    let summaries: Vec<ModeSummary> = SystemMode::ALL.iter().map(|&m| mode(m.as_str())).collect();
    write_summary(&rd, &r, &summaries, RunState::Ended(Status::Completed)).unwrap();
    let v = results(&dir);
    assert_eq!(v["results"]["status"], "completed");
    assert!(v["results"].get("modes_not_run").is_none(), "{v}");
    assert!(summary_text(&dir).starts_with("model "));
}
