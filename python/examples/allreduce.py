"""The fault-tolerant allreduce on numpy arrays: run it under the launcher, kill a rank.

    ftcoll-launch -n 8 --fault kill:rank=3,op=1,at=2ms -- python3 examples/allreduce.py

Rank r's element i is (r + 1) * 1000003 + i (int64): after each call every survivor checks
its array exactly against the sum over the ranks the call says it counted.
"""

import sys

import numpy as np

import ftcoll


def main(count: int = 1 << 20, calls: int = 3) -> int:
    with ftcoll.Communicator() as comm:
        rank, size = comm.rank, comm.size
        index = np.arange(count, dtype=np.int64)
        for call in range(calls):
            data = (rank + 1) * 1000003 + index  # a fresh input, reduced in place
            left_out = comm.ft_allreduce(data, op="sum")
            counted = [r for r in range(size) if r not in left_out]
            want = sum((r + 1) * 1000003 for r in counted) + len(counted) * index
            if not np.array_equal(data, want):
                print(f"rank {rank}, call {call}: wrong result", file=sys.stderr)
                return 2
            # One write per line: the ranks share the launcher's stdout.
            line = f"rank {rank}: call {call} exact over {len(counted)} ranks ({len(left_out)} left out)\n"
            sys.stdout.write(line)
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    sys.exit(main(*args))
