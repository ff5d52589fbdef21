//! A client's view of a cluster: connections to its brokers (one each,
//! shared by callers one request at a time) and the topics' partition
//! leaders, refreshed from Metadata when they move.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;

use futures::lock::Mutex;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::Request;

use crate::connection::{ClientError, Connection};
use crate::security::Security;

/// A topic as the cluster last described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Its name.
    pub name: String,
    /// Its id.
    pub id: uuid::Uuid,
    /// Each partition's leader broker id (-1: none).
    pub leaders: Vec<i32>,
    /// Each partition's replicas, in-sync replicas and leader epoch.
    pub partitions: Vec<PartitionInfo>,
}

/// One partition's replicas as Metadata last described them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Its replicas' broker ids.
    pub replicas: Vec<i32>,
    /// The in-sync ones.
    pub isr: Vec<i32>,
    /// The leader epoch (-1 if not given).
    pub leader_epoch: i32,
}

/// A broker as the cluster last described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Its node id.
    pub id: i32,
    /// Where it listens.
    pub address: String,
}

#[derive(Default)]
struct Known {
    brokers: HashMap<i32, BrokerInfo>,
    topics: HashMap<String, TopicInfo>,
    controller: i32,
}

/// Connections to a cluster, found from one bootstrap address.
pub struct Cluster {
    /// TLS for every connection, if the brokers speak it.
    security: Security,
    bootstrap: SocketAddr,
    client_id: String,
    known: RefCell<Known>,
    connections: RefCell<HashMap<i32, Rc<Mutex<Connection>>>>,
    bootstrap_connection: RefCell<Option<Rc<Mutex<Connection>>>>,
}

/// Resolves `host:port` to one address.
pub fn resolve(address: &str) -> Result<SocketAddr, ClientError> {
    address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| ClientError::Protocol(format!("{address} resolves to nothing")))
}

impl Cluster {
    /// A cluster reached first through `bootstrap`.
    pub fn new(bootstrap: SocketAddr, client_id: &str) -> Rc<Cluster> {
        Cluster::with_security(bootstrap, client_id, Security::default())
    }

    /// A cluster whose brokers are reached with `security` (TLS, SASL).
    pub fn with_security(
        bootstrap: SocketAddr,
        client_id: &str,
        security: Security,
    ) -> Rc<Cluster> {
        Rc::new(Cluster {
            security,
            bootstrap,
            client_id: client_id.to_string(),
            known: RefCell::new(Known::default()),
            connections: RefCell::new(HashMap::new()),
            bootstrap_connection: RefCell::new(None),
        })
    }

    /// The connection to the bootstrap broker (for calls any broker answers).
    pub async fn any(&self) -> Result<Rc<Mutex<Connection>>, ClientError> {
        if let Some(connection) = self.bootstrap_connection.borrow().clone() {
            return Ok(connection);
        }
        let connection = Rc::new(Mutex::new(
            Connection::connect_with(self.bootstrap, &self.client_id, &self.security).await?,
        ));
        *self.bootstrap_connection.borrow_mut() = Some(connection.clone());
        Ok(connection)
    }

    /// The connection to broker `id`, opened if needed.
    pub async fn broker(&self, id: i32) -> Result<Rc<Mutex<Connection>>, ClientError> {
        if let Some(connection) = self.connections.borrow().get(&id) {
            return Ok(connection.clone());
        }
        let connection = Rc::new(Mutex::new(self.connect(id).await?));
        self.connections.borrow_mut().insert(id, connection.clone());
        Ok(connection)
    }

    /// A new connection to broker `id`, not shared (for a caller that
    /// keeps requests in flight on it).
    pub async fn connect(&self, id: i32) -> Result<Connection, ClientError> {
        let address = self
            .known
            .borrow()
            .brokers
            .get(&id)
            .map(|b| b.address.clone())
            .ok_or_else(|| ClientError::Protocol(format!("unknown broker {id}")))?;
        Connection::connect_with(resolve(&address)?, &self.client_id, &self.security).await
    }

    /// Forgets a connection that failed, so the next call reconnects.
    pub fn drop_connection(&self, id: Option<i32>) {
        match id {
            Some(id) => {
                self.connections.borrow_mut().remove(&id);
            }
            None => *self.bootstrap_connection.borrow_mut() = None,
        }
    }

