// SPDX-License-Identifier: LGPL-2.1-or-later
// The application's signal handlers, kept across a library that libbmi loads on its behalf. A
// constructor of such a library, or of one it links, may take signals for itself (libinfinipath,
// which Debian's libfabric links for its psm provider, takes SIGINT, SIGTERM and SIGSEGV): a
// server's clean shutdown on SIGTERM would then be that library's exit instead.
#pragma once

#include <csignal>
#include <string>
#include <vector>

namespace bmi::support {

class KeptSignalHandlers {
public:
    // Notes every handler, and blocks this thread's asynchronous signals until restore(): one
    // that arrives meanwhile waits for the application's handler instead of meeting the
    // library's. Synchronous ones (a fault inside the load) are left as they are.
    KeptSignalHandlers();
    ~KeptSignalHandlers() { put_back(nullptr); }
    KeptSignalHandlers(const KeptSignalHandlers&) = delete;
    KeptSignalHandlers& operator=(const KeptSignalHandlers&) = delete;

    // Puts back every handler that changed since construction, then the mask; returns those
    // signals (empty on a later call).
    std::vector<int> restore();

private:
    void put_back(std::vector<int>* changed) noexcept;

    struct Noted {
        struct sigaction action {};
        bool valid = false;  // some signals (glibc's own, SIGKILL, SIGSTOP) cannot be read or set
    };
    Noted noted_[NSIG]{};
    sigset_t mask_{};
    bool restored_ = false;
};

// "SIGINT, SIGTERM": for messages.
std::string signal_names(const std::vector<int>& signals);

}  // namespace bmi::support
