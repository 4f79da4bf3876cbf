// SPDX-License-Identifier: LGPL-2.1-or-later
// Unit tests for the error table: round trips, bit layout and the values fixed by SPEC §1.
#include "support/error/error_map.hpp"

#include "bmi-types.h"

#include <catch2/catch.hpp>

#include <cerrno>
#include <set>
#include <string>

using namespace bmi::support;

TEST_CASE("constants have the values fixed by the spec", "[error_map]") {
    STATIC_REQUIRE(BMI_SUCCESS == 0);
    STATIC_REQUIRE(BMI_ERROR_BIT == (1 << 30));
    STATIC_REQUIRE(BMI_NON_ERRNO_ERROR_BIT == (1 << 29));
    STATIC_REQUIRE(BMI_ERROR == (1 << 7));
    STATIC_REQUIRE(BMI_EPERM == ((1 | BMI_ERROR_BIT) | BMI_ERROR));
    STATIC_REQUIRE(BMI_EAGAIN == ((7 | BMI_ERROR_BIT) | BMI_ERROR));
    STATIC_REQUIRE(BMI_EINVAL == ((15 | BMI_ERROR_BIT) | BMI_ERROR));
    STATIC_REQUIRE(BMI_ENOPROTOOPT == ((44 | BMI_ERROR_BIT) | BMI_ERROR));
    STATIC_REQUIRE(BMI_ECONNRESET == ((59 | BMI_ERROR_BIT) | BMI_ERROR));
    STATIC_REQUIRE(BMI_ECANCEL == (1 | BMI_ERROR_BIT | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR));
    STATIC_REQUIRE(BMI_EDETAIL == (3 | BMI_ERROR_BIT | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR));
    STATIC_REQUIRE(BMI_ETRYAGAIN == (7 | BMI_ERROR_BIT | BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR));
}

TEST_CASE("the table holds 59 errno codes then 7 non-errno codes, in spec order", "[error_map]") {
    auto table = error_table();
    REQUIRE(table.size() == 66);
    for (std::size_t i = 0; i < table.size(); ++i) {
        const ErrorEntry& entry = table[i];
        CAPTURE(i, entry.name);
        if (i < 59) {
            CHECK(entry.code == ((static_cast<int>(i) + 1) | BMI_ERROR_BIT | BMI_ERROR));
            CHECK(entry.errno_value != 0);
        } else {
            CHECK(entry.code == ((static_cast<int>(i) - 58) | BMI_ERROR_BIT |
                                 BMI_NON_ERRNO_ERROR_BIT | BMI_ERROR));
            CHECK(entry.errno_value == 0);
        }
    }
}

TEST_CASE("every entry round trips", "[error_map]") {
    auto table = error_table();
    std::set<int> codes;
    std::set<std::string> names;
    for (std::size_t i = 0; i < table.size(); ++i) {
        const ErrorEntry& entry = table[i];
        CAPTURE(entry.name, entry.code, entry.errno_value);
        CHECK(codes.insert(entry.code).second);
        CHECK(names.insert(entry.name).second);

        CHECK((entry.code & BMI_ERROR_BIT) != 0);
        CHECK((entry.code & BMI_ERROR) != 0);
        CHECK(((entry.code & BMI_NON_ERRNO_ERROR_BIT) != 0) == (entry.errno_value == 0));

        std::string name = entry.name;
        CHECK(name.rfind("BMI_E", 0) == 0);
        CHECK(std::string(error_name(entry.code)) == name);
        CHECK(std::string(error_name(-entry.code)) == name);
        CHECK(find_error(entry.code) == &entry);
        CHECK(find_error(-entry.code) == &entry);

        if (entry.errno_value == 0) continue;
        // Aliased errno values (EWOULDBLOCK == EAGAIN, EDEADLOCK == EDEADLK) map to the first row.
        const ErrorEntry* first = &entry;
        for (std::size_t j = 0; j < i; ++j)
            if (table[j].errno_value == entry.errno_value) {
                first = &table[j];
                break;
            }
        CHECK(bmi_error_from_errno(entry.errno_value) == -first->code);
        CHECK(bmi_error_from_errno(-entry.errno_value) == -first->code);
        CHECK(errno_from_bmi_error(-entry.code) == entry.errno_value);
        CHECK(errno_from_bmi_error(entry.code) == entry.errno_value);
    }
}

TEST_CASE("Linux aliases resolve to the first row", "[error_map]") {
    if (EWOULDBLOCK == EAGAIN) CHECK(bmi_error_from_errno(EWOULDBLOCK) == -BMI_EAGAIN);
    if (EDEADLOCK == EDEADLK) CHECK(bmi_error_from_errno(EDEADLOCK) == -BMI_EDEADLK);
    CHECK(errno_from_bmi_error(-BMI_EWOULDBLOCK) == EWOULDBLOCK);
    CHECK(errno_from_bmi_error(-BMI_EDEADLOCK) == EDEADLOCK);
}

TEST_CASE("specific mappings", "[error_map]") {
    CHECK(bmi_error_from_errno(EINVAL) == -BMI_EINVAL);
    CHECK(bmi_error_from_errno(ECONNREFUSED) == -BMI_ECONNREFUSED);
    CHECK(bmi_error_from_errno(ENOPROTOOPT) == -BMI_ENOPROTOOPT);
    CHECK(errno_from_bmi_error(-BMI_ENOMEM) == ENOMEM);
}

TEST_CASE("edge cases", "[error_map]") {
    CHECK(bmi_error_from_errno(0) == 0);
    CHECK(bmi_error_from_errno(EXDEV) == -BMI_EDETAIL);  // a real errno outside the table
    CHECK(bmi_error_from_errno(100000) == -BMI_EDETAIL);
    CHECK(std::string(error_name(0)) == "BMI_SUCCESS");
    CHECK(std::string(error_name(12345)) == "unknown BMI error");
    CHECK(std::string(error_name(-12345)) == "unknown BMI error");
    CHECK(std::string(error_name(BMI_ERROR_BIT | BMI_ERROR)) == "unknown BMI error");
    CHECK(find_error(0) == nullptr);
    CHECK(find_error(EINVAL) == nullptr);  // a bare errno is not a BMI code
    // Non-errno codes have no errno of their own; the header promises EIO.
    CHECK(errno_from_bmi_error(-BMI_ECANCEL) == EIO);
    CHECK(errno_from_bmi_error(-12345) == EIO);
}
