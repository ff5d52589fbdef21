//! A connection between metadata nodes (Raft messages, forwarded
//! controller calls): plain TCP, or TLS over it when the quorum is set up
//! with [`QuorumTls`]. With TLS both ends present certificates from the
//! cluster's CA, so only brokers of the cluster take part in it.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::{select, Either};
use futures::{AsyncRead, AsyncWrite};
use futures_rustls::rustls::pki_types::ServerName;
use futures_rustls::{TlsAcceptor, TlsConnector};
use glommio::net::TcpStream;

/// How long a TLS handshake between nodes may take.
const HANDSHAKE_MAX: Duration = Duration::from_secs(10);

/// The quorum's TLS: how a node connects to its peers and accepts them.
/// Shared by the node's connections; [`QuorumTls::install`] replaces it
/// for the connections made after (a certificate reload).
#[derive(Clone)]
pub struct QuorumTls {
    current: Arc<Mutex<(TlsConnector, TlsAcceptor)>>,
    any_address: bool,
}

impl QuorumTls {
    /// `connector` presents this node's certificate and checks the peer's
    /// (by IP); `acceptor` presents it and requires the peer's.
    pub fn new(connector: TlsConnector, acceptor: TlsAcceptor) -> QuorumTls {
        QuorumTls {
            current: Arc::new(Mutex::new((connector, acceptor))),
            any_address: false,
        }
    }

    /// Takes connections from any address: the CA signs the cluster's
    /// nodes only (a CA of their own, apart from the clients'), so a
    /// certificate proves a member, and a node joining from a machine the
    /// quorum does not know yet (a new broker, a replacement controller)
    /// gets in. Without it, only known members' addresses may connect.
    pub fn from_any_address(mut self) -> QuorumTls {
        self.any_address = true;
        self
    }

    /// Whether a connection from `peer` is refused before its handshake,
    /// `members` being the addresses the quorum knows.
    pub fn refuses(&self, peer: Option<SocketAddr>, members: &[std::net::IpAddr]) -> bool {
        refused(self.any_address, peer, members)
    }

    /// Uses these from the next connection on.
    pub fn install(&self, connector: TlsConnector, acceptor: TlsAcceptor) {
        *self.current.lock().expect("quorum TLS") = (connector, acceptor);
    }

    fn connector(&self) -> TlsConnector {
        self.current.lock().expect("quorum TLS").0.clone()
    }

    fn acceptor(&self) -> TlsAcceptor {
        self.current.lock().expect("quorum TLS").1.clone()
    }
}

/// [`QuorumTls::refuses`], without the certificates.
fn refused(any_address: bool, peer: Option<SocketAddr>, members: &[std::net::IpAddr]) -> bool {
    !any_address && peer.is_none_or(|p| !members.contains(&p.ip().to_canonical()))
}

impl std::fmt::Debug for QuorumTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QuorumTls")
    }
}

/// A connection's byte stream.
pub enum Link {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS, this node connecting.
    Client(Box<futures_rustls::client::TlsStream<TcpStream>>),
    /// TLS, this node accepting.
    Server(Box<futures_rustls::server::TlsStream<TcpStream>>),
}

/// Connects to `address`, over TLS if `tls`, within the handshake limit.
pub async fn connect(address: SocketAddr, tls: Option<&QuorumTls>) -> std::io::Result<Link> {
    let tcp = TcpStream::connect(address)
        .await
        .map_err(std::io::Error::from)?;
    let _ = tcp.set_nodelay(true);
    let Some(tls) = tls else {
        return Ok(Link::Plain(tcp));
    };
    let name = ServerName::IpAddress(address.ip().into());
    let stream = within(tls.connector().connect(name, tcp)).await?;
    Ok(Link::Client(Box::new(stream)))
}

/// Accepts `tcp` as a link, after its TLS handshake if `tls`.
pub async fn accept(tcp: TcpStream, tls: Option<&QuorumTls>) -> std::io::Result<Link> {
    let _ = tcp.set_nodelay(true);
    let Some(tls) = tls else {
        return Ok(Link::Plain(tcp));
    };
    let stream = within(tls.acceptor().accept(tcp)).await?;
    Ok(Link::Server(Box::new(stream)))
}

async fn within<T>(
    handshake: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    let timer = glommio::timer::sleep(HANDSHAKE_MAX);
    match select(Box::pin(handshake), Box::pin(timer)).await {
        Either::Left((done, _)) => done,
        Either::Right(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no TLS handshake within 10 s",
        )),
    }
}

impl AsyncRead for Link {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Link::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Link::Client(s) => Pin::new(s).poll_read(cx, buf),
            Link::Server(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Link {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Link::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Link::Client(s) => Pin::new(s).poll_write(cx, buf),
            Link::Server(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Link::Plain(s) => Pin::new(s).poll_flush(cx),
            Link::Client(s) => Pin::new(s).poll_flush(cx),
            Link::Server(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Link::Plain(s) => Pin::new(s).poll_close(cx),
            Link::Client(s) => Pin::new(s).poll_close(cx),
            Link::Server(s) => Pin::new(s).poll_close(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::refused;

    #[test]
    fn strangers_are_refused_unless_the_ca_is_the_clusters_own() {
        let members = ["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()];
        let from = |a: &str| Some(a.parse().unwrap());
        assert!(!refused(false, from("10.0.0.1:5000"), &members));
        assert!(
            !refused(false, from("[::ffff:10.0.0.2]:5000"), &members),
            "an IPv4-mapped peer is its IPv4 address"
        );
        assert!(refused(false, from("10.0.0.9:5000"), &members));
        assert!(refused(false, None, &members), "no address: refused");
        assert!(!refused(true, from("10.0.0.9:5000"), &members));
    }
}
