//! The metadata service over the in-memory network: an isolated leader is
//! replaced, and after healing everyone converges on one history.

mod support;

use std::collections::BTreeMap;

use futures::FutureExt;
use std::time::{Duration, Instant};

use control::raft::disk::FileRaftDisk;
use control::raft::node::{MetadataNode, NodeConfig};
use control::service::{ControllerError, ControllerRequest, MetadataService, ServiceConfig};
use control::transport::memory::MemoryNetwork;
use control::*;
use support::{on_glommio, register, WAIT_MAX};

const TICK: Duration = Duration::from_millis(5);

#[test]
fn an_isolated_leader_is_replaced_and_rejoins_the_history() {
    let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
    on_glommio(async move {
        let ids = [1u64, 2, 3, 4, 5];
        let network = MemoryNetwork::new();
        let services = start_services(&ids, &dirs, &network, ServiceConfig::new(TICK));
        let leader_of = |services: &BTreeMap<u64, MetadataService>| {
            services
                .iter()
                .find(|(_, s)| s.view().is_leader)
                .map(|(id, _)| *id)
        };
        propose_until_committed(&services, &ids, 1, "the first record everywhere").await;
        wait_until_tick("a leader", || leader_of(&services).is_some()).await;
        let first = leader_of(&services).unwrap();
        network.isolate(first);
        // A proposal to the isolated leader cannot commit.
        services[&first].propose(register(66)).unwrap();
        let others: Vec<u64> = ids.iter().copied().filter(|id| *id != first).collect();
        propose_until_committed(&services, &others, 2, "the majority commits").await;
        network.heal();
        wait_until_tick("the old leader rejoins", || {
            services[&first]
                .view()
                .metadata
                .brokers
                .contains_key(&BrokerId(2))
                && !services[&first].view().is_leader
        })
        .await;
        let states: Vec<Vec<u8>> = services
            .values()
            .map(|s| s.view().metadata.encode())
            .collect();
        wait_until_tick("convergence", || {
            let states: Vec<Vec<u8>> = services
                .values()
                .map(|s| s.view().metadata.encode())
                .collect();
            states.windows(2).all(|w| w[0] == w[1])
        })
        .await;
        assert!(!states.is_empty());
        assert!(
            services
                .values()
                .all(|s| !s.view().metadata.brokers.contains_key(&BrokerId(66))),
            "the isolated leader's proposal never committed"
        );
    });
}

