//! What a command accepts, read from its clap definition, and the checks that
//! reject a spec before any run starts.
//!
//! Nothing here lists flags by hand: the keys a spec may use are the long
//! flags of the command's clap definition, and values are checked by letting
//! clap parse them, first one by one (so an error points at the value's line)
//! and then as each run's complete argument vector (so conflicts between flags
//! are caught too).

use clap::error::{ContextKind, ContextValue, ErrorKind};

use crate::error::{SpecError, SpecErrors};
use crate::expand::Run;
use crate::layout::RUNS_DIR;
use crate::spec::{Entry, RESERVED_FLAGS, Scalar, Spec};

/// Most per-run parse errors reported; the rest are counted.
const MAX_RUN_ERRORS: usize = 10;

/// A long flag of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flag {
    pub long: String,
    /// Takes no value (`--check`): set by `true`, left out by `false`.
    pub switch: bool,
}

/// A command of the CLI (`nmp run`) and its flags.
#[derive(Debug, Clone)]
pub struct CommandSchema {
    root: clap::Command,
    pub path: Vec<String>,
    pub flags: Vec<Flag>,
}

impl CommandSchema {
    /// `path` under `root` as typed (`nmpsim nmp run`).
    fn spelled(root: &clap::Command, path: &[String]) -> String {
        std::iter::once(root.get_name())
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The names of `cmd`'s subcommands, `help` aside, comma-separated.
    fn subcommands(cmd: &clap::Command) -> String {
        cmd.get_subcommands()
            .map(clap::Command::get_name)
            .filter(|n| *n != "help")
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Finds `path` (`["nmp", "run"]`) under the CLI's root command.
    pub fn resolve(root: &clap::Command, path: &[String]) -> Result<Self, String> {
        let mut cmd = root;
        for (i, word) in path.iter().enumerate() {
            match cmd.find_subcommand(word) {
                Some(c) => cmd = c,
                None => {
                    let subs = Self::subcommands(cmd);
                    return Err(if subs.is_empty() {
                        format!(
                            "`{}` has no subcommands, and a spec's command takes no arguments: '{word}' is neither (a run's flags go in [base], [axes] and [[zip]])",
                            Self::spelled(root, &path[..i])
                        )
                    } else {
                        format!(
                            "`{}` has no subcommand '{word}' (expected one of: {subs})",
                            Self::spelled(root, &path[..i])
                        )
                    });
                }
            }
        }
        if cmd.is_subcommand_required_set() {
            return Err(format!(
                "`{}` needs a subcommand: one of {}",
                Self::spelled(root, path),
                Self::subcommands(cmd)
            ));
        }
        let flags = cmd
            .get_arguments()
            .filter_map(|a| {
                let long = a.get_long()?;
                if long == "help" || long == "version" {
                    return None;
                }
                Some(Flag {
                    long: long.to_string(),
                    switch: !a.get_action().takes_values(),
                })
            })
            .collect();
        Ok(CommandSchema {
            root: root.clone(),
            path: path.to_vec(),
            flags,
        })
    }

    pub fn flag(&self, long: &str) -> Option<&Flag> {
        self.flags.iter().find(|f| f.long == long)
    }

    pub fn has(&self, long: &str) -> bool {
        self.flag(long).is_some()
    }

    /// `nmpsim nmp run` (for messages).
    pub fn display_name(&self) -> String {
        std::iter::once(self.root.get_name())
            .chain(self.path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The arguments after the program name: the command path, then
    /// `--flag=value` for each value flag (the `=` form keeps values that
    /// start with `-` values) and `--flag` for each switch set to true.
    pub fn argv(&self, config: &[(String, Scalar)]) -> Vec<String> {
        let mut out = self.path.clone();
        for (flag, value) in config {
            let switch = self.flag(flag).is_some_and(|f| f.switch);
            match (switch, value) {
                (true, Scalar::Bool(true)) => out.push(format!("--{flag}")),
                (true, Scalar::Bool(false)) => {}
                _ => out.push(format!("--{flag}={}", value.render())),
            }
        }
        out
    }

    /// The flags the sweep adds to every run (those the command has).
    pub fn sweep_flags(&self, run_dir: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.has("out") {
            out.push(format!("--out={run_dir}"));
        }
        if self.has("json") {
            out.push("--json".to_string());
        }
        if self.has("quiet") {
            out.push("--quiet".to_string());
        }
        out
    }

    /// Lets clap parse `args` (as from [`CommandSchema::argv`]) exactly as the
    /// child process will.
    pub fn parse(&self, args: &[String]) -> Result<(), clap::Error> {
        Self::parse_in(&mut self.root.clone(), args)
    }

    /// [`CommandSchema::parse`] with a parser that is reused across calls
    /// (building clap's parser once matters for sweeps of many runs).
    fn parse_in(parser: &mut clap::Command, args: &[String]) -> Result<(), clap::Error> {
        let name = parser.get_name().to_string();
        parser
            .try_get_matches_from_mut(std::iter::once(name).chain(args.iter().cloned()))
            .map(|_| ())
    }

    /// The sweepable flag nearest to a misspelt `name` (edit distance at most
    /// 2, or a prefix relation), if any.
    fn closest(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .filter(|f| !RESERVED_FLAGS.contains(&f.long.as_str()))
            .map(|f| (edit_distance(name, &f.long), f.long.as_str()))
            .filter(|&(d, f)| d <= 2 || f.starts_with(name) || name.starts_with(f))
            .min_by_key(|&(d, _)| d)
            .map(|(_, f)| f)
    }

    fn flag_list(&self) -> String {
        self.flags
            .iter()
            .filter(|f| !RESERVED_FLAGS.contains(&f.long.as_str()))
            .map(|f| f.long.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Levenshtein distance over characters.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A clap error on one line, without its `error: ` prefix: the first line,
/// and the indented lines after it (what is missing), up to the usage.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("").trim();
    let mut msg = first.strip_prefix("error: ").unwrap_or(first).to_string();
    let more: Vec<&str> = lines
        .take_while(|l| l.starts_with(char::is_whitespace) && !l.trim().is_empty())
        .map(str::trim)
        .collect();
    if !more.is_empty() {
        msg = format!("{} {}", msg.trim_end(), more.join(", "));
    }
    msg
}

/// The long flag a clap error is about, when it names one.
fn clap_flag(e: &clap::Error) -> Option<String> {
    let arg = match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(s) => s.clone(),
        ContextValue::Strings(v) => v.first()?.clone(),
        _ => return None,
    };
    let long = arg.strip_prefix("--")?;
    Some(long.split([' ', '=']).next()?.to_string())
}

/// Checks every key of `spec` against the command and every value by clap.
pub fn check_spec(spec: &Spec, schema: &CommandSchema) -> Result<(), SpecErrors> {
    let mut errors = Vec::new();
    let mut err = |e: &Entry, line: usize, msg: String| {
        errors.push(SpecError::new(&spec.file, Some(line), Some(&e.key), msg));
    };
    for e in spec.all_entries() {
        let Some(flag) = schema.flag(&e.flag) else {
            if spec.seeds.as_ref().is_some_and(|s| std::ptr::eq(s, e)) {
                err(
                    e,
                    e.line,
                    format!(
                        "`{}` has no --seed flag to repeat over",
                        schema.display_name()
                    ),
                );
            } else {
                let flags = schema.flag_list();
                let message = if flags.is_empty() {
                    // Nothing to list or suggest.
                    let own: Vec<String> = schema
                        .flags
                        .iter()
                        .map(|f| format!("--{}", f.long))
                        .collect();
                    if own.is_empty() {
                        format!("unknown key: `{}` takes no flags", schema.display_name())
                    } else {
                        format!(
                            "unknown key: `{}` takes no flags but {}, which the sweep sets itself",
                            schema.display_name(),
                            own.join(" and ")
                        )
                    }
                } else {
                    let hint = schema
                        .closest(e.flag.trim_start_matches('-'))
                        .map(|f| format!("did you mean '{f}'? "))
                        .unwrap_or_default();
                    // (A key written as the flag, `--engine`, names it.)
                    let named = e.flag.trim_start_matches('-');
                    if named != e.flag && schema.flag(named).is_some() {
                        format!(
                            "unknown key: write it without the dashes, `{named}` (a key is the name of `{}`'s flag --{named})",
                            schema.display_name()
                        )
                    } else {
                        format!(
                            "unknown key: `{}` has no flag --{} ({hint}its flags: {flags})",
                            schema.display_name(),
                            named,
                        )
                    }
                };
                err(e, e.line, message);
            }
            continue;
        };
        for v in &e.values {
            if flag.switch {
                if !matches!(v.value, Scalar::Bool(_)) {
                    err(
                        e,
                        v.line,
                        format!(
                            "--{} is a switch: expected true or false, found {} ({})",
                            e.flag,
                            v.value.type_name(),
                            v.value.render()
                        ),
                    );
                }
                continue;
            }
            let args = schema.argv(&[(e.flag.clone(), v.value.clone())]);
            if let Err(ce) = schema.parse(&args) {
                // Alone, a flag may miss a companion or conflict with a
                // default; only the run-level check can judge those.
                if matches!(
                    ce.kind(),
                    ErrorKind::MissingRequiredArgument | ErrorKind::ArgumentConflict
                ) {
                    continue;
                }
                err(
                    e,
                    v.line,
                    format!(
                        "value {:?} rejected: {}",
                        v.value.render(),
                        clap_message(&ce)
                    ),
                );
            }
        }
    }
    SpecErrors(errors).into_result()
}

/// Lets clap parse every run's complete argument vector, as the run will
/// get it: with the flags the sweep adds ([`CommandSchema::sweep_flags`]).
pub fn check_runs(spec: &Spec, schema: &CommandSchema, runs: &[Run]) -> Result<(), SpecErrors> {
    let mut errors: Vec<SpecError> = Vec::new();
    let mut failed = 0usize;
    let mut parser = schema.root.clone();
    for run in runs {
        let own = schema.argv(&run.config);
        let added = schema.sweep_flags(&format!("{RUNS_DIR}/{}", run.dir_name(runs.len())));
        let argv: Vec<String> = own.iter().chain(&added).cloned().collect();
        let Err(ce) = CommandSchema::parse_in(&mut parser, &argv) else {
            continue;
        };
        failed += 1;
        if errors.len() >= MAX_RUN_ERRORS {
            continue;
        }
        let entry = clap_flag(&ce).and_then(|f| spec.all_entries().find(|e| e.flag == f));
        let line = entry.map(|e| e.line).unwrap_or(spec.command_line);
        let what = if run.params.is_empty() {
            String::new()
        } else {
            format!(" ({})", run.describe())
        };
        // A flag that cannot go with what the sweep adds: say so.
        let by_sweep = if !added.is_empty() && CommandSchema::parse_in(&mut parser, &own).is_ok() {
            let names: Vec<&str> = added
                .iter()
                .map(|f| f.split('=').next().unwrap_or(f))
                .collect();
            format!(
                " (every run of a sweep gets {} from the sweep itself)",
                names.join(" ")
            )
        } else {
            String::new()
        };
        errors.push(SpecError::new(
            &spec.file,
            Some(line),
            entry.map(|e| e.key.as_str()),
            format!("run {}{what}: {}{by_sweep}", run.index, clap_message(&ce)),
        ));
    }
    if failed > errors.len() {
        let more = failed - errors.len();
        errors.push(SpecError::new(
            &spec.file,
            None,
            None,
            format!("... and {more} more runs rejected"),
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SpecErrors(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::expand;
    use clap::{Arg, ArgAction, Command, value_parser};

    fn cli() -> Command {
        Command::new("tool").subcommand(
            Command::new("sim")
                .arg(
                    Arg::new("ranks")
                        .long("ranks")
                        .value_parser(value_parser!(u32))
                        .default_value("1"),
                )
                .arg(
                    Arg::new("link_gbps")
                        .long("link-gbps")
                        .value_parser(value_parser!(f64)),
                )
                .arg(
                    Arg::new("seed")
                        .long("seed")
                        .value_parser(value_parser!(u64)),
                )
                .arg(Arg::new("check").long("check").action(ArgAction::SetTrue))
                .arg(Arg::new("trace").long("trace").conflicts_with("stream"))
                .arg(Arg::new("stream").long("stream"))
                .arg(Arg::new("out").long("out"))
                .arg(
                    Arg::new("list")
                        .long("list")
                        .action(ArgAction::SetTrue)
                        .conflicts_with("out"),
                )
                .arg(Arg::new("json").long("json").action(ArgAction::SetTrue)),
        )
    }

    fn schema() -> CommandSchema {
        CommandSchema::resolve(&cli(), &["sim".to_string()]).expect("sim exists")
    }

    fn check(text: &str) -> Result<Vec<Run>, SpecErrors> {
        let spec = Spec::parse(text, "t.toml")?;
        let s = schema();
        check_spec(&spec, &s)?;
        let runs = expand(&spec);
        check_runs(&spec, &s, &runs)?;
        Ok(runs)
    }

    #[test]
    fn flags_come_from_clap() {
        let s = schema();
        assert!(s.flag("check").is_some_and(|f| f.switch));
        assert!(s.flag("ranks").is_some_and(|f| !f.switch));
        assert!(!s.has("help"));
        assert_eq!(s.display_name(), "tool sim");
        let e = CommandSchema::resolve(&cli(), &["nope".to_string()]).expect_err("no such");
        assert!(e.contains("'nope'") && e.contains("sim"), "{e}");
        // A command that only groups others names them.
        let grouped = Command::new("tool").subcommand(
            Command::new("trace")
                .subcommand_required(true)
                .subcommand(Command::new("gen"))
                .subcommand(Command::new("stats")),
        );
        let e = CommandSchema::resolve(&grouped, &["trace".to_string()]).expect_err("group");
        assert_eq!(e, "`tool trace` needs a subcommand: one of gen, stats");
    }

    #[test]
    fn a_missing_required_argument_is_named() {
        let cmd = Command::new("tool").subcommand(
            Command::new("plot")
                .arg(Arg::new("csv").required(true).value_name("CSV"))
                .arg(Arg::new("x").long("x").required(true).value_name("COLUMN")),
        );
        let s = CommandSchema::resolve(&cmd, &["plot".to_string()]).unwrap();
        let e = s.parse(&["plot".to_string()]).unwrap_err();
        let msg = clap_message(&e);
        assert!(
            msg.contains("not provided") && msg.contains("<CSV>"),
            "{msg}"
        );
        assert!(msg.contains("--x <COLUMN>"), "{msg}");
        assert!(!msg.contains("Usage"), "{msg}");
    }

    #[test]
    fn argv_uses_equals_form_and_switches() {
        let s = schema();
        let argv = s.argv(&[
            ("ranks".into(), Scalar::Int(4)),
            ("check".into(), Scalar::Bool(true)),
            ("link-gbps".into(), Scalar::Float(-2.5)),
        ]);
        assert_eq!(
            argv,
            vec!["sim", "--ranks=4", "--check", "--link-gbps=-2.5"]
        );
        assert_eq!(
            s.argv(&[("check".into(), Scalar::Bool(false))]),
            vec!["sim"]
        );
        assert!(s.parse(&argv).is_ok());
        assert_eq!(s.sweep_flags("d"), vec!["--out=d", "--json"]);
    }

    #[test]
    fn valid_spec_passes() {
        let runs = check(
            "command = \"sim\"\n[base]\ncheck = true\n[axes]\nlink_gbps = [25, 50.5]\n[repeat]\nseeds = [1, 2]\n",
        )
        .expect("valid");
        assert_eq!(runs.len(), 4);
    }

    #[test]
    fn unknown_key_names_key_line_and_flags() {
        let e = check("command = \"sim\"\n[axes]\nranks = [1]\nrank = [2]\n").expect_err("unknown");
        assert_eq!(e.0[0].line, Some(4));
        assert_eq!(e.0[0].key.as_deref(), Some("rank"));
        assert!(e.0[0].message.contains("unknown key"), "{e}");
        assert!(e.0[0].message.contains("did you mean 'ranks'?"), "{e}");
        let e = check("command = \"sim\"\n[base]\nzzzz = 1\n").expect_err("unknown");
        assert!(!e.0[0].message.contains("did you mean"), "{e}");
        assert!(
            e.0[0].message.contains("link-gbps"),
            "flags are listed: {e}"
        );
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("rank", "ranks"), 1);
        assert_eq!(edit_distance("link_gbps", "link-gbps"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn type_mismatch_points_at_the_value() {
        let e =
            check("command = \"sim\"\n[axes]\nranks = [1,\n  \"many\"]\n").expect_err("mismatch");
        assert_eq!(e.0.len(), 1);
        assert_eq!(e.0[0].line, Some(4));
        assert_eq!(e.0[0].key.as_deref(), Some("ranks"));
        assert!(e.0[0].message.contains("\"many\""), "{e}");
        let e = check("command = \"sim\"\n[base]\ncheck = 3\n").expect_err("switch");
        assert!(e.0[0].message.contains("switch"), "{e}");
        let e = check("command = \"sim\"\n[axes]\nranks = [-1]\n").expect_err("negative u32");
        assert!(e.0[0].message.contains("-1"), "{e}");
    }

    #[test]
    fn conflicts_are_caught_per_run() {
        let e = check(
            "command = \"sim\"\n[base]\nstream = \"random\"\n[axes]\ntrace = [\"a\", \"b\"]\n",
        )
        .expect_err("conflict");
        assert_eq!(e.0.len(), 2, "{e}");
        assert!(e.0[0].message.starts_with("run 0 (trace=a)"), "{e}");
        assert!(e.0[0].line == Some(3) || e.0[0].line == Some(5), "{e}");
    }

    #[test]
    fn a_command_without_flags_is_said_to_take_none() {
        let root = Command::new("tool")
            .subcommand(Command::new("bare"))
            .subcommand(
                Command::new("listing")
                    .arg(Arg::new("json").long("json").action(ArgAction::SetTrue)),
            );
        for (cmd, want) in [
            ("bare", "unknown key: `tool bare` takes no flags"),
            (
                "listing",
                "unknown key: `tool listing` takes no flags but --json, which the sweep sets itself",
            ),
        ] {
            let s = CommandSchema::resolve(&root, &[cmd.to_string()]).expect("exists");
            let text = format!("command = \"{cmd}\"\n[axes]\nx = [1, 2]\n");
            let spec = Spec::parse(&text, "t.toml").expect("shape ok");
            let e = check_spec(&spec, &s).expect_err("no such flag");
            assert_eq!(e.0.len(), 1, "{e}");
            assert_eq!(e.0[0].message, want);
            assert_eq!((e.0[0].line, e.0[0].key.as_deref()), (Some(3), Some("x")));
        }
    }

    #[test]
    fn a_flag_that_conflicts_with_what_the_sweep_adds_is_caught() {
        let e = check("command = \"sim\"\n[base]\nlist = true\n").expect_err("conflict");
        assert_eq!(e.0.len(), 1, "{e}");
        assert_eq!(
            (e.0[0].line, e.0[0].key.as_deref()),
            (Some(3), Some("list"))
        );
        assert!(
            e.0[0]
                .message
                .contains("the argument '--list' cannot be used with '--out <out>'"),
            "{e}"
        );
        assert!(
            e.0[0]
                .message
                .ends_with("(every run of a sweep gets --out --json from the sweep itself)"),
            "{e}"
        );
        // A conflict of the spec's own flags is not blamed on the sweep.
        let e = check("command = \"sim\"\n[base]\nstream = \"random\"\n[axes]\ntrace = [\"a\"]\n")
            .expect_err("conflict");
        assert!(!e.0[0].message.contains("from the sweep"), "{e}");
    }

    #[test]
    fn seeds_need_a_seed_flag() {
        let root = Command::new("tool").subcommand(Command::new("bare"));
        let s = CommandSchema::resolve(&root, &["bare".to_string()]).expect("exists");
        let spec =
            Spec::parse("command = \"bare\"\n[repeat]\nseeds = [1]\n", "t.toml").expect("shape ok");
        let e = check_spec(&spec, &s).expect_err("no seed");
        assert!(e.0[0].message.contains("no --seed"), "{e}");
    }

    #[test]
    fn a_key_written_as_a_flag_and_arguments_after_a_command_are_explained() {
        let e =
            check("command = \"sim\"\n[base]\n\"--ranks\" = 2\n").expect_err("--ranks is no key");
        let t = e.0[0].to_string();
        assert!(t.contains("write it without the dashes, `ranks`"), "{t}");
        let e = check("command = \"sim\"\n[base]\n\"--rnks\" = 2\n").expect_err("no such flag");
        let t = e.0[0].to_string();
        assert!(
            t.contains("has no flag --rnks (did you mean 'ranks'?"),
            "{t}"
        );
        let e = CommandSchema::resolve(&cli(), &["sim".to_string(), "extra".to_string()])
            .expect_err("sim has no subcommands");
        assert!(
            e.contains(
                "`tool sim` has no subcommands, and a spec's command takes no arguments: 'extra'"
            ),
            "{e}"
        );
    }
}
