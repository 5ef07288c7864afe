use nmpsim_sim::*;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let engine: EngineKind = args[1].parse().unwrap();
    let preset = DramConfig::preset(&args[2]).unwrap();
    let n: u64 = args[3].parse().unwrap();
    let random = args[4] == "random";
    let cap = preset.capacity_bytes();
    let mut rng = 0x9E3779B97F4A7C15u64;
    let src = (0..n).map(move |i| {
        if random {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            Ok(MemOp::read((rng % (cap / 64)) * 64))
        } else {
            Ok(MemOp::read(i * 64))
        }
    });
    let mut o = RunOptions::default();
    o.work_dir = Some(std::path::PathBuf::from(format!("/tmp/smoke-{}", args[1])));
    o.keep_command_traces = true;
    let s = simulate(engine, &preset, src, &o, None).unwrap();
    println!("{}", serde_json::to_string_pretty(&s).unwrap());
}
