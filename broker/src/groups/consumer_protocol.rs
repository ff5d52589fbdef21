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

/// A member's assigned partitions by topic, or None if the bytes do not
/// parse (an empty assignment parses to nothing assigned).
pub fn assigned_partitions(assignment: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    if assignment.is_empty() {
        return Some(vec![]);
    }
    let mut r = Reader(assignment);
    r.i16()?; // version
    let count = r.count(2 + 4)?;
    let mut topics = Vec::with_capacity(count);
    for _ in 0..count {
        let topic = r.string()?;
        let partitions = r.count(4)?;
        let mut indexes = Vec::with_capacity(partitions);
        for _ in 0..partitions {
            indexes.push(r.i32()?);
        }
        topics.push((topic, indexes));
    }
    Some(topics)
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
        }
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
}
