// SPDX-License-Identifier: LGPL-2.1-or-later
// The application's signal handlers, kept across a library that libbmi loads on its behalf. A
// constructor of such a library, or of one it links, may take signals for itself (libinfinipath,
// which Debian's libfabric links for its psm provider, takes SIGINT, SIGILL, SIGABRT, SIGBUS,
// SIGSEGV and SIGTERM): a server's clean shutdown on SIGTERM would then be that library's exit.
#pragma once

#include <csignal>
#include <string>

namespace bmi::support {

class KeptSignalHandlers {
public:
    // Notes every handler, and blocks this thread's asynchronous signals until restore(): one
    // that arrives meanwhile waits for the application's handler instead of meeting the
    // library's. Synchronous ones (a fault inside the load) are left as they are.
    KeptSignalHandlers();
    ~KeptSignalHandlers() { restore(); }
    KeptSignalHandlers(const KeptSignalHandlers&) = delete;
    KeptSignalHandlers& operator=(const KeptSignalHandlers&) = delete;

    // Puts back every handler that changed since construction, then the mask; returns those
    // signals (an empty set on a later call). Allocates nothing, so the destructor can call it.
    sigset_t restore() noexcept;

private:
    struct Noted {
        struct sigaction action {};
        bool valid = false;  // glibc keeps its own signals (32, 33) from sigaction
    };
    Noted noted_[NSIG]{};
    sigset_t mask_{};
    bool restored_ = false;
};

// "SIGINT, SIGTERM": for messages.
std::string signal_names(const sigset_t& signals);

}  // namespace bmi::support
