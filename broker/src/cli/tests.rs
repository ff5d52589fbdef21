//! The command line parses into the commands the brokers are sent, and
//! mistakes are refused naming the flag.

use clap::Parser;
use client::transactions::PartitionProducer;

use super::cluster::ClusterCommand;
use super::group::{GroupCommand, ResetTo};
use super::topic::TopicCommand;
use super::txn::{is_hanging, AbortTarget, ProducerChoice, TxnCommand, DEFAULT_MAX_AGE_MS};
use super::{Cli, Command};

fn parse(line: &str) -> Result<Command, String> {
    let args = std::iter::once("broker").chain(line.split_whitespace());
    let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
    cli.command.ok_or_else(|| "no subcommand".to_string())
}

fn topic(line: &str) -> (TopicCommand, String) {
    match parse(line).unwrap() {
        Command::Topic { command, target } => (command, target.brokers),
        other => panic!("{other:?}"),
    }
}

fn group(line: &str) -> Result<GroupCommand, String> {
    match parse(line)? {
        Command::Group { command, .. } => Ok(command.command()),
        other => panic!("{other:?}"),
    }
}

fn txn(line: &str) -> Result<TxnCommand, String> {
    match parse(line)? {
        Command::Txn { command, .. } => command.command(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn commands_and_flags_parse_and_mistakes_are_refused() {
    let (command, brokers) =
        topic("topic create orders --partitions 8 --config retention.ms=1000 --brokers h:1");
    assert_eq!(brokers, "h:1");
    assert_eq!(
        command,
        TopicCommand::Create {
            name: "orders".into(),
            partitions: Some(8),
            replication_factor: None,
            configs: vec![("retention.ms".into(), "1000".into())],
        }
    );
    let (command, _) = topic("topic create t --partitions -1 --replication-factor -1");
    assert!(matches!(
        command,
        TopicCommand::Create {
            partitions: Some(-1),
            replication_factor: Some(-1),
            ..
        }
    ));
    let (command, _) = topic("topic add-partitions orders --num 2");
    assert_eq!(
        command,
        TopicCommand::AddPartitions {
            name: "orders".into(),
            num: 2,
        }
    );
    assert!(parse("topic add-partitions orders --num 0").is_err());
    let (command, _) = topic("topic alter orders --config a=1 --delete-config b");
    assert_eq!(
        command,
        TopicCommand::Alter {
            name: "orders".into(),
            configs: vec![("a".into(), "1".into())],
            delete_config: vec!["b".into()],
        }
    );
    assert!(matches!(
        parse("cluster status").unwrap(),
        Command::Cluster { .. }
    ));
    let Command::Cluster { command, .. } =
        parse("cluster elect-leaders --topic orders --partition 0 --partition 3").unwrap()
    else {
        panic!("cluster");
    };
    assert_eq!(
        command,
        ClusterCommand::ElectLeaders {
            unclean: false,
            all: false,
            topic: Some("orders".into()),
            partition: vec![0, 3],
        }
    );
    let Command::Cluster { command, .. } = parse("cluster cordon 3").unwrap() else {
        panic!("cluster");
    };
    assert_eq!(command, ClusterCommand::Cordon { broker: 3 });
    assert!(
        parse("cluster elect-leaders --all").is_err(),
        "--all is for --unclean"
    );
    assert!(parse("cluster elect-leaders --unclean --all --topic t").is_err());
    let error = parse("cluster elect-leaders --partition 1").unwrap_err();
    assert!(error.contains("--topic"), "{error}");
    for (bad, named) in [
        ("topic alter orders", "--config"),
        ("topic create", "<NAME>"),
        ("topic create x --partitions many", "--partitions"),
        ("topic create x --config novalue", "--config"),
        ("topic list --bogus 1", "--bogus"),
    ] {
        let error = parse(bad).unwrap_err();
        assert!(error.contains(named), "{bad}: {error}");
    }
}

#[test]
fn serve_flags_go_with_serve_or_with_no_subcommand_only() {
    let cli = Cli::try_parse_from(["broker", "--data-dir", "/d", "--shards", "2"]).unwrap();
    assert!(cli.command.is_none());
    assert_eq!(cli.serve.shards, Some(2));
    let Command::Serve(line) = parse("serve --node-id 3").unwrap() else {
        panic!("serve");
    };
    assert_eq!(line.node_id, Some(3));
    assert!(parse("--data-dir /d topic list").is_err());
}

#[test]
fn group_commands_parse_and_a_reset_needs_one_target_and_a_scope() {
    assert_eq!(
        group("group describe g").unwrap(),
        GroupCommand::Describe("g".into())
    );
    assert_eq!(
        group(
            "group reset-offsets g --topic a --topic b --to-datetime 1970-01-01T00:00:01Z --dry-run"
        )
        .unwrap(),
        GroupCommand::Reset {
            group: "g".into(),
            topics: vec!["a".into(), "b".into()],
            to: ResetTo::Datetime(1000),
            dry_run: true,
        }
    );
    assert_eq!(
        group("group reset-offsets g --all-topics --shift-by -5 --execute").unwrap(),
        GroupCommand::Reset {
            group: "g".into(),
            topics: vec![],
            to: ResetTo::ShiftBy(-5),
            dry_run: false,
        }
    );
    for bad in [
        "group reset-offsets g --topic a",
        "group reset-offsets g --to-earliest",
        "group reset-offsets g --topic a --all-topics --to-earliest",
        "group reset-offsets g --topic a --to-earliest --to-latest",
        "group reset-offsets g --topic a --to-offset x",
        "group reset-offsets g --topic a --to-datetime soon",
    ] {
        assert!(group(bad).is_err(), "{bad}");
    }
}

#[test]
fn acl_and_quota_lines_become_the_requests_kafka_tools_send() {
    let Command::Acl { command, .. } =
        parse("acl create --allow User:a --deny User:b --operation Read --topic t --prefixed")
            .unwrap()
    else {
        panic!("acl");
    };
    let super::acl::AclCommand::Create(acls) = command.command().unwrap() else {
        panic!("create");
    };
    assert_eq!(acls.len(), 2, "one ACL per principal and operation");
    assert!(acls.iter().all(|acl| acl.resource_name == "t"));
    assert!(parse("acl create --allow User:a --operation Read --topic t --cluster").is_err());
    let Command::Quota { command, .. } =
        parse("quota set --user-default --client-id c --producer-byte-rate 1024").unwrap()
    else {
        panic!("quota");
    };
    assert_eq!(
        command.command().unwrap(),
        super::quota::QuotaCommand::Alter(
            vec![
                ("user".into(), None),
                ("client-id".into(), Some("c".into()))
            ],
            vec![("producer_byte_rate".into(), Some(1024.0))],
        )
    );
    assert!(parse("quota set --user a --user-default --producer-byte-rate 1").is_err());
}

#[test]
fn txn_lines_parse_as_kafka_transactions_sh_takes_them() {
    assert_eq!(
        txn("txn list").unwrap(),
        TxnCommand::List {
            states: vec![],
            producer_ids: vec![],
        }
    );
    assert_eq!(
        txn("txn list --state ongoing,PrepareCommit --producer-id 7 --brokers h:1").unwrap(),
        TxnCommand::List {
            states: vec!["Ongoing".into(), "PrepareCommit".into()],
            producer_ids: vec![7],
        },
        "states by Kafka's names, whatever the case given"
    );
    assert_eq!(
        txn("txn describe a b").unwrap(),
        TxnCommand::Describe(vec!["a".into(), "b".into()])
    );
    let abort = |producer, producer_epoch, coordinator_epoch| {
        TxnCommand::Abort(AbortTarget {
            topic: "t".into(),
            partition: 0,
            producer,
            producer_epoch,
            coordinator_epoch,
        })
    };
    assert_eq!(
        txn("txn abort --topic t --partition 0 --producer-id 5").unwrap(),
        abort(ProducerChoice::Id(5), None, None),
        "epochs left out are looked up"
    );
    assert_eq!(
        txn("txn abort --topic t --partition 0 --producer-id 5 --producer-epoch 2 --coordinator-epoch 3")
            .unwrap(),
        abort(ProducerChoice::Id(5), Some(2), Some(3))
    );
    assert_eq!(
        txn("txn abort --topic t --partition 0 --start-offset 40").unwrap(),
        abort(ProducerChoice::StartOffset(40), None, None)
    );
    assert_eq!(
        txn("txn find-hanging --topic t").unwrap(),
        TxnCommand::FindHanging {
            topic: "t".into(),
            max_age_ms: 900_000,
        },
        "15 minutes: Kafka's transaction.max.timeout.ms"
    );
    assert_eq!(
        txn("txn find-hanging --topic t --max-age-ms 60000").unwrap(),
        TxnCommand::FindHanging {
            topic: "t".into(),
            max_age_ms: 60_000,
        }
    );
    for (bad, named) in [
        ("txn abort --partition 0 --producer-id 5", "--topic"),
        ("txn abort --topic t --producer-id 5", "--partition"),
        ("txn abort --topic t --partition 0", "--producer-id"),
        (
            "txn abort --topic t --partition 0 --producer-id 5 --start-offset 1",
            "--start-offset",
        ),
        ("txn describe", "TRANSACTIONAL_ID"),
        ("txn find-hanging", "--topic"),
        ("txn list --state Bogus", "--state"),
        ("txn list --producer-id many", "--producer-id"),
    ] {
        let error = txn(bad).unwrap_err();
        assert!(error.contains(named), "{bad}: {error}");
    }
    assert!(txn("txn abort --topic t --partition 0 --start-offset 1 --producer-epoch 2").is_err());
}

#[test]
fn an_open_transaction_hangs_once_its_producer_is_silent_past_the_max_age() {
    let producer = |start_offset, last_timestamp| PartitionProducer {
        producer_id: 5,
        producer_epoch: 0,
        last_sequence: 9,
        last_timestamp,
        coordinator_epoch: -1,
        current_txn_start_offset: start_offset,
    };
    let now = 100_000_000;
    let max_age = DEFAULT_MAX_AGE_MS;
    assert!(is_hanging(&producer(40, now - max_age - 1), now, max_age));
    assert!(
        !is_hanging(&producer(40, now - max_age + 1), now, max_age),
        "still young"
    );
    assert!(
        !is_hanging(&producer(-1, 0), now, max_age),
        "no transaction open"
    );
}
