// SPDX-License-Identifier: LGPL-2.1-or-later
// The per-thread stock behind OpCache.
#include "bmi/core/op_cache.hpp"

#include <cstddef>
#include <new>

namespace bmi::core {

namespace {
constexpr int stock_size = 16;

// Trivially destructible, so a give() that runs after this thread's destructors (a BMI
// instance finalized from an exit handler) still finds valid memory; it then frees instead.
struct Stock {
    void* memory[stock_size];
    int count;
    bool closed;
    bool drain_registered;  // see give()
};
// initial-exec: a few hundred bytes of static TLS instead of a __tls_get_addr call on every
// post and test; glibc keeps a reserve of static TLS for libraries loaded with dlopen.
__attribute__((tls_model("initial-exec"))) thread_local Stock stock{};

// Frees what the thread kept when it exits, and closes the stock for good.
struct Drain {
    ~Drain() {
        stock.closed = true;
        while (stock.count > 0) ::operator delete(stock.memory[--stock.count]);
    }
};
thread_local Drain drain;
}  // namespace

method::Operation* OpCache::take() {
    // Default-initialised: every member has an initialiser, and `Operation()` would zero the
    // whole object once more before running them.
    if (stock.count > 0) return new (stock.memory[--stock.count]) method::Operation;
    return new method::Operation;
}

void OpCache::give(method::Operation* op) {
    if (op == nullptr) return;
    if (stock.closed || stock.count == stock_size) {
        delete op;
        return;
    }
    // The first use of `drain` registers its destructor for this thread. Touching it on every
    // give would cost a call into the dynamic linker's TLS lookup each time.
    if (!stock.drain_registered) {
        stock.drain_registered = true;
        (void)&drain;
    }
    op->~Operation();
    stock.memory[stock.count++] = op;
}

}  // namespace bmi::core
