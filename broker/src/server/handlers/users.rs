//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554):
//! the SASL/SCRAM users in the metadata. A client sends the salted
//! password, never the password; the broker stores the keys derived from
//! it (see `sasl`), through the controller, so every broker knows the
//! change once it commits.

use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use control::service::ControllerRequest;
use control::ScramMechanism;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::access::{Caller, CLUSTER_DENIED};
use super::{respond, HandlerError, Outcome};
use crate::cluster::controller::controller_error;
use crate::kafka::bounds::{
    check_alter_user_scram_credentials, check_describe_user_scram_credentials,
};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::Code;
use crate::server::shard::Shard;

/// DescribeUserScramCredentials versions served.
pub const DESCRIBE_VERSIONS: (i16, i16) = (0, 0);
/// AlterUserScramCredentials versions served.
pub const ALTER_VERSIONS: (i16, i16) = (0, 0);

type Failure = (Code, String);

/// Answers DescribeUserScramCredentials: each user's mechanisms and
/// iterations (never a key), all users when none are named.
pub async fn describe(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: DescribeUserScramCredentialsRequest =
        checked(request, check_describe_user_scram_credentials)?;
    if !caller.may_cluster(control::model::acls::Operation::Describe) {
        let refused = DescribeUserScramCredentialsResponse::default()
            .with_error_code(CLUSTER_DENIED)
            .with_error_message(Some(StrBytes::from_static_str(
                "needs DESCRIBE on the cluster",
            )));
        return respond(request, &refused);
    }
    let view = shard.cluster.view.borrow();
    let stored = &view.metadata.scram_credentials;
    let named: Vec<String> = match &decoded.users {
        Some(users) => users.iter().map(|u| u.name.to_string()).collect(),
        None => stored.keys().cloned().collect(),
    };
    let mut seen = std::collections::HashMap::new();
    for user in &named {
        *seen.entry(user.as_str()).or_insert(0) += 1;
    }
    let results = named
        .iter()
        .map(|user| {
            let result = DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user.clone()));
            if seen[user.as_str()] > 1 {
                return failed(
                    result,
                    ResponseError::DuplicateResource.code(),
                    "named twice",
                );
            }
            let Some(by_mechanism) = stored.get(user) else {
                return failed(
                    result,
                    ResponseError::ResourceNotFound.code(),
                    "no such user",
                );
            };
            let infos = by_mechanism
                .values()
                .map(|c| {
                    CredentialInfo::default()
                        .with_mechanism(c.mechanism.code())
                        .with_iterations(c.iterations as i32)
                })
                .collect();
            result.with_credential_infos(infos)
        })
        .collect();
    respond(
        request,
        &DescribeUserScramCredentialsResponse::default().with_results(results),
    )
}

fn failed(
    result: DescribeUserScramCredentialsResult,
    code: Code,
    message: &str,
) -> DescribeUserScramCredentialsResult {
    result
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message.to_string())))
}

/// One change asked for.
enum Change {
    Delete(ScramMechanism),
    Set {
        mechanism: ScramMechanism,
        iterations: i32,
        salt: Bytes,
        salted_password: Bytes,
    },
}

