//! The metadata quorum changes its members while it serves, over real TCP
//! on 127.0.0.1: nodes outside the configured voters join as observers
//! (Raft learners) and follow the log, the voter set grows from one to
//! three, the leader is demoted (handing its leadership over first) and
//! keeps following as an observer (asked again, nothing more happens),
//! a node restarted from its disk comes back with the members the log
//! gave it, and a newcomer that knows only a demoted node joins through it.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use control::raft::disk::FileRaftDisk;
use control::raft::node::{MetadataNode, NodeConfig};
use control::service::{ControllerError, ControllerRequest, MetadataService, ServiceConfig};
use control::transport::tcp::TcpTransport;
use control::*;
use glommio::net::TcpListener;
use support::{on_glommio, register, wait_until};

const TICK: Duration = Duration::from_millis(10);
/// Small, so the observers catch up from a snapshot, not the whole log.
const SNAPSHOT_EVERY: u64 = 5;

/// Node `id` with its log in `dir`, listening on `listener`; the quorum
/// began with node 1 alone, at `first`.
fn start_node(
    id: u64,
    dir: &std::path::Path,
    listener: TcpListener,
    first: SocketAddr,
) -> MetadataService {
    let disk = FileRaftDisk::open(dir).unwrap();
    let mut node_config = NodeConfig::new(id, vec![1]);
    node_config.snapshot_every_entries = SNAPSHOT_EVERY;
    let node = MetadataNode::start(&node_config, disk.recovered()).unwrap();
    let peers = BTreeMap::from([(1, first)]);
    let transport = TcpTransport::with_listener(id, listener, peers.clone(), None).unwrap();
    let mut config = ServiceConfig::new(TICK);
    config.peers = peers;
    config.peers.remove(&id);
    MetadataService::start(node, disk, transport, config)
}

/// Asks through `via` until the quorum answers (a refusal to promote a
/// node still catching up, or a leadership hand-over, is asked again).
async fn ask(via: &MetadataService, request: ControllerRequest) {
    let started = Instant::now();
    loop {
        match via.request(request.clone()).await {
            Ok(()) => return,
            Err(e) => {
                assert!(
                    started.elapsed() < support::WAIT_MAX,
                    "{request:?} still refused: {e}"
                );
                assert!(
                    matches!(
                        e,
                        ControllerError::Superseded
                            | ControllerError::NotController { .. }
                            | ControllerError::Unavailable
                            | ControllerError::Refused(MetadataError::QuorumMemberBehind { .. })
                    ) || heard_from_none(&e),
                    "{request:?}: {e}"
                );
                glommio::timer::sleep(TICK * 5).await;
            }
        }
    }
}

/// A leader asked to step down before it has heard from the voters just
/// added, or to promote a node it has not heard from yet since it started
/// (a busy machine): asked again, as an operator would.
fn heard_from_none(e: &ControllerError) -> bool {
    matches!(e, ControllerError::Refused(MetadataError::VoterChange(why))
        if why.contains("no other voter has been heard from recently")
            || why.contains("has not been heard from recently"))
}

fn voters_of(service: &MetadataService) -> Vec<u64> {
    service.view().members.voters.clone()
}

fn learners_of(service: &MetadataService) -> Vec<u64> {
    service.view().members.learners.clone()
}

