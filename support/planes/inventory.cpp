// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/inventory.hpp"

#include <algorithm>

namespace bmi::support::planes {

const InventoryPlane* Inventory::find(std::string_view name_or_identifier) const {
    for (const InventoryPlane& p : planes)
        if (p.plane.name == name_or_identifier) return &p;
    for (const InventoryPlane& p : planes)
        if (p.plane.identifier == name_or_identifier) return &p;
    return nullptr;
}

namespace {
// One optional field after the identifier; false with `why` when it is malformed.
bool apply_field(InventoryPlane& p, const Field& f, std::string& why) {
    if (f.required) {
        why = "an inventory states what a plane has; '!' belongs in requests";
        return false;
    }
    if (f.key == "ports") {
        if (p.plane.type != PlaneType::tcp) {
            why = "only tcp planes have ports";
            return false;
        }
        auto ports = PortRanges::parse(f.value, why);
        if (!ports) return false;
        p.ports = std::move(*ports);
        return true;
    }
    if (f.key == "bw") {
        const auto bw = parse_bandwidth_mbps(f.value);
        if (!bw)
            why = quoted(f.value) + " is not a bandwidth of " + bandwidth_range;
        else
            p.bandwidth_mbps = *bw;
        return bw.has_value();
    }
    if (f.key == "qos") {
        for (std::string_view level : split_on(f.value, ',')) {
            if (!is_name(level)) {
                why = quoted(level) + " is not a QoS level name";
                return false;
            }
            p.qos.emplace_back(level);
        }
        return true;
    }
    why = "unknown field (ports, bw and qos are known)";
    return false;
}
}  // namespace

std::optional<Inventory> parse_inventory(std::string_view text, std::string_view source,
                                         ParseError& error) {
    Inventory inventory;
    for (const TextLine& line : meaningful_lines(text, false)) {
        const auto fail = [&](std::string field, std::string message) {
            error = {std::string(source), line.number, std::move(field), std::move(message)};
            return std::nullopt;
        };
        const std::vector<std::string_view> words = split_blanks(line.text);
        if (words.size() < 4 || words[1] != "=")
            return fail("", "expected 'name = type identifier [field=value ...]'");
        InventoryPlane p;
        if (!is_name(words[0])) return fail("name", quoted(words[0]) + " is not a name");
        if (inventory.find(words[0]) != nullptr)
            return fail("name", quoted(words[0]) + " is named twice");
        const auto type = parse_plane_type(words[2]);
        if (!type) return fail("type", quoted(words[2]) + " is not " + plane_type_choices());
        std::string why;
        const auto id = canonical_identifier(*type, words[3], why);
        if (!id) return fail("identifier", why);
        const bool pinned_twice = std::any_of(
            inventory.planes.begin(), inventory.planes.end(), [&](const InventoryPlane& q) {
                return q.plane.type == *type && q.plane.identifier == *id;
            });
        if (pinned_twice) return fail("identifier", *id + " is already named");
        p.plane = {*type, *id, std::string(words[0]),
                   "inventory " + std::string(source) + ":" + std::to_string(line.number)};
        std::vector<std::string_view> seen;
        for (std::size_t i = 4; i < words.size(); ++i) {
            const auto field = parse_field(words[i], why);
            if (!field) return fail(std::string(words[i].substr(0, words[i].find('='))), why);
            if (std::find(seen.begin(), seen.end(), field->key) != seen.end())
                return fail(std::string(field->key), "given twice");
            seen.push_back(field->key);
            if (!apply_field(p, *field, why)) return fail(std::string(field->key), why);
        }
        inventory.planes.push_back(std::move(p));
    }
    return inventory;
}

}  // namespace bmi::support::planes
