//! The parts of the "consumer" protocol's opaque member metadata the
//! broker reads: a member's subscribed topics (OffsetDelete refuses to
//! delete offsets of a topic a live group consumes) and its assigned
//! partitions (`broker group describe`).
//!
//! Clients write these bytes; they are parsed with every count checked
//! against the bytes that remain (the codec would reserve by the count).
//! Only the leading fields, the same in every version, are read.

/// A member's subscribed topics, or None if the bytes do not parse.
pub fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader(metadata);
    r.i16()?; // version
    r.strings()
}

/// Partitions by topic name.
pub type ByTopic = Vec<(String, Vec<i32>)>;

/// A member's assigned partitions by topic, or None if the bytes do not
/// parse (an empty assignment parses to nothing assigned).
pub fn assigned_partitions(assignment: &[u8]) -> Option<ByTopic> {
    read_assignment(assignment).map(|(topics, _)| topics)
}

/// An assignment's partitions, and whether it carries user data (a
/// custom assignor's, which the broker cannot carry on).
pub fn read_assignment(assignment: &[u8]) -> Option<(ByTopic, bool)> {
    if assignment.is_empty() {
        return Some((vec![], false));
    }
    let mut r = Reader(assignment);
    r.i16()?; // version
    let topics = r.topic_partitions()?;
    // Version 0 may end here in old clients' bytes: no user data.
    let user_data = match r.0.is_empty() {
        true => false,
        false => r.nullable_bytes()?.is_some_and(|b| !b.is_empty()),
    };
    Some((topics, user_data))
}

/// A consumer's subscription (ConsumerProtocolSubscription, versions 0-3;
/// a newer version's leading fields are these).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subscription {
    /// Its version.
    pub version: i16,
    /// The topics.
    pub topics: Vec<String>,
    /// The partitions it owns (version 1+), by topic.
    pub owned: Vec<(String, Vec<i32>)>,
    /// Its rack (version 3+).
    pub rack: Option<String>,
}

/// A subscription, or None if the bytes do not parse.
pub fn subscription(metadata: &[u8]) -> Option<Subscription> {
    let mut r = Reader(metadata);
    let version = r.i16()?;
    let topics = r.strings()?;
    let mut read = Subscription {
        version,
        topics,
        ..Subscription::default()
    };
    if version < 1 || r.0.is_empty() {
        return Some(read);
    }
    r.nullable_bytes()?; // user data
    read.owned = r.topic_partitions()?;
    if version >= 2 {
        r.i32()?; // generation
    }
    if version >= 3 {
        read.rack = r.nullable_string()?;
    }
    Some(read)
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    /// An array count whose elements take at least `min_element` bytes each.
    fn count(&mut self, min_element: usize) -> Option<usize> {
        let n = usize::try_from(self.i32()?).ok()?;
        (n.checked_mul(min_element)? <= self.0.len()).then_some(n)
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.i16()?).ok()?;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }

    fn strings(&mut self) -> Option<Vec<String>> {
        let count = self.count(2)?;
        (0..count).map(|_| self.string()).collect()
    }

    fn nullable_string(&mut self) -> Option<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Some(None);
        }
        let raw = self.take(len as usize)?;
        String::from_utf8(raw.to_vec()).ok().map(Some)
    }

    fn nullable_bytes(&mut self) -> Option<Option<&[u8]>> {
        let len = self.i32()?;
        if len < 0 {
            return Some(None);
        }
        self.take(len as usize).map(Some)
    }

    /// Topics with their partitions: [topic, [partition]].
    fn topic_partitions(&mut self) -> Option<Vec<(String, Vec<i32>)>> {
        let count = self.count(2 + 4)?;
        let mut topics = Vec::with_capacity(count);
        for _ in 0..count {
            let topic = self.string()?;
            let partitions = self.count(4)?;
            let indexes = (0..partitions).map(|_| self.i32()).collect::<Option<_>>()?;
            topics.push((topic, indexes));
        }
        Some(topics)
    }
}

/// A subscription (version 0) to `topics`, as a consumer's JoinGroup
/// metadata carries it (the HTTP API's members write these).
pub fn encode_subscription(topics: &[String]) -> Vec<u8> {
    let mut out = 0i16.to_be_bytes().to_vec();
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for topic in topics {
        put_string(&mut out, topic);
    }
    out.extend_from_slice(&(-1i32).to_be_bytes()); // no user data
    out
}

/// An assignment (version 0), as SyncGroup carries it to a member.
pub fn encode_assignment(topics: &[(String, Vec<i32>)]) -> Vec<u8> {
    encode_assignment_at(0, topics)
}

/// An assignment at `version` (0-3 share one layout), no user data.
pub fn encode_assignment_at(version: i16, topics: &[(String, Vec<i32>)]) -> Vec<u8> {
    let mut out = version.to_be_bytes().to_vec();
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for (topic, partitions) in topics {
        put_string(&mut out, topic);
        out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for p in partitions {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&(-1i32).to_be_bytes()); // no user data
    out
}

fn put_string(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as i16).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
}