#[test]
fn the_voters_grow_from_one_to_three_and_a_demoted_leader_keeps_following() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    on_glommio(async move {
        let listeners: Vec<TcpListener> = (0..3)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let addresses: Vec<SocketAddr> =
            listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let mut listeners = listeners.into_iter();
        let mut services = BTreeMap::new();
        let first = start_node(1, dirs[0].path(), listeners.next().unwrap(), addresses[0]);
        wait_until("node 1 to lead alone", TICK, || first.view().is_leader).await;
        // Past a few snapshots before anyone joins.
        for broker in 1..=12 {
            first.propose(register(broker)).unwrap();
        }
        wait_until("the registrations", TICK, || {
            first.view().metadata.brokers.len() == 12
        })
        .await;
        services.insert(1u64, first);

        // Nodes 2 and 3 know only node 1; they join as observers.
        for id in [2u64, 3] {
            let index = id as usize - 1;
            let listener = listeners.next().unwrap();
            let service = start_node(id, dirs[index].path(), listener, addresses[0]);
            let joined = service.join_quorum(id, addresses[index]).await;
            assert!(joined.is_ok(), "node {id} joins: {joined:?}");
            services.insert(id, service);
        }
        wait_until("the observers to follow the log", TICK, || {
            services.values().all(|s| {
                s.view().metadata.brokers.len() == 12 && s.view().members.learners == vec![2, 3]
            })
        })
        .await;
        assert_eq!(voters_of(&services[&2]), vec![1], "observers do not vote");
        // Joining again (a restart) changes nothing.
        assert!(services[&2].join_quorum(2, addresses[1]).await.is_ok());
        assert_eq!(learners_of(&services[&1]), vec![2, 3]);

        // The voters grow to three, asked through an observer (forwarded).
        ask(&services[&2], ControllerRequest::AddVoter { node: 2 }).await;
        ask(&services[&3], ControllerRequest::AddVoter { node: 3 }).await;
        wait_until("three voters everywhere", TICK, || {
            services.values().all(|s| voters_of(s) == vec![1, 2, 3])
        })
        .await;

        // The leader is demoted: it hands over first, then follows.
        ask(&services[&3], ControllerRequest::RemoveVoter { node: 1 }).await;
        wait_until("node 1 an observer everywhere", TICK, || {
            services
                .values()
                .all(|s| voters_of(s) == vec![2, 3] && learners_of(s) == vec![1])
        })
        .await;
        let leader = *services
            .iter()
            .find(|(_, s)| s.view().is_leader)
            .map(|(id, _)| id)
            .expect("a leader");
        assert_ne!(leader, 1, "a node that no longer votes does not lead");
        services[&leader].propose(register(40)).unwrap();
        wait_until("the demoted node to follow the new record", TICK, || {
            services[&1]
                .view()
                .metadata
                .brokers
                .contains_key(&BrokerId(40))
        })
        .await;
        // A node that never joined cannot be promoted.
        let stranger = services[&2]
            .request(ControllerRequest::AddVoter { node: 9 })
            .await;
        assert!(
            matches!(
                stranger,
                Err(ControllerError::Refused(MetadataError::NotQuorumMember(9)))
            ),
            "{stranger:?}"
        );

        // Node 3 restarts from its disk (configured voters: node 1 alone):
        // the log gives it back its vote, and the quorum commits with it.
        drop(services.remove(&3));
        let listener = TcpListener::bind(addresses[2]).unwrap();
        services.insert(3, start_node(3, dirs[2].path(), listener, addresses[0]));
        wait_until("node 3 a voter again after its restart", TICK, || {
            voters_of(&services[&3]) == vec![2, 3] && services[&3].view().leader.is_some()
        })
        .await;
        let leader = *services
            .iter()
            .find(|(_, s)| s.view().is_leader)
            .map(|(id, _)| id)
            .expect("a leader");
        services[&leader].propose(register(41)).unwrap();
        wait_until("a record committed by the restarted quorum", TICK, || {
            services
                .values()
                .all(|s| s.view().metadata.brokers.contains_key(&BrokerId(41)))
        })
        .await;
        // Asked again (as after a hand-over), a demotion goes no further:
        // node 1 stays an observer, still following.
        ask(&services[&2], ControllerRequest::RemoveVoter { node: 1 }).await;
        services[&leader].propose(register(42)).unwrap();
        wait_until("node 1 still following", TICK, || {
            services[&1]
                .view()
                .metadata
                .brokers
                .contains_key(&BrokerId(42))
        })
        .await;
        assert_eq!(learners_of(&services[&2]), vec![1]);

        // A newcomer knows only node 1, no longer a voter nor the leader:
        // node 1 passes its request on to the leader.
        let dir = tempfile::tempdir().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        services.insert(4, start_node(4, dir.path(), listener, addresses[0]));
        let joined = services[&4].join_quorum(4, address).await;
        assert!(joined.is_ok(), "node 4 joins through node 1: {joined:?}");
        wait_until("node 4 follows", TICK, || {
            services[&4]
                .view()
                .metadata
                .brokers
                .contains_key(&BrokerId(42))
        })
        .await;
    });
}
