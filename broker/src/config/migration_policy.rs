//! Which online conversions of a group with members between the classic
//! and the consumer protocol the broker makes (Kafka's
//! `group.consumer.migration.policy`). Empty groups convert either way
//! whatever the policy.

/// The policy's values, Kafka's names.
pub const POLICIES: [&str; 4] = ["bidirectional", "upgrade", "downgrade", "disabled"];

/// What the policy allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationPolicy {
    /// A classic group with members becomes a consumer group when a
    /// consumer protocol member joins it.
    pub upgrade: bool,
    /// A consumer group whose last consumer protocol member leaves
    /// becomes a classic group again; off, classic members may not join
    /// a consumer group with members at all.
    pub downgrade: bool,
}

impl MigrationPolicy {
    /// The policy named `name` (case as Kafka: any), or None.
    pub fn parse(name: &str) -> Option<MigrationPolicy> {
        let (upgrade, downgrade) = match name.to_ascii_lowercase().as_str() {
            "bidirectional" => (true, true),
            "upgrade" => (true, false),
            "downgrade" => (false, true),
            "disabled" => (false, false),
            _ => return None,
        };
        Some(MigrationPolicy { upgrade, downgrade })
    }

    /// Whether classic members may join a consumer group with members
    /// (Kafka refuses them only when migration is disabled).
    pub fn classic_members_join(self) -> bool {
        self.upgrade || self.downgrade
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_names_parse_in_any_case_and_nothing_else_does() {
        let both = MigrationPolicy::parse("BIDIRECTIONAL").unwrap();
        assert!(both.upgrade && both.downgrade);
        let up = MigrationPolicy::parse("upgrade").unwrap();
        assert!(up.upgrade && !up.downgrade && up.classic_members_join());
        let down = MigrationPolicy::parse("downgrade").unwrap();
        assert!(!down.upgrade && down.downgrade);
        let off = MigrationPolicy::parse("disabled").unwrap();
        assert!(!off.upgrade && !off.downgrade && !off.classic_members_join());
        assert_eq!(MigrationPolicy::parse("sideways"), None);
        assert!(POLICIES.iter().all(|p| MigrationPolicy::parse(p).is_some()));
    }
}
