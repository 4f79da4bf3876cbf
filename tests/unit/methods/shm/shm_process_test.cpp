// SPDX-License-Identifier: LGPL-2.1-or-later
// The shm method across real processes: a peer killed mid-transfer, a kernel that refuses
// cross-memory attach to one side (seccomp), listener restarts, another user.
// Children are forked before this process starts any thread, talk to the parent through a
// pipe, die with the parent (PR_SET_PDEATHSIG), and are only ever killed by their own pid.
#include <catch2/catch.hpp>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "harness.hpp"
#include "shm_stats.hpp"

using namespace bmi;
using namespace bmi::test;
using bmi::method::shm::TakenPath;

namespace {

std::unique_ptr<core::Instance> make_server(const std::string& listen, int& rc) {
    core::InitParams params;
    params.listen = listen;
    params.flags = BMI_INIT_SERVER;
    std::unique_ptr<core::Instance> instance;
    rc = core::Instance::create(params, instance);
    return instance;
}

// Keeps the listener progressing while a child of another user tries to get in; returns the
// child's verdict ('x' = refused), or -1 if it never reported. Nothing may be delivered.
int await_refusal(Side& side, Child& child) {
    int verdict = -1;
    core::UnexpectedMessage got[1];
    int outcount = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
    while (verdict < 0 && std::chrono::steady_clock::now() < deadline) {
        REQUIRE(side.instance->testunexpected(20, outcount, got) == 0);
        REQUIRE(outcount == 0);
        verdict = child.wait_report(0);
    }
    return verdict;
}

BMI_addr_t await_hello(Side& side) {
    core::UnexpectedMessage got[1];
    int outcount = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (outcount == 0 && std::chrono::steady_clock::now() < deadline)
        REQUIRE(side.instance->testunexpected(20, outcount, got) == 0);
    REQUIRE(outcount == 1);
    side.instance->unexpected_free(got[0].buffer);
    return got[0].addr;
}

constexpr std::size_t split_size = 64 << 20;

Side server_side(const std::string& listen) {
    int rc = 0;
    Side side{make_server(listen, rc), -1};
    REQUIRE(rc == 0);
    REQUIRE(side.instance->open_context(side.context) == 0);
    return side;
}

// Tests id without idle time until the first byte of its buffer turns `want` (the copy is
// under way) or the deadline; returns the byte. The op must not have completed by then.
char test_until_copying(Side& side, bmi_op_id_t id, const char& first, char want) {
    int outcount = 0;
    core::Completion done;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (first != want && outcount == 0 && std::chrono::steady_clock::now() < deadline)
        side.instance->test(id, side.context, 0, outcount, done);
    return outcount == 0 ? first : 0;
}

#if defined(__x86_64__)
constexpr std::uint32_t audit_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t audit_arch = AUDIT_ARCH_AARCH64;
#else
constexpr std::uint32_t audit_arch = 0;  // the refusal tests say so and check nothing
#endif

// Makes the kernel refuse one system call to this process from now on (EPERM), as Yama or a
// container's seccomp profile refuse cross-memory attach; true if the refusal is in place.
bool refuse_syscall(long nr) {
    sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, audit_arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
        return false;
    // The filter must really bite: copy a byte within this process the refused way.
    char from = 'f', to = 't';
    iovec local{&to, 1}, remote{&from, 1};
    long rc = nr == SYS_process_vm_readv ? process_vm_readv(getpid(), &local, 1, &remote, 1, 0)
                                         : process_vm_writev(getpid(), &remote, 1, &local, 1, 0);
    return rc < 0 && errno == EPERM && to == 't';
}

constexpr std::size_t refused_size = 8 << 20;  // 32 chunks of a split copy

bool can_refuse() {
    if (audit_arch != 0) return true;
    WARN("no seccomp architecture constant for this CPU: nothing checked");
    return false;
}

// A client child (client_child) to which the kernel refuses system call nr.
template <class Rest>
Child refused_client(const std::string& listen, long nr, Rest&& rest) {
    return client_child(listen, [nr, rest](int to_parent, Side& me, BMI_addr_t server) {
        return refuse_syscall(nr) ? rest(to_parent, me, server) : 4;
    });
}

// Takes the hello of a child that then reports 's' (its send is posted) and posts the
// receive of that send into `in` (zeroed, in.size() bytes); returns the receive's id.
bmi_op_id_t receive_from_sending_child(Side& side, Child& child, std::vector<char>& in,
                                       bmi_msg_tag_t tag) {
    BMI_addr_t child_addr = await_hello(side);
    REQUIRE(child.wait_report() == 's');
    bmi_op_id_t rid = 0;
    REQUIRE(side.instance->post(
                recv_request(side, child_addr, in.data(), static_cast<bmi_size_t>(in.size()), tag),
                rid, nullptr) == 0);
    return rid;
}

// Kills the child; its peer's operation id must fail with ECONNRESET within 5 s.
void expect_reset_after_kill(Child& child, Side& side, bmi_op_id_t id) {
    auto killed = std::chrono::steady_clock::now();
    child.kill_now();
    auto failed = wait_op(side, id, 5000);
    REQUIRE(std::chrono::steady_clock::now() - killed < std::chrono::seconds(5));
    REQUIRE(failed.error == -BMI_ECONNRESET);
}
}  // namespace

