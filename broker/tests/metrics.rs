//! GET /metrics on a real broker: scraped before and after load, the
//! values move as they should; the alert rules and the dashboard name only
//! metrics the broker serves.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use client::cluster::Cluster;
use support::{on_glommio, start_broker_with};

/// Every sample of a scrape: `name{labels}` -> value.
fn scrape(http: SocketAddr) -> BTreeMap<String, f64> {
    let (status, body) = support::http(http, "GET", "/metrics", "");
    assert_eq!(status, 200);
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').expect("name value");
            (name.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

fn value(samples: &BTreeMap<String, f64>, name: &str) -> f64 {
    *samples
        .get(name)
        .unwrap_or_else(|| panic!("{name} not scraped; have {:?}", samples.keys()))
}

/// The metric names of a scrape (labels dropped), histograms also by
/// their base name.
fn names(samples: &BTreeMap<String, f64>) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for key in samples.keys() {
        let name = key.split('{').next().unwrap();
        names.insert(name.to_string());
        if let Some(base) = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
        {
            names.insert(base.to_string());
        }
    }
    names
}

fn kcat_produce(bootstrap: &str, topic: &str, count: usize) {
    let mut producer = Command::new("kcat")
        .args(["-P", "-b", bootstrap, "-t", topic, "-X", "acks=all"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("kcat (the test command installs it)");
    {
        let stdin = producer.stdin.as_mut().unwrap();
        for i in 0..count {
            writeln!(stdin, "metric-value-{i}").unwrap();
        }
    }
    assert!(producer.wait().unwrap().success());
}

#[test]
fn metrics_move_with_produce_consume_commits_and_groups() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(
        dir.path(),
        &[("BROKER_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")],
    );
    let bootstrap = broker.bootstrap();
    let before = scrape(broker.http);
    assert_eq!(value(&before, "under_replicated_partitions"), 0.0);
    let disk = value(&before, "broker_disk_used_pct");
    assert!(disk > 0.0 && disk <= 100.0, "{disk}");
    // What df says of the same file system (it rounds up to a whole percent).
    let df = std::process::Command::new("df")
        .args(["--output=pcent"])
        .arg(dir.path())
        .output()
        .unwrap();
    let df: f64 = String::from_utf8_lossy(&df.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().trim_end_matches('%').parse().ok())
        .expect("df's use%");
    assert!(
        (disk - df).abs() <= 1.5,
        "broker_disk_used_pct {disk} but df says {df}%"
    );

    kcat_produce(&bootstrap, "measured", 2000);
    let produced = scrape(broker.http);
    let grew = |name: &str, by: f64| {
        let (a, b) = (
            before.get(name).copied().unwrap_or(0.0),
            value(&produced, name),
        );
        assert!(b >= a + by, "{name}: {a} -> {b}, expected at least +{by}");
    };
    grew("requests_total{api=\"Produce\"}", 1.0);
    grew("produce_latency_seconds_count{acks=\"all\"}", 1.0);
    // 2000 values of 14-18 bytes each, framed in requests.
    grew("bytes_in_total", 28_000.0);
    grew("log_appended_batches_total", 1.0);
    grew("log_fdatasync_total", 1.0);
    // Each flush that wrote is counted by its duration once it is durable:
    // all of the log's flushes but those in flight (one per shard at most).
    grew("log_flush_latency_seconds_count", 1.0);
    let timed = value(&produced, "log_flush_latency_seconds_count");
    let flushes = value(&produced, "log_flushes_total");
    assert!(
        timed <= flushes && timed + 2.0 >= flushes,
        "{timed} flushes timed of {flushes}"
    );
    assert_eq!(
        value(
            &produced,
            "partition_high_watermark{topic=\"measured\",partition=\"0\"}"
        ),
        2000.0
    );
    assert_eq!(
        value(&produced, "topic_retention_seconds{topic=\"measured\"}"),
        7.0 * 24.0 * 3600.0
    );
    // A histogram's buckets are cumulative up to its count.
    let all = value(&produced, "produce_latency_seconds_count{acks=\"all\"}");
    assert_eq!(
        value(
            &produced,
            "produce_latency_seconds_bucket{acks=\"all\",le=\"+Inf\"}"
        ),
        all
    );

    let consumed = Command::new("timeout")
        .args(["60", "kcat", "-C", "-b", &bootstrap, "-t", "measured"])
        .args(["-o", "beginning", "-e", "-q"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&consumed.stdout).lines().count(),
        2000
    );
    let read = scrape(broker.http);
    assert!(value(&read, "fetch_latency_seconds_count") >= 1.0);
    assert!(value(&read, "bytes_out_total") >= value(&produced, "bytes_out_total") + 28_000.0);
    let ratio = value(&read, "log_read_cache_hit_ratio");
    assert!((0.0..=1.0).contains(&ratio) && ratio > 0.0, "{ratio}");

    // Lag follows the group's commits.
    let lag = "consumer_lag_messages{group=\"billing\",topic=\"measured\",partition=\"0\"}";
    let commit = |offset: i64| {
        let address = broker.address;
        on_glommio(async move {
            let cluster = Cluster::new(address, "metrics-test");
            let offsets = BTreeMap::from([(("measured".to_string(), 0), offset)]);
            cluster.commit_offsets("billing", &offsets).await.unwrap();
        })
    };
    commit(500);
    assert_eq!(value(&scrape(broker.http), lag), 1500.0);
    commit(2000);
    assert_eq!(value(&scrape(broker.http), lag), 0.0);

    // A group consumer's join is a rebalance.
    let mut member = Command::new("kcat")
        .args(["-b", &bootstrap, "-G", "rebalancing", "measured"])
        .args(["-X", "auto.offset.reset=earliest", "-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let rebalances = "rebalances_total{group=\"rebalancing\",type=\"classic\"}";
    while scrape(broker.http).get(rebalances).copied().unwrap_or(0.0) < 1.0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no rebalance counted"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The member's connections are open (kcat keeps at least one).
    assert!(value(&scrape(broker.http), "connections") >= 1.0);
    let _ = member.kill();
    let _ = member.wait();
}

/// `count` values into one partition of `topic` (kcat, acks=all).
fn kcat_produce_to(bootstrap: &str, topic: &str, partition: i32, count: usize) {
    let mut producer = Command::new("kcat")
        .args(["-P", "-b", bootstrap, "-t", topic, "-X", "acks=all"])
        .args(["-p", &partition.to_string()])
        .stdin(Stdio::piped())
        .spawn()
        .expect("kcat (the test command installs it)");
    {
        let stdin = producer.stdin.as_mut().unwrap();
        for i in 0..count {
            writeln!(stdin, "value-{i}").unwrap();
        }
    }
    assert!(producer.wait().unwrap().success());
}

fn lag_of(
    samples: &BTreeMap<String, f64>,
    group: &str,
    topic: &str,
    partition: i32,
) -> Option<f64> {
    let name = format!(
        "consumer_lag_messages{{group=\"{group}\",topic=\"{topic}\",partition=\"{partition}\"}}"
    );
    samples.get(&name).copied()
}

#[test]
fn lag_covers_assigned_partitions_without_a_commit() {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::{Offset, TopicPartitionList};
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[]);
    let bootstrap = broker.bootstrap();
    let created = Command::new(env!("CARGO_BIN_EXE_broker"))
        .args(["topic", "create", "assigned", "--partitions", "2"])
        .args(["--brokers", &bootstrap])
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    kcat_produce_to(&bootstrap, "assigned", 0, 10);
    kcat_produce_to(&bootstrap, "assigned", 1, 20);
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "holder")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&["assigned"]).unwrap();
    let started = Instant::now();
    while consumer.assignment().map_or(0, |a| a.count()) < 2 {
        assert!(started.elapsed() < Duration::from_secs(30), "not assigned");
        consumer.poll(Duration::from_millis(100));
    }
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset("assigned", 0, Offset::Offset(3))
        .unwrap();
    consumer.commit(&commit, CommitMode::Sync).unwrap();
    // Partition 0: from the commit; partition 1, assigned and never
    // committed: not lag (Kafka's needs a commit), its whole log shown
    // apart. Nothing deleted: nothing lost.
    let samples = scrape(broker.http);
    assert_eq!(lag_of(&samples, "holder", "assigned", 0), Some(7.0));
    assert_eq!(lag_of(&samples, "holder", "assigned", 1), None);
    let uncommitted =
        "consumer_uncommitted_log_messages{group=\"holder\",topic=\"assigned\",partition=\"1\"}";
    assert_eq!(value(&samples, uncommitted), 20.0);
    let lost = "consumer_lag_lost_messages{group=\"holder\",topic=\"assigned\",partition=\"0\"}";
    assert_eq!(value(&samples, lost), 0.0);
}

/// A cluster's group coordinator reports its groups' lag on partitions
/// other brokers lead (their ends asked of the leaders).
#[test]
fn a_cluster_reports_lag_on_partitions_led_by_other_brokers() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = support::cluster::Cluster::new(root.path(), 2, &support::cluster::FAST);
    cluster.start();
    cluster.cli_until_ok(&["topic", "create", "spread", "--partitions", "4"]);
    let described = cluster.cli_until_ok(&["topic", "describe", "spread", "--format", "json"]);
    let described: serde_json::Value = serde_json::from_str(&described).unwrap();
    let leaders: Vec<i64> = (described["partitions"].as_array().unwrap().iter())
        .map(|p| p["leader"].as_i64().unwrap())
        .collect();
    assert!(
        leaders.contains(&1) && leaders.contains(&2),
        "each broker leads a partition: {leaders:?}"
    );
    let bootstrap = cluster.bootstrap();
    for partition in 0..4 {
        kcat_produce_to(&bootstrap, "spread", partition, 10 + partition as usize);
    }
    let address = cluster.node(1).kafka;
    on_glommio(async move {
        let client = Cluster::new(address, "metrics-test");
        let offsets: BTreeMap<(String, i32), i64> =
            (0..4).map(|p| (("spread".to_string(), p), 2)).collect();
        client.commit_offsets("far", &offsets).await.unwrap();
    });
    // The coordinator (one of the two) shows all four, whichever broker
    // leads them: lag = end - 2; the other broker shows none.
    let expected: Vec<Option<f64>> = (0..4).map(|p| Some(8.0 + p as f64)).collect();
    let lags = |id: i32| -> Vec<Option<f64>> {
        let samples = scrape(cluster.node(id).http);
        (0..4)
            .map(|p| lag_of(&samples, "far", "spread", p))
            .collect()
    };
    let started = Instant::now();
    loop {
        let seen = [lags(1), lags(2)];
        if seen.contains(&expected) && seen.contains(&vec![None; 4]) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "one broker coordinates the group and reports all four: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.stop();
}

/// The metric names an expression uses: every word with an underscore
/// that is not PromQL's own (`group_left`, `clamp_min`, ...) nor a label
/// value, so a misspelt name shows as one the broker does not serve.
fn metric_names_in(text: &str) -> Vec<String> {
    const PROMQL: [&str; 4] = [
        "group_left",
        "group_right",
        "clamp_min",
        "histogram_quantile",
    ];
    // Label values (`reason="x"`, or `reason=\"x\"` inside JSON) name
    // no metric: blanked first.
    let mut text = text.to_string();
    for opening in ["=\\\"", "=\""] {
        let mut at = 0;
        while let Some(found) = text[at..].find(opening) {
            let start = at + found + opening.len();
            let end = text[start..].find('"').map_or(text.len(), |e| start + e);
            text.replace_range(start..end, "");
            at = start;
        }
    }
    let mut found = Vec::new();
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if word.contains('_') && !PROMQL.contains(&word.as_str()) {
            found.push(word.clone());
        }
        word.clear();
    }
    found
}

#[test]
fn the_alert_rules_and_the_dashboard_name_only_served_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[]);
    // Something in every family with labels.
    kcat_produce(&broker.bootstrap(), "named", 10);
    on_glommio({
        let address = broker.address;
        async move {
            let cluster = Cluster::new(address, "metrics-test");
            let offsets = BTreeMap::from([(("named".to_string(), 0), 3)]);
            cluster.commit_offsets("g", &offsets).await.unwrap();
        }
    });
    let served = names(&scrape(broker.http));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let rules = std::fs::read_to_string(root.join("ops/alerts.yml")).unwrap();
    let exprs: String = rules
        .split("expr:")
        .skip(1)
        .map(|rest| {
            rest.split("for:")
                .next()
                .unwrap()
                .split("labels:")
                .next()
                .unwrap()
        })
        .collect();
    let used = metric_names_in(&exprs);
    for alert in [
        "ConsumerLagOverHalfRetention",
        "UnderReplicatedPartitions",
        "RebalanceStorm",
        "BrokerDiskOver80Percent",
        "UncleanLeaderElection",
        "LastStableOffsetStuck",
        "ShareRecordsAtDeliveryLimit",
        "RemoteUploadLagGrowing",
    ] {
        assert!(rules.contains(&format!("alert: {alert}")), "{alert}");
    }
    for name in [
        "consumer_lag_messages",
        "under_replicated_partitions",
        "rebalances_total",
        "broker_disk_used_pct",
        "unclean_leader_elections_total",
        "partition_last_stable_offset",
        "share_records_archived_total",
        "remote_upload_lag_bytes",
    ] {
        assert!(used.contains(&name.to_string()), "no alert uses {name}");
    }
    for name in &used {
        assert!(
            served.contains(name),
            "the alert rules use {name}, not served"
        );
    }
    let dashboard = root.join("ops/grafana-dashboard.json");
    let parsed = Command::new("python3")
        .args(["-m", "json.tool"])
        .arg(&dashboard)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(parsed.success(), "the dashboard is not valid JSON");
    let text = std::fs::read_to_string(&dashboard).unwrap();
    let exprs: String = text
        .lines()
        .filter(|l| l.trim_start().starts_with("\"expr\""))
        .collect();
    let used = metric_names_in(&exprs);
    assert!(used.len() >= 15, "{used:?}");
    for name in &used {
        assert!(
            served.contains(name),
            "the dashboard uses {name}, not served"
        );
    }
}

