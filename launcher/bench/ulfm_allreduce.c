/* The reference side of `ftcoll-launch bench ft-allreduce`: the ULFM way to finish an
 * allreduce that a rank's death interrupts, with Open MPI 5's ULFM extension.
 *
 *   ulfm_allreduce COUNT ITERS VICTIM
 *       times ITERS fault-free MPI_Allreduce calls on COUNT doubles (the slowest rank per call),
 *       then one more in which rank VICTIM is SIGKILLed half the fault-free median after it
 *       starts. The survivors finish that call the ULFM way: MPI_Allreduce, then MPIX_Comm_agree
 *       on whether it succeeded everywhere (a rank may have its result while another failed),
 *       and if not MPIX_Comm_revoke, MPIX_Comm_shrink and MPI_Allreduce again on the shrunk
 *       communicator. Prints
 *       median_us A faulty_us B wrong W
 *       where B is the slowest survivor's time from the faulty call's start to its result and W
 *       counts survivors whose result is not the survivors' exact sum (or everyone's, when the
 *       call completed before the death).
 *
 * Run under `mpiexec --with-ft ulfm`. ULFM_ALLREDUCE_WATCHDOG=SECONDS (default 300) bounds the
 * run, so that a lost recovery never leaves ranks hanging. */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <sys/mman.h>

/* A vector in transparent huge pages, as ftcoll's job allocates its own: both sides of the
 * comparison get the same memory (the hint matters from megabytes: fewer page faults, TLB
 * misses and pages to pin for single-copy reads). */
static double *vector(long count) {
    size_t bytes = sizeof(double) * (size_t)count;
    void *v = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (v == MAP_FAILED) return NULL;
    madvise(v, bytes, MADV_HUGEPAGE);
    return v;
}

#ifndef OMPI_HAVE_MPI_EXT_FTMPI
#error "this benchmark needs an MPI with the ULFM extension (mpi-ext.h defining OMPI_HAVE_MPI_EXT_FTMPI)"
#endif

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Rank r's element i: integers, so every sum is exact and names who it counts. */
static double input(int r, long i) { return (double)((r + 1) * 1000 + i % 997); }

static void fill(double *v, long count, int rank) {
    for (long i = 0; i < count; i++) v[i] = input(rank, i);
}

/* Whether v is the sum over the ranks of `world` (0..size-1) whose bit is set in `in`. */
static int is_sum(const double *v, long count, int size, const unsigned char *in) {
    for (long i = 0; i < count; i++) {
        double want = 0;
        for (int r = 0; r < size; r++)
            if (in[r]) want += input(r, i);
        if (v[i] != want) return 0;
    }
    return 1;
}

static void die(int sig) {
    (void)sig;
    raise(SIGKILL);
}

static void watchdog(int sig) {
    (void)sig;
    static const char msg[] = "ulfm_allreduce: watchdog expired\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

/* Survivors can block in MPI_Finalize once a rank died (Open MPI 5.0's closing PMIx fence);
 * the result line is out by then, so leave after a grace period. */
static void finalize_timed_out(int sig) {
    (void)sig;
    _exit(0);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: %s COUNT ITERS VICTIM\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    long count = atol(argv[1]);
    int iters = atoi(argv[2]), victim = atoi(argv[3]);
    if (count < 1 || iters < 1 || victim < 0 || victim >= size || size < 2) {
        if (rank == 0) fprintf(stderr, "COUNT and ITERS at least 1, VICTIM a rank, 2 ranks or more\n");
        MPI_Finalize();
        return 2;
    }
    const char *limit = getenv("ULFM_ALLREDUCE_WATCHDOG");
    signal(SIGALRM, watchdog);
    alarm(limit ? (unsigned)atoi(limit) : 300u);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    double *in = vector(count), *out = vector(count);
    double *times = malloc(iters * sizeof *times), *slowest = malloc(iters * sizeof *slowest);
    unsigned char *everyone = malloc(size), *survivors = malloc(size);
    if (!in || !out || !times || !slowest || !everyone || !survivors) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(everyone, 1, size);
    memcpy(survivors, everyone, size);
    survivors[victim] = 0;
    fill(in, count, rank);
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        times[i] = (MPI_Wtime() - t) * 1e6;
    }
    MPI_Allreduce(times, slowest, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(slowest, iters, sizeof *slowest, by_value);
    double median = slowest[iters / 2];
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == victim) {
        /* Die half the fault-free median into the call (the watchdog's alarm is replaced). */
        struct itimerval half = {{0, 0}, {0, (long)(median / 2) + 1}};
        half.it_value.tv_sec = half.it_value.tv_usec / 1000000;
        half.it_value.tv_usec %= 1000000;
        signal(SIGALRM, die);
        setitimer(ITIMER_REAL, &half, NULL);
    }
    double t = MPI_Wtime();
    int rc = MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    int ok = rc == MPI_SUCCESS;
    int agreed = ok;
    int arc = MPIX_Comm_agree(MPI_COMM_WORLD, &agreed);
    MPI_Comm comm = MPI_COMM_WORLD;
    const unsigned char *counted = everyone;
    if (arc != MPI_SUCCESS || !agreed) {
        MPIX_Comm_revoke(MPI_COMM_WORLD);
        if (MPIX_Comm_shrink(MPI_COMM_WORLD, &comm) != MPI_SUCCESS) {
            fprintf(stderr, "rank %d: MPIX_Comm_shrink failed\n", rank);
            _exit(1);
        }
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        if (MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, comm) != MPI_SUCCESS) {
            fprintf(stderr, "rank %d: the retry failed too\n", rank);
            _exit(1);
        }
        counted = survivors;
    }
    double faulty = (MPI_Wtime() - t) * 1e6;
    signal(SIGALRM, watchdog);
    alarm(limit ? (unsigned)atoi(limit) : 300u);
    double worst;
    int wrong = !is_sum(out, count, size, counted), wrong_all;
    MPI_Reduce(&faulty, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
    MPI_Reduce(&wrong, &wrong_all, 1, MPI_INT, MPI_SUM, 0, comm);
    int me;
    MPI_Comm_rank(comm, &me);
    if (me == 0) {
        printf("median_us %.3f faulty_us %.3f wrong %d\n", median, worst, wrong_all);
        fflush(stdout);
    }
    munmap(in, count * sizeof *in);
    munmap(out, count * sizeof *out);
    free(times);
    free(slowest);
    free(everyone);
    free(survivors);
    signal(SIGALRM, finalize_timed_out);
    alarm(5);
    if (comm != MPI_COMM_WORLD) MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
