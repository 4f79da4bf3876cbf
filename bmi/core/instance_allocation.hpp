// SPDX-License-Identifier: LGPL-2.1-or-later
// The allocation an instance lives in (doc/planes.md): its planes as bound on this node, the
// instance's key (from the allocation or key_file), and which schemes it may reach. Read once,
// when the instance is created; constant afterwards.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "support/keys/secret_key.hpp"
#include "support/planes/plane_binding.hpp"
#include "support/settings/settings.hpp"

namespace bmi::core {

class InstanceAllocation {
public:
    // Reads the allocation in force (program_text from the C++ API, else the allocation
    // settings) and the key; 0, or -BMI_E* after a warning that says why.
    int take(support::Settings& settings, std::string_view program_text);

    bool allocated() const { return allocated_; }  // false: no allocation in force
    const std::string& origin() const { return origin_; }
    const std::vector<support::planes::PlaneBinding>& planes() const { return planes_; }
    const support::keys::SharedKey& key() const { return key_; }  // empty: keyless
    // With an allocation in force, a method without an allocated plane reaches nobody.
    bool reachable(std::string_view scheme) const;

private:
    support::keys::SharedKey key_;
    bool allocated_ = false;
    std::string origin_;
    std::vector<support::planes::PlaneBinding> planes_;
};

}  // namespace bmi::core
