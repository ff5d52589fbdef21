//! The built `loadgen` binary's command line, run as scripts and users run
//! it: help for every mode (the modes read from the clap definition, so a
//! new mode is covered without touching this file), mistakes refused with
//! status 2 and named, the version, and shell completions.

use std::process::{Command, Output};

use clap::CommandFactory;
use loadgen::options::Cli;

/// Runs loadgen with `args`.
fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .expect("the loadgen binary runs")
}

/// Its stdout and stderr, as text.
fn text(out: &Output) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (stdout, stderr)
}

#[test]
fn help_exits_0_with_the_usage() {
    let out = loadgen(&["--help"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains("Usage"), "{stdout}");
    assert!(stdout.contains("produce"), "{stdout}");
}

#[test]
fn every_mode_has_help_with_its_flags_and_an_example() {
    let cli = Cli::command();
    let modes: Vec<&str> = cli
        .get_subcommands()
        .map(|mode| mode.get_name())
        .filter(|name| !["completion", "help"].contains(name))
        .collect();
    assert!(modes.contains(&"produce"), "{modes:?}");
    for mode in modes {
        let out = loadgen(&[mode, "--help"]);
        let (stdout, _) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{mode}: {out:?}");
        for expected in ["Usage", "--bootstrap", "--duration", "Example"] {
            assert!(stdout.contains(expected), "{mode}: {expected}\n{stdout}");
        }
    }
}

#[test]
fn an_unknown_flag_exits_2_naming_it() {
    let out = loadgen(&["produce", "--bogus", "1"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr.contains("--bogus"), "{stderr}");
}

#[test]
fn no_mode_exits_2_with_the_usage() {
    let out = loadgen(&[]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr.contains("Usage"), "{stderr}");
}

#[test]
fn version_exits_0_with_the_version() {
    let out = loadgen(&["--version"]);
    let (stdout, _) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains(env!("CARGO_PKG_VERSION")), "{stdout}");
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = loadgen(&["completion", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {out:?}");
        assert!(!out.stdout.is_empty(), "{shell}");
    }
    let (stdout, _) = text(&loadgen(&["completion", "bash"]));
    assert!(stdout.contains("complete"), "{stdout}");
    assert!(stdout.contains("--bootstrap"), "{stdout}");
}
