//! The metadata service over the in-memory network: an isolated leader is
//! replaced, and after healing everyone converges on one history.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use control::disk::FileRaftDisk;
use control::memory::MemoryNetwork;
use control::node::{MetadataNode, NodeConfig};
use control::service::MetadataService;
use control::*;

const TICK: Duration = Duration::from_millis(5);
const WAIT_MAX: Duration = Duration::from_secs(20);

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < WAIT_MAX, "timed out waiting for {what}");
        glommio::timer::sleep(TICK).await;
    }
}

fn register(id: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker(BrokerRegistration {
        id: BrokerId(id),
        incarnation: Incarnation(1),
        listener: "127.0.0.1:9092".into(),
        rack: None,
        shards: 1,
    })
}

#[test]
fn an_isolated_leader_is_replaced_and_rejoins_the_history() {
    let dirs: Vec<_> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
    glommio::LocalExecutorBuilder::default()
        .io_memory(2 << 20)
        .make()
        .expect("glommio executor")
        .run(async move {
            let ids = [1u64, 2, 3, 4, 5];
            let network = MemoryNetwork::new();
            let mut services = BTreeMap::new();
            for (id, dir) in ids.iter().zip(&dirs) {
                let disk = FileRaftDisk::open(dir.path()).unwrap();
                let node =
                    MetadataNode::start(&NodeConfig::new(*id, ids.to_vec()), disk.recovered())
                        .unwrap();
                services.insert(
                    *id,
                    MetadataService::start(node, disk, network.join(*id), TICK),
                );
            }
            let leader_of = |services: &BTreeMap<u64, MetadataService>| {
                services
                    .iter()
                    .find(|(_, s)| s.view().is_leader)
                    .map(|(id, _)| *id)
            };
            wait_until("a leader", || leader_of(&services).is_some()).await;
            let first = leader_of(&services).unwrap();
            services[&first].propose(register(1)).unwrap();
            wait_until("the first record everywhere", || {
                services
                    .values()
                    .all(|s| s.view().metadata.brokers.contains_key(&BrokerId(1)))
            })
            .await;
            network.isolate(first);
            // A proposal to the isolated leader cannot commit.
            services[&first].propose(register(66)).unwrap();
            wait_until("a new leader among the others", || {
                services
                    .iter()
                    .any(|(id, s)| *id != first && s.view().is_leader)
            })
            .await;
            let second = services
                .iter()
                .find(|(id, s)| **id != first && s.view().is_leader)
                .map(|(id, _)| *id)
                .unwrap();
            services[&second].propose(register(2)).unwrap();
            wait_until("the majority commits", || {
                services
                    .iter()
                    .filter(|(id, _)| **id != first)
                    .all(|(_, s)| s.view().metadata.brokers.contains_key(&BrokerId(2)))
            })
            .await;
            network.heal();
            wait_until("the old leader rejoins", || {
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
            wait_until("convergence", || {
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
