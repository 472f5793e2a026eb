//! `ftcoll` for Python: a `Communicator` whose collectives work in place on numpy arrays (any
//! object with a writable, C-contiguous buffer of `float64, float32, int32, int64, uint32,
//! uint64`), without copies, and the library's typed errors as exceptions.

use pyo3::buffer::{Element as PyElement, PyBuffer};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use ftcoll_algos::values::Element;
use ftcoll_algos::ReduceOp;
use ftcoll_runtime::comm::{
    AgreeRequest as InnerRequest, CommError, Communicator as Inner, CorrectedOptions, Outcome,
};
use ftcoll_runtime::ftco_call::FtcoCall;

mod memory;

create_exception!(ftcoll, Error, PyException, "Any error of ftcoll.");
create_exception!(
    ftcoll,
    ProcFailedError,
    Error,
    "A rank failed during a call that cannot complete without it."
);
create_exception!(
    ftcoll,
    RevokedError,
    Error,
    "The communicator was revoked: agree or shrink to recover."
);
create_exception!(
    ftcoll,
    ShapeError,
    Error,
    "Ranks passed arrays of different types or lengths."
);
create_exception!(
    ftcoll,
    OpTimeoutError,
    Error,
    "The call did not complete within the operation timeout."
);
create_exception!(
    ftcoll,
    TooLongError,
    Error,
    "The algorithm carries fewer elements per call on this transport."
);
create_exception!(ftcoll, UnacknowledgedFailureError, Error, "An agreement decided while a failure was not acknowledged everywhere; args[1] is the agreed value.");
create_exception!(
    ftcoll,
    EnvError,
    Error,
    "The process was not started by ftcoll-launch."
);
create_exception!(
    ftcoll,
    ConfigError,
    Error,
    "A setting the job cannot honour, or a bad argument."
);

fn to_py(error: CommError) -> PyErr {
    let text = error.to_string();
    match error {
        CommError::PeerFailed { .. } | CommError::MixedContributors { .. } => {
            ProcFailedError::new_err(text)
        }
        CommError::Revoked => RevokedError::new_err(text),
        CommError::Shape { .. } | CommError::ShapeMismatch { .. } => ShapeError::new_err(text),
        CommError::TimedOut(_) | CommError::Unsettled { .. } => OpTimeoutError::new_err(text),
        CommError::TooLong { .. } => TooLongError::new_err(text),
        CommError::UnacknowledgedFailure { agreed, .. } => {
            UnacknowledgedFailureError::new_err((text, agreed))
        }
        CommError::Env(_) => EnvError::new_err(text),
        CommError::Tolerance { .. } | CommError::Config(_) | CommError::Agree(_) => {
            ConfigError::new_err(text)
        }
        CommError::Shutdown
        | CommError::Transport(_)
        | CommError::Control(_)
        | CommError::Faults(_)
        | CommError::SingleCopy { .. } => Error::new_err(text),
    }
}

fn op_of(name: &str) -> PyResult<ReduceOp> {
    match ReduceOp::parse(name) {
        // The weighted average and the rank-set union are the library's own operators.
        Ok(ReduceOp::Average | ReduceOp::RankUnion) | Err(_) => Err(ConfigError::new_err(format!(
            "unknown operator '{name}'; use sum, prod, min, max, band, bor or bxor"
        ))),
        Ok(op) => Ok(op),
    }
}

/// Runs `$body` with `$slice` bound to the array's elements as `&mut [T]`, for the element type
/// the array holds.
macro_rules! on_array {
    ($array:expr, $writable:expr, |$slice:ident| $body:expr) => {{
        let array = $array;
        if let Ok(buffer) = PyBuffer::<f64>::get(array) {
            let $slice = elements(&buffer, $writable)?;
            $body
        } else if let Ok(buffer) = PyBuffer::<f32>::get(array) {
            let $slice = elements(&buffer, $writable)?;
            $body
        } else if let Ok(buffer) = PyBuffer::<i64>::get(array) {
            let $slice = elements(&buffer, $writable)?;
            $body
        } else if let Ok(buffer) = PyBuffer::<i32>::get(array) {
            let $slice = elements(&buffer, $writable)?;
            $body
        } else if let Ok(buffer) = PyBuffer::<u64>::get(array) {
            let $slice = elements(&buffer, $writable)?;
            $body
        } else if let Ok(buffer) = PyBuffer::<u32>::get(array) {
            let $slice = elements(&buffer, $writable)?;
            $body
        } else {
            Err(ConfigError::new_err(
                "expected an array of float64, float32, int64, int32, uint64 or uint32",
            ))
        }
    }};
}

