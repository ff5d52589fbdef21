//! Admin calls for SASL/SCRAM users: DescribeUserScramCredentials and
//! AlterUserScramCredentials (KIP-554). The password is salted and
//! iterated here; only the salted password goes to the broker, as Kafka's
//! clients do.

use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::connection::ClientError;
use crate::scram::{new_nonce, unbase64, Mechanism};

/// Kafka's code for a SCRAM mechanism.
fn code(mechanism: Mechanism) -> i8 {
    match mechanism {
        Mechanism::Sha256 => 1,
        Mechanism::Sha512 => 2,
    }
}

/// A user's credential as the broker describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserCredential {
    /// The user.
    pub user: String,
    /// Its mechanisms and their iterations.
    pub mechanisms: Vec<(Option<Mechanism>, i32)>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl Cluster {
    /// Sets `user`'s password for `mechanism` (creating the user).
    pub async fn set_scram_password(
        &self,
        user: &str,
        mechanism: Mechanism,
        password: &str,
        iterations: u32,
    ) -> Result<(), ClientError> {
        let salt = unbase64(&new_nonce()).expect("our own base64");
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
        let upsertion = ScramCredentialUpsertion::default()
            .with_name(text(user))
            .with_mechanism(code(mechanism))
            .with_iterations(iterations as i32)
            .with_salt(salt.into())
            .with_salted_password(salted.into());
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
        self.alter_users(&request).await
    }

    /// Removes `user`'s credential for `mechanism`.
    pub async fn delete_scram_credential(
        &self,
        user: &str,
        mechanism: Mechanism,
    ) -> Result<(), ClientError> {
        let deletion = ScramCredentialDeletion::default()
            .with_name(text(user))
            .with_mechanism(code(mechanism));
        let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![deletion]);
        self.alter_users(&request).await
    }

    async fn alter_users(
        &self,
        request: &AlterUserScramCredentialsRequest,
    ) -> Result<(), ClientError> {
        let response = self.call_any(request).await?;
        for result in &response.results {
            if result.error_code != 0 {
                let message = result.error_message.as_ref().map(|m| m.to_string());
                return Err(ClientError::Refused(
                    result.error_code,
                    message.unwrap_or_default(),
                ));
            }
        }
        Ok(())
    }

    /// The users with SCRAM credentials (all of them when `users` is None).
    pub async fn describe_users(
        &self,
        users: Option<&[&str]>,
    ) -> Result<Vec<UserCredential>, ClientError> {
        let names = users.map(|u| {
            u.iter()
                .map(|n| UserName::default().with_name(text(n)))
                .collect()
        });
        let request = DescribeUserScramCredentialsRequest::default().with_users(names);
        let response = self.call_any(&request).await?;
        if response.error_code != 0 {
            let message = response.error_message.map(|m| m.to_string());
            return Err(ClientError::Refused(
                response.error_code,
                message.unwrap_or_default(),
            ));
        }
        let mut described = Vec::new();
        for result in response.results {
            if result.error_code != 0 {
                let message = result
                    .error_message
                    .map(|m| m.to_string())
                    .unwrap_or_default();
                return Err(ClientError::Refused(
                    result.error_code,
                    format!("{}: {message}", result.user),
                ));
            }
            let mechanisms = result
                .credential_infos
                .iter()
                .map(|c| {
                    let mechanism = [Mechanism::Sha256, Mechanism::Sha512]
                        .into_iter()
                        .find(|m| code(*m) == c.mechanism);
                    (mechanism, c.iterations)
                })
                .collect();
            described.push(UserCredential {
                user: result.user.to_string(),
                mechanisms,
            });
        }
        Ok(described)
    }
}
