// SPDX-License-Identifier: LGPL-2.1-or-later
// OptionalLibrary: opens the first file that loads, once; says which library and what it lacks.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/optional_library/optional_library.hpp"

using bmi::support::OptionalLibrary;
using bmi::support::resolve_symbol;

TEST_CASE("a library that is not there fails to open, naming every file tried") {
    OptionalLibrary lib({"libbmi-no-such-library.so.9", "/nonexistent/libalso-missing.so"});
    CHECK_FALSE(lib.open());
    CHECK(lib.error().find("libbmi-no-such-library.so.9") != std::string::npos);
    CHECK(lib.error().find("/nonexistent/libalso-missing.so") != std::string::npos);
    CHECK(lib.symbol("strlen") == nullptr);
    CHECK_FALSE(lib.open());  // the first answer stands
}

TEST_CASE("a fallback file is tried when the first does not open") {
    OptionalLibrary lib({"libbmi-no-such-library.so.9", "libc.so.6"});
    REQUIRE(lib.open());
    CHECK(lib.error().empty());
}

TEST_CASE("symbols resolve typed; a missing one is named in the error") {
    OptionalLibrary lib({"libc.so.6"});
    REQUIRE(lib.open());
    decltype(&std::strlen) length = nullptr;
    REQUIRE(resolve_symbol(lib, length, "strlen"));
    CHECK(length("four") == 4);
    int (*missing)(void) = nullptr;
    CHECK_FALSE(resolve_symbol(lib, missing, "bmi_no_such_symbol"));
    CHECK(missing == nullptr);
    CHECK(lib.error() == "libc.so.6: lacks bmi_no_such_symbol");
}

TEST_CASE("threads racing to open it all get the one answer") {
    OptionalLibrary lib({"libc.so.6"});
    std::vector<std::thread> threads;
    std::vector<int> opened(8, 0);
    for (std::size_t i = 0; i < opened.size(); ++i)
        threads.emplace_back([&, i] { opened[i] = lib.open() ? 1 : 0; });
    for (auto& t : threads) t.join();
    for (int o : opened) CHECK(o == 1);
}
