"""What the Python binding adds to an allreduce: times `comm.allreduce` on numpy arrays of 8 B
and 1 MiB (float64) exactly as `ftcoll-launch bench allreduce` times the Rust call — per
operation the slowest rank, median over the operations — and prints one line per size.

    ftcoll-launch -n 2 -- python3 examples/overhead.py [ITERS]

Compare with `ftcoll-launch bench allreduce --sizes 2 --bytes 8,1048576 --mpi none` in the
same session (docs/performance.md has both).
"""

import sys
import time

import numpy as np

import ftcoll


def slowest_median(comm, data, iters, warmup):
    for _ in range(warmup):
        comm.allreduce(data)
    times = np.empty(iters, dtype=np.float64)
    for i in range(iters):
        start = time.perf_counter_ns()
        comm.allreduce(data)
        times[i] = (time.perf_counter_ns() - start) / 1e3
    comm.allreduce(times, op="max")  # the slowest rank's time per operation
    return float(np.median(times))


def main(iters: int = 2000) -> int:
    with ftcoll.Communicator() as comm:
        for size in (8, 1 << 20):
            n = max(10, min(iters, (1 << 31) // size))
            median = slowest_median(comm, np.ones(size // 8), n, max(2, n // 10))
            if comm.rank == 0:
                print(f"python allreduce n={comm.size} bytes={size} median_us={median:.3f} ops={n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:2])))
