// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/allocation_source.hpp"

#include <unistd.h>

#include <iterator>
#include <set>
#include <sstream>

#include "bmi-types.h"
#include "support/files/regular_file.hpp"
#include "support/logging/log.hpp"
#include "support/planes/pmix_allocation.hpp"

namespace bmi::support::planes {

namespace {
// An allocation file is a few lines per plane; anything this large is not one.
constexpr std::size_t max_file_size = 1 << 20;

struct Source {
    std::string name;  // for messages: "BMI_ALLOCATION", "allocation_file", ...
    std::string value;
    SettingId id;
    bool program = false;
};

std::string setting_name(const Settings& settings, SettingId id) {
    const SettingSpec& spec = setting_spec(id);
    return std::string(settings.source(id) == SettingSource::option_string ? spec.key : spec.env);
}

int parse_text(std::string_view text, const std::string& origin, InstanceAllocation& out) {
    ParseError error;
    auto entries = parse_allocations(text, origin, error);
    if (!entries) {
        BMI_WARN("%s", error.text().c_str());
        return -BMI_EINVAL;
    }
    out.entries = std::move(*entries);
    out.origin = origin;
    return 0;
}

int read_file(const std::string& setting, const std::string& path, InstanceAllocation& out) {
    const OpenedFile file = open_regular_file(path);
    if (file.fd < 0) {
        BMI_WARN("%s: cannot read allocation file '%s': %s", setting.c_str(), path.c_str(),
                 file.refusal.c_str());
        return file.open_errno == 0 ? -BMI_EINVAL : -BMI_ENOENT;
    }
    std::string text(max_file_size + 1, '\0');
    std::size_t size = 0;
    const bool read_ok = read_up_to(file.fd, text.data(), text.size(), size);
    close(file.fd);
    if (!read_ok) {
        BMI_WARN("%s: cannot read allocation file '%s'", setting.c_str(), path.c_str());
        return -BMI_ENOENT;
    }
    text.resize(size);
    if (text.size() > max_file_size) {
        BMI_WARN("%s: allocation file '%s' is over %zu bytes", setting.c_str(), path.c_str(),
                 max_file_size);
        return -BMI_EINVAL;
    }
    return parse_text(text, path, out);
}

int read_pmix(const std::string& setting, const std::string& list, InstanceAllocation& out) {
    std::vector<std::string> ids;
    for (std::string_view id : split_on(list, '+')) {
        if (!is_name(id) || id.substr(0, 4) == "pmix") {
            BMI_WARN("%s: '%.*s' is not an allocation id (a name not starting with 'pmix')",
                     setting.c_str(), static_cast<int>(id.size()), id.data());
            return -BMI_EINVAL;
        }
        ids.emplace_back(id);
    }
    PmixAllocations found;
    std::string note;
    switch (read_pmix_allocations(ids, found, note)) {
        case PmixStatus::found:
            out.entries = std::move(found.entries);
            out.key_material = std::move(found.key);
            out.slice = found.local_rank;
            out.origin = "PMIx " + note;
            BMI_LOG(control, "allocation from %s", out.origin.c_str());
            return 0;
        case PmixStatus::unavailable:
        case PmixStatus::absent:
            BMI_LOG(control, "%s=%s: %s; starting with the normal configuration instead",
                    setting.c_str(), list.c_str(), note.c_str());
            return 0;
        case PmixStatus::unloadable:
            BMI_WARN("%s=%s: %s", setting.c_str(), list.c_str(), note.c_str());
            return -BMI_ENOSYS;
        case PmixStatus::malformed:
            break;
    }
    BMI_WARN("%s=%s: %s", setting.c_str(), list.c_str(), note.c_str());
    return -BMI_EINVAL;
}

// One instance holds one key, one encryption policy and every id once.
int check_entries(InstanceAllocation& out) {
    std::set<std::string> ids;
    for (const Allocation& a : out.entries) {
        if (!ids.insert(a.id).second) {
            BMI_WARN("%s: id: '%s' given twice", out.origin.c_str(), a.id.c_str());
            return -BMI_EINVAL;
        }
    }
    const Allocation& first = out.entries.front();
    for (const Allocation& a : out.entries) {
        if (a.key_file != first.key_file) {
            BMI_WARN("%s: key_file: allocations %s and %s differ in their keys; one instance "
                     "holds one key (start one instance per key)",
                     out.origin.c_str(), first.id.c_str(), a.id.c_str());
            return -BMI_EINVAL;
        }
    }
    out.key_file = first.key_file;
    // The policy belongs to the instance's key, so it is one for all its entries as well.
    for (const Allocation& a : out.entries) {
        if (a.encryption != first.encryption) {
            BMI_WARN("%s: encryption: allocations %s (%s) and %s (%s) differ; one instance has "
                     "one policy",
                     out.origin.c_str(), first.id.c_str(),
                     first.encryption.empty() ? "unset" : first.encryption.c_str(), a.id.c_str(),
                     a.encryption.empty() ? "unset" : a.encryption.c_str());
            return -BMI_EINVAL;
        }
    }
    out.encryption = first.encryption;
    return 0;
}
}  // namespace

int resolve_allocation(const Settings& settings, std::string_view program_text,
                       InstanceAllocation& out) {
    out = InstanceAllocation{};
    std::vector<Source> given;
    if (!program_text.empty())
        given.push_back(
            {"the program's allocation", std::string(program_text), SettingId::allocation, true});
    for (SettingId id :
         {SettingId::allocation, SettingId::allocation_file, SettingId::allocation_id})
        if (!settings.text(id).empty())
            given.push_back({setting_name(settings, id), settings.text(id), id});
    if (given.empty()) return 0;
    if (given.size() > 1) {
        BMI_WARN("%s and %s both give an allocation; give one", given[0].name.c_str(),
                 given[1].name.c_str());
        return -BMI_EINVAL;
    }
    const Source& s = given.front();
    int rc;
    if (s.program || s.id == SettingId::allocation)
        rc = parse_text(s.value, s.name, out);
    else if (s.id == SettingId::allocation_file)
        rc = read_file(s.name, s.value, out);
    else
        rc = read_pmix(s.name, s.value, out);
    if (rc != 0 || out.entries.empty()) return rc;
    return check_entries(out);
}

}  // namespace bmi::support::planes