/// The buffer's elements, in place.
#[allow(clippy::mut_from_ref)] // the buffer is Python's memory, not the handle's: see SAFETY
fn elements<T: PyElement + Element>(buffer: &PyBuffer<T>, writable: bool) -> PyResult<&mut [T]> {
    if !buffer.is_c_contiguous() {
        return Err(ConfigError::new_err("the array must be C-contiguous"));
    }
    if writable && buffer.readonly() {
        return Err(ConfigError::new_err("the array is read-only"));
    }
    let len = buffer.item_count();
    if len == 0 {
        return Ok(&mut []);
    }
    #[allow(unsafe_code)]
    // SAFETY: the buffer is C-contiguous with `len` items of `T` (PyBuffer::get checked the
    // format and the item size), it stays exported — so the array cannot be resized or freed —
    // while `buffer` lives, which outlasts the slice, and the GIL is held for the whole call,
    // so no Python code touches the array meanwhile. A read-only buffer is only ever read
    // (`writable` false is passed for inputs the call does not write).
    Ok(unsafe { std::slice::from_raw_parts_mut(buffer.buf_ptr().cast::<T>(), len) })
}

/// Refuses an output array that shares memory with the input.
fn disjoint<T>(input: &[T], output: &[T]) -> PyResult<()> {
    let (a, b) = (input.as_ptr_range(), output.as_ptr_range());
    if !input.is_empty() && !output.is_empty() && a.start < b.end && b.start < a.end {
        return Err(ConfigError::new_err(
            "out must not share memory with the input array",
        ));
    }
    Ok(())
}

fn excluded(outcome: &Outcome) -> Vec<u32> {
    outcome.excluded.iter().map(|r| r.0).collect()
}

/// A communicator: the ranks of the job this process was started in by `ftcoll-launch`, or
/// the survivors after `shrink()`. Use it from one thread.
#[pyclass(unsendable, module = "ftcoll")]
struct Communicator {
    inner: Option<Inner>,
}

impl Communicator {
    fn comm(&mut self) -> PyResult<&mut Inner> {
        self.inner
            .as_mut()
            .ok_or_else(|| Error::new_err("the communicator was finalized"))
    }
}

fn typed<T: Element>(
    comm: &mut Inner,
    data: &mut [T],
    call: impl FnOnce(&mut Inner, &mut [T]) -> Result<Outcome, CommError>,
) -> PyResult<Outcome> {
    call(comm, data).map_err(to_py)
}

#[pymethods]
impl Communicator {
    /// Joins the job (the launcher's environment).
    #[new]
    fn new() -> PyResult<Communicator> {
        Ok(Communicator {
            inner: Some(Inner::from_env().map_err(to_py)?),
        })
    }

    /// This rank's index (0..size).
    #[getter]
    fn rank(&mut self) -> PyResult<u32> {
        Ok(self.comm()?.rank())
    }

    /// Ranks in the communicator.
    #[getter]
    fn size(&mut self) -> PyResult<u32> {
        Ok(self.comm()?.size())
    }

    /// The members as ranks of the job (after a shrink, the survivors).
    #[getter]
    fn members(&mut self) -> PyResult<Vec<u32>> {
        Ok(self.comm()?.members())
    }

    /// Allreduce of `array` in place; raises ProcFailedError if a rank fails during it.
    #[pyo3(signature = (array, op = "sum"))]
    fn allreduce(&mut self, array: &Bound<'_, PyAny>, op: &str) -> PyResult<()> {
        let op = op_of(op)?;
        let comm = self.comm()?;
        on_array!(array, true, |data| typed(comm, data, |c, d| c
            .allreduce(d, op)))?;
        Ok(())
    }