#[test]
fn the_active_controller_answers_requests_and_fences_a_silent_broker() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    on_glommio(async move {
        let ids = [1u64, 2, 3];
        let network = MemoryNetwork::new();
        let config = ServiceConfig {
            session_timeout: Duration::from_millis(1_000),
            controller_interval: Duration::from_millis(20),
            ..ServiceConfig::new(TICK)
        };
        let services = start_services(&ids, &dirs, &network, config.clone());
        wait_until_tick("a leader", || services.values().any(|s| s.view().is_leader)).await;
        let controller = services.values().find(|s| s.view().is_leader).unwrap();
        let follower = services.values().find(|s| !s.view().is_leader).unwrap();
        let refused = follower
            .request(ControllerRequest::DeleteTopic { name: "x".into() })
            .await;
        assert!(
            matches!(refused, Err(ControllerError::NotController { .. })),
            "{refused:?}"
        );
        for broker in 1..=3 {
            let registration = BrokerRegistration {
                id: BrokerId(broker),
                incarnation: Incarnation(1),
                listener: format!("127.0.0.1:{}", 9000 + broker),
                rack: Some(format!("r{broker}")),
                shards: 2,
            };
            controller
                .request(ControllerRequest::RegisterBroker(registration, vec![]))
                .await
                .unwrap();
        }
        let heartbeat_all = |brokers: &[i32]| {
            for b in brokers {
                controller.heartbeat(BrokerId(*b), Incarnation(1)).unwrap();
            }
        };
        heartbeat_all(&[1, 2, 3]);
        wait_until_tick("the brokers unfenced", || {
            controller.view().metadata.live_brokers().count() == 3
        })
        .await;
        let create = ControllerRequest::CreateTopic {
            id: TopicId([5; 16]),
            name: "orders".into(),
            partitions: 6,
            replication_factor: 3,
            config: TopicConfig::default(),
        };
        controller.request(create.clone()).await.unwrap();
        // Committed on a majority when answered; the same request again is refused.
        assert!(matches!(
            controller.request(create).await,
            Err(ControllerError::Refused(MetadataError::TopicExists(_)))
        ));
        assert!(controller.view().metadata.topic_by_name("orders").is_ok());
        // A bootstrap user is set once: asked again (another broker, a
        // restart) it succeeds and changes nothing.
        let user = |stored_key: u8| ScramCredential {
            user: "broker".into(),
            mechanism: ScramMechanism::Sha256,
            salt: vec![1; 16],
            iterations: 4096,
            stored_key: vec![stored_key; 32],
            server_key: vec![0; 32],
        };
        for stored_key in [1, 2] {
            controller
                .request(ControllerRequest::BootstrapScramUser(vec![user(
                    stored_key,
                )]))
                .await
                .unwrap();
        }
        let kept = controller
            .view()
            .metadata
            .scram_credential("broker", ScramMechanism::Sha256)
            .cloned();
        assert_eq!(kept, Ok(user(1)));
        // Broker 1 stops heartbeating; 2 and 3 go on.
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            heartbeat_all(&[2, 3]);
            glommio::timer::sleep(Duration::from_millis(50)).await;
            if controller.view().metadata.brokers[&BrokerId(1)].fenced {
                break;
            }
        }
        let view = controller.view();
        assert!(
            view.metadata.brokers[&BrokerId(1)].fenced,
            "fenced within the session timeout and a margin"
        );
        for p in &view.metadata.topic_by_name("orders").unwrap().partitions {
            let leader = p.leader.expect("led");
            assert_ne!(leader, BrokerId(1));
            assert!(p.isr.contains(&leader));
        }
        assert!(
            !view.metadata.brokers[&BrokerId(2)].fenced
                && !view.metadata.brokers[&BrokerId(3)].fenced
        );
    });
}

#[test]
fn another_shard_receives_the_committed_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let (hand_over, receive) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let control_shard = std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::default()
            .io_memory(2 << 20)
            .make()
            .expect("glommio executor")
            .run(async move {
                let disk = FileRaftDisk::open(&path).unwrap();
                let node =
                    MetadataNode::start(&NodeConfig::new(1, vec![1]), disk.recovered()).unwrap();
                let network = MemoryNetwork::new();
                let service =
                    MetadataService::start(node, disk, network.join(1), ServiceConfig::new(TICK));
                hand_over
                    .send(service.subscribe_shared(16).unwrap())
                    .unwrap();
                wait_until_tick("leadership", || service.view().is_leader).await;
                service.propose(register(1)).unwrap();
                service.propose(register(2)).unwrap();
                // Keep the service alive until the other shard has read.
                let start = Instant::now();
                while done_rx.try_recv().is_err() {
                    assert!(start.elapsed() < WAIT_MAX, "the other shard never finished");
                    glommio::timer::sleep(TICK).await;
                }
            });
    });
    let receiver = receive.recv_timeout(WAIT_MAX).unwrap();
    let other_shard = std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::default()
            .io_memory(1 << 20)
            .make()
            .expect("glommio executor")
            .run(async move {
                let changes = receiver.connect().await;
                // This shard's own copy of the metadata, kept by the stream.
                let first = changes.recv().await.expect("stream open");
                let mut metadata = *first
                    .metadata
                    .expect("a shared stream starts with the state");
                let mut last = first.index;
                while metadata.brokers.len() < 2 {
                    let change = changes.recv().await.expect("stream open");
                    assert!(change.index > last, "changes arrive in log order");
                    last = change.index;
                    match (change.metadata, change.record) {
                        (Some(state), _) => metadata = *state,
                        (None, Some(record)) => {
                            let _ = metadata.apply(&record);
                        }
                        (None, None) => unreachable!("a change is a record or a state"),
                    }
                }
                metadata.brokers.keys().copied().collect::<Vec<_>>()
            })
    });
    let brokers = other_shard.join().unwrap();
    done_tx.send(()).unwrap();
    control_shard.join().unwrap();
    assert_eq!(brokers, vec![BrokerId(1), BrokerId(2)]);
}

