// SPDX-License-Identifier: LGPL-2.1-or-later
// How an instance waits for its provider. A sleeping process takes far longer to wake than a
// reply takes to come back over a fast path, so while operations wait for the network a test
// call first spins on the completion queue for a bounded, adaptive time
// (support/spin/adaptive_spin.hpp, as tcp and shm spin); longer while a large message moves,
// since the provider moves its data (rxm's rendezvous steps on both ends) only when this
// process polls, and a sleep here stalls the peer too. Then:
// - with a wait descriptor (tcp, verbs) the caller asks fi_trywait and sleeps in the epoll set;
//   a sleep that ended soon lets the next spin run longer, as tcp's does;
// - without one (shm) nothing would wake a sleep, so it naps on a timerfd in the method's epoll
//   set; each nap that finds nothing doubles the next one, up to ofi_nap_us, and traffic starts
//   over from the shortest. An idle server costs a wake-up per nap; a message to it waits at
//   most one nap. Such an instance spins before each nap even with nothing posted, since an
//   unexpected message has no other way in. While operations wait within ofi_nap_us of the
//   last traffic it yields the CPU instead of napping: a peer on the same core answers at once,
//   where a nap would end only with its timer.
#pragma once

#include <chrono>
#include <cstdint>

#include "support/spin/adaptive_spin.hpp"

namespace bmi::method::ofi {

class Waiting {
public:
    Waiting(int spin_us, int transfer_spin_us, int nap_us);
    ~Waiting();
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

    // For a provider without a wait descriptor: adds the nap timer to `epoll_fd` under `tag`;
    // 0 or -BMI_E*.
    int start_naps(int epoll_fd, std::uint64_t tag);
    bool naps() const { return timer_fd_ >= 0; }
    std::uint64_t naps_taken() const { return naps_taken_; }

    enum class Load : std::uint8_t { idle, operations, transfer };
    // Before a sleep, with nothing else to do: spins on poll() while operations wait (always
    // when it naps), the longer spin while a transfer moves. True if the spin moved something,
    // or if a nap could not be armed: the caller polls again. False: the caller may sleep
    // (after fi_trywait, where it has a descriptor).
    template <class Poll>
    bool before_sleep(Load load, Poll&& poll) {
        Spin& spin = load == Load::transfer ? transfer_ : short_;
        last_ = &spin;
        if ((load != Load::idle || naps()) && spin.spin.run(poll)) {
            traffic();
            return true;
        }
        if (naps()) return (load != Load::idle && yield_instead()) || !arm();
        sleep_start_ = spin.spin.rewardable() ? std::chrono::steady_clock::now()
                                              : std::chrono::steady_clock::time_point{};
        return false;
    }
    // The sleep ended: if soon, traffic flows and the next spin may be longer.
    void after_wake();
    // Something moved outside the spin: the next wait spins longer and naps short.
    void traffic();
    // Consumes a nap that ended, so the epoll set stops reporting it.
    void clear();

    static constexpr std::chrono::microseconds first_nap{50};

private:
    // False if the timer could not be set: the caller must poll again rather than sleep.
    bool arm();
    // Within a nap's length of the last traffic, operations waiting: gives the CPU to whoever
    // else wants it and says so, so the caller polls again rather than nap.
    bool yield_instead();

    struct Spin {
        explicit Spin(int cap_us) : spin(cap_us), cap(cap_us) {}
        support::AdaptiveSpin spin;
        const std::chrono::microseconds cap;
    };
    Spin short_;
    Spin transfer_;
    Spin* last_ = &short_;  // the spin the last sleep followed
    const std::chrono::microseconds longest_;
    std::chrono::microseconds next_ = first_nap;
    std::chrono::steady_clock::time_point sleep_start_{};
    int timer_fd_ = -1;
    bool armed_ = false;
    bool fresh_traffic_ = false;  // traffic since yield_until_ was last set
    std::chrono::steady_clock::time_point yield_until_{};
    std::uint64_t naps_taken_ = 0;
};

}  // namespace bmi::method::ofi