    /// Calls `request` on the connection given, at the highest common version.
    pub async fn call_on<R: Request>(
        &self,
        connection: &Mutex<Connection>,
        request: &R,
    ) -> Result<R::Response, ClientError> {
        let mut connection = connection.lock().await;
        let version = connection.version_for::<R>()?;
        connection.call(request, version).await
    }

    /// Calls the request `build` makes for the highest common version (for
    /// requests whose fields differ by version).
    pub async fn call_built<R: Request>(
        &self,
        connection: &Mutex<Connection>,
        build: impl Fn(i16) -> R,
    ) -> Result<R::Response, ClientError> {
        let mut connection = connection.lock().await;
        let version = connection.version_for::<R>()?;
        connection.call(&build(version), version).await
    }

    /// Calls `request` on any broker (the bootstrap one), reconnecting once.
    pub async fn call_any<R: Request>(&self, request: &R) -> Result<R::Response, ClientError> {
        let connection = self.any().await?;
        match self.call_on(&connection, request).await {
            Err(ClientError::Io(_)) => {
                self.drop_connection(None);
                let connection = self.any().await?;
                self.call_on(&connection, request).await
            }
            other => other,
        }
    }

    /// Refreshes what is known of `topics` (all topics if None), creating
    /// them if `auto_create` and the broker allows it.
    pub async fn refresh(
        &self,
        topics: Option<&[&str]>,
        auto_create: bool,
    ) -> Result<(), ClientError> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|names| {
                names
                    .iter()
                    .map(|n| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(n.to_string().into())))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(auto_create);
        let response = self.call_any(&request).await?;
        let mut known = self.known.borrow_mut();
        known.controller = response.controller_id.0;
        for broker in &response.brokers {
            known.brokers.insert(
                broker.node_id.0,
                BrokerInfo {
                    id: broker.node_id.0,
                    address: format!("{}:{}", broker.host.as_str(), broker.port),
                },
            );
        }
        for topic in &response.topics {
            let Some(name) = topic.name.as_ref().map(|n| n.as_str().to_string()) else {
                continue;
            };
            if topic.error_code != 0 {
                known.topics.remove(&name);
                continue;
            }
            let mut leaders = vec![-1; topic.partitions.len()];
            let mut partitions = vec![PartitionInfo::default(); topic.partitions.len()];
            for p in &topic.partitions {
                let Some(i) = usize::try_from(p.partition_index)
                    .ok()
                    .filter(|i| *i < leaders.len())
                else {
                    continue;
                };
                leaders[i] = p.leader_id.0;
                partitions[i] = PartitionInfo {
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                    leader_epoch: p.leader_epoch,
                };
            }
            known.topics.insert(
                name.clone(),
                TopicInfo {
                    name,
                    id: topic.topic_id,
                    leaders,
                    partitions,
                },
            );
        }
        Ok(())
    }

    /// What is known of a topic (refresh first to learn it).
    pub fn topic(&self, name: &str) -> Option<TopicInfo> {
        self.known.borrow().topics.get(name).cloned()
    }

    /// A known topic's id, without copying its info (None: not known).
    pub fn topic_id(&self, name: &str) -> Option<uuid::Uuid> {
        self.known.borrow().topics.get(name).map(|t| t.id)
    }

    /// How many partitions a known topic has (None: not known).
    pub fn partition_count(&self, name: &str) -> Option<usize> {
        self.known
            .borrow()
            .topics
            .get(name)
            .map(|t| t.leaders.len())
    }

    /// A known partition's leader (-1: none).
    pub fn leader_of(&self, topic: &str, partition: i32) -> Option<i32> {
        let known = self.known.borrow();
        known
            .topics
            .get(topic)?
            .leaders
            .get(partition as usize)
            .copied()
    }

    /// The known brokers.
    pub fn brokers(&self) -> Vec<BrokerInfo> {
        let mut brokers: Vec<_> = self.known.borrow().brokers.values().cloned().collect();
        brokers.sort_by_key(|b| b.id);
        brokers
    }

    /// The controller's id as last described.
    pub fn controller(&self) -> i32 {
        self.known.borrow().controller
    }

    /// A topic's info, refreshing (and auto-creating if asked) when unknown.
    pub async fn topic_info(
        &self,
        name: &str,
        auto_create: bool,
    ) -> Result<TopicInfo, ClientError> {
        if let Some(info) = self.topic(name) {
            return Ok(info);
        }
        self.refresh(Some(&[name]), auto_create).await?;
        self.topic(name).ok_or(ClientError::Broker(
            kafka_protocol::ResponseError::UnknownTopicOrPartition.code(),
        ))
    }
}
