"""ftcoll's Python binding, run by every rank under the launcher:

    ftcoll-launch -n 4 -- python3 -m pytest -q python/tests

Every rank runs the same tests in the same order, so the collectives match up across ranks.
"""

import gc
import os

import numpy as np
import pytest

import ftcoll

DTYPES = [np.float64, np.float32, np.int32, np.int64, np.uint32, np.uint64]


@pytest.fixture(scope="module")
def comm():
    with ftcoll.Communicator() as comm:
        yield comm


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("count", [1, 1000, 300_000])
def test_allreduce_in_place_every_type(comm, dtype, count):
    data = np.full(count, comm.rank + 1, dtype=dtype)
    comm.allreduce(data, op="sum")
    assert np.all(data == comm.size * (comm.size + 1) // 2)


def mapped_heap_on():
    """Whether this job puts long vectors in memory files its ranks map."""
    env = os.environ
    return (
        env.get("FTCOLL_TRANSPORT") == "shm"
        and env.get("FTCOLL_SINGLE_COPY", "auto") != "off"
        and env.get("FTCOLL_SHARED_HEAP", "auto") != "off"
    )


@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_alloc_memory_is_mapped_by_the_neighbour_and_reduces_exactly(comm, dtype):
    itemsize = np.dtype(dtype).itemsize
    memory = ftcoll.alloc(4 << 20)
    assert len(memory) == 4 << 20
    assert memory.shared == mapped_heap_on()
    data = np.frombuffer(memory, dtype=dtype)
    assert data.flags.writeable and data.size == (4 << 20) // itemsize
    assert not data.any()
    data[:] = comm.rank + 1
    # The array keeps the memory alive once the memory object itself is gone.
    del memory
    gc.collect()
    comm.allreduce(data, op="sum")
    assert np.all(data == comm.size * (comm.size + 1) // 2)
    if mapped_heap_on() and comm.size > 1:
        # The single-copy ring read the left neighbour's vector through a read-only mapping
        # of its memory file, not by a cross-memory read.
        with open("/proc/self/maps") as maps:
            peers = [line for line in maps if "memfd:ftcoll-vector" in line and " r--s " in line]
        assert peers, "no neighbour's vector mapped"
    assert not ftcoll.alloc(100).shared


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_ft_allreduce_counts_everyone_without_failures(comm, dtype):
    data = np.arange(100_000, dtype=dtype) + comm.rank
    left_out = comm.ft_allreduce(data, op="sum")
    assert left_out == []
    n = comm.size
    assert np.array_equal(data, n * np.arange(100_000, dtype=dtype) + n * (n - 1) // 2)


def test_min_max_and_bitwise(comm):
    data = np.array([comm.rank, -comm.rank], dtype=np.int64)
    comm.allreduce(data, op="max")
    assert list(data) == [comm.size - 1, 0]
    bits = np.array([1 << comm.rank], dtype=np.uint64)
    comm.allreduce(bits, op="bor")
    assert bits[0] == (1 << comm.size) - 1


def test_bcast_reduce_allgather_reduce_scatter(comm):
    n, r = comm.size, comm.rank
    data = np.full(10, r, dtype=np.float64)
    comm.bcast(data, root=n - 1)
    assert np.all(data == n - 1)
    data = np.full(10, 1.0)
    comm.reduce(data, op="sum", root=0)
    assert np.all(data == (n if r == 0 else 1.0))
    gathered = np.zeros(3 * n, dtype=np.int32)
    comm.allgather(np.full(3, r, dtype=np.int32), gathered)
    assert list(gathered) == [k for k in range(n) for _ in range(3)]
    block = np.zeros(2, dtype=np.int64)
    comm.reduce_scatter_block(np.arange(2 * n, dtype=np.int64), block, op="sum")
    assert list(block) == [n * (2 * r), n * (2 * r + 1)]


def test_agree_iagree_and_barrier(comm):
    comm.barrier()
    assert comm.agree(1) == 1
    assert comm.agree(0 if comm.rank == 0 else 1) == 0
    first, second = comm.iagree(1), comm.iagree(0 if comm.rank == comm.size - 1 else 1)
    assert comm.wait_agree(second) == 0
    assert comm.wait_agree(first) == 1
    with pytest.raises(ftcoll.ConfigError):
        comm.wait_agree(first)


def test_fault_tolerant_tree_allreduces_without_failures(comm):
    data = np.full(1000, comm.rank + 1.0)
    assert comm.corrected_allreduce(data, tolerate=1) == []
    assert np.all(data == comm.size * (comm.size + 1) / 2)
    data = np.full(1000, comm.rank + 1.0)
    assert comm.ftco_allreduce(data, detect_timeout_ms=500) == []
    assert np.all(data == comm.size * (comm.size + 1) / 2)


def test_bad_arguments_raise_typed_errors(comm):
    with pytest.raises(ftcoll.ConfigError):
        comm.allreduce(np.zeros(4, dtype=np.int16))  # no such element type
    with pytest.raises(ftcoll.ConfigError):
        comm.allreduce(np.zeros(4), op="median")
    with pytest.raises(ftcoll.ConfigError):
        comm.allreduce(np.zeros((4, 4))[:, 0])  # not contiguous
    read_only = np.zeros(4)
    read_only.flags.writeable = False
    with pytest.raises(ftcoll.ConfigError):
        comm.allreduce(read_only)
    data = np.zeros(8, dtype=np.int32)
    with pytest.raises(ftcoll.ConfigError):
        comm.allgather(data[:2], data)  # out overlaps the input


def test_mismatched_lengths_raise_shape_error_everywhere_and_the_next_call_works(comm):
    data = np.ones(1000 + (1 if comm.rank == 0 else 0))
    with pytest.raises(ftcoll.ShapeError):
        comm.allreduce(data)
    data = np.ones(1000)
    comm.allreduce(data)
    assert np.all(data == comm.size)
