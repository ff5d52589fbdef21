//! The settings' layers, defaults and checks.

use super::*;
use figment::Jail;

fn flags(args: &[&str]) -> CommandLine {
    CommandLine::parse(args.iter().map(|s| s.to_string())).unwrap()
}

#[test]
fn with_nothing_given_the_defaults_hold() {
    Jail::expect_with(|_| {
        let config = BrokerConfig::load(&CommandLine::default()).unwrap();
        assert_eq!(config, BrokerConfig::default());
        let listeners = config.kafka_listeners().unwrap();
        assert_eq!(listeners.all.len(), 1);
        let only = listeners.inter_broker();
        assert_eq!(only.name, "PLAINTEXT");
        assert_eq!(only.advertised_at(only.listen), "127.0.0.1:9092");
        Ok(())
    });
}

#[test]
fn each_layer_overrides_the_one_before() {
    Jail::expect_with(|jail| {
        jail.create_file(
            "broker.toml",
            "node_id = 7\ndata_dir = \"/from/file\"\nkafka_listen = \"127.0.0.1:1000\"\nhttp_listen = \"127.0.0.1:2000\"\nshards = 3\n",
        )?;
        let file_only = BrokerConfig::load(&flags(&["--config", "broker.toml"])).unwrap();
        assert_eq!((file_only.node_id, file_only.shards), (7, 3));
        assert_eq!(file_only.data_dir, PathBuf::from("/from/file"));

        jail.set_env("BROKER_DATA_DIR", "/from/env");
        jail.set_env("BROKER_KAFKA_LISTEN", "127.0.0.1:3000");
        let with_env = BrokerConfig::load(&flags(&["--config", "broker.toml"])).unwrap();
        assert_eq!(with_env.data_dir, PathBuf::from("/from/env"));
        assert_eq!(with_env.kafka_listen, "127.0.0.1:3000");
        assert_eq!(
            with_env.http_listen, "127.0.0.1:2000",
            "the file still counts where env is silent"
        );

        let all = BrokerConfig::load(&flags(&[
            "--config",
            "broker.toml",
            "--data-dir",
            "/from/flag",
            "--shards",
            "2",
        ]))
        .unwrap();
        assert_eq!(all.data_dir, PathBuf::from("/from/flag"));
        assert_eq!(all.shards, 2);
        assert_eq!(
            all.kafka_listen, "127.0.0.1:3000",
            "env where no flag is given"
        );
        assert_eq!(all.node_id, 7);
        Ok(())
    });
}

#[test]
fn bad_values_unknown_keys_and_flags_are_clear_errors() {
    Jail::expect_with(|jail| {
        jail.create_file("typo.toml", "nod_id = 3\n")?;
        let err = BrokerConfig::load(&flags(&["--config", "typo.toml"])).unwrap_err();
        assert!(err.to_string().contains("nod_id"), "{err}");
        jail.set_env("BROKER_KAFKA_LISTEN", "not an address");
        assert!(BrokerConfig::load(&CommandLine::default()).is_err());
        assert!(matches!(
            CommandLine::parse(["--bogus".to_string()]),
            Err(ConfigError::Usage(_))
        ));
        assert!(matches!(
            CommandLine::parse(["--shards".to_string()]),
            Err(ConfigError::Usage(_))
        ));
        assert!(matches!(
            CommandLine::parse(["--shards".to_string(), "x".to_string()]),
            Err(ConfigError::Usage(_))
        ));
        assert!(BrokerConfig::load(&flags(&["--config", "missing.toml"])).is_err());
        Ok(())
    });
}

