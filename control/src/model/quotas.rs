//! Client quotas as Kafka's (KIP-13, KIP-124, KIP-546): byte rates a user,
//! a client id, or a user's client id may produce and fetch per broker,
//! and the share of the broker's request-handling time its requests may
//! take, with defaults for any user or client id, stored in the metadata
//! so every broker enforces the same ones. The most specific quota
//! applies, in Kafka's order of precedence.

use rkyv::{Archive, Deserialize, Serialize};

use crate::model::error::MetadataError;

/// The quota keys served.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// See [`PRODUCER_BYTE_RATE`].
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Percent of one request-handling thread (here: one shard's time)
/// over the quota window; 200 is two threads' worth (KIP-124).
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Every key served.
pub const QUOTA_KEYS: [&str; 3] = [PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE];
/// The most quota entities the metadata holds.
pub const QUOTA_ENTITIES_MAX: usize = 100_000;

/// One part of a quota's entity: a name, or the default for all.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord))]
pub enum EntityName {
    /// The default for every user (or client id) without its own.
    Default,
    /// This one.
    Named(String),
}

/// Who a quota is for: a user, a client id, or both.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord))]
pub struct QuotaEntity {
    /// The user part, if any.
    pub user: Option<EntityName>,
    /// The client id part, if any.
    pub client_id: Option<EntityName>,
}

impl QuotaEntity {
    /// Kafka's order of precedence for a connection of `user` with
    /// `client_id`: the most specific entity first.
    pub fn precedence(user: &str, client_id: &str) -> [QuotaEntity; 8] {
        let named = |s: &str| Some(EntityName::Named(s.to_string()));
        let default = || Some(EntityName::Default);
        let entity = |user, client_id| QuotaEntity { user, client_id };
        [
            entity(named(user), named(client_id)),
            entity(named(user), default()),
            entity(named(user), None),
            entity(default(), named(client_id)),
            entity(default(), default()),
            entity(default(), None),
            entity(None, named(client_id)),
            entity(None, default()),
        ]
    }
}

/// Checks a quota change before it is stored.
pub fn check_quota(
    entity: &QuotaEntity,
    key: &str,
    value: Option<u64>,
) -> Result<(), MetadataError> {
    let invalid = |why: String| Err(MetadataError::InvalidQuota(why));
    if entity.user.is_none() && entity.client_id.is_none() {
        return invalid("a quota is for a user, a client id, or both".into());
    }
    if !QUOTA_KEYS.contains(&key) {
        return invalid(format!(
            "{key}: the quotas served are {}",
            QUOTA_KEYS.join(", ")
        ));
    }
    if value == Some(0) {
        return invalid(format!("{key} of 0 would stop the client for good"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_specific_entity_comes_first() {
        let order = QuotaEntity::precedence("alice", "app");
        assert_eq!(
            order[0],
            QuotaEntity {
                user: Some(EntityName::Named("alice".into())),
                client_id: Some(EntityName::Named("app".into())),
            }
        );
        assert_eq!(order[2].client_id, None);
        assert_eq!(order[7].user, None);
        assert_eq!(order[7].client_id, Some(EntityName::Default));
    }

    #[test]
    fn unknown_keys_empty_entities_and_zero_rates_are_refused() {
        let alice = QuotaEntity {
            user: Some(EntityName::Named("alice".into())),
            client_id: None,
        };
        check_quota(&alice, PRODUCER_BYTE_RATE, Some(1024)).unwrap();
        check_quota(&alice, PRODUCER_BYTE_RATE, None).unwrap();
        assert!(check_quota(&alice, REQUEST_PERCENTAGE, Some(50)).is_ok());
        assert!(check_quota(&alice, "controller_mutation_rate", Some(50)).is_err());
        assert!(check_quota(&alice, CONSUMER_BYTE_RATE, Some(0)).is_err());
        let nobody = QuotaEntity {
            user: None,
            client_id: None,
        };
        assert!(check_quota(&nobody, PRODUCER_BYTE_RATE, Some(1)).is_err());
    }
}
