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