TEST_CASE("shm: a peer killed mid-transfer fails the pending operations quickly", "[shm]") {
    std::string listen = test_listen_address("shm");
    Side side = server_side(listen);
    // The child introduces itself with an unexpected message, then stops making progress.
    auto child = client_child(listen, [](int to_parent, Side&, BMI_addr_t) {
        report(to_parent, 'r');
        return 0;
    });
    BMI_addr_t child_addr = await_hello(side);
    REQUIRE(child.wait_report() == 'r');

    // A large send the child never receives (announced, in flight) and a receive it never
    // satisfies.
    std::vector<char> big(32 << 20);
    char small[16];
    bmi_op_id_t sid = 0, rid = 0;
    REQUIRE(side.instance->post(send_request(side, child_addr, big.data(), 32 << 20, 5), sid,
                                nullptr) == 0);
    REQUIRE(side.instance->post(recv_request(side, child_addr, small, 16, 6), rid, nullptr) == 0);
    int idle = 0;
    core::Completion none;
    REQUIRE(side.instance->test(sid, side.context, 0, idle, none) == 0);
    REQUIRE(idle == 0);

    expect_reset_after_kill(child, side, sid);
    REQUIRE(wait_op(side, rid, 5000).error == -BMI_ECONNRESET);
}

TEST_CASE("shm: a sender killed during a split copy fails the receive quickly", "[shm]") {
    std::string listen = test_listen_address("shm");
    Side side = server_side(listen);
    // The child announces 64 MiB and then never polls: the parent copies every chunk.
    auto child = client_child(listen, [](int to_parent, Side& me, BMI_addr_t server) {
        static std::vector<char> big(split_size, 'b');
        bmi_op_id_t id = 0;
        if (me.instance->post(send_request(me, server, big.data(), split_size, 5), id, nullptr) !=
            0)
            return 3;
        report(to_parent, 's');
        return 0;
    });
    std::vector<char> in(split_size, 0);
    bmi_op_id_t rid = receive_from_sending_child(side, child, in, 5);
    // Progress until the copy is under way (each step copies at most 1 MiB), then kill.
    REQUIRE(test_until_copying(side, rid, in[0], 'b') == 'b');
    expect_reset_after_kill(child, side, rid);
}

