// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/optional_library/kept_signal_handlers.hpp"

#include <pthread.h>

#include <cstring>  // sigabbrev_np

namespace bmi::support {

namespace {

bool same_action(const struct sigaction& a, const struct sigaction& b) {
    // The handler sits in a union with sa_sigaction; SA_SIGINFO says which one it is.
    return reinterpret_cast<void*>(a.sa_handler) == reinterpret_cast<void*>(b.sa_handler) &&
           a.sa_flags == b.sa_flags;
}

}  // namespace

KeptSignalHandlers::KeptSignalHandlers() {
    sigset_t block;
    sigfillset(&block);
    for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT})
        sigdelset(&block, fault);
    pthread_sigmask(SIG_BLOCK, &block, &mask_);
    for (int sig = 1; sig < NSIG; ++sig)
        noted_[sig].valid = sigaction(sig, nullptr, &noted_[sig].action) == 0;
}

sigset_t KeptSignalHandlers::restore() noexcept {
    sigset_t changed;
    sigemptyset(&changed);
    if (restored_) return changed;
    restored_ = true;
    for (int sig = 1; sig < NSIG; ++sig) {
        struct sigaction now {};
        if (!noted_[sig].valid || sigaction(sig, nullptr, &now) != 0) continue;
        if (same_action(now, noted_[sig].action)) continue;
        if (sigaction(sig, &noted_[sig].action, nullptr) == 0) sigaddset(&changed, sig);
    }
    pthread_sigmask(SIG_SETMASK, &mask_, nullptr);
    return changed;
}

std::string signal_names(const sigset_t& signals) {
    std::string text;
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sigismember(&signals, sig) != 1) continue;
        const char* abbrev = sigabbrev_np(sig);
        text += (text.empty() ? "SIG" : ", SIG") +
                std::string(abbrev != nullptr ? abbrev : std::to_string(sig).c_str());
    }
    return text;
}

}  // namespace bmi::support
