// SPDX-License-Identifier: LGPL-2.1-or-later
#include <catch2/catch.hpp>

#include "methods/source_admission.hpp"

using bmi::method::SourceAdmission;

TEST_CASE("source admission: each source has its own bound and knows its oldest",
          "[admission]") {
    SourceAdmission admission(2);
    CHECK_FALSE(admission.oldest("10.0.0.1"));
    admission.admit("10.0.0.1", 1);
    admission.admit("10.0.0.1", 2);
    admission.admit("10.0.0.2", 3);
    CHECK_FALSE(admission.has_room("10.0.0.1"));
    CHECK(admission.has_room("10.0.0.2"));  // another source has its own bound
    CHECK(admission.oldest("10.0.0.1") == 1u);
    // A ticket frees its place once, whether it proved itself or closed.
    admission.release("10.0.0.1", 1);
    admission.release("10.0.0.1", 1);
    CHECK(admission.held("10.0.0.1") == 1);
    CHECK(admission.oldest("10.0.0.1") == 2u);
    admission.release("10.0.0.1", 2);
    CHECK(admission.held("10.0.0.1") == 0);
    CHECK(admission.held("10.0.0.2") == 1);
}
