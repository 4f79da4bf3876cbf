// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/allocation.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <span>

#include "support/settings/settings.hpp"

namespace bmi::support::planes {

namespace {
// Raised inside one entry's parse; turned into a ParseError with the source and line.
struct FieldError {
    std::string field;
    std::string message;
};

// The fields of one entry, each known key at most once.
class EntryFields {
public:
    EntryFields(std::string_view line, std::span<const std::string_view> known,
                bool allow_required) {
        for (std::string_view token : split_blanks(line)) {
            std::string why;
            const auto f = parse_field(token, why);
            if (!f) throw FieldError{std::string(token.substr(0, token.find('='))), why};
            if (std::find(known.begin(), known.end(), f->key) == known.end())
                throw FieldError{std::string(f->key), "unknown field"};
            if (find(f->key) != nullptr) throw FieldError{std::string(f->key), "given twice"};
            if (f->required && !allow_required)
                throw FieldError{std::string(f->key), "'!' (required) belongs in requests"};
            fields_.push_back(*f);
        }
    }
    const Field* find(std::string_view key) const {
        for (const Field& f : fields_)
            if (f.key == key) return &f;
        return nullptr;
    }
    const Field& need(std::string_view key) const {
        const Field* f = find(key);
        if (f == nullptr) throw FieldError{std::string(key), "missing"};
        return *f;
    }

private:
    std::vector<Field> fields_;
};

std::string parse_id(const Field& f) {
    // PMIx reserves keys that start with "pmix" (its job-info store refuses them), and the id
    // becomes such a key when an allocation travels through PMIx.
    if (!is_name(f.value)) throw FieldError{"id", quoted(f.value) + " is not a name"};
    if (f.value.substr(0, 4) == "pmix")
        throw FieldError{"id", quoted(f.value) + " starts with 'pmix', which PMIx reserves"};
    return std::string(f.value);
}

PlaneType parse_type(const Field& f) {
    const auto t = parse_plane_type(f.value);
    if (!t) throw FieldError{"type", quoted(f.value) + " is not " + plane_type_choices()};
    return *t;
}

std::size_t parse_endpoints(const Field& f) {
    const auto n = parse_whole(f.value, 1, 65535);
    if (!n) throw FieldError{"endpts", quoted(f.value) + " is not a count of endpoints (1..65535)"};
    return static_cast<std::size_t>(*n);
}

double parse_bandwidth(const Field& f) {
    const auto bw = parse_bandwidth_mbps(f.value);
    if (!bw) throw FieldError{"bw", quoted(f.value) + " is not a bandwidth of " + bandwidth_range};
    return *bw;
}

std::string parse_qos(const Field& f) {
    if (!is_name(f.value)) throw FieldError{"qos", quoted(f.value) + " is not a QoS level name"};
    return std::string(f.value);
}

template <class T, class Parse>
void take_wanted(const EntryFields& fields, std::string_view key, Wanted<T>& out, Parse parse) {
    if (const Field* f = fields.find(key)) out = {parse(*f), f->required};
}

RequestEntry parse_request(std::string_view line) {
    static constexpr std::array<std::string_view, 7> known{"id",  "type", "endpts", "plane",
                                                           "qos", "bw",   "key"};
    const EntryFields fields(line, known, true);
    RequestEntry e;
    e.id = parse_id(fields.need("id"));
    take_wanted(fields, "type", e.type, parse_type);
    fields.need("type");
    take_wanted(fields, "endpts", e.endpoints, parse_endpoints);
    fields.need("endpts");
    take_wanted(fields, "plane", e.plane, [&](const Field& f) {
        // An inventory name, or the plane's identifier as the allocation would write it.
        std::string why;
        if (is_name(f.value)) return std::string(f.value);
        const auto id = canonical_identifier(*e.type.value, f.value, why);
        if (!id) throw FieldError{"plane", why};
        return *id;
    });
    take_wanted(fields, "qos", e.qos, parse_qos);
    take_wanted(fields, "bw", e.bandwidth_mbps, parse_bandwidth);
    take_wanted(fields, "key", e.key, [](const Field& f) {
        if (f.value != "yes" && f.value != "no")
            throw FieldError{"key", quoted(f.value) + " is not yes or no"};
        return f.value == "yes";
    });
    return e;
}

Allocation parse_allocation(std::string_view line) {
    static constexpr std::array<std::string_view, 10> known{
        "id",  "type", "plane",    "endpts",     "ports",
        "qos", "bw",   "key_file", "encryption", "degraded"};
    static constexpr std::array<std::string_view, 5> degradable{"plane", "endpts", "qos", "bw",
                                                                "key"};
    const EntryFields fields(line, known, false);
    Allocation a;
    a.id = parse_id(fields.need("id"));
    a.type = parse_type(fields.need("type"));
    std::string why;
    const auto plane = canonical_identifier(a.type, fields.need("plane").value, why);
    if (!plane) throw FieldError{"plane", why};
    a.plane = *plane;
    a.endpoints = parse_endpoints(fields.need("endpts"));
    if (a.type == PlaneType::tcp) {
        auto ports = PortRanges::parse(fields.need("ports").value, why);
        if (!ports) throw FieldError{"ports", why};
        a.ports = std::move(*ports);
        // A tcp endpoint is a listening port; fewer ports than endpoints cannot be honoured.
        if (a.ports.count() < a.endpoints)
            throw FieldError{"ports", std::to_string(a.ports.count()) + " port(s) for " +
                                          std::to_string(a.endpoints) + " endpoints"};
    } else if (fields.find("ports") != nullptr) {
        throw FieldError{"ports", "only tcp allocations have ports"};
    }
    if (const Field* f = fields.find("qos")) a.qos = parse_qos(*f);
    if (const Field* f = fields.find("bw")) a.bandwidth_mbps = parse_bandwidth(*f);
    if (const Field* f = fields.find("key_file")) {
        // The launcher's working directory is not the library's: a relative path would name a
        // different file, or none.
        if (f->value.front() != '/') throw FieldError{"key_file", "not an absolute path"};
        a.key_file = std::string(f->value);
    }
    if (const Field* f = fields.find("encryption")) {
        // The setting's own choices, so the allocation and the settings table never disagree.
        const SettingSpec& spec = setting_spec(SettingId::encryption);
        if (!parse_setting(spec, f->value))
            throw FieldError{"encryption",
                             quoted(f->value) + " is not one of " + std::string(spec.choices)};
        a.encryption = std::string(f->value);
    }
    if (const Field* f = fields.find("degraded")) {
        for (std::string_view name : split_on(f->value, ',')) {
            if (std::find(degradable.begin(), degradable.end(), name) == degradable.end())
                throw FieldError{"degraded",
                                 quoted(name) + " is not plane, endpts, qos, bw or key"};
            a.degraded.emplace_back(name);
        }
    }
    return a;
}

template <class Entry, class ParseOne>
std::optional<std::vector<Entry>> parse_entries(std::string_view text, std::string_view source,
                                                ParseError& error, ParseOne parse_one) {
    std::vector<Entry> entries;
    for (const TextLine& line : meaningful_lines(text, true)) {
        try {
            Entry e = parse_one(line.text);
            const bool duplicate = std::any_of(entries.begin(), entries.end(),
                                               [&](const Entry& o) { return o.id == e.id; });
            if (duplicate) throw FieldError{"id", quoted(e.id) + " appears twice"};
            entries.push_back(std::move(e));
        } catch (const FieldError& fe) {
            error = {std::string(source), line.number, fe.field, fe.message};
            return std::nullopt;
        }
    }
    if (entries.empty()) {
        error = {std::string(source), 0, "", "no entry (an empty text is not an allocation)"};
        return std::nullopt;
    }
    return entries;
}

// The shortest fixed-notation text that parses back to v: parse_positive reads fixed notation
// only, and "%.6g" wrote 6005555 as "6.00556e+06", an allocation no instance could read back
// (found by tests/fuzz/planes_text). A double's fixed form is at most ~330 characters.
std::string number_text(double v) {
    char buf[512];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
    return ec == std::errc{} ? std::string(buf, end) : std::string();
}

template <class T, class Show>
void put_wanted(std::string& out, std::string_view key, const Wanted<T>& w, Show show) {
    if (!w.value) return;
    out += ' ';
    out += key;
    out += '=';
    out += show(*w.value);
    if (w.required) out += '!';
}
}  // namespace

std::optional<std::vector<RequestEntry>> parse_requests(std::string_view text,
                                                        std::string_view source,
                                                        ParseError& error) {
    return parse_entries<RequestEntry>(text, source, error, parse_request);
}

std::optional<std::vector<Allocation>> parse_allocations(std::string_view text,
                                                         std::string_view source,
                                                         ParseError& error) {
    return parse_entries<Allocation>(text, source, error, parse_allocation);
}

std::string format_request(const RequestEntry& e) {
    std::string out = "id=" + e.id;
    const auto same = [](const std::string& s) { return s; };
    put_wanted(out, "type", e.type, [](PlaneType t) { return std::string(to_string(t)); });
    put_wanted(out, "endpts", e.endpoints, [](std::size_t n) { return std::to_string(n); });
    put_wanted(out, "plane", e.plane, same);
    put_wanted(out, "qos", e.qos, same);
    put_wanted(out, "bw", e.bandwidth_mbps, number_text);
    put_wanted(out, "key", e.key, [](bool k) { return std::string(k ? "yes" : "no"); });
    return out;
}

std::string format_allocation(const Allocation& a) {
    std::string out = "id=" + a.id + " type=" + std::string(to_string(a.type)) +
                      " plane=" + a.plane + " endpts=" + std::to_string(a.endpoints);
    if (a.type == PlaneType::tcp) out += " ports=" + a.ports.text();
    if (!a.qos.empty()) out += " qos=" + a.qos;
    if (a.bandwidth_mbps > 0) out += " bw=" + number_text(a.bandwidth_mbps);
    if (!a.key_file.empty()) out += " key_file=" + a.key_file;
    if (!a.encryption.empty()) out += " encryption=" + a.encryption;
    if (!a.degraded.empty()) {
        out += " degraded=";
        for (std::size_t i = 0; i < a.degraded.size(); ++i)
            out += (i == 0 ? "" : ",") + a.degraded[i];
    }
    return out;
}

}  // namespace bmi::support::planes
