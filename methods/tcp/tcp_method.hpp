// SPDX-License-Identifier: LGPL-2.1-or-later
// Entry point of the tcp method for the static method table.
#pragma once

#include <memory>

#include "methods/method.hpp"

namespace bmi::method::tcp {

// Creates a tcp instance; listens when config.listen_address is set. 0, or -BMI_E* (e.g.
// -BMI_EADDRINUSE, -BMI_EINVAL for a malformed listen address).
int create(const Config& config, Sink& sink, std::unique_ptr<Method>& out);
// Parses and resolves a "tcp://host:port" string with no lock held (see Descriptor).
int prepare_lookup(std::string_view address, std::unique_ptr<LookupHint>& out);

// tcp_same_node.cpp: Descriptor::ask_same_node.
int ask_same_node(std::string_view address, const Config& config, kit::SameNodeOffer& out);
inline constexpr Descriptor descriptor{.name = "bmi_tcp",
                                       .scheme = "tcp",
                                       .create = &create,
                                       .prepare_lookup = &prepare_lookup,
                                       .ask_same_node = &ask_same_node};

}  // namespace bmi::method::tcp
