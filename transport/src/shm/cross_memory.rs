//! Single-copy reads of another rank's memory on this node (Linux cross-memory attach,
//! `process_vm_readv`): a large vector crosses memory once, from the peer's buffer into this
//! rank's, instead of through a lane (written by the sender, read by the receiver).
//!
//! The kernel lets a process read another only where it could ptrace it: the same user, and,
//! under Yama's `ptrace_scope = 1`, only a declared tracer. Ranks are siblings, not ancestors,
//! so a rank that offers its memory declares any process a tracer ([`offer_memory`]), as MPI
//! libraries do for the same reason. A refusal is a typed error that names the switch.
#![allow(unsafe_code)]

use std::io;

/// Where a peer's vector lies in the peer's address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerRegion {
    /// The peer's process id.
    pub pid: u32,
    /// The first byte, in the peer's address space.
    pub addr: u64,
    /// Bytes in the region.
    pub bytes: u64,
}

/// Why a read failed.
#[derive(Debug, thiserror::Error)]
pub enum CrossMemoryError {
    /// The kernel refused (ptrace rules, a seccomp filter, or no such system call).
    #[error("the kernel refused a single-copy read of process {pid} ({source}); set FTCOLL_SINGLE_COPY=off to move vectors through the shared segment")]
    Refused {
        /// The peer.
        pid: u32,
        /// What the kernel said.
        source: io::Error,
    },
    /// The peer process no longer exists (it died; the failure detector reports it).
    #[error("process {pid} is gone")]
    Gone {
        /// The peer.
        pid: u32,
    },
    /// The bytes asked for lie outside the region the peer offered, or outside its memory.
    #[error("bytes {offset}..{end} of process {pid}'s region of {bytes} bytes cannot be read")]
    OutOfRegion {
        /// The peer.
        pid: u32,
        /// First byte asked, from the region's start.
        offset: u64,
        /// One past the last byte asked.
        end: u64,
        /// The region's size.
        bytes: u64,
    },
}

/// Lets sibling processes read this one's memory where Yama restricts ptrace to ancestors.
/// Harmless (and ignored) where Yama is absent.
pub fn offer_memory() {
    // Without Yama the call fails with EINVAL and nothing is needed.
    let _ = rustix::process::set_ptracer(rustix::process::PTracer::Any);
}

/// Reads `dst.len()` bytes at `offset` of the peer's region into `dst`.
pub fn read(region: &PeerRegion, offset: u64, dst: &mut [u8]) -> Result<(), CrossMemoryError> {
    let end = offset.saturating_add(dst.len() as u64);
    let out_of_region = || CrossMemoryError::OutOfRegion {
        pid: region.pid,
        offset,
        end,
        bytes: region.bytes,
    };
    if end > region.bytes {
        return Err(out_of_region());
    }
    let mut done = 0usize;
    // A read may come back short (a page boundary the kernel stops at); each turn moves at
    // least one byte or fails, so the loop ends within `dst.len()` turns.
    while done < dst.len() {
        let rest = &mut dst[done..];
        let local = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        let remote = libc::iovec {
            iov_base: (region.addr + offset + done as u64) as usize as *mut libc::c_void,
            iov_len: rest.len(),
        };
        // SAFETY: the local iovec covers `rest`, a live exclusive borrow of this process's
        // memory, which the kernel writes only within its length; the remote iovec names the
        // peer's memory, which the kernel checks (a bad address is EFAULT, never a write here).
        let got =
            unsafe { libc::process_vm_readv(region.pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        if got > 0 {
            done += got as usize;
            continue;
        }
        let error = io::Error::last_os_error();
        return Err(match error.raw_os_error() {
            Some(libc::ESRCH) => CrossMemoryError::Gone { pid: region.pid },
            Some(libc::EFAULT) => out_of_region(),
            // A zero-byte read without an error: the peer's mapping ends here.
            _ if got == 0 => out_of_region(),
            _ => CrossMemoryError::Refused {
                pid: region.pid,
                source: error,
            },
        });
    }
    Ok(())
}

/// Whether this kernel lets this process read its own memory by cross-memory attach: the
/// system call exists and no filter blocks it. Reads of siblings may still be refused (ptrace
/// rules), which [`read`] reports.
pub fn available() -> bool {
    let probe = [0x5au8; 8];
    let mut copy = [0u8; 8];
    let region = PeerRegion {
        pid: std::process::id(),
        addr: probe.as_ptr() as u64,
        bytes: probe.len() as u64,
    };
    read(&region, 0, &mut copy).is_ok() && copy == probe
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_at_an_offset_and_refuses_beyond_the_region() {
        assert!(available(), "process_vm_readv is blocked on this machine");
        let source: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        let region = PeerRegion {
            pid: std::process::id(),
            addr: source.as_ptr() as u64,
            bytes: source.len() as u64,
        };
        let mut dst = vec![0u8; 4096];
        read(&region, 1000, &mut dst).expect("read");
        assert_eq!(dst, source[1000..5096]);
        let beyond = read(&region, source.len() as u64 - 10, &mut dst);
        assert!(matches!(beyond, Err(CrossMemoryError::OutOfRegion { .. })));
    }

    #[test]
    fn a_process_that_is_gone_is_reported_gone() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        child.wait().expect("wait");
        let region = PeerRegion {
            pid,
            addr: 4096,
            bytes: 8,
        };
        let mut dst = [0u8; 8];
        assert!(matches!(
            read(&region, 0, &mut dst),
            Err(CrossMemoryError::Gone { .. })
        ));
    }
}
