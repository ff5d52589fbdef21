//! Metadata: the brokers and the topics' partitions, from the committed
//! cluster metadata. Unknown topics are reported so the caller can create
//! them (when auto-creation is enabled) and answer again.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, MetadataRequest, MetadataResponse, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::ResponseError;

use control::TopicId;

use crate::kafka::bounds::check_metadata;
use crate::kafka::request::Request;
use crate::server::handlers::HandlerError;

/// The Metadata versions served. v0 is old (Kafka 0.8) but still sent:
/// Sarama 1.22's cluster admin (Debian's) lists topics with it whatever
/// version it is configured for.
pub const VERSIONS: (i16, i16) = (0, 12);

/// What the answer needs besides the request.
pub struct Cluster<'a> {
    /// The committed metadata.
    pub metadata: &'a control::Metadata,
    /// The cluster id.
    pub cluster_id: &'a str,
    /// The active controller's node id (-1 if unknown).
    pub controller_id: i32,
    /// The listener the client connected to: brokers are given by their
    /// address on it (those without it are left out, as Kafka does).
    pub listener: &'a str,
    /// Whether the client may see a topic (DESCRIBE): a topic it may not is
    /// left out of an "all topics" answer and answered
    /// TOPIC_AUTHORIZATION_FAILED when named, whether it exists or not.
    pub may_describe: &'a dyn Fn(&str) -> bool,
}

/// A Metadata answer: the response (header and body) and the requested
/// topics that do not exist.
pub struct Answer {
    /// The response frame body.
    pub response: Bytes,
    /// Topics asked for by name that do not exist.
    pub missing_topics: Vec<String>,
    /// Whether the client allows auto-creation (v4+; always before).
    pub allow_auto_create: bool,
}

/// Answers a Metadata request of a served version.
pub fn answer(request: &Request, cluster: &Cluster<'_>) -> Result<Answer, HandlerError> {
    let version = request.header.request_api_version;
    check_metadata(&request.body, version)?;
    let decoded = MetadataRequest::decode(&mut request.body.clone(), version)
        .map_err(|e| HandlerError::Malformed(e.to_string()))?;
    let metadata = cluster.metadata;
    // A topic asked for by id alone (v10+; librdkafka's consumer asks so
    // for the topics a consumer group heartbeat assigned it) is named
    // here; an id nobody knows is answered UNKNOWN_TOPIC_ID.
    let mut unknown_ids = Vec::new();
    // v0 has no null list: an empty one asks for every topic.
    let asked = match decoded.topics {
        Some(topics) if version == 0 && topics.is_empty() => None,
        asked => asked,
    };
    let requested: Option<Vec<String>> = asked.map(|topics| {
        topics
            .into_iter()
            .filter_map(|t| match t.name {
                Some(name) if !name.0.is_empty() || t.topic_id.is_nil() => Some(name.0.to_string()),
                _ => {
                    let id = TopicId(*t.topic_id.as_bytes());
                    let named = metadata.topics.get(&id).map(|topic| topic.name.clone());
                    if named.is_none() {
                        unknown_ids.push(t.topic_id);
                    }
                    named
                }
            })
            .collect()
    });
    let names: Vec<String> = requested.clone().unwrap_or_else(|| {
        let all = metadata.names.keys();
        all.filter(|name| (cluster.may_describe)(name))
            .cloned()
            .collect()
    });
    let on_listener = |id: control::BrokerId| {
        (metadata.brokers.get(&id))
            .is_some_and(|b| metadata.endpoint(b, cluster.listener).is_some())
    };
    let mut missing = Vec::new();
    let topics = names
        .iter()
        .map(|name| match metadata.topic_by_name(name) {
            _ if !(cluster.may_describe)(name) => MetadataResponseTopic::default()
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_name(Some(TopicName(StrBytes::from_string(name.clone())))),
            Ok(topic) => topic_entry(topic, version, &on_listener),
            Err(_) => {
                missing.push(name.clone());
                MetadataResponseTopic::default()
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
            }
        })
        .chain(unknown_ids.into_iter().map(|id| {
            MetadataResponseTopic::default()
                .with_error_code(ResponseError::UnknownTopicId.code())
                .with_topic_id(id)
        }))
        .collect();
    let brokers = metadata
        .live_brokers()
        .filter_map(|b| {
            let (host, port) = metadata.endpoint(b, cluster.listener)?.rsplit_once(':')?;
            let mut entry = MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.registration.id.0))
                .with_host(StrBytes::from_string(host.to_string()))
                .with_port(port.parse().ok()?);
            if version >= 1 {
                entry = entry.with_rack(b.registration.rack.clone().map(StrBytes::from_string));
            }
            Some(entry)
        })
        .collect();
    let mut response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_topics(topics);
    if version >= 1 {
        response = response.with_controller_id(BrokerId(cluster.controller_id));
    }
    if version >= 2 {
        response =
            response.with_cluster_id(Some(StrBytes::from_string(cluster.cluster_id.to_string())));
    }
    let mut out = BytesMut::new();
    let header = ResponseHeader::default().with_correlation_id(request.header.correlation_id);
    header
        .encode(&mut out, MetadataResponse::header_version(version))
        .map_err(|e| HandlerError::Malformed(e.to_string()))?;
    response
        .encode(&mut out, version)
        .map_err(|e| HandlerError::Malformed(e.to_string()))?;
    Ok(Answer {
        response: out.freeze(),
        missing_topics: missing,
        allow_auto_create: decoded.allow_auto_topic_creation,
    })
}

