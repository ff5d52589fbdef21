//! The broker's Kafka listeners, as Kafka names them: each has a name, an
//! address to bind, an address to advertise and a security protocol
//! (`listeners`, `advertised_listeners`, `listener_security_protocol_map`,
//! `inter_broker_listener_name`). A client is told the addresses of the
//! listener it connected to; brokers reach each other on the inter-broker
//! one. Parsing only: the server binds them.

use std::net::SocketAddr;

/// How a listener's connections are secured (Kafka's security.protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// Plain TCP.
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL login over plain TCP.
    SaslPlaintext,
    /// SASL login over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name of a protocol.
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        Some(match name {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    /// Its connections speak TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Its clients log in with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// One Kafka listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Its name (upper case, as Kafka normalises it).
    pub name: String,
    /// Where it binds (port 0: any free port).
    pub listen: SocketAddr,
    /// What its clients are told, `host:port`; None: the bound address,
    /// with 0.0.0.0 told as 127.0.0.1.
    pub advertised: Option<String>,
    /// How its connections are secured.
    pub protocol: SecurityProtocol,
}

impl Listener {
    /// What its clients are told, once it is bound at `bound`.
    pub fn advertised_at(&self, bound: SocketAddr) -> String {
        self.advertised
            .clone()
            .unwrap_or_else(|| bound.to_string().replace("0.0.0.0", "127.0.0.1"))
    }
}

/// A broker's listeners, the inter-broker one among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listeners {
    /// Every listener, in the order configured.
    pub all: Vec<Listener>,
    /// The index in `all` of the one brokers reach each other on.
    inter_broker: usize,
}

/// The settings the listeners are read from (see the module doc).
pub struct ListenerSettings<'a> {
    /// `NAME://ip:port` each (an empty ip binds every interface).
    pub listeners: &'a [String],
    /// `NAME://host:port` each, for some of the listeners.
    pub advertised: &'a [String],
    /// `NAME:PROTOCOL` each; a listener named after a protocol needs none.
    pub protocol_map: &'a [String],
    /// The inter-broker listener's name; None: the first listener.
    pub inter_broker: Option<&'a str>,
}

/// The most listeners a broker may have (the metadata's bound, less the
/// HTTP API's endpoint).
pub const LISTENERS_MAX: usize = control::model::ENDPOINTS_PER_BROKER_MAX - 1;

impl Listeners {
    /// One listener (the broker's single Kafka port).
    pub fn single(listener: Listener) -> Listeners {
        Listeners {
            all: vec![listener],
            inter_broker: 0,
        }
    }

    /// Reads `settings`; what is wrong is said by setting name.
    pub fn parse(settings: &ListenerSettings) -> Result<Listeners, String> {
        if settings.listeners.is_empty() || settings.listeners.len() > LISTENERS_MAX {
            return Err(format!("listeners: 1 to {LISTENERS_MAX} entries"));
        }
        let protocols = parse_protocol_map(settings.protocol_map)?;
        let mut all: Vec<Listener> = Vec::new();
        for entry in settings.listeners {
            let (name, address) = split_entry("listeners", entry, "NAME://ip:port")?;
            if all.iter().any(|l| l.name == name) {
                return Err(format!("listeners: {name} twice"));
            }
            let listen = parse_listen(&address)
                .ok_or_else(|| format!("listeners: {entry:?}: expected NAME://ip:port"))?;
            let protocol = protocols
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, p)| *p)
                .or_else(|| SecurityProtocol::from_name(&name))
                .ok_or_else(|| {
                    format!("listener {name} has no protocol in listener_security_protocol_map")
                })?;
            all.push(Listener {
                name,
                listen,
                advertised: None,
                protocol,
            });
        }
        for entry in settings.advertised {
            let (name, address) = split_entry("advertised_listeners", entry, "NAME://host:port")?;
            let listener = all.iter_mut().find(|l| l.name == name).ok_or_else(|| {
                format!("advertised_listeners: {name} is not one of the listeners")
            })?;
            if !is_host_port(&address) {
                return Err(format!(
                    "advertised_listeners: {entry:?}: expected NAME://host:port"
                ));
            }
            if listener.advertised.is_some() {
                return Err(format!("advertised_listeners: {name} twice"));
            }
            listener.advertised = Some(address);
        }
        let inter_broker = match settings.inter_broker {
            None => 0,
            Some(name) => {
                let name = name.to_ascii_uppercase();
                all.iter().position(|l| l.name == name).ok_or_else(|| {
                    format!("inter_broker_listener_name {name} is not one of the listeners")
                })?
            }
        };
        Ok(Listeners { all, inter_broker })
    }

    /// The listener brokers reach each other on.
    pub fn inter_broker(&self) -> &Listener {
        &self.all[self.inter_broker]
    }

    /// Whether some listener's protocol is `wanted`.
    pub fn any(&self, wanted: impl Fn(SecurityProtocol) -> bool) -> bool {
        self.all.iter().any(|l| wanted(l.protocol))
    }
}

/// `NAME://rest` with the name upper-cased and checked; `form` says what
/// is expected.
fn split_entry(setting: &str, entry: &str, form: &str) -> Result<(String, String), String> {
    let (name, address) = entry
        .split_once("://")
        .ok_or_else(|| format!("{setting}: {entry:?}: expected {form}"))?;
    let name = name.to_ascii_uppercase();
    control::model::check_listener_name(&name).map_err(|e| format!("{setting}: {e}"))?;
    if name == control::model::HTTP_ENDPOINT {
        return Err(format!("{setting}: the name {name} is the HTTP API's"));
    }
    Ok((name, address.to_string()))
}

