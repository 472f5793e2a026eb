// The ULFM way from C++, with ftcoll's C ABI behind a small RAII class: a plain allreduce that
// a rank's death interrupts, an agreement on whether it succeeded everywhere, and if not
// revoke, acknowledge, shrink and the allreduce again over the survivors.
//
//   ftcoll-launch -n 8 --fault kill:rank=5,op=2,at=1ms -- ./ulfm_recovery [COUNT] [CALLS]
//
// Each survivor checks every result exactly against the sum over the communicator's members
// at the time of the successful call, and prints one line per call.
#include <ftcoll.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Error : std::runtime_error {
    int code;
    Error(int c, const std::string &what)
        : std::runtime_error(what + ": " + ftcoll_error_string(c) + ": " + ftcoll_last_error()),
          code(c) {}
};

void check(int code, const char *what) {
    if (code != FTCOLL_SUCCESS) throw Error(code, what);
}

// Owns a communicator: joined on construction, left on destruction.
class Communicator {
  public:
    Communicator() { check(ftcoll_init(&comm_), "ftcoll_init"); }
    ~Communicator() {
        if (comm_ != nullptr) ftcoll_finalize(comm_);
    }
    Communicator(const Communicator &) = delete;
    Communicator &operator=(const Communicator &) = delete;

    int rank() const { return get(ftcoll_comm_rank); }
    int size() const { return get(ftcoll_comm_size); }

    std::vector<uint32_t> members() const {
        std::vector<uint32_t> ranks(static_cast<size_t>(size()));
        size_t len = 0;
        check(ftcoll_comm_members(comm_, ranks.data(), ranks.size(), &len), "members");
        ranks.resize(len);
        return ranks;
    }

    // The allreduce; false when a rank failed (or the communicator was revoked) during it.
    bool allreduce(const std::vector<double> &in, std::vector<double> &out) {
        int code = ftcoll_allreduce(comm_, in.data(), out.data(), in.size(), FTCOLL_F64,
                                    FTCOLL_SUM);
        if (code == FTCOLL_ERR_PROC_FAILED || code == FTCOLL_ERR_REVOKED) return false;
        check(code, "ftcoll_allreduce");
        return true;
    }

    // MPIX_Comm_agree on a flag; an unacknowledged failure counts as "not everywhere".
    bool agree(bool mine) {
        uint64_t flag = mine ? 1 : 0;
        int code = ftcoll_agree(comm_, &flag);
        if (code == FTCOLL_ERR_UNACKED_FAILURE) return false;
        check(code, "ftcoll_agree");
        return flag == 1;
    }

    void recover() {
        check(ftcoll_revoke(comm_), "ftcoll_revoke");
        check(ftcoll_ack_failed(comm_, nullptr), "ftcoll_ack_failed");
        check(ftcoll_shrink(comm_), "ftcoll_shrink");
    }

  private:
    int get(int (*query)(FtcollComm *, int *)) const {
        int value = 0;
        check(query(comm_, &value), "query");
        return value;
    }
    FtcollComm *comm_ = nullptr;
};

double input(uint32_t rank, size_t i) { return static_cast<double>(rank + 1) * 4096.0 + i % 1000; }

}  // namespace

int main(int argc, char **argv) {
    size_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{1} << 18;
    int calls = argc > 2 ? std::atoi(argv[2]) : 4;
    try {
        Communicator comm;
        const uint32_t me = comm.members()[static_cast<size_t>(comm.rank())];
        std::vector<double> in(count), out(count);
        for (size_t i = 0; i < count; i++) in[i] = input(me, i);
        for (int call = 0; call < calls; call++) {
            bool ran = comm.allreduce(in, out);
            int retries = 0;
            // Each retry runs on a communicator without the ranks found dead.
            while (!comm.agree(ran)) {
                if (++retries > 16) throw std::runtime_error("no recovery after 16 shrinks");
                comm.recover();
                ran = comm.allreduce(in, out);
            }
            const std::vector<uint32_t> members = comm.members();
            for (size_t i = 0; i < count; i++) {
                double want = 0;
                for (uint32_t r : members) want += input(r, i);
                if (out[i] != want) {
                    std::fprintf(stderr, "rank %u, call %d: element %zu is %.1f, expected %.1f\n",
                                 me, call, i, out[i], want);
                    return 2;
                }
            }
            std::printf("rank %u: call %d exact over %zu ranks (%d shrinks)\n", me, call,
                        members.size(), retries);
        }
    } catch (const std::exception &error) {
        std::fprintf(stderr, "ulfm_recovery: %s\n", error.what());
        return 1;
    }
    return 0;
}