/// A follower of the change stream reaches `published`, though `applied`
/// may be past it: a new leader's first entry carries no record and sends
/// no change. (The broker once waited for `applied` before serving and
/// could wait until the next record.)
#[test]
fn a_follower_reaches_the_published_index_though_applied_is_past_it() {
    let dir = tempfile::tempdir().unwrap();
    on_glommio(async move {
        // A first life names the quorum: a new quorum's first leader
        // proposes the cluster id right after its empty entry, so the
        // moment when applied is past published would be a race. A
        // restarted leader has nothing to propose after its empty entry.
        {
            let service = start_alone(dir.path());
            wait_until_tick("the cluster id published", || {
                service.view().metadata.cluster_id.is_some()
            })
            .await;
        }
        let service = start_alone(dir.path());
        let changes = service.subscribe(16);
        let mut copy = control::raft::changes::MetadataCopy::default();
        copy.apply(changes.recv().await.expect("the state first"));
        wait_until_tick("leadership", || service.view().is_leader).await;
        wait_until_tick(
            "the new leader's empty entry applied, not published",
            || {
                let view = service.view();
                view.applied > view.published
            },
        )
        .await;
        let published = service.view().published;
        while let Some(Some(change)) = changes.recv().now_or_never() {
            copy.apply(change);
        }
        assert!(copy.index.is_some_and(|i| i >= published));
        service.propose(register(1)).unwrap();
        wait_until_tick("the registration published", || {
            service.view().metadata.brokers.contains_key(&BrokerId(1))
        })
        .await;
        let published = service.view().published;
        while copy.index.is_none_or(|i| i < published) {
            copy.apply(changes.recv().await.expect("stream open"));
        }
        assert_eq!(copy.index, Some(published));
        assert!(copy.metadata.brokers.contains_key(&BrokerId(1)));
    });
}

/// A single-node quorum on `dir` (dropping it stops it).
fn start_alone(dir: &std::path::Path) -> MetadataService {
    let disk = FileRaftDisk::open(dir).unwrap();
    let node = MetadataNode::start(&NodeConfig::new(1, vec![1]), disk.recovered()).unwrap();
    let network = MemoryNetwork::new();
    MetadataService::start(node, disk, network.join(1), ServiceConfig::new(TICK))
}

/// Proposes `register(broker)` to whichever of `among` leads, again every
/// 50 ticks, until every one of `among` has it: on a loaded machine a
/// 50 ms election timeout can depose the leader before its proposal
/// commits, and raft drops a deposed leader's uncommitted proposal.
async fn propose_until_committed(
    services: &BTreeMap<u64, MetadataService>,
    among: &[u64],
    broker: i32,
    what: &str,
) {
    let everywhere = || {
        among.iter().all(|id| {
            services[id]
                .view()
                .metadata
                .brokers
                .contains_key(&BrokerId(broker))
        })
    };
    let start = Instant::now();
    while !everywhere() {
        assert!(start.elapsed() < WAIT_MAX, "timed out waiting for {what}");
        if let Some(leader) = among.iter().find(|id| services[id].view().is_leader) {
            services[leader].propose(register(broker)).unwrap();
        }
        for _ in 0..50 {
            if everywhere() {
                return;
            }
            glommio::timer::sleep(TICK).await;
        }
    }
}

async fn wait_until_tick(what: &str, check: impl FnMut() -> bool) {
    support::wait_until(what, TICK, check).await
}

/// One metadata service per id, each on its own directory, on `network`.
fn start_services(
    ids: &[u64],
    dirs: &[tempfile::TempDir],
    network: &MemoryNetwork,
    config: ServiceConfig,
) -> BTreeMap<u64, MetadataService> {
    ids.iter()
        .zip(dirs)
        .map(|(id, dir)| {
            let disk = FileRaftDisk::open(dir.path()).unwrap();
            let node =
                MetadataNode::start(&NodeConfig::new(*id, ids.to_vec()), disk.recovered()).unwrap();
            (
                *id,
                MetadataService::start(node, disk, network.join(*id), config.clone()),
            )
        })
        .collect()
}
