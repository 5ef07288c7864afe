//! The DDR4 standard as data gives what the hand-written DDR4 code gave:
//! every preset's DRAMsim3 `.ini`, Ramulator `.cfg` and native timing table
//! byte for byte as `tests/data/ddr4-generated/` holds them (written by the
//! code before the standard became a table; the native tables' one
//! `act_to_rw` delay has since become `act_to_rd` and `act_to_wr`, with the
//! same value for every DDR4 preset, as tRCD is one figure there), and a
//! configuration file with an added constraint reaches all three consumers.

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
    let names: Vec<String> = preset_names()
        .into_iter()
        .filter(|n| n.starts_with("DDR4"))
        .collect();
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
    assert_eq!(
        (t.act_to_rd, t.act_to_wr, t.pre_to_act, t.rd_to_pre),
        (30, 30, 25, 32)
    );
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

/// HBM-1000's `.ini` carries the figures of DRAMsim3's `HBM_4Gb_x128.ini`
/// (the structure, every timing that file gives a value, the currents, the
/// system), and states the ones it leaves blank or zero from Ramulator's
/// table (tRFC, tXS, tCKESR) and its one `tRTP` (the file's tRTP_L).
/// Ramulator's configuration names its own HBM: a stack of 8 channels, its
/// one speed bin and organisation.
#[test]
fn hbms_ini_and_cfg_carry_both_references_hbm_channel() {
    let cfg = DramConfig::preset("HBM-1000").unwrap();
    let ini = cfg.dramsim3_ini("P");
    let shipped = [
        "protocol = HBM",
        "bankgroups = 4",
        "banks_per_group = 4",
        "rows = 16384",
        "columns = 64",
        "device_width = 128",
        "BL = 4",
        "tCK = 2",
        "CL = 7",
        "CWL = 4",
        "tRCDRD = 7",
        "tRCDWR = 6",
        "tRP = 7",
        "tRAS = 17",
        "tREFI = 1950",
        "tRPRE = 1",
        "tWPRE = 1",
        "tRRD_S = 4",
        "tRRD_L = 5",
        "tWTR_S = 2",
        "tWTR_L = 4",
        "tFAW = 20",
        "tWR = 8",
        "tCCD_S = 2",
        "tCCD_L = 3",
        "tXP = 5",
        "VDD = 1.2",
        "IDD0 = 48",
        "IDD2P = 25",
        "IDD2N = 34",
        "IDD3P = 37",
        "IDD3N = 43",
        "IDD4W = 123",
        "IDD4R = 135",
        "IDD5AB = 250",
        "IDD6x = 31",
        "channel_size = 512",
        "bus_width = 128",
        "queue_structure = PER_BANK",
        "row_buf_policy = OPEN_PAGE",
        "cmd_queue_size = 8",
        "trans_queue_size = 32",
        "address_mapping = chrorabgbaco",
    ];
    let stated = [
        "tRFC = 130",
        "tXS = 135",
        "tCKESR = 5",
        "tRTP = 7",
        "hbm_dual_cmd = true",
    ];
    for kv in shipped.iter().chain(&stated) {
        assert!(ini.lines().any(|l| l == *kv), "no `{kv}` in\n{ini}");
    }
    let ram = cfg.ramulator_cfg("P").unwrap();
    for kv in [
        "standard = HBM",
        "channels = 8",
        "ranks = 1",
        "speed = HBM_1Gbps",
        "org = HBM_4Gb",
        "addr_mapping = RoBaRaCoCh",
    ] {
        assert!(ram.lines().any(|l| l == kv), "no `{kv}` in\n{ram}");
    }
    // Ramulator's table is the preset's; an override does not reach it,
    // and Ramulator has no other HBM organisation.
    assert_eq!(cfg.ramulator_speed(), Some("HBM_1Gbps"));
    let mut moved = cfg.clone();
    moved.timing.set("tRCDRD", 9).unwrap();
    assert_eq!(
        moved.ramulator_timing_differences(),
        vec![("tRCDRD".to_string(), 9, 7)]
    );
    let mut other = cfg.clone();
    other.org.rows = 1 << 15;
    let e = other.ramulator_cfg("P").unwrap_err().to_string();
    assert!(e.contains("HBM_4Gb"), "{e}");
}

