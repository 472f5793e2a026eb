//! C buffers as typed slices: the element type checked, pointers checked for null, alignment
//! and overlap, then one generic call per collective.

use std::ffi::{c_int, c_void};

use ftcoll_algos::values::Element;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{Communicator, Outcome};

use super::{arg, Failure, FTCOLL_F32, FTCOLL_F64, FTCOLL_I32, FTCOLL_I64, FTCOLL_U32, FTCOLL_U64};

/// The collective a buffer pair goes to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Allreduce(ReduceOp),
    FtAllreduce(ReduceOp),
    Reduce(ReduceOp, u32),
    Bcast(u32),
    Allgather,
    ReduceScatter(ReduceOp),
}

/// A send and a receive buffer as C passed them.
pub(crate) struct Buffer {
    send: *const c_void,
    recv: *mut c_void,
    send_count: usize,
    recv_count: usize,
    dtype: c_int,
}

/// The root as a rank of `comm`.
pub(crate) fn root_of(comm: &Communicator, root: c_int) -> Result<u32, Failure> {
    u32::try_from(root)
        .ok()
        .filter(|r| *r < comm.size())
        .ok_or_else(|| {
            arg(format!(
                "root {root} is not a rank of a communicator of {}",
                comm.size()
            ))
        })
}

/// `count` doubles at `buf`.
///
/// # Safety
/// `buf` is valid for `count` reads and writes, or `count` is 0.
#[allow(unsafe_code)]
pub(crate) unsafe fn doubles<'a>(buf: *mut f64, count: usize) -> Result<&'a mut [f64], Failure> {
    // SAFETY: the caller's contract.
    unsafe { slice_mut(buf.cast(), count) }
}

/// `count` elements of `T` at `ptr`, read only.
///
/// # Safety
/// `ptr` is valid for `count` reads of `T`, or `count` is 0.
#[allow(unsafe_code)]
unsafe fn slice<'a, T>(ptr: *const c_void, count: usize) -> Result<&'a [T], Failure> {
    if count == 0 {
        return Ok(&[]);
    }
    check(
        ptr,
        count,
        std::mem::size_of::<T>(),
        std::mem::align_of::<T>(),
    )?;
    // SAFETY: non-null, aligned, and valid for `count` reads (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<T>(), count) })
}

/// `count` elements of `T` at `ptr`, read and written.
///
/// # Safety
/// `ptr` is valid for `count` reads and writes of `T`, or `count` is 0.
#[allow(unsafe_code)]
unsafe fn slice_mut<'a, T>(ptr: *mut c_void, count: usize) -> Result<&'a mut [T], Failure> {
    if count == 0 {
        return Ok(&mut []);
    }
    check(
        ptr,
        count,
        std::mem::size_of::<T>(),
        std::mem::align_of::<T>(),
    )?;
    // SAFETY: non-null, aligned, valid for `count` reads and writes (the caller's contract),
    // and not aliased by another slice of this call (`Buffer::new` checks overlap).
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<T>(), count) })
}

fn check(ptr: *const c_void, count: usize, size: usize, align: usize) -> Result<(), Failure> {
    if ptr.is_null() {
        return Err(arg("null buffer with a non-zero count"));
    }
    if !(ptr as usize).is_multiple_of(align) {
        return Err(arg(format!(
            "buffer at {ptr:p} is not aligned to {align} bytes"
        )));
    }
    if count
        .checked_mul(size)
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(arg("count too large for the address space"));
    }
    Ok(())
}

fn elem_bytes(dtype: c_int) -> Result<usize, Failure> {
    Ok(match dtype {
        FTCOLL_F64 | FTCOLL_U64 | FTCOLL_I64 => 8,
        FTCOLL_F32 | FTCOLL_I32 | FTCOLL_U32 => 4,
        other => {
            return Err(arg(format!(
                "unknown element type {other}; use FTCOLL_F64 .. FTCOLL_U32"
            )))
        }
    })
}

