//! What every CLI test file needs: run the built binary, and a temporary
//! directory removed when the test ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the built `nmpsim` in `dir` and returns what it did.
pub fn nmpsim(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nmpsim"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("spawn nmpsim")
}

/// A fresh directory `nmpsim-<test file>-<name>-<pid>` under the system
/// temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!(
            "nmpsim-{}-{name}-{}",
            env!("CARGO_CRATE_NAME").replace('_', "-"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create temp dir");
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