/// Kafka's range assignor: for each topic, its partitions in contiguous
/// ranges over the members subscribed to it (by member id), the first
/// ones taking one more when they do not divide evenly. `partitions`
/// gives a topic's partition count (None: unknown, skipped).
pub fn assign_range(
    members: &[(String, Vec<String>)],
    partitions: impl Fn(&str) -> Option<u32>,
) -> std::collections::BTreeMap<String, Vec<(String, Vec<i32>)>> {
    let mut out: std::collections::BTreeMap<String, Vec<(String, Vec<i32>)>> = members
        .iter()
        .map(|(m, _)| (m.clone(), Vec::new()))
        .collect();
    let topics: std::collections::BTreeSet<&String> = members.iter().flat_map(|(_, t)| t).collect();
    for topic in topics {
        let Some(count) = partitions(topic) else {
            continue;
        };
        let mut subscribed: Vec<&String> = members
            .iter()
            .filter(|(_, t)| t.contains(topic))
            .map(|(m, _)| m)
            .collect();
        subscribed.sort();
        let (each, extra) = (
            count / subscribed.len() as u32,
            count % subscribed.len() as u32,
        );
        let mut next = 0;
        for (i, member) in subscribed.into_iter().enumerate() {
            let take = each + u32::from((i as u32) < extra);
            let range: Vec<i32> = (next..next + take).map(|p| p as i32).collect();
            next += take;
            if !range.is_empty() {
                out.get_mut(member)
                    .expect("every member has an entry")
                    .push((topic.clone(), range));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
    use kafka_protocol::messages::{
        ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn name(s: &'static str) -> StrBytes {
        StrBytes::from_static_str(s)
    }

    #[test]
    fn what_clients_write_is_read_back() {
        for version in 0..=3i16 {
            let subscription =
                ConsumerProtocolSubscription::default().with_topics(vec![name("a"), name("b")]);
            let mut out = BytesMut::new();
            out.extend_from_slice(&version.to_be_bytes());
            subscription.encode(&mut out, version).unwrap();
            assert_eq!(
                subscribed_topics(&out),
                Some(vec!["a".to_string(), "b".to_string()])
            );
            let owned = vec![TopicPartition::default()
                .with_topic(TopicName(name("a")))
                .with_partitions(vec![1])];
            let full = subscription
                .clone()
                .with_owned_partitions(owned_partitions(owned))
                .with_rack_id(Some(name("r")));
            let mut out = BytesMut::new();
            out.extend_from_slice(&version.to_be_bytes());
            full.encode(&mut out, version).unwrap();
            let read = super::subscription(&out).unwrap();
            assert_eq!(read.topics, vec!["a".to_string(), "b".to_string()]);
            let expected_owned = match version {
                0 => vec![],
                _ => vec![("a".to_string(), vec![1])],
            };
            assert_eq!(read.owned, expected_owned, "version {version}");
            let expected_rack = (version >= 3).then(|| "r".to_string());
            assert_eq!(read.rack, expected_rack, "version {version}");
            let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
                TopicPartition::default()
                    .with_topic(TopicName(name("a")))
                    .with_partitions(vec![0, 2]),
            ]);
            let mut out = BytesMut::new();
            out.extend_from_slice(&version.to_be_bytes());
            assignment.encode(&mut out, version).unwrap();
            assert_eq!(
                assigned_partitions(&out),
                Some(vec![("a".to_string(), vec![0, 2])])
            );
            assert_eq!(read_assignment(&out).map(|(_, user)| user), Some(false));
            let custom = assignment.with_user_data(Some(bytes::Bytes::from_static(b"x")));
            let mut out = BytesMut::new();
            out.extend_from_slice(&version.to_be_bytes());
            custom.encode(&mut out, version).unwrap();
            assert_eq!(read_assignment(&out).map(|(_, user)| user), Some(true));
            let ours = encode_assignment_at(version, &[("a".to_string(), vec![0, 2])]);
            let mut theirs = BytesMut::new();
            theirs.extend_from_slice(&version.to_be_bytes());
            let plain = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
                TopicPartition::default()
                    .with_topic(TopicName(name("a")))
                    .with_partitions(vec![0, 2]),
            ]);
            plain.encode(&mut theirs, version).unwrap();
            assert_eq!(ours, theirs.to_vec(), "version {version}");
        }
    }

    /// The subscription's owned partitions, from the assignment's type.
    fn owned_partitions(
        topics: Vec<TopicPartition>,
    ) -> Vec<kafka_protocol::messages::consumer_protocol_subscription::TopicPartition> {
        use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as Owned;
        let each = topics.into_iter().map(|t| {
            Owned::default()
                .with_topic(t.topic)
                .with_partitions(t.partitions)
        });
        each.collect()
    }

    #[test]
    fn forged_counts_and_garbage_parse_to_none() {
        let mut forged = vec![0, 0];
        forged.extend_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(subscribed_topics(&forged), None);
        assert_eq!(assigned_partitions(&forged), None);
        assert_eq!(subscribed_topics(&[1]), None);
        assert_eq!(assigned_partitions(&[]), Some(vec![]));
        assert_eq!(assigned_partitions(&[0, 0, 0, 0, 0, 1, 0, 5, b'x']), None);
    }

    #[test]
    fn encoded_subscriptions_and_assignments_read_back_and_ranges_split_like_kafkas() {
        let topics = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            subscribed_topics(&encode_subscription(&topics)),
            Some(topics)
        );
        let assignment = vec![("a".to_string(), vec![0, 1]), ("b".to_string(), vec![2])];
        assert_eq!(
            assigned_partitions(&encode_assignment(&assignment)),
            Some(assignment)
        );
        // 5 partitions over 2 members: 3 and 2; a topic only one wants goes whole to it.
        let members = vec![
            ("m2".to_string(), vec!["t".to_string()]),
            ("m1".to_string(), vec!["t".to_string(), "solo".to_string()]),
        ];
        let counts = |t: &str| match t {
            "t" => Some(5),
            "solo" => Some(2),
            _ => None,
        };
        let assigned = assign_range(&members, counts);
        assert_eq!(
            assigned["m1"],
            vec![
                ("solo".to_string(), vec![0, 1]),
                ("t".to_string(), vec![0, 1, 2])
            ]
        );
        assert_eq!(assigned["m2"], vec![("t".to_string(), vec![3, 4])]);
    }
}
