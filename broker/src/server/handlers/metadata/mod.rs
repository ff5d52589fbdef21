//! The Metadata API in one place: the handler (creating unknown topics
//! the client asked for, when auto-creation is allowed) and the sans-IO
//! answer built from the committed cluster metadata (`answer`).

mod answer;

use std::rc::Rc;

use super::access::Caller;
use super::{HandlerError, Outcome};
use crate::cluster::topics::NewTopic;
use crate::kafka::request::Request;
use crate::kafka::response::Frame;
use crate::server::shard::Shard;
use answer::Cluster;
use control::model::acls::Operation;

pub use answer::VERSIONS;

fn answer_metadata(
    shard: &Shard,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<answer::Answer, HandlerError> {
    let view = shard.cluster.view.borrow();
    let cluster_id = crate::server::cluster_id(&view.metadata);
    let may_describe = |topic: &str| caller.may_topic(Operation::Describe, topic);
    let cluster = Cluster {
        metadata: &view.metadata,
        cluster_id: &cluster_id,
        controller_id: view.controller_id,
        may_describe: &may_describe,
        listener: &caller.listener,
    };
    answer::answer(request, &cluster)
}

/// Answers Metadata, first creating unknown topics the client asked for
/// when both it and the broker allow auto-creation.
pub async fn metadata(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let answer = answer_metadata(shard, request, caller)?;
    if answer.missing_topics.is_empty()
        || !answer.allow_auto_create
        || !shard.cluster.config.auto_create_topics
    {
        return Ok(Outcome::Respond(Frame::of_body(&answer.response)));
    }
    let may_create = |name: &str| {
        caller.may_cluster(Operation::Create) || caller.may_topic(Operation::Create, name)
    };
    for name in answer.missing_topics.into_iter().filter(|n| may_create(n)) {
        let topic = NewTopic {
            name: name.clone(),
            partitions: -1,
            replication_factor: -1,
            configs: vec![],
        };
        if let Err((code, why)) = shard.cluster.create_topic(topic, false).await {
            // Another client may have created it meanwhile; anything else
            // shows in the answer as the topic's error.
            tracing::debug!(topic = %name, code, %why, "auto-creating a topic failed");
        }
    }
    let answer = answer_metadata(shard, request, caller)?;
    Ok(Outcome::Respond(Frame::of_body(&answer.response)))
}
