//! The cluster layer: this broker's part in the cluster, one [`Cluster`]
//! per shard. Its copy of the metadata ([`view`]), where work for a topic,
//! partition or group runs ([`routing`]), the link to the active
//! controller ([`controller`]) and the producer ids it hands out
//! ([`producer_ids`]), the quorum it runs and its life with the controller
//! ([`quorum`]), its lease and readiness ([`lease`]). Built on the runtime
//! layer; knows nothing of partitions' data.

pub mod controller;
pub mod lease;
pub mod peer_tls;
pub mod peers;
pub mod producer_ids;
pub mod quorum;
pub mod remote_watermarks;
pub mod routing;
pub mod topics;
pub mod view;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use client::connection::{ClientError, Connection};
use client::security::{SaslLogin, SaslMechanism, Security};
use control::service::MetadataService;
use control::BrokerId;

use crate::config::group_timeouts::Timeouts;
use crate::config::share_settings::ShareSettings;
use crate::config::BrokerConfig;
use crate::runtime::sharded::{Mesh, ShardId, Sharded};
use crate::security::authorizer::Authorizer;
use peer_tls::PeerTls;
use producer_ids::ProducerIds;
use quorum::BrokerLife;
use view::View;

/// How this broker logs in to the others: as its own user, with the first
/// of `sasl_enabled_mechanisms` (every broker of a cluster offers the same).
fn peer_login(config: &BrokerConfig) -> Option<SaslLogin> {
    if !config.inter_broker_uses_sasl() {
        return None;
    }
    let (user, password) = config.broker_user()?;
    let mechanism = config
        .sasl_mechanisms()
        .into_iter()
        .map(|m| match m {
            crate::security::sasl::SaslMechanism::Plain => SaslMechanism::Plain,
            crate::security::sasl::SaslMechanism::Scram(m) => {
                SaslMechanism::Scram(crate::security::sasl::hash_of(m))
            }
        })
        .next()?;
    Some(SaslLogin {
        mechanism,
        user: user.to_string(),
        password: password.to_string(),
    })
}

/// The directory under the data directory holding the partitions.
pub const PARTITIONS_DIR: &str = "partitions";

/// One shard's part in the cluster.
pub struct Cluster {
    /// This broker.
    pub me: BrokerId,
    /// The broker's configuration.
    pub config: BrokerConfig,
    /// This shard's copy of the cluster metadata.
    pub view: View,
    /// This broker's life with the controller (kept by shard 0).
    pub life: Rc<BrokerLife>,
    /// The metadata service (on shard 0 only).
    controller: Option<Rc<MetadataService>>,
    /// Producer ids to hand out (shard 0's).
    producer_ids: ProducerIds,
    /// How this broker reaches other brokers' Kafka ports when they speak
    /// TLS (its CA file, and its own certificate if they ask for one).
    peer_tls: Option<Arc<PeerTls>>,
    /// The ACL authorizer, as of a metadata index (rebuilt when the
    /// metadata moved on); unused unless `authorizer = "acl"`.
    authorizer: RefCell<Option<(Option<u64>, Rc<Authorizer>)>>,
    peers: Sharded<Cluster>,
}

impl Cluster {
    /// Shard `index`'s part; `mesh` reaches every shard's; `controller`
    /// is the metadata service, on the shard that runs it; `peer_tls` how
    /// to reach other brokers over TLS.
    pub fn new(
        index: ShardId,
        config: BrokerConfig,
        view: View,
        life: Rc<BrokerLife>,
        controller: Option<Rc<MetadataService>>,
        peer_tls: Option<Arc<PeerTls>>,
        mesh: Mesh<Cluster>,
    ) -> Rc<Cluster> {
        Rc::new_cyclic(|this| Cluster {
            me: BrokerId(config.node_id),
            config,
            view,
            life,
            controller,
            producer_ids: ProducerIds::default(),
            peer_tls,
            authorizer: RefCell::new(None),
            peers: Sharded::new(index, this.clone(), mesh),
        })
    }

    /// The TLS settings this broker reaches other brokers with, when its
    /// inter-broker listener speaks TLS (its CA, its own certificate).
    pub fn peer_client_tls(&self) -> Option<client::tls::ClientTls> {
        self.peer_tls.as_ref().map(|peer| peer.current())
    }

    /// The ACL authorizer of this shard's metadata, or None when ACLs are
    /// not checked (`authorizer = "none"`).
    pub fn authorizer(&self) -> Option<Rc<Authorizer>> {
        if !self.config.acls_checked() {
            return None;
        }
        let view = self.view.borrow();
        let mut cached = self.authorizer.borrow_mut();
        match &*cached {
            Some((index, authorizer)) if *index == view.applied_index => Some(authorizer.clone()),
            _ => {
                let authorizer = Rc::new(Authorizer::new(
                    &view.metadata.acls,
                    &self.config.all_super_users(),
                    self.config.allow_everyone_if_no_acl_found,
                ));
                *cached = Some((view.applied_index, authorizer.clone()));
                Some(authorizer)
            }
        }
    }

    /// A connection to another broker's Kafka port at `address` (over TLS
    /// when the brokers' ports speak it, logged in as `sasl_broker_user`
    /// when they ask for SASL).
    pub async fn connect_to(
        &self,
        address: SocketAddr,
        client_id: &str,
    ) -> Result<Connection, ClientError> {
        let security = Security {
            tls: self.peer_tls.as_ref().map(|peer| peer.current()),
            sasl: peer_login(&self.config),
        };
        Connection::connect_with(address, client_id, &security).await
    }

    /// Consumer group `group`'s timeouts: its own configs (in the
    /// metadata) over the broker's settings.
    pub fn consumer_group_timeouts(&self, group: &str) -> Timeouts {
        let view = self.view.borrow();
        let own = view.metadata.group_configs.get(group);
        Timeouts::of(self.config.consumer_group_timeouts(), own)
    }

    /// Share group `group`'s settings: its own configs over the
    /// broker's.
    pub fn share_group_settings(&self, group: &str) -> ShareSettings {
        let view = self.view.borrow();
        ShareSettings::of(&self.config, view.metadata.group_configs.get(group))
    }

    /// This shard (the first runs the metadata service).
    pub fn shard(&self) -> ShardId {
        self.peers.index()
    }

    /// How many shards the broker runs.
    pub fn shards(&self) -> usize {
        self.peers.count()
    }

    /// The metadata service, if this shard runs it.
    pub fn controller_here(&self) -> Option<&Rc<MetadataService>> {
        self.controller.as_ref()
    }

    /// Where the partitions' directories are.
    pub fn partitions_root(&self) -> PathBuf {
        self.config.data_dir.join(PARTITIONS_DIR)
    }
}
