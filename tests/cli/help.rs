//! Every command that runs something has examples in its `--help`.

use crate::common::*;

/// The subcommands `--help` of `path` lists (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    let Some(start) = help.find("\nCommands:\n") else {
        return Vec::new();
    };
    help[start + "\nCommands:\n".len()..]
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Walks the whole command tree: each command that runs something (not a
/// group whose only usage is `<COMMAND>`) has an "Examples:" section with a
/// line that calls it.
#[test]
fn every_command_has_examples() {
    let t = TempDir::new("help");
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let o = nmpsim(&t.0, &args);
        let help = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let usage = help
            .split_once("Usage: ")
            .map(|(_, u)| u.split("\n\n").next().unwrap_or(""))
            .unwrap_or("");
        let group = usage.lines().count() == 1 && usage.trim_end().ends_with("<COMMAND>");
        if !group {
            let examples = help
                .split_once("\nExamples:\n")
                .map(|(_, e)| e)
                .unwrap_or_else(|| panic!("`nmpsim {}` has no examples:\n{help}", path.join(" ")));
            let prefix = format!("nmpsim {}", path.join(" "));
            assert!(
                examples
                    .lines()
                    .any(|l| l.trim_start().starts_with(prefix.trim_end())),
                "`{prefix}`: no example calls it:\n{examples}"
            );
        }
        for sub in subcommands(&help) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        seen += 1;
    }
    // nmpsim, its 11 commands and their subcommands.
    assert!(seen >= 20, "{seen} commands");
}