#[test]
fn promtool_accepts_the_alert_rules_the_dashboards_queries_and_a_live_scrape() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let rules = root.join("ops/alerts.yml");
    let (ok, printed) = support::promtool(&["check", "rules", rules.to_str().unwrap()], "");
    assert!(ok, "promtool check rules: {printed}");
    assert!(printed.contains("SUCCESS: 8 rules found"), "{printed}");
    // The dashboard's queries parse as PromQL: each as a recording rule.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("ops/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let exprs: Vec<String> = (dashboard["panels"].as_array().unwrap().iter())
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    assert!(exprs.len() >= 15, "{exprs:?}");
    let rules: String = (exprs.iter().enumerate())
        .map(|(i, expr)| {
            format!(
                "      - record: dashboard:query_{i}\n        expr: {}\n",
                serde_json::json!(expr)
            )
        })
        .collect();
    let rules_dir = tempfile::tempdir().unwrap();
    let file = rules_dir.path().join("dashboard-queries.yml");
    std::fs::write(
        &file,
        format!("groups:\n  - name: dashboard\n    rules:\n{rules}"),
    )
    .unwrap();
    let (ok, printed) = support::promtool(&["check", "rules", file.to_str().unwrap()], "");
    assert!(ok, "the dashboard's queries: {printed}");
    assert!(
        printed.contains(&format!("SUCCESS: {} rules found", exprs.len())),
        "{printed}"
    );

    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[]);
    // Every family with labels has a sample: a produce, a group's commit.
    kcat_produce(&broker.bootstrap(), "linted", 10);
    on_glommio({
        let address = broker.address;
        async move {
            let cluster = Cluster::new(address, "metrics-test");
            let offsets = BTreeMap::from([(("linted".to_string(), 0), 3)]);
            cluster.commit_offsets("g", &offsets).await.unwrap();
        }
    });
    let (status, body) = support::http(broker.http, "GET", "/metrics", "");
    assert_eq!(status, 200);
    assert!(body.contains("consumer_lag_messages{"), "{body}");
    // `check metrics` prints one line per problem (a counter without
    // `_total`, a unit not in base units, a missing HELP) and fails.
    let (ok, printed) = support::promtool(&["check", "metrics"], &body);
    assert!(
        ok && printed.trim().is_empty(),
        "promtool check metrics:\n{printed}"
    );
}

