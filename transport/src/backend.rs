//! The static set of compiled-in transports.

use std::time::Duration;

use ftcoll_algos::Rank;

#[cfg(feature = "ofi")]
use super::ofi::OfiTransport;
use super::remote::{ExposedMemory, Exposure, RemoteReader, RemoteReads};
use super::shm::ShmTransport;
use super::tcp::TcpTransport;
#[cfg(feature = "ucx")]
use super::ucx::UcxTransport;
use super::{RegisteredBuffer, Transport, TransportError, TransportKind, Waker};
use std::sync::Arc;

/// One of the compiled-in transports, dispatched statically.
pub enum Backend {
    /// Shared memory.
    Shm(ShmTransport),
    /// TCP (boxed: its socket tables make it much larger than the shared-memory endpoint).
    Tcp(Box<TcpTransport>),
    /// UCX.
    #[cfg(feature = "ucx")]
    Ucx(Box<UcxTransport>),
    /// libfabric.
    #[cfg(feature = "ofi")]
    Ofi(Box<OfiTransport>),
}

macro_rules! each {
    ($self:expr, $t:ident => $body:expr) => {
        match $self {
            Backend::Shm($t) => $body,
            Backend::Tcp($t) => $body,
            #[cfg(feature = "ucx")]
            Backend::Ucx($t) => $body,
            #[cfg(feature = "ofi")]
            Backend::Ofi($t) => $body,
        }
    };
}

impl Transport for Backend {
    fn kind(&self) -> TransportKind {
        each!(self, t => t.kind())
    }
    fn local_address(&self) -> String {
        each!(self, t => t.local_address())
    }
    fn max_frame_bytes(&self) -> usize {
        each!(self, t => t.max_frame_bytes())
    }
    fn send(&mut self, to: Rank, frame: &[u8]) -> Result<(), TransportError> {
        each!(self, t => t.send(to, frame))
    }
    fn register(&mut self, bytes: usize) -> Result<RegisteredBuffer, TransportError> {
        each!(self, t => t.register(bytes))
    }
    fn send_registered(
        &mut self,
        to: Rank,
        buffer: &RegisteredBuffer,
        len: usize,
    ) -> Result<(), TransportError> {
        each!(self, t => t.send_registered(to, buffer, len))
    }
    fn remote_reads(&self) -> RemoteReads {
        each!(self, t => t.remote_reads())
    }
    fn expose(
        &mut self,
        memory: ExposedMemory,
        identity: Option<u64>,
    ) -> Result<Option<Arc<Exposure>>, TransportError> {
        each!(self, t => t.expose(memory, identity))
    }
    fn forget_exposures(&mut self, live: &mut dyn FnMut(u64) -> bool) {
        each!(self, t => t.forget_exposures(live))
    }
    fn exposure_counts(&self) -> (u64, u64) {
        each!(self, t => t.exposure_counts())
    }
    fn remote_reader(
        &mut self,
        peer: Rank,
    ) -> Result<Option<Box<dyn RemoteReader>>, TransportError> {
        each!(self, t => t.remote_reader(peer))
    }
    fn progress(&mut self) -> Result<usize, TransportError> {
        each!(self, t => t.progress())
    }
    fn poll_recv(
        &mut self,
        max_frames: usize,
        handler: &mut dyn FnMut(Rank, &[u8]),
    ) -> Result<usize, TransportError> {
        each!(self, t => t.poll_recv(max_frames, handler))
    }
    fn wait(&mut self, timeout: Option<Duration>) -> Result<(), TransportError> {
        each!(self, t => t.wait(timeout))
    }
    fn wait_until(&mut self, deadline: std::time::Instant) -> Result<(), TransportError> {
        each!(self, t => t.wait_until(deadline))
    }
    fn wait_within(
        &mut self,
        limit: Duration,
        deadline: &mut Option<std::time::Instant>,
    ) -> Result<(), TransportError> {
        each!(self, t => t.wait_within(limit, deadline))
    }
    fn waker(&self) -> Waker {
        each!(self, t => t.waker())
    }
    fn peer_failed(&mut self, peer: Rank) {
        each!(self, t => t.peer_failed(peer))
    }
    fn take_unreachable(&mut self, out: &mut Vec<Rank>) {
        each!(self, t => t.take_unreachable(out))
    }
}