impl Buffer {
    /// A pair for a call; `send` null means in place (the data is in `recv`), `recv` null
    /// means this rank receives nothing (a reduce's non-roots).
    ///
    /// # Safety
    /// The pointers are valid for their counts of `dtype`, as the calling function documents.
    #[allow(unsafe_code)]
    pub(crate) unsafe fn new(
        send: *const c_void,
        recv: *mut c_void,
        send_count: usize,
        recv_count: usize,
        dtype: c_int,
    ) -> Result<Buffer, Failure> {
        let elem = elem_bytes(dtype)?;
        let distinct = !send.is_null() && !recv.is_null() && send != recv.cast_const();
        if distinct {
            let (s, r) = (send as usize, recv as usize);
            let (s_end, r_end) = (
                s.saturating_add(send_count.saturating_mul(elem)),
                r.saturating_add(recv_count.saturating_mul(elem)),
            );
            if s < r_end && r < s_end && send_count > 0 && recv_count > 0 {
                return Err(arg("send and receive buffers overlap without being equal"));
            }
        }
        Ok(Buffer {
            send: if send == recv.cast_const() {
                std::ptr::null()
            } else {
                send
            },
            recv,
            send_count,
            recv_count,
            dtype,
        })
    }

    /// Runs `kind` on the buffers in their element type.
    pub(crate) fn run(self, comm: &mut Communicator, kind: Kind) -> Result<Outcome, Failure> {
        match self.dtype {
            FTCOLL_F64 => self.typed::<f64>(comm, kind),
            FTCOLL_F32 => self.typed::<f32>(comm, kind),
            FTCOLL_U64 => self.typed::<u64>(comm, kind),
            FTCOLL_I32 => self.typed::<i32>(comm, kind),
            FTCOLL_I64 => self.typed::<i64>(comm, kind),
            FTCOLL_U32 => self.typed::<u32>(comm, kind),
            other => Err(arg(format!("unknown element type {other}"))),
        }
    }

    #[allow(unsafe_code)]
    fn typed<T: Element>(self, comm: &mut Communicator, kind: Kind) -> Result<Outcome, Failure> {
        // SAFETY (every slice below): `Buffer::new`'s caller vouched for the pointers and
        // counts; `new` checked that distinct buffers do not overlap.
        let in_place = self.send.is_null();
        let outcome = match kind {
            Kind::Allreduce(op) | Kind::FtAllreduce(op) => {
                let recv = unsafe { slice_mut::<T>(self.recv, self.recv_count) }?;
                // Out of place the library reads the input where it lies: no copy into the
                // output first, and (shared memory) the neighbour reads both buffers.
                match (kind, in_place) {
                    (Kind::FtAllreduce(_), true) => comm.ft_allreduce(recv, op),
                    (_, true) => comm.allreduce(recv, op),
                    (Kind::FtAllreduce(_), false) => {
                        let send = unsafe { slice::<T>(self.send, self.send_count) }?;
                        comm.ft_allreduce_into(send, recv, op)
                    }
                    (_, false) => {
                        let send = unsafe { slice::<T>(self.send, self.send_count) }?;
                        comm.allreduce_into(send, recv, op)
                    }
                }
            }
            Kind::Reduce(op, root) if !self.recv.is_null() => {
                let recv = unsafe { slice_mut::<T>(self.recv, self.recv_count) }?;
                if !in_place {
                    let send = unsafe { slice::<T>(self.send, self.send_count) }?;
                    recv.copy_from_slice(send);
                }
                comm.reduce(recv, op, root)
            }
            Kind::Reduce(op, root) => {
                if in_place {
                    return Err(arg("a rank other than the root needs a send buffer"));
                }
                let mut scratch = unsafe { slice::<T>(self.send, self.send_count) }?.to_vec();
                comm.reduce(&mut scratch, op, root)
            }
            Kind::Bcast(root) => {
                let data = unsafe { slice_mut::<T>(self.recv, self.recv_count) }?;
                comm.bcast(data, root)
            }
            Kind::Allgather => {
                let send = unsafe { slice::<T>(self.send, self.send_count) }?;
                let recv = unsafe { slice_mut::<T>(self.recv, self.recv_count) }?;
                comm.allgather(send, recv)
            }
            Kind::ReduceScatter(op) => {
                let send = unsafe { slice::<T>(self.send, self.send_count) }?;
                let recv = unsafe { slice_mut::<T>(self.recv, self.recv_count) }?;
                comm.reduce_scatter_block(send, recv, op)
            }
        };
        outcome.map_err(Failure::from)
    }
}