#[test]
fn several_listeners_come_from_kafkas_settings_and_replace_the_single_one() {
    Jail::expect_with(|jail| {
        jail.set_env(
            "BROKER_LISTENERS",
            "[INTERNAL://127.0.0.1:9092,EXTERNAL://0.0.0.0:9093]",
        );
        jail.set_env(
            "BROKER_LISTENER_SECURITY_PROTOCOL_MAP",
            "[INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL]",
        );
        jail.set_env(
            "BROKER_ADVERTISED_LISTENERS",
            "[EXTERNAL://kafka.example:443]",
        );
        jail.set_env("BROKER_INTER_BROKER_LISTENER_NAME", "INTERNAL");
        jail.set_env("BROKER_SASL_BROKER_USER", "broker:secret");
        jail.set_env("BROKER_SSL_CERTIFICATE_LOCATION", "server.pem");
        jail.set_env("BROKER_SSL_KEY_LOCATION", "server.key");
        let config = BrokerConfig::load(&CommandLine::default()).unwrap();
        let listeners = config.kafka_listeners().unwrap();
        assert_eq!(listeners.all.len(), 2);
        assert_eq!(listeners.inter_broker().name, "INTERNAL");
        assert_eq!(
            listeners.all[1].advertised.as_deref(),
            Some("kafka.example:443")
        );
        // The other listener's protocols decide what the broker needs.
        assert!(config.kafka_uses_sasl() && config.kafka_uses_tls());
        assert!(!config.inter_broker_uses_sasl() && !config.inter_broker_uses_tls());
        // Mixed with the single listener's settings: refused.
        let mixed = BrokerConfig::load(&flags(&["--kafka-listen", "127.0.0.1:1"]));
        assert!(
            mixed
                .unwrap_err()
                .to_string()
                .contains("set one or the other"),
            "kafka_listen beside listeners"
        );
        jail.clear_env();
        jail.set_env(
            "BROKER_ADVERTISED_LISTENERS",
            "[EXTERNAL://kafka.example:443]",
        );
        let orphan = BrokerConfig::load(&CommandLine::default()).unwrap_err();
        assert!(orphan.to_string().contains("set listeners too"), "{orphan}");
        // In a cluster, the inter-broker listener is told as an IP.
        jail.clear_env();
        jail.set_env("BROKER_ADVERTISED_LISTENER", "broker1.internal:9092");
        assert!(
            BrokerConfig::load(&CommandLine::default()).is_ok(),
            "one broker"
        );
        jail.set_env(
            "BROKER_CONTROLLER_QUORUM_VOTERS",
            "1@127.0.0.1:1,2@127.0.0.1:2",
        );
        let named = BrokerConfig::load(&CommandLine::default()).unwrap_err();
        assert!(named.to_string().contains("by IP address"), "{named}");
        Ok(())
    });
}

#[test]
fn tls_settings_are_checked_together() {
    let ssl = |changes: &dyn Fn(&mut BrokerConfig)| {
        let mut config = BrokerConfig {
            kafka_security_protocol: "SSL".into(),
            ssl_certificate_location: Some("server.pem".into()),
            ssl_key_location: Some("server.key".into()),
            ..BrokerConfig::default()
        };
        changes(&mut config);
        config.check().map_err(|e| e.to_string())
    };
    assert!(ssl(&|_| {}).is_ok());
    let err = ssl(&|c| c.ssl_key_location = None).unwrap_err();
    assert!(err.contains("ssl_key_location"), "{err}");
    let err = ssl(&|c| c.ssl_client_auth = "required".into()).unwrap_err();
    assert!(err.contains("ssl_ca_location"), "{err}");
    let err = ssl(&|c| c.kafka_security_protocol = "TLS".into()).unwrap_err();
    assert!(err.contains("PLAINTEXT, SSL"), "{err}");
    let err =
        ssl(&|c| c.controller_quorum_voters = "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3".into())
            .unwrap_err();
    assert!(err.contains("needs ssl_ca_location"), "{err}");
    assert!(ssl(&|c| {
        c.controller_quorum_voters = "1@127.0.0.1:1,2@127.0.0.1:2".into();
        c.ssl_ca_location = Some("ca.pem".into());
    })
    .is_ok());
    // One voter listed is still one broker.
    assert!(ssl(&|c| c.controller_quorum_voters = "1@127.0.0.1:1".into()).is_ok());
    // Client certificates asked for on no TLS port: refused, not ignored.
    let plaintext = BrokerConfig {
        ssl_client_auth: "required".into(),
        ..BrokerConfig::default()
    };
    assert!(plaintext.check().is_err());
    // The quorum's TLS needs the certificate, key and CA.
    let quorum = BrokerConfig {
        controller_security_protocol: "SSL".into(),
        ssl_certificate_location: Some("server.pem".into()),
        ssl_key_location: Some("server.key".into()),
        ..BrokerConfig::default()
    };
    let err = quorum.check().unwrap_err().to_string();
    assert!(err.contains("ssl_ca_location"), "{err}");
    let with_ca = BrokerConfig {
        ssl_ca_location: Some("ca.pem".into()),
        ..quorum.clone()
    };
    assert!(with_ca.check().is_ok());
    let own_ca = BrokerConfig {
        controller_ssl_ca_location: Some("brokers-ca.pem".into()),
        ..quorum.clone()
    };
    assert!(own_ca.check().is_ok());
    assert_eq!(
        own_ca.quorum_ca_location(),
        Some(&PathBuf::from("brokers-ca.pem"))
    );
    let typo = BrokerConfig {
        controller_security_protocol: "TLS".into(),
        ..BrokerConfig::default()
    };
    assert!(typo.check().is_err());
    // HTTPS alone needs the files too.
    let https = BrokerConfig {
        http_tls: true,
        ..BrokerConfig::default()
    };
    assert!(https.check().is_err());
}

