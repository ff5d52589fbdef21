//! DescribeCluster: the cluster id, the controller and the brokers.

use std::rc::Rc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::access::{Caller, CLUSTER_DENIED};
use super::{HandlerError, Outcome};
use crate::kafka::bounds::check_describe_cluster;
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::response;
use crate::server::shard::Shard;
use control::model::acls::Operation;

/// DescribeCluster versions served.
pub const DESCRIBE_CLUSTER_VERSIONS: (i16, i16) = (0, 2);

/// "Authorized operations not requested".
const OPERATIONS_UNKNOWN: i32 = i32::MIN;

/// Answers DescribeCluster.
pub async fn describe_cluster(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let version = request.header.request_api_version;
    let decoded: DescribeClusterRequest = checked(request, check_describe_cluster)?;
    if !caller.may_cluster(Operation::Describe) {
        let refused = DescribeClusterResponse::default().with_error_code(CLUSTER_DENIED);
        return super::respond(request, &refused);
    }
    let view = shard.cluster.view.borrow();
    let brokers = view
        .metadata
        .brokers
        .values()
        .filter(|b| !b.fenced || (version >= 2 && decoded.include_fenced_brokers))
        .filter_map(|b| {
            let address = view.metadata.endpoint(b, &caller.listener)?;
            let (host, port) = address.rsplit_once(':')?;
            let mut entry = DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.registration.id.0))
                .with_host(StrBytes::from_string(host.to_string()))
                .with_port(port.parse().ok()?)
                .with_rack(b.registration.rack.clone().map(StrBytes::from_string));
            if version >= 2 {
                entry = entry.with_is_fenced(b.fenced);
            }
            Some(entry)
        })
        .collect();
    let mut answer = DescribeClusterResponse::default()
        .with_cluster_id(StrBytes::from_string(super::super::cluster_id(
            &view.metadata,
        )))
        .with_controller_id(BrokerId(view.controller_id))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(OPERATIONS_UNKNOWN);
    if version >= 1 {
        answer = answer.with_endpoint_type(1);
    }
    drop(view);
    Ok(Outcome::Respond(response::encode(
        request.header.correlation_id,
        version,
        &answer,
    )?))
}
