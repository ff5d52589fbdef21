//! Who sent a request, and what the ACLs let them do: each handler asks
//! before it touches a topic, group or the cluster, and answers a refusal
//! with Kafka's code (TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED).
//! With `authorizer = "none"` every question is answered yes at once.

use std::cell::{Cell, RefCell};
use std::net::IpAddr;
use std::rc::Rc;

use control::model::acls::{Operation, ResourceType, CLUSTER_NAME};
use futures::channel::oneshot;
use kafka_protocol::ResponseError;

use crate::cluster::routing::Route;
use crate::kafka::Code;
use crate::runtime::clock::monotonic_ms;
use crate::security::authorizer::Authorizer;
use crate::security::quotas::{shard_share, Metered};
use crate::server::connection::move_to_shard::PartitionShards;
use crate::server::connection::refused_batches::RefusedBatches;
use crate::server::connection::share_link::ShareLink;
use crate::server::shard::Shard;

/// The sender of a request.
pub struct Caller<'a> {
    authorizer: Option<Rc<Authorizer>>,
    /// `User:name`: the SASL user, else the client certificate's subject,
    /// else `User:ANONYMOUS` (empty when nothing is checked or metered).
    principal: String,
    /// The request's client id (quotas are per user and client id).
    client_id: &'a str,
    /// Whether any client quota is set (else nothing is metered).
    metered: bool,
    /// The throttle time a handler answered with (0: none).
    throttled_ms: Cell<u64>,
    /// The request was a follower's fetch: no quota applies to it.
    replication: Cell<bool>,
    /// Where the partitions it reads or writes live (the connection
    /// moves to their shard: [`crate::server::connection::move_to_shard`]).
    partition_shards: Cell<PartitionShards>,
    /// Its IP address, as ACL hosts name it.
    host: String,
    /// "/ip", as DescribeGroups shows a member's host.
    pub group_host: &'a str,
    /// The listener the request came in on: Metadata, FindCoordinator
    /// and DescribeCluster answer with the brokers' addresses on it.
    pub listener: Rc<str>,
    /// Its connection's refused idempotent batches (Produce answers the
    /// batches behind one with its refusal).
    pub refused: Option<&'a RefCell<RefusedBatches>>,
    /// Its connection's share sessions (ShareFetch opens them).
    pub share_link: Option<&'a RefCell<ShareLink>>,
    /// Told once a Produce's records have their offsets: its connection
    /// may then start the next request ([`crate::server::connection::pipeline`]).
    placing: Cell<Option<oneshot::Sender<()>>>,
}