#[test]
fn sasl_settings_are_checked_together_and_the_password_never_printed() {
    let sasl = |changes: &dyn Fn(&mut BrokerConfig)| {
        let mut config = BrokerConfig {
            kafka_security_protocol: "SASL_PLAINTEXT".into(),
            sasl_broker_user: Some(Secret("broker:hunter2".into())),
            ..BrokerConfig::default()
        };
        changes(&mut config);
        config.check().map_err(|e| e.to_string())
    };
    assert!(sasl(&|_| {}).is_ok());
    let err = sasl(&|c| c.sasl_broker_user = None).unwrap_err();
    assert!(err.contains("sasl_broker_user"), "{err}");
    for bad in ["nopassword", ":pw", "name:"] {
        let err = sasl(&|c| c.sasl_broker_user = Some(Secret(bad.into()))).unwrap_err();
        assert!(err.contains("sasl_broker_user"), "{bad}: {err}");
    }
    let err = sasl(&|c| c.sasl_enabled_mechanisms = vec!["GSSAPI".into()]).unwrap_err();
    assert!(err.contains("GSSAPI"), "{err}");
    let err = sasl(&|c| c.sasl_enabled_mechanisms.clear()).unwrap_err();
    assert!(err.contains("at least one"), "{err}");
    let err = sasl(&|c| c.kafka_security_protocol = "SASL_SSL".into()).unwrap_err();
    assert!(err.contains("ssl_certificate_location"), "{err}");
    let config = BrokerConfig {
        sasl_broker_user: Some(Secret("broker:hunter2".into())),
        ..BrokerConfig::default()
    };
    assert_eq!(config.broker_user(), Some(("broker", "hunter2")));
    assert!(!format!("{config:?}").contains("hunter2"));
}

#[test]
fn voters_parse_and_a_broker_must_be_one_of_them() {
    Jail::expect_with(|jail| {
        jail.set_env(
            "BROKER_CONTROLLER_QUORUM_VOTERS",
            "1@127.0.0.1:9093, 2@127.0.0.1:9094,3@127.0.0.1:9095",
        );
        let config = BrokerConfig::load(&CommandLine::default()).unwrap();
        let voters = config.voters().unwrap();
        assert_eq!(voters.len(), 3);
        assert_eq!(voters[&2].port(), 9094);
        jail.set_env("BROKER_NODE_ID", "4");
        let err = BrokerConfig::load(&CommandLine::default()).unwrap_err();
        assert!(err.to_string().contains("not among"), "{err}");
        jail.set_env("BROKER_NODE_ID", "1");
        for bad in [
            "1@nowhere",
            "x@127.0.0.1:1",
            "1@127.0.0.1:1,1@127.0.0.1:2",
            "1",
        ] {
            jail.set_env("BROKER_CONTROLLER_QUORUM_VOTERS", bad);
            assert!(
                BrokerConfig::load(&CommandLine::default()).is_err(),
                "{bad}"
            );
        }
        Ok(())
    });
}