/// `NAME:PROTOCOL` entries.
fn parse_protocol_map(entries: &[String]) -> Result<Vec<(String, SecurityProtocol)>, String> {
    let map: Vec<(String, SecurityProtocol)> = entries
        .iter()
        .map(|entry| {
            let bad = || {
                format!(
                    "listener_security_protocol_map: {entry:?}: expected NAME:PROTOCOL \
                     (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"
                )
            };
            let (name, protocol) = entry.split_once(':').ok_or_else(bad)?;
            let protocol = SecurityProtocol::from_name(&protocol.to_ascii_uppercase());
            Ok((name.to_ascii_uppercase(), protocol.ok_or_else(bad)?))
        })
        .collect::<Result<_, String>>()?;
    for (i, (name, _)) in map.iter().enumerate() {
        if map[..i].iter().any(|(n, _)| n == name) {
            return Err(format!("listener_security_protocol_map: {name} twice"));
        }
    }
    Ok(map)
}

/// `ip:port`, or `:port` for every interface.
fn parse_listen(address: &str) -> Option<SocketAddr> {
    match address.strip_prefix(':') {
        Some(port) => Some(SocketAddr::from(([0, 0, 0, 0], port.parse::<u16>().ok()?))),
        None => address.parse().ok(),
    }
}

fn is_host_port(address: &str) -> bool {
    matches!(address.rsplit_once(':'), Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn parse(
        listeners: &[&str],
        advertised: &[&str],
        map: &[&str],
        inter: Option<&str>,
    ) -> Result<Listeners, String> {
        Listeners::parse(&ListenerSettings {
            listeners: &strings(listeners),
            advertised: &strings(advertised),
            protocol_map: &strings(map),
            inter_broker: inter,
        })
    }

    #[test]
    fn kafkas_settings_name_each_listener_and_its_protocol() {
        let listeners = parse(
            &[
                "internal://10.0.0.1:9092",
                "EXTERNAL://:9093",
                "SSL://127.0.0.1:0",
            ],
            &["EXTERNAL://broker1.example.com:443"],
            &["INTERNAL:SASL_PLAINTEXT", "external:sasl_ssl"],
            Some("internal"),
        )
        .unwrap();
        let names: Vec<&str> = listeners.all.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["INTERNAL", "EXTERNAL", "SSL"]);
        assert_eq!(listeners.all[0].protocol, SecurityProtocol::SaslPlaintext);
        assert_eq!(listeners.all[1].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(listeners.all[2].protocol, SecurityProtocol::Ssl);
        assert_eq!(
            listeners.all[1].listen,
            "0.0.0.0:9093".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            listeners.all[1].advertised_at("0.0.0.0:9093".parse().unwrap()),
            "broker1.example.com:443"
        );
        assert_eq!(
            listeners.all[0].advertised_at("10.0.0.1:9092".parse().unwrap()),
            "10.0.0.1:9092"
        );
        assert_eq!(listeners.inter_broker().name, "INTERNAL");
        assert!(listeners.any(SecurityProtocol::uses_tls));
        let first = parse(&["PLAINTEXT://0.0.0.0:0"], &[], &[], None).unwrap();
        assert_eq!(first.inter_broker().name, "PLAINTEXT");
        assert_eq!(
            first.all[0].advertised_at("0.0.0.0:4242".parse().unwrap()),
            "127.0.0.1:4242"
        );
        assert!(!first.any(SecurityProtocol::uses_sasl));
    }

    #[test]
    fn what_kafka_refuses_is_refused_by_setting_name() {
        let refused = |result: Result<Listeners, String>, says: &str| {
            let error = result.unwrap_err();
            assert!(error.contains(says), "{error} does not say {says}");
        };
        refused(parse(&[], &[], &[], None), "listeners: 1 to");
        refused(parse(&["CLIENT://:9092"], &[], &[], None), "no protocol");
        refused(
            parse(&["PLAINTEXT://:9092", "plaintext://:9093"], &[], &[], None),
            "PLAINTEXT twice",
        );
        refused(parse(&["PLAINTEXT:9092"], &[], &[], None), "NAME://ip:port");
        refused(
            parse(&["PLAINTEXT://broker.example:9092"], &[], &[], None),
            "NAME://ip:port",
        );
        refused(
            parse(&["PLAINTEXT://:9092"], &["SSL://h:1"], &[], None),
            "SSL is not one of the listeners",
        );
        refused(
            parse(&["PLAINTEXT://:9092"], &["PLAINTEXT://h"], &[], None),
            "NAME://host:port",
        );
        refused(
            parse(&["A://:9092"], &[], &["A:TLS"], None),
            "listener_security_protocol_map",
        );
        refused(
            parse(&["PLAINTEXT://:9092"], &[], &[], Some("INTERNAL")),
            "inter_broker_listener_name INTERNAL",
        );
        refused(parse(&["A B://:9092"], &[], &[], None), "listener name");
        refused(
            parse(&["A://:9092"], &[], &["A:SSL", "a:PLAINTEXT"], None),
            "A twice",
        );
        refused(
            parse(&["SSL://:9092"], &["SSL://h:1", "SSL://h:2"], &[], None),
            "SSL twice",
        );
    }
}
