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
/// The command line is wrong (as clap's usage errors).
pub const EXIT_USAGE: i32 = 2;
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

/// A mistake in the command line that clap could not see (flags that go
/// together, a value that does not parse): exit 2.
pub fn usage(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_USAGE,
    }
}

/// The words for `error` from a command about `subject` (`group
/// 'billing'`, if the command names one).
pub fn explain(subject: Option<&str>, error: &ClientError) -> Failure {
    let (code, detail) = match error {
        ClientError::Broker(code) => (*code, None),
        ClientError::Refused(code, detail) => (*code, Some(detail.as_str())),
        // rustls reports a failed handshake as invalid data.
        ClientError::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Failure::from(format!(
                "TLS with the cluster failed: {e} (check --ssl-ca-location and the certificates)"
            ))
        }
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
    let name = error_name(code);
    let words = words(code, subject);
    let mut message = match subject {
        Some(subject) => format!("{subject} {} ({name})", words.what),
        None if words.about_the_request => format!("the request {} ({name})", words.what),
        None => format!("the cluster refused the request ({name})"),
    };
    // A message may carry the name already (`named_error`, `id: NAME`).
    let detail = detail.map(|d| {
        d.replace(&format!("{name}: "), "")
            .replace(&format!(": {name}"), "")
            .replace(&name, "")
    });
    let detail = detail.as_deref().map(|d| d.trim().trim_matches(':').trim());
    if let Some(detail) = detail.filter(|d| !d.is_empty()) {
        message.push_str(&format!(": {detail}"));
    }
    if let Some(todo) = words.todo {
        message.push_str(&format!("; {todo}"));
    }
    let exit_code = match ResponseError::try_from_code(code) {
        Some(ResponseError::RequestTimedOut) => EXIT_UNREACHABLE,
        _ => EXIT_REFUSED,
    };
    Failure { message, exit_code }
}

/// What an error code means after the thing it is about, and what to do.
struct Words {
    what: &'static str,
    todo: Option<&'static str>,
    /// Whether `what` reads right after "the request" when the command
    /// names no thing (else: "the cluster refused the request").
    about_the_request: bool,
}

/// The words for `code`, after `subject` (if the command names one).
fn words(code: i16, subject: Option<&str>) -> Words {
    use ResponseError as E;
    let thing = |what, todo| Words {
        what,
        todo,
        about_the_request: false,
    };
    let request = |what, todo| Words {
        what,
        todo,
        about_the_request: true,
    };
    let Some(error) = ResponseError::try_from_code(code) else {
        return request("failed without an error code", None);
    };
    match error {
        E::UnknownTopicOrPartition if subject.is_some_and(|s| s.starts_with("topic ")) => {
            thing("does not exist", Some("broker topic list shows the topics"))
        }
        E::UnknownTopicOrPartition => request(
            "names a topic or partition that does not exist",
            Some("broker topic list shows the topics"),
        ),
        E::GroupIdNotFound => thing(
            "does not exist",
            Some("broker group list shows the groups (share groups: broker share-group list)"),
        ),
        E::TopicAlreadyExists => thing("already exists", Some("broker topic describe shows it")),
        E::NonEmptyGroup => thing(
            "still has members",
            Some("stop its consumers first, then ask again"),
        ),
        E::InvalidPartitions => thing("cannot have that many partitions", None),
        E::InvalidReplicationFactor => thing(
            "cannot have that replication factor",
            Some("it needs at least that many live brokers (broker cluster status)"),
        ),
        E::InvalidConfig => thing("was given a setting the broker refuses", None),
        E::InvalidRequest => request("was refused as invalid", None),
        E::PolicyViolation => request("was refused by the broker's policy", None),
        E::TopicAuthorizationFailed
        | E::GroupAuthorizationFailed
        | E::ClusterAuthorizationFailed
        | E::TransactionalIdAuthorizationFailed
        | E::DelegationTokenAuthorizationFailed => request(
            "is not allowed to this user",
            Some("an administrator grants it with broker acl add (docs/security.md)"),
        ),
        E::SaslAuthenticationFailed => Words {
            what: "could not log in",
            todo: Some("check --sasl-mechanism, --sasl-username and BROKER_SASL_PASSWORD"),
            about_the_request: false,
        },
        E::RequestTimedOut => request(
            "got no answer in time",
            Some("ask again; broker cluster status shows whether the quorum has a leader"),
        ),
        E::NotController
        | E::CoordinatorNotAvailable
        | E::CoordinatorLoadInProgress
        | E::LeaderNotAvailable
        | E::NotLeaderOrFollower
        | E::BrokerNotAvailable => request(
            "cannot be served right now",
            Some("ask again in a moment (a leader or coordinator is moving)"),
        ),
        E::UnsupportedVersion => request(
            "needs a request version the broker does not serve",
            Some("use a broker of the same release as this command"),
        ),
        E::NoReassignmentInProgress => thing("is not being reassigned", None),
        E::ReassignmentInProgress => thing(
            "is being reassigned already",
            Some("broker topic reassignments shows the moves; cancel one with --cancel"),
        ),
        E::TransactionalIdNotFound => thing("does not exist", Some("broker txn list shows them")),
        E::InvalidTxnState => thing("is in no state for that", None),
        _ => request("was refused", None),
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
            "the cluster refused the request (INVALID_TXN_STATE): no open transaction"
        );
        let doubled = explain(
            None,
            &ClientError::Refused(105, "nosuch: TRANSACTIONAL_ID_NOT_FOUND".into()),
        );
        assert_eq!(
            doubled.message,
            "the cluster refused the request (TRANSACTIONAL_ID_NOT_FOUND): nosuch; broker txn \
             list shows them"
        );
        let elsewhere = explain(Some("group 'g'"), &ClientError::Broker(3));
        assert!(
            elsewhere.message.starts_with(
                "group 'g' names a topic or partition that does not exist \
                 (UNKNOWN_TOPIC_OR_PARTITION)"
            ),
            "{elsewhere:?}"
        );
        let tls = explain(
            None,
            &ClientError::Io(std::io::ErrorKind::InvalidData.into()),
        );
        assert_eq!(tls.exit_code, EXIT_REFUSED);
        assert!(
            tls.message.starts_with("TLS with the cluster failed"),
            "{tls:?}"
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