#[test]
fn the_transaction_version_is_one_kafka_knows() {
    for (level, valid) in [(-1, false), (0, true), (1, true), (2, true), (3, false)] {
        let config = BrokerConfig {
            transaction_version: level,
            ..BrokerConfig::default()
        };
        let checked = config.check().map_err(|e| e.to_string());
        assert_eq!(checked.is_ok(), valid, "{level}: {checked:?}");
        if let Err(why) = checked {
            assert!(why.contains("transaction_version"), "{why}");
        }
    }
}

#[test]
fn consumer_groups_heartbeat_more_often_than_their_session_lapses() {
    // (session, interval, minimum session and interval, valid)
    let cases = [
        (45_000, 5_000, (45_000, 5_000), true),
        (3_000, 500, (45_000, 5_000), false),
        (3_000, 500, (1_000, 100), true),
        (5_000, 5_000, (1_000, 100), false),
        (5_000, 0, (1_000, 0), false),
        (70_000, 5_000, (45_000, 5_000), false),
    ];
    for (session, interval, (min_session, min_interval), valid) in cases {
        let config = BrokerConfig {
            group_consumer_session_timeout_ms: session,
            group_consumer_heartbeat_interval_ms: interval,
            group_consumer_min_session_timeout_ms: min_session,
            group_consumer_min_heartbeat_interval_ms: min_interval,
            ..BrokerConfig::default()
        };
        let checked = config.check().map_err(|e| e.to_string());
        assert_eq!(checked.is_ok(), valid, "{session}/{interval}: {checked:?}");
        if let Err(why) = checked {
            assert!(why.contains("group_consumer_"), "{why}");
        }
    }
}

#[test]
fn a_node_outside_the_voters_is_an_observer_that_must_be_reachable() {
    let outside = |listen: Option<&str>| BrokerConfig {
        node_id: 4,
        controller_quorum_voters: "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3".into(),
        controller_listen: listen.map(str::to_string),
        ..BrokerConfig::default()
    };
    let err = outside(None).check().unwrap_err().to_string();
    assert!(
        err.contains("observer") && err.contains("controller_listen"),
        "{err}"
    );
    assert!(outside(Some("0.0.0.0:9193")).check().is_err(), "unroutable");
    assert!(outside(Some("127.0.0.1:0")).check().is_err(), "no port");
    assert!(outside(Some("127.0.0.1:9193")).check().is_ok());
    let voter = BrokerConfig {
        node_id: 2,
        ..outside(None)
    };
    assert!(voter.check().is_ok(), "a voter needs no controller_listen");
}

#[test]
fn process_roles_fit_the_quorum() {
    let voters = "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3";
    let node = |id: i32, roles: &str, voters: &str| BrokerConfig {
        node_id: id,
        controller_quorum_voters: voters.into(),
        controller_listen: Some("127.0.0.1:9193".into()),
        process_roles: roles.into(),
        ..BrokerConfig::default()
    };
    assert!(node(1, "controller", voters).check().is_ok());
    assert!(node(1, "broker,controller", voters).check().is_ok());
    assert!(node(4, "broker", voters).check().is_ok());
    assert!(
        node(4, "controller", voters).check().is_ok(),
        "joins, to be promoted"
    );
    let refused = |config: BrokerConfig, says: &str| {
        let err = config.check().unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
    };
    refused(node(1, "broker", voters), "so it is a controller");
    refused(node(1, "controller", ""), "needs controller_quorum_voters");
    refused(node(1, "broker", ""), "needs controller_quorum_voters");
    refused(node(1, "brokers", voters), "unknown role \"brokers\"");
    refused(
        node(1, " , ", voters),
        "must name broker, controller or both",
    );
    assert!(node(1, "controller", voters).roles().controller_only());
    assert!(!BrokerConfig::default().roles().controller_only());
}
