//! One connection to a Kafka-protocol broker, on glommio: typed requests
//! and responses with correlation ids, response sizes bounded before
//! allocating, and ApiVersions negotiation.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures_rustls::rustls::pki_types::ServerName;
use glommio::net::TcpStream;

use crate::scram::{new_nonce, ScramClient};
use crate::security::{SaslLogin, SaslMechanism, Security};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::ResponseError;

/// The longest a connection may take to be made, TLS handshake and
/// version negotiation included.
pub const CONNECT_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// The largest response accepted unless configured otherwise.
pub const RESPONSE_BYTES_MAX_DEFAULT: usize = 100 * 1024 * 1024;
/// The ApiVersions version this client speaks first (v3: flexible, with
/// the client's software name).
const API_VERSIONS_VERSION: i16 = 3;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection failed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// A response larger than allowed, or negative.
    #[error("response size {0} out of bounds")]
    ResponseSize(i64),
    /// A response that does not decode, or answers another request.
    #[error("bad response: {0}")]
    Protocol(String),
    /// The broker does not serve this API at any version this client speaks.
    #[error("the broker does not serve {0:?} at a version this client speaks")]
    Unsupported(ApiKey),
    /// The broker answered with an error code.
    #[error("broker error code {0}")]
    Broker(i16),
    /// The broker answered with an error code and a message.
    #[error("broker error code {0}: {1}")]
    Refused(i16, String),
}

/// Kafka's name for an error code, as its tools print it:
/// TRANSACTIONAL_ID_NOT_FOUND for 105, NONE for 0.
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(ResponseError::Unknown(code)) => format!("UNKNOWN_ERROR_CODE_{code}"),
        // The variants are Kafka's names in CamelCase.
        Some(error) => screaming_snake(&format!("{error:?}")),
    }
}

/// `TransactionalIdNotFound` as `TRANSACTIONAL_ID_NOT_FOUND`.
fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// A connection's byte stream: plain TCP, or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<futures_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(s).poll_close(cx),
        }
    }
}

/// A connection with the version ranges its broker advertised.
pub struct Connection {
    stream: Stream,
    client_id: StrBytes,
    next_correlation_id: i32,
    response_bytes_max: usize,
    /// api key -> (min, max) served by the broker.
    versions: BTreeMap<i16, (i16, i16)>,
    /// The `transaction.version` the broker finalized (0: none said).
    transaction_version: i16,
    /// The SASL login, kept to log in again before the session ends.
    login: Option<SaslLogin>,
    /// When to log in again (KIP-368: the broker said how long the
    /// session lasts; a request after that closes the connection).
    reauthenticate_at: Option<std::time::Instant>,
    /// Bytes read and not yet taken as a frame: its first `read_filled`
    /// bytes (past them, while a read waits, the room it reads into).
    /// Kept here, not in a read's future, so that a read dropped half-way
    /// loses nothing.
    read_buf: BytesMut,
    read_filled: usize,
}

impl Connection {
    /// Connects and negotiates versions with ApiVersions.
    pub async fn connect(address: SocketAddr, client_id: &str) -> Result<Connection, ClientError> {
        Connection::connect_with(address, client_id, &Security::default()).await
    }

