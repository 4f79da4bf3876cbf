// SPDX-License-Identifier: LGPL-2.1-or-later
#include <catch2/catch.hpp>

#include "methods/kit/source_admission.hpp"

using bmi::method::kit::SourceAdmission;

TEST_CASE("source admission: each source has its own bound and knows its oldest", "[admission]") {
    SourceAdmission admission(2);
    const auto t0 = SourceAdmission::Clock::now();
    CHECK_FALSE(admission.oldest("10.0.0.1"));
    admission.admit("10.0.0.1", 1, t0);
    admission.admit("10.0.0.1", 2, t0 + std::chrono::seconds(1));
    admission.admit("10.0.0.2", 3, t0);
    CHECK_FALSE(admission.has_room("10.0.0.1"));
    CHECK(admission.has_room("10.0.0.2"));  // another source has its own bound
    CHECK(admission.oldest("10.0.0.1")->ticket == 1u);
    CHECK(admission.oldest("10.0.0.1")->since == t0);
    // A ticket frees its place once, whether it proved itself or closed.
    CHECK(admission.release(1) == "10.0.0.1");
    CHECK_FALSE(admission.release(1));
    CHECK_FALSE(admission.holds(1));
    CHECK(admission.held("10.0.0.1") == 1);
    CHECK(admission.oldest("10.0.0.1")->ticket == 2u);
    CHECK(admission.release(2) == "10.0.0.1");
    CHECK(admission.held("10.0.0.1") == 0);
    CHECK(admission.held("10.0.0.2") == 1);
    CHECK(admission.holds(3));
}
