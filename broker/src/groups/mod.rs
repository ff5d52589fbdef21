//! Consumer groups. Built so far: the membership state machine of one
//! group (join, sync, heartbeat, leave, session and rebalance timeouts,
//! static membership), sans-IO and tested on its own. Not yet wired: the
//! Kafka group APIs, the coordinator's placement on `__consumer_offsets`
//! partitions and the offsets stored there (the consumer groups issue).

pub mod membership;
