// SPDX-License-Identifier: LGPL-2.1-or-later
// The verbs bootstrap HELLO as the other side reads it from the TCP socket, before any queue
// pair exists: the bytes are the Hello struct.
// Properties: an accepted HELLO has a credit window the credit checks can hold (1-4096), our
// eager size, a known MTU and a name inside its field; the name the server logs stays within
// the struct; a HELLO of another protocol version is never taken for ours, whether told by its
// first bytes (as the bootstrap does before a HELLO of another size is whole) or by the whole.
#include <string_view>

#include "methods/verbs/verbs_peer_checks.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::verbs;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // From hello_version_end bytes on, the bootstrap refuses another version; it waits for a
    // whole struct before it looks at any other field.
    const bool start_ours = hello_speaks_our_protocol(std::span<const std::uint8_t>(data, size));
    FUZZ_CHECK(size >= hello_version_end || !start_ours);
    if (size != sizeof(Hello)) return 0;
    Hello hello;
    std::memcpy(&hello, data, sizeof hello);
    const bool ours = hello_speaks_our_protocol(hello);
    FUZZ_CHECK(ours == start_ours);
    if (!hello_well_formed(hello)) return 0;
    FUZZ_CHECK(ours && hello.version == protocol_version);
    FUZZ_CHECK(hello.credits >= 1 && hello.credits <= 4096);
    FUZZ_CHECK(hello.mtu >= IBV_MTU_256 && hello.mtu <= IBV_MTU_4096);
    FUZZ_CHECK(hello.name_length < sizeof hello.name);
    const std::string_view name(hello.name, hello.name_length);
    FUZZ_CHECK(name.size() <= max_name);
    // The window it grants must be one take_returned_credits can enforce.
    int send_credits = 0;
    FUZZ_CHECK(take_returned_credits(send_credits, hello.credits, static_cast<int>(hello.credits)));
    FUZZ_CHECK(!take_returned_credits(send_credits, 1, static_cast<int>(hello.credits)));
    return 0;
}
