//! The `broker` binary's command line as an operator meets it: every
//! subcommand (found by walking the command tree, so a new one is
//! covered) answers `--help` with its usage, its flags and an example;
//! a mistake exits 2 naming the flag; `completion` prints a script each
//! shell can load; a refusal names the thing, Kafka's error name and what
//! to do, exiting 1, and a cluster out of reach exits 3.

mod support;

use std::process::{Command, Output};

use clap::CommandFactory;

use broker::cli::Cli;

fn broker(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(args)
        .env_remove("BROKER_BROKERS")
        .output()
        .expect("the broker binary runs")
}

/// Every subcommand path below `command` (e.g. ["group", "reset-offsets"]).
fn paths(command: &clap::Command, above: Vec<String>, into: &mut Vec<Vec<String>>) {
    for sub in command.get_subcommands() {
        let mut path = above.clone();
        path.push(sub.get_name().to_string());
        into.push(path.clone());
        paths(sub, path, into);
    }
}

#[test]
fn every_subcommand_answers_help_with_its_flags_and_an_example() {
    let tree = Cli::command();
    let mut all = vec![vec![]];
    paths(&tree, vec![], &mut all);
    assert!(
        all.len() > 30,
        "the tree was walked: {} commands",
        all.len()
    );
    for path in &all {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = broker(&args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(text.contains("Usage: broker"), "{args:?}:\n{text}");
        // The command's own flags are listed.
        let mut node = &tree;
        for name in path {
            node = node.find_subcommand(name).expect("walked");
        }
        for arg in node.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                assert!(
                    text.contains(&format!("--{long}")),
                    "{args:?} lists --{long}"
                );
            }
        }
        // Leaves (what an operator runs) show an example.
        if node.get_subcommands().next().is_none() {
            assert!(text.contains("Example"), "{args:?} has an example:\n{text}");
        }
    }
}

#[test]
fn a_mistake_exits_2_and_names_the_flag() {
    for (args, named) in [
        (
            vec!["topic", "create", "x", "--partitions", "many"],
            "--partitions",
        ),
        (vec!["topic", "list", "--bogus"], "--bogus"),
        (vec!["serve", "--shards"], "--shards"),
        (
            vec!["group", "reset-offsets", "g", "--topic", "t"],
            "--to-earliest",
        ),
    ] {
        let out = broker(&args);
        let error = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {error}");
        assert!(error.contains(named), "{args:?} names {named}: {error}");
    }
}

#[test]
fn completion_prints_a_script_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef broker"),
        ("fish", "complete -c broker"),
    ] {
        let out = broker(&["completion", shell]);
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{shell}: {out:?}");
        assert!(script.contains(marker), "{shell}: {script:.200}");
        assert!(
            script.contains("reset-offsets"),
            "{shell} completes subcommands"
        );
    }
}

#[test]
fn the_bash_script_loads_in_bash() {
    let out = broker(&["completion", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("broker.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    let loaded = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p broker", script.display()))
        .output()
        .unwrap();
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
}

#[test]
fn errors_are_in_words_with_kafkas_name_and_their_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let running = support::start_broker(dir.path());
    let bootstrap = running.bootstrap();
    for (args, says) in [
        (
            vec!["group", "describe", "nosuch"],
            "broker: group 'nosuch' does not exist (GROUP_ID_NOT_FOUND); broker group list shows the groups",
        ),
        (
            vec!["topic", "describe", "nosuch"],
            "broker: topic 'nosuch' does not exist (UNKNOWN_TOPIC_OR_PARTITION); broker topic list shows the topics",
        ),
        (
            vec!["topic", "delete", "nosuch"],
            "broker: topic 'nosuch' does not exist (UNKNOWN_TOPIC_OR_PARTITION)",
        ),
    ] {
        let out = broker(&[&args[..], &["--brokers", &bootstrap]].concat());
        let error = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {error}");
        assert!(error.starts_with(says), "{args:?}: {error}");
    }
    let created = broker(&["topic", "create", "twice", "--brokers", &bootstrap]);
    assert!(created.status.success(), "{created:?}");
    let again = broker(&["topic", "create", "twice", "--brokers", &bootstrap]);
    let error = String::from_utf8_lossy(&again.stderr);
    assert!(
        error.starts_with("broker: topic 'twice' already exists (TOPIC_ALREADY_EXISTS)"),
        "{error}"
    );
    // Flags that go together, a --brokers that is no host:port: the
    // command line is wrong, exit 2 (as clap's own usage errors).
    for args in [
        vec!["topic", "list", "--sasl-mechanism", "PLAIN"],
        vec!["topic", "list", "--brokers", "nonsense"],
    ] {
        let out = broker(&args);
        let error = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {error}");
    }
    // Nothing listens on this port: unreachable, exit 3.
    let nobody = format!("127.0.0.1:{}", support::fixed_port());
    let out = broker(&["topic", "list", "--brokers", &nobody]);
    let error = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{error}");
    assert!(
        error.starts_with("broker: cannot reach the cluster"),
        "{error}"
    );
}
