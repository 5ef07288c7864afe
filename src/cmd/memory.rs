//! The memory a run may take: `MemAvailable`, the control group's limit and
//! the address-space limit, and the check every command makes before it
//! allocates its tables.

/// Refuses a run whose `need` bytes (`what` they hold) exceed 80% of the
/// memory available, naming the flags that lower it (`lower`), instead of
/// leaving the out-of-memory killer to end it.
pub fn check_memory(need: u128, what: &str, lower: &str) -> anyhow::Result<()> {
    if let Some(m) = memory_available() {
        if need > m.bytes as u128 * 8 / 10 {
            anyhow::bail!(
                "{what} need {:.1} GB, more than the {:.1} GB a run may take (80% of the {:.1} GB {}); lower {lower}",
                need as f64 / 1e9,
                m.bytes as f64 * 0.8 / 1e9,
                m.bytes as f64 / 1e9,
                m.what()
            );
        }
    }
    Ok(())
}

/// What limits the memory a run may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryLimit {
    /// The machine's `MemAvailable`.
    Machine,
    /// The control group's memory limit, less what the group uses.
    Cgroup,
    /// The address-space limit (`ulimit -v`), less what the process maps.
    AddressSpace,
}

/// The memory a run may allocate, and what sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryAvailable {
    pub bytes: u64,
    pub limit: MemoryLimit,
}

impl MemoryAvailable {
    /// What the bytes are, after "N GB " in a message.
    pub fn what(&self) -> &'static str {
        match self.limit {
            MemoryLimit::Machine => "of memory available",
            MemoryLimit::Cgroup => "the control group's memory limit leaves",
            MemoryLimit::AddressSpace => "the address-space limit (ulimit -v) leaves",
        }
    }
}

/// The least of: `MemAvailable` of `/proc/meminfo`, what the control
/// group's memory limit leaves (cgroup v2 or v1, reclaimable file pages
/// counted as free) and what the address-space limit (`ulimit -v`) leaves;
/// `None` where none of them can be read.
pub fn memory_available() -> Option<MemoryAvailable> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let machine = read("/proc/meminfo")
        .and_then(|t| meminfo_available(&t))
        .map(|bytes| MemoryAvailable {
            bytes,
            limit: MemoryLimit::Machine,
        });
    let cgroup = read("/proc/self/cgroup")
        .and_then(|t| cgroup_headroom(&t, &read))
        .map(|bytes| MemoryAvailable {
            bytes,
            limit: MemoryLimit::Cgroup,
        });
    let address_space = address_space_headroom().map(|bytes| MemoryAvailable {
        bytes,
        limit: MemoryLimit::AddressSpace,
    });
    [machine, cgroup, address_space]
        .into_iter()
        .flatten()
        .min_by_key(|m| m.bytes)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn meminfo_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Limits at or above this are no limit (cgroup v1 writes about 2^63).
const NO_LIMIT: u64 = 1 << 60;

/// What the memory limits of this process's control group and its
/// ancestors leave (the least), from its `/proc/self/cgroup` text; `read`
/// reads a file of `/sys/fs/cgroup`. Where the group's directory is not
/// under the mount point, the mount point itself is the group (a
/// container's own).
fn cgroup_headroom(proc_cgroup: &str, read: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    let num = |t: Option<String>| t.and_then(|t| t.trim().parse::<u64>().ok());
    // The count of a key in a memory.stat text.
    let stat = |t: Option<String>, key: &str| {
        t.and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
            })
        })
        .unwrap_or(0)
    };
    let headroom = |limit: Option<u64>, usage: Option<u64>, reclaimable: u64| {
        let limit = limit.filter(|&l| l < NO_LIMIT)?;
        Some(limit.saturating_sub(usage?.saturating_sub(reclaimable)))
    };
    // The group's directory and every ancestor up to the mount point (a
    // limit on any of them applies); only the mount point where the group's
    // own directory is not there (a container's own group).
    let levels = |mount: &str, path: &str, limit_file: &str| -> Vec<String> {
        let own = format!("{mount}{path}");
        if read(&format!("{own}/{limit_file}")).is_none() {
            return vec![mount.to_string()];
        }
        let mut dirs = Vec::new();
        let mut p = path.to_string();
        loop {
            dirs.push(format!("{mount}{p}"));
            match p.rfind('/') {
                Some(i) if !p.is_empty() => p.truncate(i),
                _ => break,
            }
        }
        dirs
    };
    // The least headroom over the levels that have a limit.
    let least = |dirs: Vec<String>, files: [&str; 3], reclaim_key: &str| {
        dirs.iter()
            .filter_map(|dir| {
                headroom(
                    num(read(&format!("{dir}/{}", files[0]))),
                    num(read(&format!("{dir}/{}", files[1]))),
                    stat(read(&format!("{dir}/{}", files[2])), reclaim_key),
                )
            })
            .min()
    };
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = path.trim_end_matches('/');
        if id == "0" && controllers.is_empty() {
            // ("max" does not parse: no limit.)
            let files = ["memory.max", "memory.current", "memory.stat"];
            if let Some(h) = least(
                levels("/sys/fs/cgroup", path, files[0]),
                files,
                "inactive_file",
            ) {
                return Some(h);
            }
        } else if controllers.split(',').any(|c| c == "memory") {
            let files = [
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "memory.stat",
            ];
            return least(
                levels("/sys/fs/cgroup/memory", path, files[0]),
                files,
                "total_inactive_file",
            );
        }
    }
    None
}

