// SPDX-License-Identifier: LGPL-2.1-or-later
// The hello an shm acceptor reads from a connecting peer's Unix socket (with the segment and
// eventfd beside it, which the fuzzer does not supply): the bytes are the Hello struct.
// Properties: an accepted hello names a geometry Ring can use (powers of two within bounds,
// so positions wrap with a mask) and a name of valid characters inside the name field; the
// name the acceptor then builds (peer_for_hello) stays within the struct.
#include <string>

#include "methods/shm/shm_checks.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::shm;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // receive_hello refuses anything but a whole struct.
    if (size != sizeof(Hello)) return 0;
    Hello hello;
    std::memcpy(&hello, data, sizeof hello);
    if (!hello_well_formed(hello)) return 0;
    FUZZ_CHECK(hello.slot_count >= min_slot_count && hello.slot_count <= max_slot_count);
    FUZZ_CHECK(hello.slot_size >= min_slot_size && hello.slot_size <= max_slot_size);
    FUZZ_CHECK((hello.slot_count & (hello.slot_count - 1)) == 0);
    FUZZ_CHECK((hello.slot_size & (hello.slot_size - 1)) == 0);
    FUZZ_CHECK(hello.name_length <= sizeof hello.name);
    const std::string name(hello.name, hello.name_length);
    FUZZ_CHECK(name.empty() || valid_name(name));
    FUZZ_CHECK(name.find('/') == std::string::npos);  // a name becomes a socket path
    return 0;
}
