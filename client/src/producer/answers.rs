//! A Produce answer's partitions, found by topic name or id and index.

use std::collections::HashMap;

use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

/// The topic ids a Produce request named its topics by, kept until its
/// answer: the answer (v13 names topics by id only) is matched against
/// the id sent, not the one the cluster's metadata holds by then (a
/// topic deleted and created again meanwhile has a new id).
#[derive(Debug, Default)]
pub(super) struct SentIds(HashMap<String, uuid::Uuid>);

impl SentIds {
    pub(super) fn of(request: &ProduceRequest) -> SentIds {
        let ids = request
            .topic_data
            .iter()
            .filter(|topic| !topic.topic_id.is_nil())
            .map(|topic| (topic.name.to_string(), topic.topic_id));
        SentIds(ids.collect())
    }

    /// The id `topic` was sent under, if it was sent under one.
    pub(super) fn get(&self, topic: &str) -> Option<uuid::Uuid> {
        self.0.get(topic).copied()
    }
}

/// A Produce answer's partitions, found by topic name or id and index in
/// one lookup each: a request of a thousand partitions' batches searched
/// linearly per batch took about half a million comparisons.
pub(super) struct Answers<'a> {
    by_name: HashMap<(&'a str, i32), &'a PartitionProduceResponse>,
    by_id: HashMap<(uuid::Uuid, i32), &'a PartitionProduceResponse>,
}

impl<'a> Answers<'a> {
    pub(super) fn of(response: &'a ProduceResponse) -> Answers<'a> {
        let mut answers = Answers {
            by_name: HashMap::new(),
            by_id: HashMap::new(),
        };
        for topic in &response.responses {
            for partition in &topic.partition_responses {
                // The first answer for a partition under a name (or an id)
                // counts. A partition answered under both its name and its
                // id (no broker does so) is found by its name.
                let name = (topic.name.as_str(), partition.index);
                answers.by_name.entry(name).or_insert(partition);
                // v13 names topics by id only; a nil id names none.
                if !topic.topic_id.is_nil() {
                    let id = (topic.topic_id, partition.index);
                    answers.by_id.entry(id).or_insert(partition);
                }
            }
        }
        answers
    }

    /// The answer for `topic` (whose id is `id`, if known) and `partition`.
    pub(super) fn find(
        &self,
        topic: &str,
        id: Option<uuid::Uuid>,
        partition: i32,
    ) -> Option<&'a PartitionProduceResponse> {
        let by_name = self.by_name.get(&(topic, partition));
        let by_id = || id.and_then(|id| self.by_id.get(&(id, partition)));
        by_name.or_else(by_id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_request::TopicProduceData;
    use kafka_protocol::messages::produce_response::TopicProduceResponse;
    use kafka_protocol::messages::TopicName;

    fn partition(index: i32, base_offset: i64) -> PartitionProduceResponse {
        PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(base_offset)
    }

    fn topic(
        name: &str,
        id: uuid::Uuid,
        partitions: Vec<PartitionProduceResponse>,
    ) -> TopicProduceResponse {
        TopicProduceResponse::default()
            .with_name(TopicName(name.to_string().into()))
            .with_topic_id(id)
            .with_partition_responses(partitions)
    }

    #[test]
    fn answers_are_found_by_name_or_by_id_and_index() {
        let id = uuid::Uuid::from_u128(7);
        let response = ProduceResponse::default().with_responses(vec![
            topic(
                "a",
                uuid::Uuid::nil(),
                vec![partition(0, 10), partition(1, 11)],
            ),
            // v13: named by id only.
            topic("", id, vec![partition(0, 20), partition(2, 22)]),
        ]);
        let answers = Answers::of(&response);
        let base = |topic: &str, id: Option<uuid::Uuid>, index: i32| {
            answers.find(topic, id, index).map(|p| p.base_offset)
        };
        assert_eq!(base("a", None, 1), Some(11));
        assert_eq!(base("b", Some(id), 2), Some(22));
        assert_eq!(
            base("b", Some(id), 1),
            None,
            "no such partition under that id"
        );
        assert_eq!(base("b", None, 0), None, "b's id is not known");
        // A nil id names no topic: "a"'s answers are not b's.
        assert_eq!(base("b", Some(uuid::Uuid::nil()), 0), None);
        assert_eq!(base("a", None, 2), None);
    }

    #[test]
    fn the_first_answer_for_a_partition_counts() {
        let response = ProduceResponse::default().with_responses(vec![
            topic("a", uuid::Uuid::nil(), vec![partition(0, 1)]),
            topic("a", uuid::Uuid::nil(), vec![partition(0, 2)]),
        ]);
        let answers = Answers::of(&response);
        assert_eq!(answers.find("a", None, 0).map(|p| p.base_offset), Some(1));
    }

    #[test]
    fn an_answer_is_matched_by_the_id_its_request_was_sent_under() {
        let (old, new) = (uuid::Uuid::from_u128(1), uuid::Uuid::from_u128(2));
        let data = |name: &str, id| {
            TopicProduceData::default()
                .with_name(TopicName(name.to_string().into()))
                .with_topic_id(id)
        };
        let request = ProduceRequest::default().with_topic_data(vec![
            data("t", old),
            data("unnamed-by-id", uuid::Uuid::nil()),
        ]);
        let sent = SentIds::of(&request);
        assert_eq!(sent.get("t"), Some(old));
        assert_eq!(sent.get("unnamed-by-id"), None, "a nil id is no id");
        assert_eq!(sent.get("other"), None);
        // The topic was created again (id `new`) before the answer came,
        // which names the partition by the id sent.
        let response =
            ProduceResponse::default().with_responses(vec![topic("", old, vec![partition(0, 5)])]);
        let answers = Answers::of(&response);
        assert_eq!(
            answers.find("t", sent.get("t"), 0).map(|p| p.base_offset),
            Some(5)
        );
        assert!(answers.find("t", Some(new), 0).is_none());
    }

    /// Through the producer: a batch whose request named its topic by id
    /// is settled by the answer under that id, though the producer's
    /// metadata no longer holds it (here: holds none, as after the
    /// topic's deletion).
    #[test]
    fn a_producer_settles_a_batch_by_the_id_its_request_named() {
        use crate::cluster::Cluster;
        use crate::producer::queues::Batch;
        use crate::producer::{Producer, ProducerConfig, Unsettled, Waiter};

        let executor = glommio::LocalExecutorBuilder::default().make().unwrap();
        executor.run(async {
            let unused = "127.0.0.1:9".parse().unwrap();
            let producer = Producer::new(Cluster::new(unused, "t"), ProducerConfig::default());
            let sent_under = uuid::Uuid::from_u128(9);
            let request =
                ProduceRequest::default().with_topic_data(vec![TopicProduceData::default()
                    .with_name(TopicName("t".to_string().into()))
                    .with_topic_id(sent_under)]);
            let (tell, told) = futures::channel::oneshot::channel();
            let mut batch = Batch::with_capacity(0, 0);
            batch.waiters.push(Waiter::Channel(tell));
            producer.queues.borrow_mut().batches.queue("t", 0).sent = 1;
            // v13: the answer names the topic by id only.
            let response = ProduceResponse::default().with_responses(vec![topic(
                "",
                sent_under,
                vec![partition(0, 42)],
            )]);
            let retry = producer.settle(
                vec![(("t".to_string(), 0), batch)],
                &SentIds::of(&request),
                Some(&response),
                &mut Unsettled::default(),
            );
            assert!(retry.is_empty());
            let delivered = told.await.unwrap().expect("acknowledged, not failed");
            assert_eq!(delivered.offset, 42);
        });
    }
}
