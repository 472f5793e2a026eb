//! `ftcoll.alloc`: memory for an array that the ranks of a node map, so that the allreduce
//! reads it with plain loads instead of a cross-memory read per call (`docs/python.md`). numpy
//! allocates its own arrays where no peer can map them; an array made over this memory
//! (`np.frombuffer(ftcoll.alloc(n), dtype)`) keeps it alive for as long as the array lives.

use std::os::raw::c_int;

use pyo3::exceptions::{PyBufferError, PyMemoryError};
use pyo3::ffi;
use pyo3::prelude::*;

use ftcoll_runtime::transport::shm::shared_heap;

/// Where the bytes live.
enum Storage {
    /// A memory file of the shared heap, by address (freed with `free_bytes`).
    Shared(usize),
    /// Private memory, 8-byte aligned for every element type: what the heap could not place
    /// (below 1 MiB, before `Communicator()`, or off the shared-memory transport).
    Private(Vec<u64>),
}

/// `bytes` of zeroed memory exported through the buffer protocol (unsigned bytes, writable).
#[pyclass(module = "ftcoll")]
pub struct SharedMemory {
    storage: Storage,
    bytes: usize,
}

impl SharedMemory {
    fn address(&mut self) -> *mut u8 {
        match &mut self.storage {
            Storage::Shared(address) => *address as *mut u8,
            Storage::Private(words) => words.as_mut_ptr().cast(),
        }
    }
}

#[pymethods]
impl SharedMemory {
    /// Bytes of the memory.
    fn __len__(&self) -> usize {
        self.bytes
    }

    /// Whether the node's ranks map it (a memory file of the shared heap).
    #[getter]
    fn shared(&self) -> bool {
        matches!(self.storage, Storage::Shared(_))
    }

    #[allow(unsafe_code)]
    unsafe fn __getbuffer__(
        mut slf: PyRefMut<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no view to fill"));
        }
        let bytes = slf.bytes as ffi::Py_ssize_t;
        let address = slf.address();
        // SAFETY: `view` is the interpreter's to fill; the memory stays valid while the view's
        // owned reference to this object (taken by PyBuffer_FillInfo) keeps it alive, and it is
        // writable.
        let rc =
            unsafe { ffi::PyBuffer_FillInfo(view, slf.as_ptr(), address.cast(), bytes, 0, flags) };
        if rc == 0 {
            Ok(())
        } else {
            Err(PyErr::fetch(slf.py()))
        }
    }

    #[allow(unsafe_code)]
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        if let Storage::Shared(address) = self.storage {
            shared_heap::free_bytes(address as *mut u8);
        }
    }
}

/// `bytes` of zeroed memory for an array: from 1 MiB, once `Communicator()` joined a job on
/// shared memory with the single copy on, a memory file the node's ranks map; otherwise
/// private memory. View it with `np.frombuffer(memory, dtype)`.
#[pyfunction]
pub fn alloc(bytes: usize) -> PyResult<SharedMemory> {
    if let Some(address) = shared_heap::alloc_bytes(bytes) {
        return Ok(SharedMemory {
            storage: Storage::Shared(address.as_ptr() as usize),
            bytes,
        });
    }
    let mut words = Vec::new();
    words
        .try_reserve_exact(bytes.div_ceil(8))
        .map_err(|_| PyMemoryError::new_err(format!("cannot allocate {bytes} bytes")))?;
    words.resize(bytes.div_ceil(8), 0);
    Ok(SharedMemory {
        storage: Storage::Private(words),
        bytes,
    })
}
