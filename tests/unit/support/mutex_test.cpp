// SPDX-License-Identifier: LGPL-2.1-or-later
// support::Mutex: mutual exclusion under contention, try_lock, and a waiter that sleeps in the
// kernel (not spinning) until the holder's unlock wakes it; a biased mutex's claim by its first
// thread, its revocation by the second, and mutual exclusion across the revocation.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <linux/filter.h>
#include <linux/membarrier.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <iterator>

#include "support/sync/mutex.hpp"

using bmi::support::Mutex;
using namespace std::chrono_literals;

TEST_CASE("try_lock fails while the mutex is held and succeeds once it is free") {
    Mutex m;
    REQUIRE(m.try_lock());
    REQUIRE_FALSE(m.try_lock());
    m.unlock();
    std::unique_lock lock(m, std::try_to_lock);
    REQUIRE(lock.owns_lock());
}

TEST_CASE("threads incrementing a plain counter under the mutex lose no update") {
    Mutex m;
    long counter = 0;  // deliberately not atomic: only the mutex protects it
    constexpr int threads = 4, rounds = 50000;
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
            for (int i = 0; i < rounds; ++i) {
                std::lock_guard lock(m);
                ++counter;
            }
        });
    }
    for (auto& w : workers) w.join();
    REQUIRE(counter == long{threads} * rounds);
}

namespace {
// The scheduler state of one of our threads: 'S' while it sleeps in the kernel, 'R' running.
char thread_state(pid_t tid) {
    std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');  // the command name may hold spaces
    return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}
}  // namespace

TEST_CASE("a thread waiting for the mutex sleeps until the unlock wakes it") {
    Mutex m;
    m.lock();
    std::atomic<pid_t> tid{0};
    std::atomic<bool> acquired{false};
    std::thread waiter([&] {
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        std::lock_guard lock(m);
        acquired = true;
    });
    // Give it time to reach the kernel; it must not get the lock meanwhile.
    auto deadline = std::chrono::steady_clock::now() + 5s;
    char state = '?';
    while (std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
        if (tid != 0 && (state = thread_state(tid)) == 'S') break;
    }
    CHECK(state == 'S');
    REQUIRE_FALSE(acquired);
    m.unlock();
    while (!acquired && std::chrono::steady_clock::now() < deadline + 5s)
        std::this_thread::sleep_for(1ms);
    REQUIRE(acquired);
    waiter.join();
    // The waiter left the lock marked as wanted; it must still be free and reusable.
    REQUIRE(m.try_lock());
    m.unlock();
}

TEST_CASE("a mutex without a bias never takes one") {
    Mutex m;
    m.lock();
    m.unlock();
    REQUIRE_FALSE(m.bias_stands());
}

TEST_CASE("a biased mutex stays biased while only its first thread locks it") {
    Mutex m(Mutex::Bias::first_thread);
    for (int i = 0; i < 1000; ++i) {
        std::lock_guard lock(m);
        m.assert_held();
    }
    REQUIRE(m.bias_stands());
    REQUIRE(m.try_lock());
    REQUIRE_FALSE(m.try_lock());  // not recursive, biased or not
    m.unlock();
    REQUIRE(m.bias_stands());
}

TEST_CASE("a second thread's lock revokes the bias and waits until the owner unlocks") {
    Mutex m(Mutex::Bias::first_thread);
    m.lock();
    std::atomic<bool> acquired{false};
    std::thread other([&] {
        std::lock_guard lock(m);
        acquired = true;
    });
    std::this_thread::sleep_for(50ms);
    REQUIRE_FALSE(acquired);  // the owner still holds it by its bias
    m.unlock();
    other.join();
    REQUIRE(acquired);
    REQUIRE_FALSE(m.bias_stands());
    // The former owner now takes the plain lock, which the other thread can see held.
    m.lock();
    std::thread probe([&] { CHECK_FALSE(m.try_lock()); });
    probe.join();
    m.unlock();
}

TEST_CASE("a second thread's try_lock fails at once while the owner holds it") {
    Mutex m(Mutex::Bias::first_thread);
    m.lock();
    const auto start = std::chrono::steady_clock::now();
    bool got = true;
    std::thread other([&] { got = m.try_lock(); });
    other.join();
    REQUIRE_FALSE(got);
    REQUIRE(std::chrono::steady_clock::now() - start < 2s);
    // The owner's unlock sees the revocation that was asked for and settles the mutex.
    m.unlock();
    REQUIRE_FALSE(m.bias_stands());
    std::thread again([&] {
        got = m.try_lock();
        if (got) m.unlock();
    });
    again.join();
    REQUIRE(got);
}

TEST_CASE("a biased mutex loses no update while other threads join its owner") {
    Mutex m(Mutex::Bias::first_thread);
    long counter = 0;  // deliberately not atomic: only the mutex protects it
    constexpr int threads = 4, rounds = 50000;
    std::atomic<bool> others_started{false};
    std::vector<std::thread> workers;
    // The owner claims the mutex and keeps locking while the others start and revoke it.
    for (int i = 0; i < 100; ++i) {
        std::lock_guard lock(m);
        ++counter;
    }
    REQUIRE(m.bias_stands());
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
            others_started = true;
            for (int i = 0; i < rounds; ++i) {
                if (i % 2 == 0) {
                    std::lock_guard lock(m);
                    ++counter;
                } else {
                    while (!m.try_lock()) std::this_thread::yield();
                    ++counter;
                    m.unlock();
                }
            }
        });
    }
    long own = 100;
    while (!others_started || own < 100 + rounds) {
        std::lock_guard lock(m);
        ++counter;
        ++own;
    }
    for (auto& w : workers) w.join();
    std::lock_guard lock(m);
    REQUIRE(counter == own + long{threads} * rounds);
    REQUIRE_FALSE(m.bias_stands());
}

namespace {
// Makes membarrier(2) fail with EPERM in this process and what it executes, as a sandbox may.
bool refuse_membarrier() {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}
}  // namespace

// Run only by the case below, in a process that cannot use membarrier (hidden tag).
TEST_CASE("in a process without membarrier a biased mutex stays a plain lock",
          "[.][no_membarrier]") {
    errno = 0;
    REQUIRE(syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) == -1);
    REQUIRE(errno == EPERM);
    Mutex m(Mutex::Bias::first_thread);
    m.lock();
    m.unlock();
    REQUIRE_FALSE(m.bias_stands());
    long counter = 0;
    constexpr int rounds = 20000;
    auto work = [&] {
        for (int i = 0; i < rounds; ++i) {
            std::lock_guard lock(m);
            ++counter;
        }
    };
    std::thread other(work);
    work();
    other.join();
    REQUIRE(counter == 2L * rounds);
}

TEST_CASE("a sandbox that refuses membarrier leaves biased mutexes plain") {
    // Whether the barrier exists is settled once per process, so the check runs in a new one.
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        if (!refuse_membarrier()) _exit(3);
        execl("/proc/self/exe", "mutex_test", "[no_membarrier]", nullptr);
        _exit(4);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    INFO("exit status 3: seccomp refused here; 4: the test program did not start again");
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
}