/// Answers AlterUserScramCredentials: per user, every change is checked
/// before any is made, then each goes to the controller in order.
pub async fn alter(
    shard: &Rc<Shard>,
    request: &Request,
    caller: &Caller<'_>,
) -> Result<Outcome, HandlerError> {
    let decoded: AlterUserScramCredentialsRequest =
        checked(request, check_alter_user_scram_credentials)?;
    let allowed = caller.may_cluster(control::model::acls::Operation::Alter);
    let mut by_user: BTreeMap<String, Vec<Result<Change, i8>>> = BTreeMap::new();
    for d in &decoded.deletions {
        let change = ScramMechanism::from_code(d.mechanism)
            .map(Change::Delete)
            .ok_or(d.mechanism);
        by_user.entry(d.name.to_string()).or_default().push(change);
    }
    for u in &decoded.upsertions {
        let change = ScramMechanism::from_code(u.mechanism)
            .map(|mechanism| Change::Set {
                mechanism,
                iterations: u.iterations,
                salt: u.salt.clone(),
                salted_password: u.salted_password.clone(),
            })
            .ok_or(u.mechanism);
        by_user.entry(u.name.to_string()).or_default().push(change);
    }
    let mut results = Vec::new();
    for (user, changes) in by_user {
        let outcome = match allowed {
            true => alter_user(shard, &user, changes).await,
            false => Err((CLUSTER_DENIED, "needs ALTER on the cluster".to_string())),
        };
        let (code, message) = match outcome {
            Ok(()) => (0, None),
            Err((code, message)) => (code, Some(StrBytes::from_string(message))),
        };
        results.push(
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user))
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    respond(
        request,
        &AlterUserScramCredentialsResponse::default().with_results(results),
    )
}

async fn alter_user(
    shard: &Shard,
    user: &str,
    changes: Vec<Result<Change, i8>>,
) -> Result<(), Failure> {
    let requests = controller_requests(user, changes)?;
    for request in requests {
        let applied = request.clone();
        shard
            .cluster
            .call_controller(request)
            .await
            .map_err(|e| controller_error(&e))?;
        // The next request on this connection sees the change.
        shard.cluster.catch_up(|m| shows(m, &applied)).await;
    }
    Ok(())
}

/// Whether `metadata` holds the change `request` made.
fn shows(metadata: &control::Metadata, request: &ControllerRequest) -> bool {
    match request {
        ControllerRequest::SetScramCredential(c) => {
            metadata.scram_credential(&c.user, c.mechanism).ok() == Some(c)
        }
        ControllerRequest::DeleteScramCredential { user, mechanism } => {
            metadata.scram_credential(user, *mechanism).is_err()
        }
        _ => true,
    }
}

/// The controller requests for one user's changes, or why none is made.
fn controller_requests(
    user: &str,
    changes: Vec<Result<Change, i8>>,
) -> Result<Vec<ControllerRequest>, Failure> {
    control::model::credentials::check_user_name(user)
        .map_err(|e| (ResponseError::UnacceptableCredential.code(), e.to_string()))?;
    let mut mechanisms = Vec::new();
    let mut requests = Vec::new();
    for change in changes {
        let change = change.map_err(|code| {
            (
                ResponseError::UnsupportedSaslMechanism.code(),
                format!("mechanism {code} is not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)"),
            )
        })?;
        let mechanism = match &change {
            Change::Delete(m) | Change::Set { mechanism: m, .. } => *m,
        };
        if mechanisms.contains(&mechanism) {
            return Err((
                ResponseError::DuplicateResource.code(),
                format!("{mechanism} named twice for {user}"),
            ));
        }
        mechanisms.push(mechanism);
        requests.push(request_for(user, change)?);
    }
    Ok(requests)
}

fn request_for(user: &str, change: Change) -> Result<ControllerRequest, Failure> {
    match change {
        Change::Delete(mechanism) => Ok(ControllerRequest::DeleteScramCredential {
            user: user.to_string(),
            mechanism,
        }),
        Change::Set {
            mechanism,
            iterations,
            salt,
            salted_password,
        } => {
            let unacceptable = |why: String| (ResponseError::UnacceptableCredential.code(), why);
            if salted_password.len() != mechanism.key_len() {
                return Err(unacceptable(format!(
                    "a {mechanism} salted password is {} bytes",
                    mechanism.key_len()
                )));
            }
            let iterations = u32::try_from(iterations)
                .map_err(|_| unacceptable(format!("{iterations} iterations")))?;
            let credential = crate::security::sasl::credential_from_salted(
                user,
                mechanism,
                salt.to_vec(),
                iterations,
                &salted_password,
            );
            control::model::credentials::check_credential(&credential)
                .map_err(|e| unacceptable(e.to_string()))?;
            Ok(ControllerRequest::SetScramCredential(credential))
        }
    }
}