impl<'a> Caller<'a> {
    /// A caller checked by `authorizer` (None: nothing is checked);
    /// `principal` is asked only when something is. `on`: its group host
    /// ("/ip") and the listener it connected to.
    pub fn new(
        (authorizer, metered): (Option<Rc<Authorizer>>, bool),
        principal: impl FnOnce() -> String,
        (ip, client_id): (Option<IpAddr>, &'a str),
        (group_host, listener): (&'a str, Rc<str>),
    ) -> Caller<'a> {
        let principal = match authorizer.is_some() || metered {
            true => principal(),
            false => String::new(),
        };
        let host = match &authorizer {
            Some(_) => ip.map(|ip| ip.to_string()).unwrap_or_default(),
            None => String::new(),
        };
        Caller {
            authorizer,
            principal,
            client_id,
            metered,
            throttled_ms: Cell::new(0),
            replication: Cell::new(false),
            partition_shards: Cell::default(),
            host,
            group_host,
            listener,
            refused: None,
            share_link: None,
            placing: Cell::new(None),
        }
    }

    /// The same caller, its Produce answers kept consistent through
    /// `refused` (its connection's).
    pub fn remembering(self, refused: &'a RefCell<RefusedBatches>) -> Caller<'a> {
        Caller {
            refused: Some(refused),
            ..self
        }
    }

    /// The same caller, the share sessions it opens remembered in
    /// `link` (its connection's).
    pub fn linking(self, link: &'a RefCell<ShareLink>) -> Caller<'a> {
        Caller {
            share_link: Some(link),
            ..self
        }
    }

    /// The same caller, told on `placing` once its Produce's records are
    /// placed (dropped unsent if it ends without placing them).
    pub fn telling_when_placed(self, placing: oneshot::Sender<()>) -> Caller<'a> {
        Caller {
            placing: Cell::new(Some(placing)),
            ..self
        }
    }

    /// Its Produce's records have their offsets (or were refused): the
    /// connection may start its next request.
    pub fn placed(&self) {
        if let Some(placing) = self.placing.take() {
            let _ = placing.send(());
        }
    }

    /// Meters `amount` of `metered` (bytes, or microseconds) against the
    /// caller's quota (Kafka's precedence of user and client id quotas);
    /// the throttle time to answer with, in ms (0 without a quota or
    /// under it). The connection then reads nothing more for that long.
    pub fn meter(&self, shard: &Shard, metered: Metered, amount: usize) -> i32 {
        if !self.metered {
            return 0;
        }
        let key = metered.quota_key();
        let user = self
            .principal
            .strip_prefix("User:")
            .unwrap_or(&self.principal);
        // The broker's own calls (forwarded from its HTTP API, say) are
        // never throttled.
        if shard
            .cluster
            .config
            .broker_user()
            .is_some_and(|(own, _)| own == user)
        {
            return 0;
        }
        let matched = {
            let view = shard.cluster.view.borrow();
            view.metadata.client_quota_entity(user, self.client_id, key)
        };
        let Some((entity, quota)) = matched else {
            return 0;
        };
        // One meter per what the quota names (a user quota is shared by
        // all of the user's client ids, as Kafka's).
        let metered_user = if entity.user.is_some() { user } else { "" };
        let metered_client = if entity.client_id.is_some() {
            self.client_id
        } else {
            ""
        };
        let share = shard_share(metered.per_second(quota), shard.cluster.shards());
        let throttle = shard.quota_meters.borrow_mut().record(
            metered,
            (metered_user, metered_client),
            amount as u64,
            share,
            monotonic_ms(),
        );
        self.throttled_ms.set(self.throttled_ms.get().max(throttle));
        throttle as i32
    }

    /// Whether any client quota is set (else nothing is metered).
    pub fn metered(&self) -> bool {
        self.metered
    }

    /// Marks the request as a follower's fetch: replication is never
    /// metered, whoever the follower logged in as.
    pub fn mark_replication(&self) {
        self.replication.set(true);
    }

    /// Notes the shards of the partitions a data request routes to (the
    /// refused ones have none).
    pub fn note_routes<'r>(&self, routes: impl IntoIterator<Item = &'r Route>) {
        let noted = routes
            .into_iter()
            .flatten()
            .fold(self.partition_shards.get(), |on, (_, shard)| on.and(*shard));
        self.partition_shards.set(noted);
    }

    /// Where the partitions of the request (a Fetch or Produce) live.
    pub fn partition_shards(&self) -> PartitionShards {
        self.partition_shards.get()
    }

    /// Whether the request was a follower's fetch.
    pub fn is_replication(&self) -> bool {
        self.replication.get()
    }

    /// The throttle time of the request answered (0: none).
    pub fn throttled_ms(&self) -> u64 {
        self.throttled_ms.get()
    }

    /// Whether the ACLs are checked (else every question is answered yes,
    /// and what a check would need need not be looked up).
    pub fn checks_acls(&self) -> bool {
        self.authorizer.is_some()
    }

    /// Whether the caller may do `operation` to `name` of `resource`.
    pub fn may(&self, operation: Operation, resource: ResourceType, name: &str) -> bool {
        self.authorizer
            .as_ref()
            .is_none_or(|a| a.allows(&self.principal, &self.host, operation, resource, name))
    }

    /// On a topic.
    pub fn may_topic(&self, operation: Operation, topic: &str) -> bool {
        self.may(operation, ResourceType::Topic, topic)
    }

    /// On a group.
    pub fn may_group(&self, operation: Operation, group: &str) -> bool {
        self.may(operation, ResourceType::Group, group)
    }

    /// Whether the caller may DESCRIBE every topic of a group member's
    /// subscription (None: unchanged). Kafka answers a heartbeat naming
    /// one it may not with TOPIC_AUTHORIZATION_FAILED.
    pub fn may_subscribe(&self, topics: Option<&[String]>) -> bool {
        let mut topics = topics.unwrap_or_default().iter();
        topics.all(|topic| self.may_topic(Operation::Describe, topic))
    }

    /// On a transactional id.
    pub fn may_transactional_id(&self, operation: Operation, id: &str) -> bool {
        self.may(operation, ResourceType::TransactionalId, id)
    }

    /// On the cluster.
    pub fn may_cluster(&self, operation: Operation) -> bool {
        self.may(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether some topic allows `operation` (an idempotent producer needs
    /// IDEMPOTENT_WRITE on the cluster or WRITE on any topic, as Kafka's).
    pub fn may_on_any_topic(&self, operation: Operation) -> bool {
        self.authorizer.as_ref().is_none_or(|a| {
            a.allows_any(&self.principal, &self.host, operation, ResourceType::Topic)
        })
    }

    /// `route` to a partition of `topic`, unless the caller may not do
    /// `operation` to it: then TOPIC_AUTHORIZATION_FAILED, whether or not
    /// the topic exists (an unauthorized caller does not learn that).
    pub fn topic_route(&self, route: Route, operation: Operation, topic: Option<&str>) -> Route {
        match topic {
            Some(topic) if !self.may_topic(operation, topic) => Err(TOPIC_DENIED),
            _ => route,
        }
    }
}

/// TOPIC_AUTHORIZATION_FAILED.
pub const TOPIC_DENIED: Code = ResponseError::TopicAuthorizationFailed.code();
/// GROUP_AUTHORIZATION_FAILED.
pub const GROUP_DENIED: Code = ResponseError::GroupAuthorizationFailed.code();
/// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
pub const TXN_ID_DENIED: Code = ResponseError::TransactionalIdAuthorizationFailed.code();
/// CLUSTER_AUTHORIZATION_FAILED.
pub const CLUSTER_DENIED: Code = ResponseError::ClusterAuthorizationFailed.code();
