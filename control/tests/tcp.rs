//! Three metadata nodes over real TCP on 127.0.0.1 in one process: they
//! elect a leader, replicate records, stream committed changes, and carry
//! on after the leader is stopped.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use control::raft::disk::FileRaftDisk;
use control::raft::node::{MetadataNode, NodeConfig};
use control::service::{MetadataService, ServiceConfig};
use control::transport::tcp::TcpTransport;
use control::*;
use glommio::net::TcpListener;
use support::{on_glommio, register};

const TICK: Duration = Duration::from_millis(10);

fn leader_of(services: &BTreeMap<u64, MetadataService>) -> Option<u64> {
    let leaders: Vec<u64> = services
        .iter()
        .filter(|(_, s)| s.view().is_leader)
        .map(|(id, _)| *id)
        .collect();
    assert!(
        leaders.len() <= 1 || {
            // Two nodes may both think they lead only in different terms.
            let terms: Vec<u64> = leaders.iter().map(|id| services[id].view().term).collect();
            terms.windows(2).all(|w| w[0] != w[1])
        }
    );
    leaders.first().copied()
}

/// Three metadata nodes (ids 1-3) over TCP on 127.0.0.1, their logs in
/// `dirs`; with `peers`, each knows the others' addresses for forwarding.
fn three_nodes(dirs: &[tempfile::TempDir], peers: bool) -> BTreeMap<u64, MetadataService> {
    let ids = [1u64, 2, 3];
    let listeners: Vec<TcpListener> = ids
        .iter()
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let addresses: BTreeMap<u64, std::net::SocketAddr> = ids
        .iter()
        .zip(&listeners)
        .map(|(id, l)| (*id, l.local_addr().unwrap()))
        .collect();
    let mut services = BTreeMap::new();
    for ((id, listener), dir) in ids.iter().zip(listeners).zip(dirs) {
        let disk = FileRaftDisk::open(dir.path()).unwrap();
        let node =
            MetadataNode::start(&NodeConfig::new(*id, ids.to_vec()), disk.recovered()).unwrap();
        let transport =
            TcpTransport::with_listener(*id, listener, addresses.clone(), None).unwrap();
        let mut config = ServiceConfig::new(TICK);
        if peers {
            config.peers = addresses.clone();
            config.peers.remove(id);
        }
        services.insert(*id, MetadataService::start(node, disk, transport, config));
    }
    services
}

#[test]
fn three_nodes_elect_replicate_and_survive_the_leaders_loss() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    on_glommio(async move {
        let ids = [1u64, 2, 3];
        let mut services = three_nodes(&dirs, false);
        wait_until_tick("a leader", || leader_of(&services).is_some()).await;
        let leader = leader_of(&services).unwrap();
        let follower = *ids.iter().find(|id| **id != leader).unwrap();
        let changes = services[&follower].subscribe(64);
        for broker in 1..=3 {
            services[&leader].propose(register(broker)).unwrap();
        }
        wait_until_tick("replication to all three", || {
            services
                .values()
                .all(|s| s.view().metadata.brokers.len() == 3)
        })
        .await;
        // The follower's change stream saw the three records in order.
        let mut seen = Vec::new();
        while seen.len() < 3 {
            let change = changes.recv().await.expect("stream open");
            if let Some(MetadataRecord::RegisterBroker(r)) = change.record {
                seen.push((change.index, r.id));
            }
        }
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(
            seen.iter().map(|s| s.1).collect::<Vec<_>>(),
            vec![BrokerId(1), BrokerId(2), BrokerId(3)]
        );

        // Stop the leader: its transport closes with it.
        let old_term = services[&leader].view().term;
        drop(services.remove(&leader));
        wait_until_tick("a new leader", || {
            leader_of(&services).is_some_and(|l| l != leader && services[&l].view().term > old_term)
        })
        .await;
        let new_leader = leader_of(&services).unwrap();
        services[&new_leader].propose(register(4)).unwrap();
        wait_until_tick("replication after the loss", || {
            services
                .values()
                .all(|s| s.view().metadata.brokers.contains_key(&BrokerId(4)))
        })
        .await;
    });
}

#[test]
fn requests_and_heartbeats_to_a_follower_are_forwarded_to_the_leader() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    on_glommio(async move {
        let ids = [1u64, 2, 3];
        let services = three_nodes(&dirs, true);
        wait_until_tick("a leader", || leader_of(&services).is_some()).await;
        let leader = leader_of(&services).unwrap();
        let follower = *ids.iter().find(|id| **id != leader).unwrap();
        wait_until_tick("the follower to know the leader", || {
            services[&follower].view().leader == Some(leader)
        })
        .await;
        let MetadataRecord::RegisterBroker(registration) = register(5) else {
            unreachable!()
        };
        let incarnation = registration.incarnation;
        let external = control::BrokerEndpoint {
            listener: "EXTERNAL".into(),
            address: "broker5.example:9093".into(),
        };
        let asked = services[&follower]
            .request(service::ControllerRequest::RegisterBroker(
                registration.clone(),
                vec![external.clone()],
            ))
            .await;
        assert_eq!(asked, Ok(()), "registration through a follower");
        // Committed by the leader; the follower's own view follows.
        wait_until_tick("the follower to apply the registration", || {
            services[&follower]
                .view()
                .metadata
                .brokers
                .get(&BrokerId(5))
                .is_some_and(|b| b.fenced)
        })
        .await;

        // A heartbeat through the follower unfences it.
        services[&follower]
            .heartbeat(BrokerId(5), incarnation)
            .unwrap();
        wait_until_tick("the forwarded heartbeat to unfence", || {
            services.values().all(|s| {
                s.view()
                    .metadata
                    .brokers
                    .get(&BrokerId(5))
                    .is_some_and(|b| !b.fenced)
            })
        })
        .await;
        // Its listeners were committed with the registration, before the
        // request was answered (so before the heartbeat that unfenced it).
        let metadata = services[&follower].view().metadata.clone();
        let broker = &metadata.brokers[&BrokerId(5)];
        assert_eq!(
            metadata.endpoint(broker, "EXTERNAL"),
            Some("broker5.example:9093")
        );
        assert_eq!(metadata.endpoint(broker, "INTERNAL"), None);
        // A refusal comes back as the leader's refusal.
        let again = services[&follower]
            .request(service::ControllerRequest::RegisterBroker(
                control::BrokerRegistration {
                    incarnation: Incarnation(incarnation.0 - 1),
                    ..registration
                },
                vec![],
            ))
            .await;
        assert!(
            matches!(
                again,
                Err(service::ControllerError::Refused(
                    MetadataError::StaleIncarnation { .. }
                ))
            ),
            "{again:?}"
        );
    });
}

#[test]
fn one_voter_is_a_quorum_and_its_state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    on_glommio(async move {
        for life in 1..=2 {
            let disk = FileRaftDisk::open(&path).unwrap();
            let node = MetadataNode::start(&NodeConfig::new(1, vec![1]), disk.recovered()).unwrap();
            let transport =
                TcpTransport::start(1, "127.0.0.1:0".parse().unwrap(), BTreeMap::new()).unwrap();
            let service = MetadataService::start(node, disk, transport, ServiceConfig::new(TICK));
            wait_until_tick("the single node to lead", || service.view().is_leader).await;
            if life == 1 {
                service.propose(register(7)).unwrap();
            }
            wait_until_tick("the record", || {
                service.view().metadata.brokers.contains_key(&BrokerId(7))
            })
            .await;
        }
    });
}

async fn wait_until_tick(what: &str, check: impl FnMut() -> bool) {
    support::wait_until(what, TICK, check).await
}
