//! Opening a network backend (TCP, UCX, libfabric) from its kind and a few options: what the
//! communicator and the transport benchmark share. Shared memory is opened from its inherited
//! segment instead (see `ftcoll_runtime::comm`).

use std::net::IpAddr;
use std::time::Duration;

use ftcoll_algos::Rank;

use super::backend::Backend;
use super::tcp::{TcpConfig, TcpTransport};
use super::{TransportError, TransportKind};

/// Looks up a peer's address: what its `local_address()` returned, as text.
pub type AddressResolver = Box<dyn FnMut(Rank) -> Result<String, TransportError> + Send>;

/// What a network backend needs besides its rank and resolver.
#[derive(Clone, Debug)]
pub struct NetworkOptions {
    /// The IP the TCP data plane listens on.
    pub bind_ip: IpAddr,
    /// The token TCP connections present (from the job secret).
    pub job_token: [u8; 32],
    /// Busy-wait budget before a waiting rank blocks.
    pub spin: Duration,
    /// libfabric provider (`None`: `FI_PROVIDER` or libfabric's choice).
    pub ofi_provider: Option<String>,
    /// UCX transports (`None`: `UCX_TLS` or UCX's choice).
    pub ucx_tls: Option<String>,
}

/// Opens the network backend `kind` for `rank` of `size`.
pub fn open_network(
    kind: TransportKind,
    rank: Rank,
    size: u32,
    mut resolver: AddressResolver,
    options: &NetworkOptions,
) -> Result<Backend, TransportError> {
    Ok(match kind {
        TransportKind::Tcp => {
            let resolver = move |peer: Rank| {
                let text = resolver(peer)?;
                text.parse().map_err(|_| TransportError::Resolve {
                    rank: peer.0,
                    why: format!("'{text}' is not a TCP address"),
                })
            };
            Backend::Tcp(Box::new(TcpTransport::bind(TcpConfig {
                rank,
                size,
                bind_ip: options.bind_ip,
                job_token: options.job_token,
                resolver: Box::new(resolver),
                spin: options.spin,
            })?))
        }
        #[cfg(feature = "ucx")]
        TransportKind::Ucx => Backend::Ucx(Box::new(super::ucx::UcxTransport::new(
            super::ucx::UcxConfig {
                rank,
                size,
                resolver,
                tls: options.ucx_tls.clone(),
                spin: options.spin,
            },
        )?)),
        #[cfg(feature = "ofi")]
        TransportKind::Ofi => Backend::Ofi(Box::new(super::ofi::OfiTransport::new(
            super::ofi::OfiConfig {
                rank,
                size,
                resolver,
                provider: options.ofi_provider.clone(),
                spin: options.spin,
            },
        )?)),
        TransportKind::Shm => {
            return Err(TransportError::Segment(
                "shared memory is opened from the launcher's segment, not as a network backend"
                    .into(),
            ))
        }
        #[allow(unreachable_patterns)]
        other => return Err(TransportError::NotCompiledIn(other)),
    })
}
