// SPDX-License-Identifier: LGPL-2.1-or-later
#include "bmi/tools/bmi_info_planes.hpp"

#include <fstream>
#include <sstream>
#include <string>

#include "methods/method.hpp"
#include "support/planes/allocation_source.hpp"
#include "support/planes/discovery.hpp"
#include "support/planes/inventory.hpp"
#include "support/planes/plane_binding.hpp"
#include "support/settings/settings.hpp"

namespace bmi::info {

namespace {
using support::planes::Plane;

void print_plane(std::ostream& out, const Plane& p, std::string_view note) {
    out << "  " << to_string(p.type) << " " << p.identifier;
    if (!p.name.empty()) out << " (" << p.name << ")";
    out << "  from " << p.origin << note << "\n";
}
}  // namespace

bool print_planes(std::ostream& out, std::string_view options) {
    support::Settings settings(method::all_settings());
    settings.load(options);
    const std::string path = settings.text(support::SettingId::inventory);
    const auto discovered = support::planes::discover_planes();
    std::string no_rdma;
    out << "Planes (doc/planes.md)"
        << (support::planes::discovers_verbs(&no_rdma) ? "" : "; RDMA ports not listed: " + no_rdma)
        << ":\n";
    support::planes::Inventory inventory;
    bool ok = true;
    if (!path.empty()) {
        std::ifstream in(path, std::ios::binary);
        std::ostringstream text;
        text << in.rdbuf();
        support::planes::ParseError error;
        auto parsed = in ? support::planes::parse_inventory(text.str(), path, error) : std::nullopt;
        if (!in) error = {path, 0, "", "cannot be read"};
        if (parsed)
            inventory = std::move(*parsed);
        else {
            out << "  inventory (BMI_INVENTORY): " << error.text() << "\n";
            ok = false;
        }
    }
    for (Plane p : discovered) {
        const auto* pinned = inventory.find(p.identifier);
        const bool named = pinned != nullptr && pinned->plane.type == p.type;
        if (named) p.name = pinned->plane.name;
        print_plane(out, p, named ? ", named in " + pinned->plane.origin : std::string());
    }
    for (const auto& ip : inventory.planes) {
        bool seen = false;
        for (const Plane& p : discovered)
            seen = seen || (p.type == ip.plane.type && p.identifier == ip.plane.identifier);
        if (!seen) print_plane(out, ip.plane, ", not seen on this node");
    }
    return ok;
}

bool print_allocation(std::ostream& out, std::string_view options) {
    support::Settings settings(method::all_settings());
    if (settings.load(options) < 0) return false;
    support::planes::InstanceAllocation allocation;
    out << "Allocation in force (doc/planes.md):";
    if (support::planes::resolve_allocation(settings, "", allocation) != 0) {
        out << " INVALID (the warning above names the field)\n";
        return false;
    }
    if (allocation.entries.empty()) {
        out << " none (BMI_ALLOCATION, BMI_ALLOCATION_FILE and BMI_ALLOCATION_ID are unset, or "
               "PMIx had none: see BMI_DEBUG=control)\n";
        return true;
    }
    out << " from " << allocation.origin << "\n";
    bool ok = true;
    for (const auto& entry : allocation.entries) {
        support::planes::PlaneBinding binding;
        std::string why;
        if (support::planes::bind_allocation(entry, allocation.slice, binding, why) != 0) {
            out << "  " << entry.id << ": CANNOT BE BOUND HERE: " << why << "\n";
            ok = false;
            continue;
        }
        out << "  " << support::planes::describe(binding)
            << (entry.key_file.empty() && allocation.key_material.empty() ? "" : ", keyed") << "\n";
        for (const auto& note : support::planes::enforcement_notes(binding))
            out << "    " << (note.enforced ? "" : "NOT ENFORCED: ") << note.text << "\n";
    }
    return ok;
}

}  // namespace bmi::info
