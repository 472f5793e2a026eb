/* The reference side of `ftcoll-launch bench allreduce`: the same measurement as ftcoll's
 * (per-iteration time at every rank, the slowest rank per iteration, median and p99 over
 * iterations) for the MPI library this file is compiled against.
 * Arguments: iterations, warm-up iterations, doubles per rank (default 1), and the collective:
 * allreduce (default), bcast (from rank 0) or reduce (to rank 0), and the pages of the vectors:
 * huge (default, hinted for transparent huge pages) or base. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A vector in transparent huge pages, as ftcoll's job allocates its own: both sides of the
 * comparison get the same memory (the hint matters from megabytes: fewer page faults, TLB
 * misses and pages to pin for single-copy reads). */
static double *vector(long count, int huge) {
    size_t bytes = sizeof(double) * (size_t)count;
    void *v = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (v == MAP_FAILED) return NULL;
    if (huge) madvise(v, bytes, MADV_HUGEPAGE);
    return v;
}

enum collective { ALLREDUCE, BCAST, REDUCE };

static void run(enum collective c, double *in, double *out, long count) {
    if (c == BCAST) MPI_Bcast(out, (int)count, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    else if (c == REDUCE) MPI_Reduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    else MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

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
    enum collective c = ALLREDUCE;
    if (argc > 4 && strcmp(argv[4], "bcast") == 0) c = BCAST;
    if (argc > 4 && strcmp(argv[4], "reduce") == 0) c = REDUCE;
    int huge = !(argc > 5 && strcmp(argv[5], "base") == 0);
    if (iters < 1) iters = 1;
    if (count < 1) count = 1;
    double *times = malloc(sizeof(double) * iters);
    double *slowest = malloc(sizeof(double) * iters);
    double *in = vector(count, huge);
    double *out = vector(count, huge);
    if (!times || !slowest || !in || !out) {
        fprintf(stderr, "cannot allocate %ld doubles\n", count);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* Every element is the rank, as ftcoll's `--input rank`: the sum is exact. */
    for (long i = 0; i < count; i++) in[i] = rank, out[i] = rank;
    /* A broadcast leaves rank 0's values (0) everywhere; a reduce the sum at rank 0. */
    double expected = c == BCAST ? 0.0 : (double)size * (size - 1) / 2.0;
    int checked = c != REDUCE || rank == 0;
    for (int i = 0; i < warmup; i++) run(c, in, out, count);
    int wrong = 0;
    for (int i = 0; i < iters; i++) {
        if (c == BCAST) out[0] = out[count - 1] = rank;
        double start = MPI_Wtime();
        run(c, in, out, count);
        times[i] = MPI_Wtime() - start;
        wrong |= checked && (out[0] != expected || out[count - 1] != expected);
    }
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Reduce(times, slowest, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(slowest, iters, sizeof(double), by_value);
        int p99 = (int)(0.99 * (iters - 1));
        printf("median_us %.3f p99_us %.3f wrong %d\n", slowest[iters / 2] * 1e6, slowest[p99] * 1e6, wrong);
    }
    free(times);
    free(slowest);
    munmap(in, sizeof(double) * (size_t)count);
    munmap(out, sizeof(double) * (size_t)count);
    MPI_Finalize();
    return 0;
}