/// A topic's entry; `on_listener` says whether a broker has an address on
/// the client's listener (a leader without one is answered as Kafka does:
/// LISTENER_NOT_FOUND, no leader id).
fn topic_entry(
    topic: &control::Topic,
    version: i16,
    on_listener: &dyn Fn(control::BrokerId) -> bool,
) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, p)| {
            let ids = |brokers: &[control::BrokerId]| {
                brokers.iter().map(|b| BrokerId(b.0)).collect::<Vec<_>>()
            };
            let leader = p.leader.filter(|l| on_listener(*l));
            let mut entry = MetadataResponsePartition::default()
                .with_partition_index(index as i32)
                .with_leader_id(BrokerId(leader.map_or(-1, |l| l.0)))
                .with_replica_nodes(ids(&p.replicas))
                .with_isr_nodes(ids(&p.isr));
            if p.leader.is_none() {
                entry = entry.with_error_code(ResponseError::LeaderNotAvailable.code());
            } else if leader.is_none() {
                entry = entry.with_error_code(ResponseError::ListenerNotFound.code());
            }
            if version >= 7 {
                entry = entry.with_leader_epoch(p.leader_epoch.0);
            }
            entry
        })
        .collect();
    let mut entry = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_partitions(partitions);
    if version >= 1 {
        // Clients leave internal topics out of pattern subscriptions.
        entry = entry.with_is_internal(crate::cluster::topics::is_internal(&topic.name));
    }
    if version >= 10 {
        entry = entry.with_topic_id(uuid::Uuid::from_bytes(topic.id.0));
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::request::parse;
    use control::model::placement::place;
    use control::{BrokerRegistration, Incarnation, MetadataRecord, TopicId};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{ApiKey, RequestHeader};

    fn everything(_: &str) -> bool {
        true
    }

    /// What an answer needs, every topic described, on `listener`.
    fn open_cluster<'a>(metadata: &'a control::Metadata, listener: &'a str) -> Cluster<'a> {
        Cluster {
            metadata,
            cluster_id: "test-cluster",
            controller_id: 1,
            may_describe: &everything,
            listener,
        }
    }

    fn cluster_metadata() -> control::Metadata {
        let mut metadata = control::Metadata::default();
        for id in 1..=2 {
            let registration = BrokerRegistration {
                id: control::BrokerId(id),
                incarnation: Incarnation(1),
                listener: format!("127.0.0.1:{}", 9090 + id),
                rack: Some(format!("r{id}")),
                shards: 1,
            };
            metadata
                .apply(&MetadataRecord::RegisterBroker(registration))
                .unwrap();
            metadata
                .apply(&MetadataRecord::UnfenceBroker {
                    id: control::BrokerId(id),
                    incarnation: Incarnation(1),
                })
                .unwrap();
        }
        let partitions = place(&metadata, 3, 2).unwrap();
        metadata
            .apply(&MetadataRecord::CreateTopic {
                id: TopicId([9; 16]),
                name: "orders".into(),
                config: Box::default(),
                partitions,
            })
            .unwrap();
        metadata
    }

    fn request(version: i16, topics: Option<Vec<&str>>) -> Request {
        let topics = topics.map(|names| {
            names
                .into_iter()
                .map(|n| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n.to_string()))))
                })
                .collect()
        });
        request_of(version, topics)
    }

    fn request_of(version: i16, topics: Option<Vec<MetadataRequestTopic>>) -> Request {
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Metadata as i16)
            .with_request_api_version(version)
            .with_correlation_id(5)
            .with_client_id(Some(StrBytes::from_static_str("t")));
        let mut out = BytesMut::new();
        header
            .encode(&mut out, MetadataRequest::header_version(version))
            .unwrap();
        MetadataRequest::default()
            .with_topics(topics)
            .encode(&mut out, version)
            .unwrap();
        parse(out.freeze()).unwrap()
    }

    fn decode(bytes: Bytes, version: i16) -> MetadataResponse {
        let mut bytes = bytes;
        let header =
            ResponseHeader::decode(&mut bytes, MetadataResponse::header_version(version)).unwrap();
        assert_eq!(header.correlation_id, 5);
        let response = MetadataResponse::decode(&mut bytes, version).unwrap();
        assert!(bytes.is_empty());
        response
    }

    #[test]
    fn v0s_empty_list_asks_for_every_topic() {
        let metadata = cluster_metadata();
        let cluster = open_cluster(&metadata, "PLAINTEXT");
        let every = decode(
            answer(&request(0, Some(vec![])), &cluster)
                .unwrap()
                .response,
            0,
        );
        let names: Vec<_> = (every.topics.iter())
            .map(|t| t.name.as_ref().unwrap().0.to_string())
            .collect();
        assert_eq!(names, ["orders"]);
        assert_eq!(every.topics[0].partitions.len(), 3);
        assert!(!every.brokers.is_empty());
        // Named, as in later versions.
        let named = decode(
            answer(&request(0, Some(vec!["orders"])), &cluster)
                .unwrap()
                .response,
            0,
        );
        assert_eq!(named.topics.len(), 1);
    }

    #[test]
    fn topics_asked_for_by_id_alone_are_named_or_unknown() {
        let metadata = cluster_metadata();
        let cluster = open_cluster(&metadata, "PLAINTEXT");
        let by_id = |id: [u8; 16]| {
            MetadataRequestTopic::default()
                .with_name(None)
                .with_topic_id(uuid::Uuid::from_bytes(id))
        };
        let asked = request_of(12, Some(vec![by_id([9; 16]), by_id([7; 16])]));
        let response = decode(answer(&asked, &cluster).unwrap().response, 12);
        let (known, unknown) = (&response.topics[0], &response.topics[1]);
        assert_eq!(known.error_code, 0);
        assert_eq!(known.name.as_ref().map(|n| n.0.as_str()), Some("orders"));
        assert_eq!(known.partitions.len(), 3);
        assert_eq!(unknown.error_code, ResponseError::UnknownTopicId.code());
        assert_eq!(unknown.topic_id.as_bytes(), &[7; 16]);
    }

    #[test]
    fn every_served_version_describes_brokers_and_partitions() {
        let metadata = cluster_metadata();
        let cluster = open_cluster(&metadata, "PLAINTEXT");
        for version in VERSIONS.0..=VERSIONS.1 {
            let answer = answer(&request(version, Some(vec!["orders"])), &cluster).unwrap();
            assert!(answer.missing_topics.is_empty());
            let response = decode(answer.response, version);
            assert_eq!(response.brokers.len(), 2, "v{version}");
            assert!(response
                .brokers
                .iter()
                .any(|b| b.port == 9091 && b.host.as_str() == "127.0.0.1"));
            let topic = &response.topics[0];
            assert_eq!(topic.error_code, 0);
            assert_eq!(topic.partitions.len(), 3);
            for p in &topic.partitions {
                assert!(p.leader_id.0 == 1 || p.leader_id.0 == 2);
                assert_eq!(p.replica_nodes.len(), 2);
                assert_eq!(p.isr_nodes.len(), 2);
            }
            if version >= 10 {
                assert_eq!(topic.topic_id.as_bytes(), &[9; 16]);
            }
            if version >= 2 {
                assert_eq!(
                    response.cluster_id.as_ref().map(|c| c.as_str()),
                    Some("test-cluster")
                );
            }
        }
    }

    #[test]
    fn brokers_are_given_at_their_address_on_the_clients_listener() {
        let mut metadata = cluster_metadata();
        let endpoint = |listener: &str, address: &str| control::BrokerEndpoint {
            listener: listener.into(),
            address: address.into(),
        };
        // Broker 1 has two listeners; broker 2 only the internal one.
        let both = vec![
            endpoint("INTERNAL", "10.0.0.1:9092"),
            endpoint("EXTERNAL", "kafka1.example:443"),
        ];
        for (id, endpoints) in [(1, both), (2, vec![endpoint("INTERNAL", "10.0.0.2:9092")])] {
            let record = MetadataRecord::SetBrokerEndpoints {
                id: control::BrokerId(id),
                incarnation: Incarnation(1),
                endpoints,
            };
            metadata.apply(&record).unwrap();
        }
        let brokers_on = |listener: &str| {
            let cluster = open_cluster(&metadata, listener);
            let answer = answer(&request(12, None), &cluster).unwrap();
            let mut brokers: Vec<String> = decode(answer.response, 12)
                .brokers
                .iter()
                .map(|b| format!("{}@{}:{}", b.node_id.0, b.host.as_str(), b.port))
                .collect();
            brokers.sort();
            brokers
        };
        assert_eq!(
            brokers_on("INTERNAL"),
            ["1@10.0.0.1:9092", "2@10.0.0.2:9092"]
        );
        assert_eq!(brokers_on("EXTERNAL"), ["1@kafka1.example:443"]);
        assert!(brokers_on("OTHER").is_empty());
        // On EXTERNAL, partitions broker 2 leads have no leader to name.
        let cluster = open_cluster(&metadata, "EXTERNAL");
        let answer = answer(&request(12, Some(vec!["orders"])), &cluster).unwrap();
        let topic = &decode(answer.response, 12).topics[0];
        let orders = &metadata.topics[&TopicId([9; 16])];
        for (partition, placed) in topic.partitions.iter().zip(&orders.partitions) {
            let expected = match placed.leader {
                Some(control::BrokerId(1)) => (0, 1),
                _ => (ResponseError::ListenerNotFound.code(), -1),
            };
            assert_eq!((partition.error_code, partition.leader_id.0), expected);
        }
        assert!(
            orders
                .partitions
                .iter()
                .any(|p| p.leader == Some(control::BrokerId(2))),
            "some partition is led by broker 2"
        );
    }

    #[test]
    fn unknown_topics_are_reported_and_null_means_all() {
        let metadata = cluster_metadata();
        let cluster = open_cluster(&metadata, "PLAINTEXT");
        let answer_unknown = answer(&request(9, Some(vec!["orders", "nope"])), &cluster).unwrap();
        assert_eq!(answer_unknown.missing_topics, vec!["nope".to_string()]);
        let response = decode(answer_unknown.response, 9);
        assert_eq!(
            response.topics[1].error_code,
            ResponseError::UnknownTopicOrPartition.code()
        );
        let all = decode(answer(&request(9, None), &cluster).unwrap().response, 9);
        assert_eq!(all.topics.len(), 1);
    }

    #[test]
    fn a_forged_topic_count_is_refused_before_decoding() {
        let metadata = cluster_metadata();
        let cluster = open_cluster(&metadata, "PLAINTEXT");
        let mut forged = request(4, Some(vec![]));
        forged.body = Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 1]);
        assert!(matches!(
            answer(&forged, &cluster),
            Err(HandlerError::Bounds(_))
        ));
    }
}