/// ops/grafana-dashboard.json checked against Grafana's own dashboard
/// types (@grafana/schema, installed by the test command beside
/// TypeScript): the dashboard as an object literal that must satisfy
/// `Dashboard`, so a misspelt field, a wrong type or an unknown panel key
/// fails `tsc`; and the schema version it declares is one that release
/// knows (Grafana migrates older ones on import).
#[test]
fn the_dashboard_satisfies_grafanas_dashboard_schema() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let modules = std::env::var("KAFKAJS_NODE_PATH")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join("target/test-node/node_modules"));
    let dashboard = std::fs::read_to_string(root.join("ops/grafana-dashboard.json")).unwrap();
    // tsc resolves @grafana/schema from node_modules above the file.
    let dir = tempfile::tempdir_in(modules.parent().unwrap()).unwrap();
    let checked = dir.path().join("dashboard.ts");
    std::fs::write(
        &checked,
        format!(
            "import type {{ Dashboard }} from '@grafana/schema';\n\
             export const dashboard = {} satisfies Dashboard;\n",
            dashboard.trim()
        ),
    )
    .unwrap();
    let tsc = Command::new("node")
        .arg(modules.join("typescript/bin/tsc"))
        .args(["--noEmit", "--strict", "--skipLibCheck"])
        .args(["--module", "nodenext", "--moduleResolution", "nodenext"])
        .arg(&checked)
        .output()
        .expect("node (the test command installs TypeScript and @grafana/schema)");
    assert!(
        tsc.status.success(),
        "the dashboard does not satisfy Grafana's Dashboard type:\n{}{}",
        String::from_utf8_lossy(&tsc.stdout),
        String::from_utf8_lossy(&tsc.stderr)
    );
    let known = Command::new("node")
        .args([
            "-e",
            "console.log(require('@grafana/schema').defaultDashboard.schemaVersion)",
        ])
        .env("NODE_PATH", &modules)
        .output()
        .unwrap();
    let known: u32 = String::from_utf8_lossy(&known.stdout)
        .trim()
        .parse()
        .expect("a version");
    let parsed: serde_json::Value = serde_json::from_str(&dashboard).unwrap();
    let declared = parsed["schemaVersion"].as_u64().expect("schemaVersion") as u32;
    assert!(
        (36..=known).contains(&declared),
        "schemaVersion {declared}: this Grafana knows up to {known}"
    );
}

