//! What AlterConfigs and IncrementalAlterConfigs ask of one config key,
//! and how a resource's change is refused: shared by topic and group
//! configs.

use crate::kafka::Code;

/// How one key changes.
pub enum Change {
    /// To this value.
    Set(String),
    /// Back to its default.
    Reset,
}

/// A refusal: its code and why.
pub type Failure = (Code, String);
