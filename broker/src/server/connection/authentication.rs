//! SaslHandshake and SaslAuthenticate on a Kafka connection: the Kafka
//! messages around a connection's [`Session`] (crate::security::sasl), with Kafka's
//! error codes, a log line and a counter for each failure, and the
//! connection closed after a failed authentication (one attempt per
//! connection), as Kafka's brokers do.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::kafka::bounds::{check_sasl_authenticate, check_sasl_handshake};
use crate::kafka::decode::checked;
use crate::kafka::request::Request;
use crate::kafka::response::{self, Frame};
use crate::security::sasl::{Failure, Session};
use crate::server::handlers::{is_served, HandlerError};
use crate::server::shard::Shard;

/// How long a failed authentication's answer waits (Kafka's
/// connection.failed.authentication.delay.ms): a client guessing
/// passwords gets one guess per connection and per this delay.
const FAILURE_DELAY: Duration = Duration::from_millis(100);

/// An answer, and whether the connection closes after it.
pub struct Answer {
    /// The response.
    pub frame: Frame,
    /// The connection closes once it is written.
    pub close: bool,
}

/// Answers a SaslHandshake or SaslAuthenticate request from `peer`.
/// `session` is None on a port without SASL.
pub async fn answer(
    shard: &Shard,
    session: Option<&mut Session>,
    request: &Request,
    peer: &str,
) -> Result<Answer, HandlerError> {
    let version = request.header.request_api_version;
    if !is_served(request.api_key, version) {
        return Err(HandlerError::NotServed(request.api_key, version));
    }
    match request.api_key {
        ApiKey::SaslHandshake => handshake(session, request, peer),
        _ => authenticate(shard, session, request, peer).await,
    }
}

fn handshake(
    session: Option<&mut Session>,
    request: &Request,
    peer: &str,
) -> Result<Answer, HandlerError> {
    let decoded: SaslHandshakeRequest = checked(request, check_sasl_handshake)?;
    let mechanism = decoded.mechanism.as_str();
    let Some(session) = session else {
        tracing::info!(%peer, mechanism, "closing connection: a SASL handshake on a port without SASL (the client's security.protocol is SASL_*, the listener's is not)");
        return respond_handshake(
            request,
            ResponseError::IllegalSaslState.code(),
            vec![],
            true,
        );
    };
    let offered = session.enabled_names();
    let offered: Vec<StrBytes> = offered.into_iter().map(StrBytes::from_static_str).collect();
    // v0: the exchange follows in bare frames (Kafka before 1.0).
    match session.handshake(mechanism, request.header.request_api_version == 0) {
        Ok(()) => respond_handshake(request, 0, offered, false),
        Err(Failure::Unsupported(name)) => {
            tracing::info!(%peer, mechanism = %name, "closing connection: a SASL mechanism not enabled");
            let code = ResponseError::UnsupportedSaslMechanism.code();
            respond_handshake(request, code, offered, true)
        }
        Err(failure) => {
            tracing::info!(%peer, %failure, "closing connection: SASL handshake out of order");
            respond_handshake(
                request,
                ResponseError::IllegalSaslState.code(),
                offered,
                true,
            )
        }
    }
}

fn respond_handshake(
    request: &Request,
    error_code: i16,
    mechanisms: Vec<StrBytes>,
    close: bool,
) -> Result<Answer, HandlerError> {
    let response = SaslHandshakeResponse::default()
        .with_error_code(error_code)
        .with_mechanisms(mechanisms);
    Ok(Answer {
        frame: encode(request, &response)?,
        close,
    })
}

async fn authenticate(
    shard: &Shard,
    session: Option<&mut Session>,
    request: &Request,
    peer: &str,
) -> Result<Answer, HandlerError> {
    let decoded: SaslAuthenticateRequest = checked(request, check_sasl_authenticate)?;
    let outcome = match session {
        Some(session) => step(shard, session, &decoded.auth_bytes, peer).await,
        None => Err(Failure::State("no SASL on this port".into())),
    };
    match outcome {
        Ok(progress) => {
            let lifetime_ms = progress.done.map_or(0, |(_, ms)| ms);
            let response = SaslAuthenticateResponse::default()
                .with_auth_bytes(Bytes::from(progress.message))
                .with_session_lifetime_ms(lifetime_ms);
            Ok(Answer {
                frame: encode(request, &response)?,
                close: false,
            })
        }
        Err(failure) => {
            let (code, message) = match failure {
                Failure::State(_) => (ResponseError::IllegalSaslState.code(), "out of order"),
                _ => (
                    ResponseError::SaslAuthenticationFailed.code(),
                    "Authentication failed: invalid credentials",
                ),
            };
            let response = SaslAuthenticateResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_static_str(message)));
            Ok(Answer {
                frame: encode(request, &response)?,
                close: true,
            })
        }
    }
}

/// A bare token of an exchange begun by a SaslHandshake v0: the answer in
/// a bare frame, or None when it failed (the connection closes unanswered,
/// as Kafka's brokers do).
pub async fn raw_token(
    shard: &Shard,
    session: &mut Session,
    token: &[u8],
    peer: &str,
) -> Option<Frame> {
    let progress = step(shard, session, token, peer).await.ok()?;
    Some(Frame::of_body(&progress.message))
}

/// One message of the exchange, counted, and logged when it fails (the
/// reason stays in the broker's log, never the password; the client
/// learns only that it failed, after [`FAILURE_DELAY`]).
async fn step(
    shard: &Shard,
    session: &mut Session,
    message: &[u8],
    peer: &str,
) -> Result<crate::security::sasl::session::Progress, Failure> {
    let outcome = {
        let metadata = &shard.cluster.view.borrow().metadata;
        session.authenticate(message, metadata, Instant::now())
    };
    let metrics = &shard.metrics;
    match &outcome {
        Ok(progress) => {
            if let Some((user, _)) = &progress.done {
                metrics.sasl_authentications.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%peer, %user, "SASL authentication succeeded");
            }
        }
        Err(failure) => {
            metrics
                .sasl_authentication_failures
                .fetch_add(1, Ordering::Relaxed);
            tracing::info!(%peer, %failure, "closing connection: SASL authentication failed");
            glommio::timer::sleep(FAILURE_DELAY).await;
        }
    }
    outcome
}

fn encode<T>(request: &Request, answer: &T) -> Result<Frame, HandlerError>
where
    T: kafka_protocol::protocol::Encodable + kafka_protocol::protocol::HeaderVersion,
{
    Ok(response::encode(
        request.header.correlation_id,
        request.header.request_api_version,
        answer,
    )?)
}