/// What `ulimit -v` (RLIMIT_AS) leaves this process: the limit less its
/// mapped size (`VmSize`); `None` without a limit.
fn address_space_headroom() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given, which outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let vm = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))?
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()?
        * 1024;
    Some(lim.rlim_cur.saturating_sub(vm))
}

#[cfg(test)]
mod tests {
    use super::{cgroup_headroom, meminfo_available};
    use std::collections::HashMap;

    fn files(f: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = f
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |p: &str| m.get(p).cloned()
    }

    #[test]
    fn meminfo_gives_mem_available_in_bytes() {
        let t = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000000 kB\n";
        assert_eq!(meminfo_available(t), Some(2_048_000_000));
        assert_eq!(meminfo_available("MemTotal: 5 kB\n"), None);
    }

    #[test]
    fn cgroup_limits_are_read_for_v2_and_v1() {
        // v2, the group's own directory; inactive file pages count as free.
        let v2 = files(&[
            ("/sys/fs/cgroup/a/b/memory.max", "4000000000\n"),
            ("/sys/fs/cgroup/a/b/memory.current", "1500000000\n"),
            (
                "/sys/fs/cgroup/a/b/memory.stat",
                "anon 1\ninactive_file 500000000\nactive_file 7\n",
            ),
        ]);
        assert_eq!(cgroup_headroom("0::/a/b\n", &v2), Some(3_000_000_000));
        // v2 without a limit.
        let max = files(&[
            ("/sys/fs/cgroup/memory.max", "max\n"),
            ("/sys/fs/cgroup/memory.current", "1\n"),
        ]);
        assert_eq!(cgroup_headroom("0::/\n", &max), None);
        // v1: the group's directory is not mounted, the mount point is the
        // container's own group.
        let v1 = files(&[
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "2000000000\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.usage_in_bytes",
                "2500000000\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.stat",
                "cache 3\ntotal_inactive_file 100\n",
            ),
        ]);
        let text = "5:devices:/x\n4:memory:/docker/abc\n0::/\n";
        assert_eq!(cgroup_headroom(text, &v1), Some(0), "usage above the limit");
        // v1's "no limit" (about 2^63).
        let none = files(&[
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712",
            ),
            ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "5"),
        ]);
        assert_eq!(cgroup_headroom("4:memory:/\n", &none), None);
        // Nothing readable.
        assert_eq!(cgroup_headroom("0::/\n", &files(&[])), None);
        // A limit on an ancestor applies to the groups below it (v2 and v1),
        // the least headroom of all the levels.
        let v2 = files(&[
            ("/sys/fs/cgroup/slice/pod/memory.max", "max\n"),
            ("/sys/fs/cgroup/slice/pod/memory.current", "100\n"),
            ("/sys/fs/cgroup/slice/memory.max", "1000000000\n"),
            ("/sys/fs/cgroup/slice/memory.current", "400000000\n"),
        ]);
        assert_eq!(cgroup_headroom("0::/slice/pod\n", &v2), Some(600_000_000));
        let v1 = files(&[
            (
                "/sys/fs/cgroup/memory/a/leaf/memory.limit_in_bytes",
                "9223372036854771712",
            ),
            ("/sys/fs/cgroup/memory/a/leaf/memory.usage_in_bytes", "10"),
            (
                "/sys/fs/cgroup/memory/a/memory.limit_in_bytes",
                "1000000000",
            ),
            ("/sys/fs/cgroup/memory/a/memory.usage_in_bytes", "200000000"),
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712",
            ),
        ]);
        assert_eq!(
            cgroup_headroom("4:memory:/a/leaf\n", &v1),
            Some(800_000_000)
        );
    }
}
