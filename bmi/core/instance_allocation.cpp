// SPDX-License-Identifier: LGPL-2.1-or-later
// The allocation an instance lives in (doc/planes.md): read once when it is created, bound to
// this node's interfaces and devices, and handed to each method in its Config. Everything the
// OS is asked to enforce is logged under BMI_DEBUG=control; everything it cannot, as a warning.
#include "bmi/core/instance_allocation.hpp"

#include <algorithm>

#include "methods/method_table.hpp"
#include "support/logging/log.hpp"
#include "support/optional_library/libcrypto.hpp"
#include "support/planes/allocation_source.hpp"

namespace bmi::core {

namespace {
using support::planes::PlaneType;

// The key of the allocation, or of key_file; both at once only if they name the same file.
int load_instance_key(const support::Settings& settings,
                      const support::planes::InstanceAllocation& allocation,
                      support::keys::SharedKey& out) {
    const std::string& key_file = settings.text(support::SettingId::key_file);
    const bool allocation_key = !allocation.key_file.empty() || !allocation.key_material.empty();
    if (!allocation_key) return support::keys::key_from_settings(settings, out);
    if (!key_file.empty() && key_file != allocation.key_file) {
        BMI_WARN("key_file (%s) and the key of allocation %s both given; one instance holds "
                 "one key",
                 key_file.c_str(), allocation.origin.c_str());
        return -BMI_EINVAL;
    }
    if (allocation.key_material.empty())
        return support::keys::load_key_file(allocation.key_file, out);
    int rc = support::keys::key_from_material(allocation.key_material, out);
    if (rc == -BMI_EINVAL)
        BMI_WARN("%s: pmix.alloc.nsec: %zu bytes; a key is 16 to 64 bytes",
                 allocation.origin.c_str(), allocation.key_material.size());
    return rc;
}
// The allocation's policy is the site's floor: a setting may ask for more, never for less.
int raise_encryption(support::Settings& settings,
                     const support::planes::InstanceAllocation& allocation) {
    using support::SettingId;
    if (allocation.encryption.empty()) return 0;
    const auto floor =
        support::parse_setting(support::setting_spec(SettingId::encryption), allocation.encryption);
    if (!floor) return -BMI_EINVAL;
    if (*floor <= settings.number(SettingId::encryption)) return 0;
    BMI_LOG(control, "%s: encryption=%s (the setting said %s)", allocation.origin.c_str(),
            allocation.encryption.c_str(), settings.shown(SettingId::encryption).c_str());
    return settings.set(SettingId::encryption, allocation.encryption,
                        support::SettingSource::allocation);
}
}  // namespace

int InstanceAllocation::take(support::Settings& settings, std::string_view program_text) {
    support::planes::InstanceAllocation allocation;
    if (int rc = support::planes::resolve_allocation(settings, program_text, allocation); rc != 0)
        return rc;
    if (int rc = load_instance_key(settings, allocation, key_); rc != 0) return rc;
    if (int rc = raise_encryption(settings, allocation); rc != 0) return rc;
    // Traffic keys are derived from the pre-shared key: without one there is nothing to encrypt
    // with, and silently plain traffic is what the setting was given to rule out.
    if (!key_ && settings.number(support::SettingId::encryption) != 0) {
        BMI_WARN("encryption=%s needs a security key (key_file, BMI_KEY_FILE, or an "
                 "allocation's key); none is given",
                 settings.shown(support::SettingId::encryption).c_str());
        return -BMI_EINVAL;
    }
    // The record cipher's library is opened here, so that a missing one fails the instance
    // that asked for encryption, naming the library, rather than every connection it makes.
    std::string why;
    if (settings.number(support::SettingId::encryption) != 0 &&
        support::load_libcrypto(&why) == nullptr) {
        BMI_WARN("encryption=%s needs %s, which cannot be loaded (%s)",
                 settings.shown(support::SettingId::encryption).c_str(), support::libcrypto_file,
                 why.c_str());
        return -BMI_ENOSYS;
    }
    if (allocation.entries.empty()) return 0;
    allocated_ = true;
    origin_ = allocation.origin;
    for (const auto& entry : allocation.entries) {
        support::planes::PlaneBinding binding;
        std::string why;
        if (int rc = support::planes::bind_allocation(entry, allocation.slice, binding, why);
            rc != 0) {
            BMI_WARN("%s: %s", allocation.origin.c_str(), why.c_str());
            return rc;
        }
        BMI_LOG(control, "plane %s", support::planes::describe(binding).c_str());
        for (const auto& note : support::planes::enforcement_notes(binding)) {
            if (note.enforced)
                BMI_LOG(control, "plane %s: %s", binding.plane.c_str(), note.text.c_str());
            else
                BMI_WARN("plane %s (%s): %s", binding.plane.c_str(), entry.id.c_str(),
                         note.text.c_str());
        }
        planes_.push_back(std::move(binding));
    }
    if (std::count_if(planes_.begin(), planes_.end(),
                      [](const auto& p) { return p.type == PlaneType::verbs; }) > 1) {
        BMI_WARN("%s: one instance opens one RDMA device port; allocate one verbs plane",
                 origin_.c_str());
        return -BMI_EINVAL;
    }
    return 0;
}

bool InstanceAllocation::reachable(std::string_view scheme) const {
    if (!allocated_) return true;
    return std::any_of(planes_.begin(), planes_.end(), [&](const auto& plane) {
        return support::planes::to_string(plane.type) == method::canonical_scheme(scheme);
    });
}

}  // namespace bmi::core