// From a shared buffer (BMI_memalloc) the receiver copies through its own mapping, which
// outlives the sender: killed mid-copy, the sender can neither fault the receiver nor leave
// it waiting. The receive ends at once either way: whole (every byte was readable) or reset.
TEST_CASE("shm: a sender killed during a copy from its shared buffer never faults the receiver",
          "[shm]") {
    std::string listen = test_listen_address("shm");
    Side side = server_side(listen);
    auto child = client_child(listen, [](int to_parent, Side& me, BMI_addr_t server) {
        auto* big = static_cast<char*>(me.instance->memalloc(server, split_size));
        if (big == nullptr) return 3;
        std::memset(big, 'b', split_size);
        bmi_op_id_t id = 0;
        if (me.instance->post(send_request(me, server, big, split_size, 7), id, nullptr) != 0)
            return 3;
        report(to_parent, 's');
        return 0;
    });
    std::vector<char> in(split_size, 0);
    bmi_op_id_t rid = receive_from_sending_child(side, child, in, 7);
    REQUIRE(test_until_copying(side, rid, in[0], 'b') == 'b');
    auto killed = std::chrono::steady_clock::now();
    child.kill_now();
    auto ended = wait_op(side, rid, 5000);
    REQUIRE(std::chrono::steady_clock::now() - killed < std::chrono::seconds(5));
    if (ended.error == 0)
        REQUIRE(std::count(in.begin(), in.end(), 'b') == static_cast<long>(split_size));
    else
        REQUIRE(ended.error == -BMI_ECONNRESET);
}

TEST_CASE("shm: a receiver killed during a split copy fails the send quickly", "[shm]") {
    std::string listen = test_listen_address("shm");
    Side side = server_side(listen);
    // The child receives 64 MiB: it starts the split (HELP, one step of its own), then stops,
    // so the parent is left writing its chunks into a process that is about to die.
    auto child = client_child(listen, [](int to_parent, Side& me, BMI_addr_t server) {
        static std::vector<char> in(split_size, 0);
        bmi_op_id_t id = 0;
        if (me.instance->post(recv_request(me, server, in.data(), split_size, 6), id, nullptr) != 0)
            return 3;
        report(to_parent, 'p');
        report(to_parent, test_until_copying(me, id, in[0], 'a') == 'a' ? 's' : 'x');
        return 0;
    });
    BMI_addr_t child_addr = await_hello(side);
    REQUIRE(child.wait_report() == 'p');
    std::vector<char> big(split_size, 'a');
    bmi_op_id_t sid = 0;
    REQUIRE(side.instance->post(send_request(side, child_addr, big.data(), split_size, 6), sid,
                                nullptr) == 0);
    REQUIRE(child.wait_report() == 's');
    // Take the HELP and write part of the sender's share, then kill the receiver.
    int outcount = 0;
    core::Completion done;
    for (int i = 0; i < 3 && outcount == 0; ++i)
        REQUIRE(side.instance->test(sid, side.context, 0, outcount, done) == 0);
    REQUIRE(outcount == 0);  // no DONE can come from a receiver that stopped
    expect_reset_after_kill(child, side, sid);
}

// Where the kernel refuses cross-memory attach, the method finds out at run time and still
// delivers: a receiver that may not read the sender's memory has it streamed through the
// ring (two copies) ...
TEST_CASE("shm: a receiver refused process_vm_readv gets large messages by two copies", "[shm]") {
    if (!can_refuse()) return;
    std::string listen = test_listen_address("shm");
    Side side = server_side(listen);
    auto child = refused_client(
        listen, SYS_process_vm_readv, [](int to_parent, Side& me, BMI_addr_t server) {
            static std::vector<char> in(refused_size);
            for (std::uint32_t seed : {21u, 22u}) {
                bmi_op_id_t id = 0;
                std::fill(in.begin(), in.end(), 0);
                if (me.instance->post(recv_request(me, server, in.data(), refused_size, 9), id,
                                      nullptr) != 0)
                    return 3;
                report(to_parent, 'r');
                auto got = wait_op(me, id, 30000);
                bool whole = got.error == 0 &&
                             got.actual_size == static_cast<bmi_size_t>(refused_size) &&
                             check_pattern(in.data(), refused_size, seed);
                report(to_parent, whole ? 'k' : 'x');
            }
            // Never by a read of its own. A sender that wrote every chunk of a split before
            // the receiver tried one (a loaded machine) finished the message by itself.
            const auto on = [&](TakenPath path) {
                return large_receives(me, refused_size, path).value_or(99);
            };
            const bool fell_back = on(TakenPath::single) == 0 &&
                                   on(TakenPath::stream) + on(TakenPath::split) == 2;
            report(to_parent, fell_back ? 's' : 'n');
            return 0;
        });
    BMI_addr_t child_addr = await_hello(side);
    std::vector<char> out(refused_size);
    // The first message meets a receiver that tries to read and is refused; the second one a
    // receiver that already knows.
    for (std::uint32_t seed : {21u, 22u}) {
        REQUIRE(child.wait_report() == 'r');
        fill_pattern(out.data(), refused_size, seed);
        bmi_op_id_t sid = 0;
        REQUIRE(side.instance->post(send_request(side, child_addr, out.data(), refused_size, 9),
                                    sid, nullptr) == 0);
        REQUIRE(wait_op(side, sid, 30000).error == 0);
        REQUIRE(child.wait_report(30000) == 'k');
    }
    REQUIRE(child.wait_report(30000) == 's');  // both came without a read of the receiver's
}