    /// Connects, over TLS if `security` has it (the broker's certificate
    /// checked against the IP address connected to), negotiates versions
    /// and logs in with SASL if `security` has a login, within
    /// [`CONNECT_MAX`] (a peer that accepts and then falls silent must not
    /// hold the caller forever).
    pub async fn connect_with(
        address: SocketAddr,
        client_id: &str,
        security: &Security,
    ) -> Result<Connection, ClientError> {
        let connect = Box::pin(Connection::open(address, client_id, security));
        let deadline = Box::pin(glommio::timer::sleep(CONNECT_MAX));
        match futures::future::select(connect, deadline).await {
            futures::future::Either::Left((connected, _)) => connected,
            futures::future::Either::Right(_) => Err(ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{address}: no connection within {CONNECT_MAX:?}"),
            ))),
        }
    }

    async fn open(
        address: SocketAddr,
        client_id: &str,
        security: &Security,
    ) -> Result<Connection, ClientError> {
        let tcp = TcpStream::connect(address)
            .await
            .map_err(std::io::Error::from)?;
        let _ = tcp.set_nodelay(true);
        let stream = match &security.tls {
            None => Stream::Plain(tcp),
            Some(tls) => {
                let name = ServerName::IpAddress(address.ip().into());
                Stream::Tls(Box::new(tls.connector().connect(name, tcp).await?))
            }
        };
        let mut connection = Connection {
            stream,
            client_id: StrBytes::from_string(client_id.to_string()),
            next_correlation_id: 0,
            response_bytes_max: RESPONSE_BYTES_MAX_DEFAULT,
            versions: BTreeMap::new(),
            transaction_version: 0,
            login: security.sasl.clone(),
            reauthenticate_at: None,
            read_buf: BytesMut::new(),
            read_filled: 0,
        };
        connection.negotiate().await?;
        connection.log_in().await?;
        Ok(connection)
    }

    /// Logs in again if the session is near its end (at 85% of the
    /// lifetime the broker gave, as Kafka's clients do).
    async fn renew_if_due(&mut self) -> Result<(), ClientError> {
        match self.reauthenticate_at {
            Some(at) if std::time::Instant::now() >= at => self.log_in().await,
            _ => Ok(()),
        }
    }

    /// Whether the session is near its end: the next request sent logs
    /// in again first, which needs every answer in (a pipeline lets its
    /// requests out drain before sending more).
    pub fn renewal_due(&self) -> bool {
        self.reauthenticate_at
            .is_some_and(|at| std::time::Instant::now() >= at)
    }

    /// SaslHandshake, then the mechanism's exchange in SaslAuthenticate
    /// requests (nothing without a login); a refusal is the broker's error
    /// code and message.
    async fn log_in(&mut self) -> Result<(), ClientError> {
        let Some(login) = self.login.clone() else {
            return Ok(());
        };
        let handshake = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(login.mechanism.name()));
        let version = self.version_for::<SaslHandshakeRequest>()?;
        let answer = self.call_now(&handshake, version).await?;
        if answer.error_code != 0 {
            let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(ClientError::Refused(
                answer.error_code,
                format!(
                    "{} is not offered (offered: {offered:?})",
                    login.mechanism.name()
                ),
            ));
        }
        match login.mechanism {
            SaslMechanism::Plain => {
                let message = format!("\0{}\0{}", login.user, login.password);
                self.authenticate_step(message.into_bytes()).await.map(drop)
            }
            SaslMechanism::Scram(mechanism) => {
                let mut scram =
                    ScramClient::new(mechanism, &login.user, &login.password, new_nonce());
                let server_first = self
                    .authenticate_step(scram.first_message().into_bytes())
                    .await?;
                let server_first = String::from_utf8_lossy(&server_first).into_owned();
                let client_final = scram.final_message(&server_first).map_err(protocol)?;
                let server_final = self.authenticate_step(client_final.into_bytes()).await?;
                scram
                    .verify_server_final(&String::from_utf8_lossy(&server_final))
                    .map_err(protocol)
            }
        }
    }

    /// One SaslAuthenticate: the broker's answer, or its refusal. An
    /// answer with a session lifetime sets when to log in again.
    async fn authenticate_step(&mut self, message: Vec<u8>) -> Result<Bytes, ClientError> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(message));
        let version = self.version_for::<SaslAuthenticateRequest>()?;
        let sent_at = std::time::Instant::now();
        let answer = self.call_now(&request, version).await?;
        if answer.error_code != 0 {
            let message = answer
                .error_message
                .map(|m| m.to_string())
                .unwrap_or_default();
            return Err(ClientError::Refused(answer.error_code, message));
        }
        if answer.session_lifetime_ms > 0 {
            let renew =
                std::time::Duration::from_millis(answer.session_lifetime_ms as u64 * 85 / 100);
            self.reauthenticate_at = Some(sent_at + renew);
        }
        Ok(answer.auth_bytes)
    }

    async fn negotiate(&mut self) -> Result<(), ClientError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("commit-log-client"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut response = self.call_now(&request, API_VERSIONS_VERSION).await?;
        if response.error_code == kafka_protocol::ResponseError::UnsupportedVersion.code() {
            // The broker answered in v0 with what it serves: retry at v0.
            response = self.call_now(&ApiVersionsRequest::default(), 0).await?;
        }
        if response.error_code != 0 {
            return Err(ClientError::Broker(response.error_code));
        }
        self.versions = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        // As the Java client: finalized features count only at an epoch.
        self.transaction_version = response
            .finalized_features
            .iter()
            .filter(|_| response.finalized_features_epoch >= 0)
            .find(|f| f.name.as_str() == "transaction.version")
            .map_or(0, |f| f.max_version_level);
        Ok(())
    }

    /// The `transaction.version` the broker finalized: 2 or more means
    /// KIP-890's protocol (an epoch per transaction, partitions added by
    /// the leaders).
    pub fn transaction_version(&self) -> i16 {
        self.transaction_version
    }

    /// The highest version of `R` that both this client and the broker speak.
    pub fn version_for<R: Request>(&self) -> Result<i16, ClientError> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|_| ClientError::Protocol(format!("unknown key {}", R::KEY)))?;
        let (broker_min, broker_max) = *self
            .versions
            .get(&R::KEY)
            .ok_or(ClientError::Unsupported(key))?;
        let ours = key.valid_versions();
        let version = broker_max.min(ours.max);
        if version < broker_min.max(ours.min) {
            return Err(ClientError::Unsupported(key));
        }
        Ok(version)
    }

    /// The version ranges the broker advertised, by api key.
    pub fn broker_versions(&self) -> &BTreeMap<i16, (i16, i16)> {
        &self.versions
    }

    /// Sends `request` at `version` and waits for its response (logging
    /// in again first if the session is near its end).
    pub async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        self.renew_if_due().await?;
        self.call_now(request, version).await
    }

    async fn call_now<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let correlation_id = self.send_now(request, version).await?;
        self.read_response::<R>(correlation_id, version).await
    }

    /// Sends every request at `version` back to back, then reads their
    /// answers (Kafka answers a connection's requests in order): up to
    /// `requests.len()` in flight. After a failed send the rest are not
    /// sent; after a failed read the rest are not read. Any failure
    /// leaves the connection out of step: the caller drops it.
    pub async fn call_many<R: Request>(
        &mut self,
        requests: &[R],
        version: i16,
    ) -> Vec<Result<R::Response, ClientError>> {
        let mut sent = Vec::with_capacity(requests.len());
        if let Err(e) = self.renew_if_due().await {
            return requests.iter().map(|_| Err(protocol(&e))).collect();
        }
        let mut send_failed = false;
        for request in requests {
            if send_failed {
                sent.push(Err(ClientError::Protocol(
                    "not sent: an earlier send failed".into(),
                )));
                continue;
            }
            let correlation_id = self.send_now(request, version).await;
            send_failed = correlation_id.is_err();
            sent.push(correlation_id);
        }
        let mut answers = Vec::with_capacity(requests.len());
        let mut broken = false;
        for correlation_id in sent {
            let answer = match correlation_id {
                Ok(id) if !broken => {
                    let answer = self.read_response::<R>(id, version).await;
                    broken = answer.is_err();
                    answer
                }
                Ok(_) => Err(ClientError::Protocol("an earlier answer failed".into())),
                Err(e) => Err(e),
            };
            answers.push(answer);
        }
        answers
    }

    /// Sends `request` without waiting for a response (Produce with
    /// acks=0 gets none); returns its correlation id.
    pub async fn send_only<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<i32, ClientError> {
        self.renew_if_due().await?;
        self.send_now(request, version).await
    }

    /// Sends `request` and returns its correlation id; its answer is read
    /// with [`Connection::read_answer`] after those of the requests sent
    /// before it (a pipeline of requests on one connection). A login due
    /// ([`Connection::renewal_due`]) is made first: call it with no answer
    /// outstanding then.
    pub async fn send_request<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<i32, ClientError> {
        self.renew_if_due().await?;
        self.send_now(request, version).await
    }

    /// Sends `request` behind answers still out, without the login a due
    /// renewal would make first (its exchange would read their answers as
    /// its own): the caller lets them drain and logs in with none out.
    pub async fn send_behind<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<i32, ClientError> {
        self.send_now(request, version).await
    }

    /// Reads the next answer, which must be the one to `correlation_id`.
    pub async fn read_answer<R: Request>(
        &mut self,
        correlation_id: i32,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        self.read_response::<R>(correlation_id, version).await
    }

    async fn send_now<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<i32, ClientError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        // The frame is encoded in place, behind room for its length: one
        // copy of a Produce request's records, no buffer grown.
        let header_version = R::header_version(version);
        let size = header.compute_size(header_version).map_err(protocol)?
            + request.compute_size(version).map_err(protocol)?;
        let mut frame = BytesMut::with_capacity(4 + size);
        frame.extend_from_slice(&[0; 4]);
        header
            .encode(&mut frame, header_version)
            .map_err(protocol)?;
        request.encode(&mut frame, version).map_err(protocol)?;
        let length = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&length.to_be_bytes());
        self.stream.write_all(&frame).await?;
        // Sends what TLS buffered (nothing to do on plain TCP).
        self.stream.flush().await?;
        Ok(correlation_id)
    }

    async fn read_response<R: Request>(
        &mut self,
        correlation_id: i32,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let mut response = self.read_frame().await?;
        // ApiVersions answers always use header v0.
        let header_version = if R::KEY == ApiKey::ApiVersions as i16 {
            0
        } else {
            R::Response::header_version(version)
        };
        let header = ResponseHeader::decode(&mut response, header_version).map_err(protocol)?;
        if header.correlation_id != correlation_id {
            return Err(ClientError::Protocol(format!(
                "correlation id {} answers {}",
                header.correlation_id, correlation_id
            )));
        }
        // A v0 fallback answer to a too-new ApiVersions request decodes as v0.
        let decode_version = if R::KEY == ApiKey::ApiVersions as i16
            && response.len() >= 2
            && response[..2] == [0, 35]
        {
            0
        } else {
            version
        };
        R::Response::decode(&mut response, decode_version).map_err(protocol)
    }

    /// The next response frame's body. Cancel-safe: dropped while it
    /// waits, it leaves every byte read in the connection's buffer, so a
    /// caller may stop waiting for an answer (to send another request)
    /// and read it later.
    async fn read_frame(&mut self) -> Result<Bytes, ClientError> {
        loop {
            if let Some(frame) = self.take_frame()? {
                return Ok(frame);
            }
            let want = self.read_wanted();
            let filled = self.read_filled;
            if self.read_buf.len() < filled + want {
                self.read_buf.resize(filled + want, 0);
            }
            let read = self.stream.read(&mut self.read_buf[filled..filled + want]);
            let n = match read.await {
                Ok(0) => return Err(ClientError::Io(std::io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            self.read_filled += n;
            // No zeroed room kept past the data: a frame split off later
            // leaves nothing to copy when the buffer grows again.
            self.read_buf.truncate(self.read_filled);
        }
    }

    /// A whole frame's body out of the buffer, if one is there; its
    /// length is bounded before anything is allocated for it.
    fn take_frame(&mut self) -> Result<Option<Bytes>, ClientError> {
        let Some(size) = self.frame_size()? else {
            return Ok(None);
        };
        if self.read_filled < 4 + size {
            return Ok(None);
        }
        let mut frame = self.read_buf.split_to(4 + size);
        self.read_filled -= 4 + size;
        Ok(Some(frame.split_off(4).freeze()))
    }

    /// The size of the frame the buffer starts with, once its length is read.
    fn frame_size(&self) -> Result<Option<usize>, ClientError> {
        if self.read_filled < 4 {
            return Ok(None);
        }
        let length: [u8; 4] = self.read_buf[..4].try_into().expect("four bytes");
        let size = i32::from_be_bytes(length) as i64;
        if size < 0 || size > self.response_bytes_max as i64 {
            return Err(ClientError::ResponseSize(size));
        }
        Ok(Some(size as usize))
    }

    /// How many bytes the next read asks for: the rest of the frame
    /// begun (its length known), else enough for a small answer whole.
    fn read_wanted(&self) -> usize {
        match self.frame_size() {
            Ok(Some(size)) => 4 + size - self.read_filled,
            _ => READ_MIN_BYTES,
        }
    }
}

/// The least a read asks for when no frame's length is known yet.
const READ_MIN_BYTES: usize = 16 << 10;

fn protocol(error: impl std::fmt::Display) -> ClientError {
    ClientError::Protocol(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::oneshot;
    use futures::future::{select, Either};
    use glommio::net::TcpListener;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{
        ApiVersionsResponse, MetadataRequest, MetadataResponse, ResponseHeader,
    };
    use std::time::Duration;

    /// Reads one request frame; returns its correlation id.
    async fn read_request(stream: &mut TcpStream) -> i32 {
        let mut length = [0u8; 4];
        stream.read_exact(&mut length).await.expect("length");
        let mut body = vec![0u8; i32::from_be_bytes(length) as usize];
        stream.read_exact(&mut body).await.expect("body");
        i32::from_be_bytes(body[4..8].try_into().expect("correlation id"))
    }

    /// A response frame: length, header, body.
    fn frame<R: Encodable + HeaderVersion>(id: i32, response: &R, version: i16) -> Vec<u8> {
        let mut bytes = BytesMut::new();
        let header = ResponseHeader::default().with_correlation_id(id);
        header
            .encode(&mut bytes, R::header_version(version))
            .expect("header");
        response.encode(&mut bytes, version).expect("body");
        let mut out = (bytes.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&bytes);
        out
    }

    /// A broker that serves ApiVersions, then answers one Metadata
    /// request in two halves, the second once `go` says so.
    async fn serve_half_then_rest(listener: TcpListener, go: oneshot::Receiver<()>) {
        let mut stream = listener.accept().await.expect("accept");
        let id = read_request(&mut stream).await;
        let versions = ApiVersionsResponse::default().with_api_keys(vec![
            ApiVersion::default().with_api_key(18).with_max_version(3),
            ApiVersion::default().with_api_key(3).with_max_version(12),
        ]);
        let answer = frame(id, &versions, API_VERSIONS_VERSION);
        stream.write_all(&answer).await.expect("versions");
        let id = read_request(&mut stream).await;
        let metadata = MetadataResponse::default().with_throttle_time_ms(1234);
        let answer = frame(id, &metadata, 12);
        let half = answer.len() / 2;
        stream.write_all(&answer[..half]).await.expect("first half");
        go.await.expect("told to go on");
        stream
            .write_all(&answer[half..])
            .await
            .expect("second half");
        // Held open until the client has read it.
        let _ = stream.read(&mut [0u8; 1]).await;
    }

    #[test]
    fn an_answer_read_dropped_half_way_is_read_whole_later() {
        glommio::LocalExecutorBuilder::default()
            .make()
            .expect("executor")
            .run(async {
                let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
                let address = listener.local_addr().expect("address");
                let (go, gone) = oneshot::channel();
                let server = glommio::spawn_local(serve_half_then_rest(listener, gone));
                let mut connection = Connection::connect(address, "test").await.expect("connect");
                let version = connection
                    .version_for::<MetadataRequest>()
                    .expect("version");
                assert_eq!(version, 12);
                let request = MetadataRequest::default();
                let id = connection
                    .send_request(&request, version)
                    .await
                    .expect("sent");
                {
                    let read = Box::pin(connection.read_answer::<MetadataRequest>(id, version));
                    let soon = Box::pin(glommio::timer::sleep(Duration::from_millis(50)));
                    let first = select(read, soon).await;
                    assert!(
                        matches!(first, Either::Right(_)),
                        "only half the answer is there yet"
                    );
                }
                assert!(connection.read_filled > 0, "the first half was read");
                go.send(()).expect("the broker waits");
                let answer = connection.read_answer::<MetadataRequest>(id, version).await;
                assert_eq!(answer.expect("the whole answer").throttle_time_ms, 1234);
                drop(connection);
                server.await;
            });
    }
}
