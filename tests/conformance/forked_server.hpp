// SPDX-License-Identifier: LGPL-2.1-or-later
// A server in a process of the test's own, which the test kills without a bye, as a crash
// would end it.
#pragma once

#include <string>

#include "harness.hpp"

namespace bmi::test {

// Forked before this process makes any instance (libfabric's verbs does not work in a child
// forked after its parent used it): the child listens on a test address of `scheme`, writes
// it as a line to the parent, then answers each unexpected message with its bytes under its
// tag until it is killed. No Catch check runs there: it exits 3 to 5 if it cannot serve.
struct ForkedServer {
    int pid = -1;
    std::string address;
    ForkedServer() = default;
    ForkedServer(const ForkedServer&) = delete;
    ForkedServer& operator=(const ForkedServer&) = delete;
    // SIGKILL, then waits for it; also if the test fails before.
    void kill_now();
    // Also removes the region a killed ofi+shm server leaves in /dev/shm, whatever the case
    // did before (a server it started at the same address has ended by then).
    ~ForkedServer();
};
void fork_server(const std::string& scheme, const std::string& options, ForkedServer& server);

// One request from the client and its echo, within ms: whether both went through.
bool echoed(Side& client, BMI_addr_t server, const std::string& text, bmi_msg_tag_t tag, int ms);

// Whether the ofi conformance run is over libfabric's shm (BMI_CONFORMANCE_OFI_PROVIDER).
bool ofi_over_shm();
// Whether a case about libfabric's shm runs here: ofi compiled and the run over shm; else it
// is skipped, with a warning that names `what` as shm's.
bool runs_over_ofi_shm(const char* what);

}  // namespace bmi::test
