//! Build facts recorded by `build.rs`, carried by `--version` and every result file.

use serde::Serialize;

/// What built this binary.
#[derive(Debug, Clone, Serialize)]
pub struct BuildInfo {
    pub version: &'static str,
    pub git_rev: &'static str,
    pub features: Vec<&'static str>,
    pub profile: &'static str,
    pub target: &'static str,
}

pub fn build_info() -> BuildInfo {
    BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        git_rev: env!("NMPSIM_GIT_REV"),
        features: env!("NMPSIM_FEATURES")
            .split(',')
            .filter(|f| !f.is_empty())
            .collect(),
        profile: env!("NMPSIM_PROFILE"),
        target: env!("NMPSIM_TARGET"),
    }
}

/// The long `--version` text.
pub fn long_version() -> &'static str {
    let b = build_info();
    let features = if b.features.is_empty() {
        "none".to_string()
    } else {
        b.features.join(",")
    };
    let s = format!(
        "{}\ngit revision: {}\nfeatures: {}\nprofile: {}\ntarget: {}",
        b.version, b.git_rev, features, b.profile, b.target
    );
    Box::leak(s.into_boxed_str())
}