    /// Fault-tolerant allreduce of `array` in place at the ring's bandwidth: every survivor gets
    /// the same result, each rank's input counted once or not at all. Returns the ranks whose
    /// inputs it leaves out.
    #[pyo3(signature = (array, op = "sum"))]
    fn ft_allreduce(&mut self, array: &Bound<'_, PyAny>, op: &str) -> PyResult<Vec<u32>> {
        let op = op_of(op)?;
        let comm = self.comm()?;
        let outcome = on_array!(array, true, |data| typed(comm, data, |c, d| c
            .ft_allreduce(d, op)))?;
        Ok(excluded(&outcome))
    }

    /// Fault-tolerant allreduce of a float64 array by correction (001), tolerating
    /// `tolerate` failures; returns the ranks left out.
    #[pyo3(signature = (array, op = "sum", tolerate = 1))]
    fn corrected_allreduce(
        &mut self,
        array: &Bound<'_, PyAny>,
        op: &str,
        tolerate: u32,
    ) -> PyResult<Vec<u32>> {
        let op = op_of(op)?;
        let comm = self.comm()?;
        let buffer = PyBuffer::<f64>::get(array)
            .map_err(|_| ConfigError::new_err("corrected_allreduce takes float64 arrays"))?;
        let data = elements(&buffer, true)?;
        let options = CorrectedOptions {
            tolerate,
            ..CorrectedOptions::default()
        };
        let outcome = comm.corrected_allreduce(data, op, options).map_err(to_py)?;
        Ok(excluded(&outcome))
    }

    /// Fault-tolerant allreduce of a float64 array by FTCO (004): a tree that routes around
    /// ranks silent for `detect_timeout_ms` (or reported dead); returns the ranks left out.
    #[pyo3(signature = (array, op = "sum", detect_timeout_ms = 100))]
    fn ftco_allreduce(
        &mut self,
        array: &Bound<'_, PyAny>,
        op: &str,
        detect_timeout_ms: u64,
    ) -> PyResult<Vec<u32>> {
        let op = op_of(op)?;
        if detect_timeout_ms == 0 {
            return Err(ConfigError::new_err("detect_timeout_ms must be at least 1"));
        }
        let comm = self.comm()?;
        let buffer = PyBuffer::<f64>::get(array)
            .map_err(|_| ConfigError::new_err("ftco_allreduce takes float64 arrays"))?;
        let data = elements(&buffer, true)?;
        let call = FtcoCall::allreduce(std::time::Duration::from_millis(detect_timeout_ms));
        let outcome = comm.ftco(data, op, &call).map_err(to_py)?;
        Ok(excluded(&outcome))
    }

    /// Reduce of every rank's `array` to `root`, in place at the root.
    #[pyo3(signature = (array, op = "sum", root = 0))]
    fn reduce(&mut self, array: &Bound<'_, PyAny>, op: &str, root: u32) -> PyResult<()> {
        let op = op_of(op)?;
        let comm = self.comm()?;
        on_array!(array, true, |data| typed(comm, data, |c, d| c
            .reduce(d, op, root)))?;
        Ok(())
    }

    /// Broadcast of the root's `array` into every rank's.
    #[pyo3(signature = (array, root = 0))]
    fn bcast(&mut self, array: &Bound<'_, PyAny>, root: u32) -> PyResult<()> {
        let comm = self.comm()?;
        on_array!(array, true, |data| typed(comm, data, |c, d| c
            .bcast(d, root)))?;
        Ok(())
    }

    /// Every rank's `array` into `out` (size × len elements, the same type), in rank order.
    fn allgather(&mut self, array: &Bound<'_, PyAny>, out: &Bound<'_, PyAny>) -> PyResult<()> {
        let comm = self.comm()?;
        on_array!(array, false, |input| {
            let out_buffer = PyBuffer::get(out)
                .map_err(|_| ConfigError::new_err("out must be an array of the input's type"))?;
            let output = elements(&out_buffer, true)?;
            disjoint(input, output)?;
            typed(comm, output, |c, o| c.allgather(input, o))
        })?;
        Ok(())
    }

