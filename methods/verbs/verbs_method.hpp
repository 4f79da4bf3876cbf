// SPDX-License-Identifier: LGPL-2.1-or-later
// The verbs method's entry in the static method table: RDMA over libibverbs RC queue pairs.
#pragma once

#include <memory>
#include <string>

#include "methods/method.hpp"

namespace bmi::method::verbs {

// Creates a verbs instance; with a listen address "verbs://host:port" it listens there for
// bootstrap connections. -BMI_ENODEV without a usable RDMA port, -BMI_EINVAL if malformed.
int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out);

inline constexpr Descriptor descriptor{"bmi_verbs", "verbs", &create};

// True if this host has an RDMA device; otherwise reason says why (tests skip on false).
bool device_available(std::string* reason);

}  // namespace bmi::method::verbs
