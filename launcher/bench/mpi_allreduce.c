/* The reference side of `ftcoll-launch bench allreduce`: the same measurement as ftcoll's
 * (per-iteration time at every rank, the slowest rank per iteration, median and p99 over
 * iterations) for the MPI library this file is compiled against.
 * Arguments: iterations, warm-up iterations, doubles per rank (default 1). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 1000;
    int warmup = argc > 2 ? atoi(argv[2]) : 100;
    long count = argc > 3 ? atol(argv[3]) : 1;
    if (iters < 1) iters = 1;
    if (count < 1) count = 1;
    double *times = malloc(sizeof(double) * iters);
    double *slowest = malloc(sizeof(double) * iters);
    double *in = malloc(sizeof(double) * count);
    double *out = malloc(sizeof(double) * count);
    if (!times || !slowest || !in || !out) {
        fprintf(stderr, "cannot allocate %ld doubles\n", count);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Every element is the rank, as ftcoll's `--input rank`: the sum is exact. */
    for (long i = 0; i < count; i++) in[i] = rank, out[i] = 0.0;
    double expected = (double)size * (size - 1) / 2.0;
    for (int i = 0; i < warmup; i++)
        MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int wrong = 0;
    for (int i = 0; i < iters; i++) {
        double start = MPI_Wtime();
        MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        times[i] = MPI_Wtime() - start;
        wrong |= out[0] != expected || out[count - 1] != expected;
    }
    MPI_Reduce(times, slowest, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(slowest, iters, sizeof(double), by_value);
        int p99 = (int)(0.99 * (iters - 1));
        printf("median_us %.3f p99_us %.3f wrong %d\n", slowest[iters / 2] * 1e6, slowest[p99] * 1e6, wrong);
    }
    free(times);
    free(slowest);
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
