//! ops/tune-host.sh in its default mode: reports every setting and
//! changes nothing (it must be safe to run anywhere).

use std::process::Command;

#[test]
fn tune_host_reports_every_setting_and_changes_nothing_without_apply() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../ops/tune-host.sh");
    let swappiness = std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap();
    let output = Command::new("bash").arg(script).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for setting in [
        "net.core.rmem_max",
        "vm.swappiness",
        "fs.nr_open",
        "locked memory",
        "governor",
        "nvme",
        "THP defrag",
        "IRQ affinity",
    ] {
        assert!(text.contains(setting), "no line for {setting}:\n{text}");
    }
    assert!(text.contains("run with --apply"), "{text}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/vm/swappiness").unwrap(),
        swappiness,
        "the dry run changed a setting"
    );
    // A mistyped flag is refused.
    let refused = Command::new("bash")
        .arg(script)
        .arg("--aply")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
}

/// scripts/release.sh packages the binaries (here the ones this test run
/// built, `--binaries`: a release build is minutes) with the systemd unit,
/// the alert rules, the dashboard and the docs; the tarball's checksum
/// holds and the broker in it runs.
#[test]
fn the_release_tarball_holds_the_binaries_ops_files_and_docs() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let built = std::path::Path::new(env!("CARGO_BIN_EXE_broker"))
        .parent()
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let made = Command::new("bash")
        .arg(repo.join("scripts/release.sh"))
        .arg("--binaries")
        .arg(built)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&made.stdout).to_string();
    assert!(made.status.success(), "{made:?}");
    let tarball = std::path::PathBuf::from(printed.trim());
    let name = tarball.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with("broker-") && name.ends_with(".tar.gz"),
        "{name}"
    );
    let checked = Command::new("sha256sum")
        .args(["-c", &format!("{name}.sha256")])
        .current_dir(out.path())
        .output()
        .unwrap();
    assert!(checked.status.success(), "{checked:?}");
    let unpacked = tempfile::tempdir().unwrap();
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(unpacked.path())
        .status()
        .unwrap();
    assert!(untar.success());
    let root = unpacked.path().join(name.trim_end_matches(".tar.gz"));
    for file in [
        "bin/broker",
        "bin/loadgen",
        "bin/perf",
        "ops/broker.service",
        "ops/alerts.yml",
        "ops/grafana-dashboard.json",
        "ops/tune-host.sh",
        "docs/operations.md",
        "docs/configuration.md",
        "docs/openapi.yaml",
        "README.md",
        "VERSION",
    ] {
        assert!(root.join(file).is_file(), "{file} missing from {name}");
    }
    let version = Command::new(root.join("bin/broker"))
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    assert!(version.starts_with("broker "), "{version}");
    assert_eq!(
        std::fs::read_to_string(root.join("VERSION")).unwrap(),
        version
    );
}
