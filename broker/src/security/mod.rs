//! Who may do what, and how much: the broker's security, below the
//! server layers that apply it. Authentication exchanges and a
//! connection's login (`sasl`), the ACL decisions (`authorizer`), the TLS
//! material of the ports (`tls_files`), and the byte-rate quotas
//! (`quotas`). All sans-IO except reading the PEM files; the server's
//! connections and handlers call into them.

pub mod authorizer;
pub mod quotas;
pub mod sasl;
pub mod tls_files;
