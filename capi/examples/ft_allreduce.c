/* The fault-tolerant allreduce from C: run it under the launcher and kill a rank in the middle.
 *
 *   ftcoll-launch -n 8 --fault kill:rank=3,op=1,at=2ms -- ./ft_allreduce [COUNT] [CALLS]
 *
 * Every rank contributes int64 elements that name it: rank r's element i is
 * (r + 1) * 1000003 + i. After each call a survivor checks its result exactly against the sum
 * over the ranks the call says it counted, and prints one line. Exit status 0 only if every
 * result was exact. */
#include <ftcoll.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ != FTCOLL_SUCCESS) {                                                  \
            fprintf(stderr, "%s: %s: %s\n", #call, ftcoll_error_string(rc_),         \
                    ftcoll_last_error());                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

int main(int argc, char **argv) {
    size_t count = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)1 << 20;
    int calls = argc > 2 ? atoi(argv[2]) : 3;
    FtcollComm *comm;
    CHECK(ftcoll_init(&comm));
    int rank, size;
    CHECK(ftcoll_comm_rank(comm, &rank));
    CHECK(ftcoll_comm_size(comm, &size));
    /* ftcoll_alloc: from 1 MiB the node's ranks map these vectors and read them directly. */
    int64_t *in = ftcoll_alloc(count * sizeof *in), *out = ftcoll_alloc(count * sizeof *out);
    uint32_t *excluded = malloc((size_t)size * sizeof *excluded);
    if (!in || !out || !excluded) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        return 1;
    }
    for (size_t i = 0; i < count; i++) in[i] = (int64_t)(rank + 1) * 1000003 + (int64_t)i;
    for (int call = 0; call < calls; call++) {
        size_t left_out = 0;
        CHECK(ftcoll_ft_allreduce(comm, in, out, count, FTCOLL_I64, FTCOLL_SUM, excluded,
                                  (size_t)size, &left_out));
        /* The sum over the counted ranks: every rank but the ones left out. */
        int64_t base = 0, counted = 0;
        for (int r = 0; r < size; r++) {
            int out_of_it = 0;
            for (size_t k = 0; k < left_out; k++) out_of_it |= excluded[k] == (uint32_t)r;
            if (!out_of_it) {
                base += (int64_t)(r + 1) * 1000003;
                counted++;
            }
        }
        for (size_t i = 0; i < count; i++) {
            if (out[i] != base + counted * (int64_t)i) {
                fprintf(stderr, "rank %d, call %d: element %zu is %" PRId64 ", expected %" PRId64 "\n",
                        rank, call, i, out[i], base + counted * (int64_t)i);
                return 2;
            }
        }
        printf("rank %d: call %d exact over %" PRId64 " ranks (%zu left out)\n", rank, call,
               counted, left_out);
    }
    /* ULFM's non-blocking agreement, and FTCO's tree allreduce, which leaves the dead out. */
    FtcollAgreeRequest *request;
    CHECK(ftcoll_iagree(comm, 1, &request));
    uint64_t flag = 0;
    int rc = ftcoll_wait_agree(comm, request, &flag);
    if ((rc != FTCOLL_SUCCESS && rc != FTCOLL_ERR_UNACKED_FAILURE) || flag != 1) {
        fprintf(stderr, "rank %d: agreement: %s, flag %" PRIu64 "\n", rank, ftcoll_error_string(rc), flag);
        return 3;
    }
    double small[16];
    for (int i = 0; i < 16; i++) small[i] = rank + 1;
    size_t left_out = 0;
    CHECK(ftcoll_ftco_allreduce(comm, small, 16, FTCOLL_SUM, 500, excluded, (size_t)size, &left_out));
    double want = 0;
    for (int r = 0; r < size; r++) {
        int out_of_it = 0;
        for (size_t k = 0; k < left_out; k++) out_of_it |= excluded[k] == (uint32_t)r;
        want += out_of_it ? 0 : r + 1;
    }
    if (small[0] != want) {
        fprintf(stderr, "rank %d: ftco allreduce gave %.1f, expected %.1f\n", rank, small[0], want);
        return 4;
    }
    printf("rank %d: agreement and FTCO allreduce ok (%zu left out)\n", rank, left_out);
    ftcoll_free(in);
    ftcoll_free(out);
    free(excluded);
    CHECK(ftcoll_finalize(comm));
    return 0;
}