// ... and a sender that may not write into the receiver's memory leaves the whole copy to the
// receiver, even for chunks it had already claimed.
TEST_CASE("shm: a sender refused process_vm_writev leaves the copy to the receiver", "[shm]") {
    if (!can_refuse()) return;
    std::string listen = test_listen_address("shm");
    Side side = server_side(listen);
    auto child = refused_client(
        listen, SYS_process_vm_writev, [](int to_parent, Side& me, BMI_addr_t server) {
            static std::vector<char> out(refused_size);
            fill_pattern(out.data(), refused_size, 23);
            bmi_op_id_t id = 0;
            if (me.instance->post(send_request(me, server, out.data(), refused_size, 10), id,
                                  nullptr) != 0)
                return 3;
            report(to_parent, 's');
            // Poll for half a second: the receiver's HELP comes within it, and the first poll
            // after it claims a chunk and is refused writing it.
            int outcount = 0;
            core::Completion done;
            auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
            while (outcount == 0 && std::chrono::steady_clock::now() < until)
                if (me.instance->test(id, me.context, 0, outcount, done) != 0) return 5;
            report(to_parent, outcount == 0 ? 'w' : 'e');  // it cannot finish without the parent
            auto sent = wait_op(me, id, 30000);
            report(to_parent, sent.error == 0 ? 'd' : 'x');
            return 0;
        });
    std::vector<char> in(refused_size, 0);
    bmi_op_id_t rid = receive_from_sending_child(side, child, in, 10);
    // One pass: take the RTS, answer HELP, copy a first step; then leave the sender alone
    // with the rest of the chunks while it polls.
    int outcount = 0;
    core::Completion done;
    REQUIRE(side.instance->test(rid, side.context, 0, outcount, done) == 0);
    REQUIRE(outcount == 0);
    REQUIRE(child.wait_report() == 'w');
    auto got = wait_op(side, rid, 30000);
    REQUIRE(got.error == 0);
    REQUIRE(got.actual_size == static_cast<bmi_size_t>(refused_size));
    REQUIRE(check_pattern(in.data(), refused_size, 23));
    REQUIRE(large_receives(side, refused_size, TakenPath::single) == 1u);
    REQUIRE(child.wait_report(30000) == 'd');
}