    /// Reduce-scatter: `array` holds size blocks; rank r's `out` gets block r reduced.
    #[pyo3(signature = (array, out, op = "sum"))]
    fn reduce_scatter_block(
        &mut self,
        array: &Bound<'_, PyAny>,
        out: &Bound<'_, PyAny>,
        op: &str,
    ) -> PyResult<()> {
        let op = op_of(op)?;
        let comm = self.comm()?;
        on_array!(array, false, |input| {
            let out_buffer = PyBuffer::get(out)
                .map_err(|_| ConfigError::new_err("out must be an array of the input's type"))?;
            let output = elements(&out_buffer, true)?;
            disjoint(input, output)?;
            typed(comm, output, |c, o| c.reduce_scatter_block(input, o, op))
        })?;
        Ok(())
    }

    /// Returns once every rank has called it.
    fn barrier(&mut self) -> PyResult<()> {
        self.comm()?.barrier().map_err(to_py)
    }

    /// ULFM's agree: the bitwise AND of every participant's `flag`, the same at every survivor.
    /// Raises UnacknowledgedFailureError (args[1]: the agreed value) when a failure was not
    /// acknowledged everywhere.
    fn agree(&mut self, flag: u64) -> PyResult<u64> {
        self.comm()?.agree(flag).map_err(to_py)
    }

    /// ULFM's iagree: starts an agreement on `flag` (AND) and returns a request at once.
    fn iagree(&mut self, flag: u64) -> PyResult<AgreeRequest> {
        let inner = self
            .comm()?
            .iagree(&[flag], ReduceOp::BitAnd)
            .map_err(to_py)?;
        Ok(AgreeRequest { inner: Some(inner) })
    }

    /// Completes an agreement `iagree` started; errors as `agree`.
    fn wait_agree(&mut self, request: &mut AgreeRequest) -> PyResult<u64> {
        let inner = request
            .inner
            .take()
            .ok_or_else(|| ConfigError::new_err("the request was already waited for"))?;
        let agreed = self.comm()?.wait_agree(inner).map_err(to_py)?;
        let value = agreed.words.first().copied().unwrap_or(0);
        if agreed.unacknowledged.is_empty() {
            Ok(value)
        } else {
            Err(to_py(CommError::UnacknowledgedFailure {
                agreed: value,
                unacknowledged: agreed.unacknowledged,
            }))
        }
    }

    /// ULFM's failure_ack: acknowledges the failures known now; returns how many are.
    fn ack_failed(&mut self) -> PyResult<usize> {
        Ok(self.comm()?.ack_failed())
    }

    /// The ranks known failed.
    fn failed_ranks(&mut self) -> PyResult<Vec<u32>> {
        Ok(self.comm()?.failed_ranks())
    }

    /// ULFM's shrink, in place: continues as the survivors' communicator; returns its members.
    fn shrink(&mut self) -> PyResult<Vec<u32>> {
        self.comm()?.shrink().map_err(to_py)
    }

    /// ULFM's revoke: every pending and later collective fails with RevokedError everywhere.
    fn revoke(&mut self) -> PyResult<()> {
        self.comm()?.revoke().map_err(to_py)
    }

    /// Leaves the job; the communicator is unusable afterwards.
    fn finalize(&mut self) -> PyResult<()> {
        match self.inner.take() {
            Some(comm) => comm.finish().map_err(to_py),
            None => Ok(()),
        }
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.finalize()?;
        Ok(false)
    }
}

/// An agreement in flight (`Communicator.iagree`).
#[pyclass(unsendable, module = "ftcoll")]
struct AgreeRequest {
    inner: Option<InnerRequest>,
}

/// The module.
#[pymodule]
fn ftcoll(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Communicator>()?;
    m.add_class::<AgreeRequest>()?;
    m.add_class::<memory::SharedMemory>()?;
    m.add_function(wrap_pyfunction!(memory::alloc, m)?)?;
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("ProcFailedError", py.get_type::<ProcFailedError>())?;
    m.add("RevokedError", py.get_type::<RevokedError>())?;
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("OpTimeoutError", py.get_type::<OpTimeoutError>())?;
    m.add("TooLongError", py.get_type::<TooLongError>())?;
    m.add(
        "UnacknowledgedFailureError",
        py.get_type::<UnacknowledgedFailureError>(),
    )?;
    m.add("EnvError", py.get_type::<EnvError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    Ok(())
}
