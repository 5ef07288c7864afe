//! The DDR4 standard as data gives what the hand-written DDR4 code gave:
//! every preset's DRAMsim3 `.ini`, Ramulator `.cfg` and native timing table
//! byte for byte as `tests/data/ddr4-generated/` holds them (written by the
//! code before the standard became a table), and a configuration file with
//! an added constraint reaches all three consumers.

use std::path::Path;

use nmpsim_sim::jedec::{Checker, Command, CommandRecord};
use nmpsim_sim::{DramConfig, preset_names};

fn golden(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/ddr4-generated")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_ddr4_presets_generated_files_are_unchanged() {
    let names = preset_names();
    assert_eq!(names.len(), 18);
    for n in names {
        let c = DramConfig::preset(&n).unwrap();
        assert_eq!(
            c.dramsim3_ini("PREFIX"),
            golden(&format!("{n}.ini")),
            "{n}.ini"
        );
        assert_eq!(
            c.ramulator_cfg("PREFIX").unwrap(),
            golden(&format!("{n}.cfg")),
            "{n}.cfg"
        );
        assert_eq!(
            nmpsim_sim::native::describe(&c),
            golden(&format!("{n}.native.txt")),
            "{n}.native.txt"
        );
    }
}

#[test]
fn an_override_reaches_the_ini_the_native_table_and_the_checker() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("slow.toml");
    std::fs::write(
        &f,
        "preset = \"DDR4-3200-x8\"\n[timing]\ntRCD = 30\n\n[[constraint]]\nrule = \"tRTP+\"\nlevel = \"bank\"\npreceding = [\"RD\", \"RDA\"]\nfollowing = [\"PRE\"]\nlatency = \"tRTP + 20\"\n",
    )
    .unwrap();
    let c = DramConfig::resolve("DDR4-2400-x8", Some(&f), &["tRP=25".into()], &[]).unwrap();
    assert_eq!(c.name, "DDR4-3200-x8 (slow.toml) [tRP=25]");
    let ini = c.dramsim3_ini("P");
    assert!(
        ini.contains("\ntRCD = 30\n") && ini.contains("\ntRP = 25\n"),
        "{ini}"
    );
    let t = nmpsim_sim::native::TimingTable::of(&c);
    assert_eq!((t.act_to_rw, t.pre_to_act, t.rd_to_pre), (30, 25, 32));
    // The checker reads the same rules: a PRE 31 cycles after a RD breaks
    // the added one, and a RD 29 cycles after its ACT breaks tRCD.
    let log = [
        CommandRecord {
            cycle: 0,
            rank: 0,
            command: Command::Act,
            bank: 0,
        },
        CommandRecord {
            cycle: 29,
            rank: 0,
            command: Command::Rd,
            bank: 0,
        },
        CommandRecord {
            cycle: 60,
            rank: 0,
            command: Command::Pre,
            bank: 0,
        },
    ];
    let v = Checker::for_config(&c).check(&log);
    let rules: Vec<&str> = v.iter().map(|v| v.rule.as_str()).collect();
    assert_eq!(rules, ["tRCD", "tRTP+"], "{v:#?}");
    // Ramulator keeps its built-in table, and the difference is listed.
    let d = c.ramulator_timing_differences();
    assert!(d.contains(&("tRCD".to_string(), 30, 22)), "{d:?}");
}