/// HBM2-2000's `.ini` carries the figures of DRAMsim3's own
/// `HBM2_8Gb_x128.ini`: the structure (its 64 columns, which DRAMsim3
/// doubles), every timing DRAMsim3 reads from that file, the currents and
/// the system; and, stated, the two keys that file leaves out or names
/// otherwise (tRTP: its tRTP_L; tCKESR: its tCKSRE), and the dual command
/// buses (DRAMsim3's default for HBM).
#[test]
fn hbm2s_ini_carries_dramsim3s_hbm2_figures() {
    let ini = DramConfig::preset("HBM2-2000").unwrap().dramsim3_ini("P");
    let shipped = [
        "bankgroups = 4",
        "banks_per_group = 4",
        "rows = 32768",
        "columns = 64",
        "device_width = 128",
        "BL = 4",
        "tCK = 1",
        "CL = 14",
        "CWL = 4",
        "tRCDRD = 14",
        "tRCDWR = 14",
        "tRP = 14",
        "tRAS = 34",
        "tRFC = 260",
        "tREFI = 3900",
        "tRPRE = 1",
        "tWPRE = 1",
        "tRRD_S = 4",
        "tRRD_L = 6",
        "tWTR_S = 6",
        "tWTR_L = 8",
        "tFAW = 30",
        "tWR = 16",
        "tCCD_S = 1",
        "tCCD_L = 2",
        "tXS = 268",
        "tCKE = 8",
        "tXP = 8",
        "VDD = 1.2",
        "IDD0 = 65",
        "IDD2P = 28",
        "IDD2N = 40",
        "IDD3P = 40",
        "IDD3N = 55",
        "IDD4W = 500",
        "IDD4R = 390",
        "IDD5AB = 250",
        "IDD6x = 31",
        "channel_size = 1024",
        "bus_width = 128",
        "queue_structure = PER_BANK",
        "row_buf_policy = OPEN_PAGE",
        "cmd_queue_size = 8",
        "trans_queue_size = 32",
    ];
    let stated = [
        "protocol = HBM2",
        "tRTP = 6",
        "tCKESR = 10",
        "hbm_dual_cmd = true",
    ];
    for kv in shipped.iter().chain(&stated) {
        assert!(ini.lines().any(|l| l == *kv), "no `{kv}` in\n{ini}");
    }
    // DRAMsim3's HBM2 address mapping (`rorabgbachco`; the channel field
    // first and zero bits wide, as in every file nmpsim writes).
    assert!(
        ini.lines().any(|l| l == "address_mapping = chrorabgbaco"),
        "{ini}"
    );
    // A pseudo-channel is DRAMsim3's channel of a 64-bit bus: 32 B
    // requests, half the page (DRAMsim3 doubles the 64 columns to 128 of 64
    // bits), 512 MiB, the channel's currents halved, the same timings.
    let pc = DramConfig::preset("HBM2-2000-PC")
        .unwrap()
        .dramsim3_ini("P");
    let halved = [
        "IDD0 = 32.5",
        "IDD2P = 14",
        "IDD2N = 20",
        "IDD3P = 20",
        "IDD3N = 27.5",
        "IDD4W = 250",
        "IDD4R = 195",
        "IDD5AB = 125",
        "IDD6x = 15.5",
    ];
    let own = [
        "columns = 64",
        "device_width = 64",
        "bus_width = 64",
        "channel_size = 512",
        "channels = 1",
    ];
    for kv in shipped
        .iter()
        .filter(|kv| {
            !kv.starts_with("IDD")
                && !kv.starts_with("device_width")
                && !kv.starts_with("bus_width")
                && !kv.starts_with("channel_size")
        })
        .chain(&stated)
        .chain(&halved)
        .chain(&own)
    {
        assert!(
            pc.lines().any(|l| l == *kv),
            "no `{kv}` in
{pc}"
        );
    }
    // The DDR4 presets' files say nothing of a second command bus.
    let ddr4 = DramConfig::preset("DDR4-3200-x8")
        .unwrap()
        .dramsim3_ini("P");
    assert!(!ddr4.contains("hbm_dual_cmd"));
}
