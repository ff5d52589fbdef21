//! What a failed command prints and its exit status, as rpk users expect:
//! the thing it was about, what went wrong in words, Kafka's name for the
//! error, and what to do (`group 'nosuch' does not exist
//! (GROUP_ID_NOT_FOUND): broker group list shows the groups`), never a bare
//! error code.
//!
//! Exit status: 0 done; 1 the cluster refused or failed the request (a
//! Kafka error, or a local file the command reads); 2 the command line is
//! wrong (clap's usage errors); 3 the cluster could not be reached.

pub use client::connection::error_name;
use client::connection::ClientError;
use kafka_protocol::ResponseError;

/// The cluster refused or failed the request.
pub const EXIT_REFUSED: i32 = 1;
/// The cluster could not be reached (no connection, no answer).
pub const EXIT_UNREACHABLE: i32 = 3;

/// A failed command: what to print, and the exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The message (printed after `broker: `).
    pub message: String,
    /// The process's exit status.
    pub exit_code: i32,
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure {
            message,
            exit_code: EXIT_REFUSED,
        }
    }
}

/// The words for `error` from a command about `subject` (`group
/// 'billing'`, if the command names one).
pub fn explain(subject: Option<&str>, error: &ClientError) -> Failure {
    let (code, detail) = match error {
        ClientError::Broker(code) => (*code, None),
        ClientError::Refused(code, detail) => (*code, Some(detail.as_str())),
        ClientError::Io(e) => {
            return Failure {
                message: format!(
                    "cannot reach the cluster: {e} (is a broker listening at --brokers?)"
                ),
                exit_code: EXIT_UNREACHABLE,
            }
        }
        other => return Failure::from(other.to_string()),
    };
    let (what, todo) = words(code);
    let about = subject.unwrap_or("the request");
    let mut message = format!("{about} {what} ({})", error_name(code));
    // A message may start with the name already (`named_error`).
    let name = error_name(code);
    let detail = detail.map(|d| d.strip_prefix(name.as_str()).unwrap_or(d));
    let detail = detail.map(|d| d.trim_start_matches(':').trim());
    if let Some(detail) = detail.filter(|d| !d.is_empty()) {
        message.push_str(&format!(": {detail}"));
    }
    if let Some(todo) = todo {
        message.push_str(&format!("; {todo}"));
    }
    let exit_code = match ResponseError::try_from_code(code) {
        Some(ResponseError::RequestTimedOut) => EXIT_UNREACHABLE,
        _ => EXIT_REFUSED,
    };
    Failure { message, exit_code }
}

/// What an error code means, after the thing it is about, and what to do.
fn words(code: i16) -> (&'static str, Option<&'static str>) {
    use ResponseError as E;
    let Some(error) = ResponseError::try_from_code(code) else {
        return ("failed without an error code", None);
    };
    match error {
        E::UnknownTopicOrPartition => {
            ("does not exist", Some("broker topic list shows the topics"))
        }
        E::GroupIdNotFound => (
            "does not exist",
            Some("broker group list shows the groups (share groups: broker share-group list)"),
        ),
        E::TopicAlreadyExists => ("already exists", Some("broker topic describe shows it")),
        E::NonEmptyGroup => (
            "still has members",
            Some("stop its consumers first, then ask again"),
        ),
        E::InvalidPartitions => ("cannot have that many partitions", None),
        E::InvalidReplicationFactor => (
            "cannot have that replication factor",
            Some("it needs at least that many live brokers (broker cluster status)"),
        ),
        E::InvalidConfig => ("was given a setting the broker refuses", None),
        E::InvalidRequest => ("was refused as invalid", None),
        E::PolicyViolation => ("was refused by the broker's policy", None),
        E::TopicAuthorizationFailed
        | E::GroupAuthorizationFailed
        | E::ClusterAuthorizationFailed
        | E::TransactionalIdAuthorizationFailed
        | E::DelegationTokenAuthorizationFailed => (
            "is not allowed to this user",
            Some("an administrator grants it with broker acl add (docs/security.md)"),
        ),
        E::SaslAuthenticationFailed => (
            "could not log in",
            Some("check --sasl-mechanism, --sasl-username and BROKER_SASL_PASSWORD"),
        ),
        E::RequestTimedOut => (
            "got no answer in time",
            Some("ask again; broker cluster status shows whether the quorum has a leader"),
        ),
        E::NotController
        | E::CoordinatorNotAvailable
        | E::CoordinatorLoadInProgress
        | E::LeaderNotAvailable
        | E::NotLeaderOrFollower
        | E::BrokerNotAvailable => (
            "cannot be served right now",
            Some("ask again in a moment (a leader or coordinator is moving)"),
        ),
        E::UnsupportedVersion => (
            "needs a request version the broker does not serve",
            Some("use a broker of the same release as this command"),
        ),
        E::NoReassignmentInProgress => ("is not being reassigned", None),
        E::ReassignmentInProgress => (
            "is being reassigned already",
            Some("broker topic reassignments shows the moves; cancel one with --cancel"),
        ),
        E::TransactionalIdNotFound => ("does not exist", Some("broker txn list shows them")),
        E::InvalidTxnState => ("is in no state for that", None),
        _ => ("was refused", None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_named_as_kafka_names_them() {
        assert_eq!(error_name(69), "GROUP_ID_NOT_FOUND");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(30), "GROUP_AUTHORIZATION_FAILED");
        assert_eq!(error_name(9999), "UNKNOWN_ERROR_CODE_9999");
    }

    #[test]
    fn an_error_names_its_thing_the_kafka_name_and_what_to_do() {
        let failure = explain(Some("group 'nosuch'"), &ClientError::Broker(69));
        assert_eq!(
            failure.message,
            "group 'nosuch' does not exist (GROUP_ID_NOT_FOUND); broker group list shows the \
             groups (share groups: broker share-group list)"
        );
        assert_eq!(failure.exit_code, EXIT_REFUSED);
        let refused = explain(
            Some("topic 'orders'"),
            &ClientError::Refused(40, "retention.ms: not a number".into()),
        );
        assert_eq!(
            refused.message,
            "topic 'orders' was given a setting the broker refuses (INVALID_CONFIG): \
             retention.ms: not a number"
        );
        let named = explain(
            None,
            &ClientError::Refused(48, "INVALID_TXN_STATE: no open transaction".into()),
        );
        assert_eq!(
            named.message,
            "the request is in no state for that (INVALID_TXN_STATE): no open transaction"
        );
        let down = explain(
            None,
            &ClientError::Io(std::io::ErrorKind::ConnectionRefused.into()),
        );
        assert_eq!(down.exit_code, EXIT_UNREACHABLE);
        assert!(
            down.message.starts_with("cannot reach the cluster"),
            "{down:?}"
        );
        assert_eq!(
            explain(None, &ClientError::Broker(7)).exit_code,
            EXIT_UNREACHABLE
        );
    }
}