#[test]
fn produce_spans_are_exported_as_json_logs_tagged_with_acks() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(
        dir.path(),
        &[
            ("BROKER_LOG_FORMAT", "json"),
            (
                "RUST_LOG",
                "info,broker::server::handlers::produce=debug,broker::partition=debug",
            ),
        ],
    );
    kcat_produce(&broker.bootstrap(), "traced", 100);
    let started = Instant::now();
    let closed = |name: &str| {
        broker
            .logged("\"message\":\"close\"")
            .into_iter()
            .any(|line| {
                line.contains(&format!("\"name\":\"{name}\"")) && line.contains("\"acks\":\"all\"")
            })
    };
    while !(closed("produce") && closed("partition")) {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no produce spans in the JSON log: {:?}",
            broker.logged("produce")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The leader's fdatasync is a child span of the partition's, with its timing.
    let fdatasync = broker
        .logged("\"message\":\"close\"")
        .into_iter()
        .find(|l| l.contains("\"name\":\"fdatasync\""))
        .expect("an fdatasync span");
    assert!(fdatasync.contains("time.busy"), "{fdatasync}");
    assert!(fdatasync.contains("\"topic\":\"traced\""), "{fdatasync}");
}

#[test]
fn scrapes_during_load_see_the_counters_climb() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_broker_with(dir.path(), &[]);
    let http = broker.http;
    let post = |path: &str, body: &str| {
        let (status, text) = support::http(http, "POST", path, body);
        assert!((200..300).contains(&status), "{status} {text}");
    };
    post("/topics", r#"{"name":"load","partitions":1}"#);
    // Produce (acks=all, one record per request) until the scraper has
    // seen the counters part-way, or 5000 requests.
    let seen_midway = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producer = {
        let seen_midway = seen_midway.clone();
        std::thread::spawn(move || {
            let mut sent = 0u64;
            while sent < 5000
                && (sent < 50 || !seen_midway.load(std::sync::atomic::Ordering::SeqCst))
            {
                let (status, text) =
                    support::http(http, "POST", "/topics/load/messages", r#"{"value":"eA=="}"#);
                assert_eq!(status, 200, "{text}");
                sent += 1;
            }
            sent
        })
    };
    let count = "produce_latency_seconds_count{acks=\"all\"}";
    let mark = "partition_high_watermark{topic=\"load\",partition=\"0\"}";
    let mut last = (0.0, 0.0);
    while !producer.is_finished() {
        let samples = scrape(http);
        let now = (
            samples.get(count).copied().unwrap_or(0.0),
            samples.get(mark).copied().unwrap_or(0.0),
        );
        assert!(
            now.0 >= last.0 && now.1 >= last.1,
            "went back: {last:?} -> {now:?}"
        );
        if now.0 > 0.0 && now.1 > 0.0 {
            seen_midway.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        last = now;
        std::thread::sleep(Duration::from_millis(5));
    }
    let sent = producer.join().unwrap() as f64;
    assert!(seen_midway.load(std::sync::atomic::Ordering::SeqCst));
    let end = scrape(http);
    assert_eq!(value(&end, count), sent, "one observation per produce");
    assert_eq!(
        value(&end, mark),
        sent,
        "one record per produce, all acknowledged"
    );
    assert!(value(&end, "log_appended_batches_total") >= sent);
}
