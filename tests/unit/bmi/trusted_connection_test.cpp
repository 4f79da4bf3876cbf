// SPDX-License-Identifier: LGPL-2.1-or-later
// BMI_TRUSTED_CONNECTION in a process without OrangeFS's accessors (this one defines neither
// PINT_config_get_allowed_ports nor _networks): -BMI_ENOSYS, in either dialect, and tcp keeps
// serving everyone. tests/integration/trusted_connection_test.c has the process that does.
#include <catch2/catch.hpp>

#include <memory>

#include "bmi-types.h"
#include "bmi/core/instance.hpp"

using namespace bmi;

TEST_CASE("BMI_TRUSTED_CONNECTION without OrangeFS's accessors is -BMI_ENOSYS", "[trusted]") {
    for (auto dialect : {method::ApiDialect::orangefs, method::ApiDialect::standalone}) {
        core::InitParams params;
        params.method_list = "bmi_tcp";
        params.dialect = dialect;
        std::unique_ptr<core::Instance> instance;
        REQUIRE(core::Instance::create(params, instance) == 0);
        int config = 0;  // never read: there is nothing to read it with
        CHECK(instance->set_info(0, BMI_TRUSTED_CONNECTION, &config) == -BMI_ENOSYS);
        CHECK(instance->set_info(0, BMI_TRUSTED_CONNECTION, nullptr) ==
              (dialect == method::ApiDialect::orangefs ? -BMI_EINVAL : -BMI_ENOSYS));
    }
}
