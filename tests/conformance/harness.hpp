// SPDX-License-Identifier: LGPL-2.1-or-later
// Two real BMI instances in one process over one method: a listening "server" and a "client"
// that looked the server up. Every wait has a deadline; a background thread can keep an
// instance's progress going while the test thread posts and tests on its own contexts.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bmi/core/instance.hpp"

namespace bmi::test {

// Listen address a method can bind in a test ("tcp://127.0.0.1:0", "shm://conf-<pid>-<n>").
std::string test_listen_address(const std::string& scheme);
// Schemes of every compiled-in method.
std::vector<std::string> compiled_schemes();
// Whether `scheme` is among them.
bool scheme_compiled(const std::string& scheme);
// The dialect both instances are created in (BMI_CONFORMANCE_DIALECT: orangefs or standalone).
method::ApiDialect selected_dialect();

struct Side {
    std::unique_ptr<core::Instance> instance;
    bmi_context_id context = -1;
};

// Keeps calling testcontext on a private empty context so the instance progresses on its own.
class Pump {
public:
    explicit Pump(core::Instance& instance);
    ~Pump();
    Pump(const Pump&) = delete;
    Pump& operator=(const Pump&) = delete;

private:
    core::Instance& instance_;
    bmi_context_id context_ = -1;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

struct Pair {
    Side server;
    Side client;
    BMI_addr_t server_addr = 0;  // the server as the client knows it
    std::string scheme;
};

// Creates server + client; options go to both (e.g. "emulate_lists=1"), or client_options
// to the client when given (e.g. another key_file=). server_flags are added to the server's
// BMI_INIT_SERVER (e.g. BMI_AUTO_REF_COUNT).
Pair make_peers(const std::string& scheme, const std::string& options = "",
                const std::optional<std::string>& client_options = std::nullopt,
                int server_flags = 0);

// A client instance (with options, in the selected dialect) that looked up a server's listen
// address: the server as it knows it in server_addr.
Side make_client(const std::string& options, const std::string& listen, BMI_addr_t& server_addr);

// How many clients a churn test sends one after another: more than any method's fixed table
// of peers holds (libfabric's shm: 256); fewer where no such table exists and a client is
// costly (verbs, rxm), and, with a warning, for ofi+shm where this process's closed endpoints
// cannot be forgotten (methods/ofi/ofi_fabric.hpp). Under ThreadSanitizer, a few.
int churn_clients(const std::string& scheme);

// The shortest handshake deadline a test may give a listener whose legitimate clients must
// still get through it: a client's own connection setup over verbs (rdma_cm, and rxm's on top
// of it for ofi) takes hundreds of milliseconds in the emulated soft-RoCE guest, and rxm's
// first connection to a peer as long under a sanitizer.
int shortest_setup_deadline_ms(const std::string& scheme);

// Waits for one op; fails the current test (Catch2 REQUIRE) when the deadline passes.
core::Completion wait_op(Side& side, bmi_op_id_t id, int deadline_ms = 10000);

// Posts and waits; handles immediate completion. Returns the completion (id 0 if immediate).
core::Completion post_and_wait(Side& side, const core::PostRequest& request,
                               int deadline_ms = 10000);

// Waits for one unexpected message (of msg_class when given); fails the current test when the
// deadline passes. The caller frees its buffer with unexpected_free.
core::UnexpectedMessage wait_unexpected(Side& side, int deadline_ms = 10000,
                                        std::optional<std::uint8_t> msg_class = std::nullopt);

// Every unexpected message that reaches `side` within `ms`, in order, each as its sender's
// address and its bytes as text (its buffer freed).
std::vector<std::pair<BMI_addr_t, std::string>> unexpected_within(Side& side, int ms);

// The client sends one unexpected message; the server receives it and returns the client's
// address as the server sees it.
BMI_addr_t introduce(Pair& pair);

core::PostRequest send_request(const Side& side, BMI_addr_t to, const void* data, bmi_size_t size,
                               bmi_msg_tag_t tag);
// As send_request, for an unexpected message.
core::PostRequest unexpected_request(const Side& side, BMI_addr_t to, const void* data,
                                     bmi_size_t size, bmi_msg_tag_t tag);
core::PostRequest recv_request(const Side& side, BMI_addr_t from, void* data, bmi_size_t size,
                               bmi_msg_tag_t tag);

// A fork with a pipe between parent and child: in each, its pid as fork returned it and its
// own end of the pipe (the write end in the child if child_writes, else in the parent).
struct ForkedChild {
    int pid = -1;
    int fd = -1;
};
ForkedChild fork_with_pipe(bool child_writes);
// A line from fd, without its newline ("" at the end of the pipe).
std::string read_line(int fd);

// A client process forked before this one makes any instance (libfabric's verbs does not work
// in a child forked after its parent used it), which waits to be told the server's address.
struct ForkedClient {
    int pid = -1;
    int address_fd = -1;  // the parent's end of the pipe
    // Writes the server's listen address to the child and closes the pipe.
    void tell(const std::string& listen_address);
};
// Forks; the child reads the address and runs `client` on it, which must end the process.
ForkedClient fork_client(void (*client)(const std::string& address));
// In such a child: an instance with the defaults that looked up `address` as `server`; the
// process exits with status 3 (no instance) or 4 (no lookup), since no Catch check runs there.
Side client_in_child(const std::string& address, BMI_addr_t& server);
// Removes the /dev/shm regions an ofi+shm client process left under its client names
// (methods/ofi/ofi_address.hpp, shm_client_name): libfabric removes them on a clean close only.
void remove_shm_regions_of(int pid);

// Deterministic payload and its check.
void fill_pattern(void* data, std::size_t size, std::uint32_t seed);
bool check_pattern(const void* data, std::size_t size, std::uint32_t seed);

}  // namespace bmi::test