TEST_CASE("shm: a listener name can be bound again once its holder is gone", "[shm]") {
    int rc = 0;
    SECTION("after the instance is destroyed") {
        std::string listen = test_listen_address("shm");
        auto first = make_server(listen, rc);
        REQUIRE(rc == 0);
        auto second = make_server(listen, rc);
        REQUIRE(rc == -BMI_EADDRINUSE);
        first.reset();
        auto third = make_server(listen, rc);
        REQUIRE(rc == 0);
    }
    SECTION("after a listening child process is killed") {
        std::string listen = "restart-" + std::to_string(getpid());
        std::string address = "shm://" + listen;
        Child child([&](int to_parent, auto&& park) {
            int child_rc = 0;
            auto server = make_server(address, child_rc);
            report(to_parent, child_rc == 0 ? 'l' : 'e');
            park();  // until killed, holding the name
            return child_rc == 0 ? 0 : 1;
        });
        REQUIRE(child.wait_report() == 'l');
        auto taken = make_server(address, rc);
        REQUIRE(rc == -BMI_EADDRINUSE);
        child.kill_now();
        auto restarted = make_server(address, rc);
        REQUIRE(rc == 0);
        // And it works: a client reaches the restarted listener.
        Pair pair;
        pair.server.instance = std::move(restarted);
        REQUIRE(pair.server.instance->open_context(pair.server.context) == 0);
        REQUIRE(core::Instance::create({}, pair.client.instance) == 0);
        REQUIRE(pair.client.instance->open_context(pair.client.context) == 0);
        REQUIRE(pair.client.instance->addr_lookup(address, pair.server_addr) == 0);
        introduce(pair);
    }
}

TEST_CASE("shm: a process of another user cannot attach to a listener", "[shm]") {
    if (getuid() != 0) {
        WARN("not root: cannot run a child as another user; nothing checked");
        return;
    }
    int rc = 0;
    std::string name = "other-user-" + std::to_string(getpid());
    auto server = make_server("shm://" + name, rc);
    REQUIRE(rc == 0);
    Side side{std::move(server), -1};
    REQUIRE(side.instance->open_context(side.context) == 0);
    constexpr uid_t nobody = 65534;

    SECTION("through the BMI API") {
        Child child([&](int to_parent, auto&&) {
            if (setgid(nobody) != 0 || setuid(nobody) != 0) return 1;
            std::unique_ptr<core::Instance> client;
            bmi_context_id context = -1;
            BMI_addr_t addr = 0;
            if (core::Instance::create({}, client) != 0 || client->open_context(context) != 0)
                return 2;
            if (client->addr_lookup("shm://" + name, addr) != 0) {
                report(to_parent, 'x');  // refused at lookup: fine
                return 0;
            }
            int hello = 7;
            core::PostRequest send;
            send.kind = method::OpKind::send_unexpected;
            send.addr = addr;
            send.buffer = &hello;
            send.size = sizeof hello;
            send.context = context;
            bmi_op_id_t id = 0;
            int posted = client->post(send, id, nullptr);
            if (posted < 0) {
                report(to_parent, 'x');
                return 0;
            }
            if (posted == 1) {
                report(to_parent, 'd');  // claimed delivered: the parent checks it was not
                return 0;
            }
            int outcount = 0;
            core::Completion c;
            auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            while (outcount == 0 && std::chrono::steady_clock::now() < deadline)
                client->test(id, context, 20, outcount, c);
            report(to_parent, outcount == 1 && c.error != 0 ? 'x' : 'd');
            return 0;
        });
        REQUIRE(await_refusal(side, child) == 'x');
    }
    SECTION("through a raw socket to the owner's rendezvous name") {
        Child child([&](int to_parent, auto&&) {
            if (setgid(nobody) != 0 || setuid(nobody) != 0) return 1;
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);
            sockaddr_un sa{};
            sa.sun_family = AF_UNIX;
            std::string path = std::string(1, '\0') + "libbmi-shm.0." + name;
            std::memcpy(sa.sun_path, path.data(), path.size());
            auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
            if (connect(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) {
                report(to_parent, 'c');  // the name exists: connect itself must work
                return 0;
            }
            char junk[64] = {};
            // The listener may have hung up already: no SIGPIPE for us.
            ssize_t ignored = send(fd, junk, sizeof junk, MSG_NOSIGNAL);
            (void)ignored;
            // The listener must hang up on us.
            pollfd p{fd, POLLIN, 0};
            char byte;
            bool closed = poll(&p, 1, 5000) == 1 && read(fd, &byte, 1) <= 0;
            report(to_parent, closed ? 'x' : 'k');
            return 0;
        });
        REQUIRE(await_refusal(side, child) == 'x');
    }
}
