// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/planes/pmix_value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "support/planes/port_ranges.hpp"

namespace bmi::support::planes {

namespace {
// Raised while converting one id; names the text-form field, so that an error reads the same
// whatever the allocation's source.
struct Refusal {
    std::string field;
    std::string message;
};

constexpr std::string_view type_key = "pmix.alloc.nettype";
constexpr std::string_view plane_key = "pmix.alloc.netplane";
constexpr std::string_view endpts_key = "pmix.alloc.endpts";
constexpr std::string_view endpts_node_key = "pmix.alloc.endpts.nd";
constexpr std::string_view qos_key = "pmix.alloc.netqos";
constexpr std::string_view bw_key = "pmix.alloc.bw";
constexpr std::string_view key_key = "pmix.alloc.nsec";
// RFC0030 does not size keys; 16 bytes is the least worth calling a secret, and 64 is what
// support/keys can hold.
constexpr std::size_t min_key_bytes = 16;
constexpr std::size_t max_key_bytes = 64;

std::string type_name(const PmixScalar& v) {
    struct Namer {
        std::string operator()(const std::string&) const { return "string"; }
        std::string operator()(std::uint64_t) const { return "integer"; }
        std::string operator()(double) const { return "real number"; }
        std::string operator()(const PmixBytes&) const { return "byte object"; }
        std::string operator()(const PmixOtherType& o) const { return o.name; }
    };
    return std::visit(Namer{}, v);
}

// A value goes into the text as one field. Blanks, ';' or '#' would end it early and could
// smuggle in another field or a second entry; '=' and '!' would change its meaning. Such a
// value is refused here, before the parser could read it as something else.
const std::string& as_token(std::string_view field, std::string_view pmix_key, const PmixScalar& v,
                            bool may_be_empty = false) {
    const auto* s = std::get_if<std::string>(&v);
    if (s == nullptr)
        throw Refusal{std::string(field),
                      std::string(pmix_key) + " is a " + type_name(v) + ", not a string"};
    if (s->empty() && !may_be_empty)
        throw Refusal{std::string(field), std::string(pmix_key) + " is empty"};
    const bool bad = std::any_of(s->begin(), s->end(), [](char c) {
        return static_cast<unsigned char>(c) <= ' ' || c == 0x7f || c == ';' || c == '#' ||
               c == '=' || c == '!';
    });
    if (bad) throw Refusal{std::string(field), quoted(*s) + " is not a single word"};
    return *s;
}

std::uint64_t as_count(std::string_view field, std::string_view pmix_key, const PmixScalar& v) {
    if (const auto* n = std::get_if<std::uint64_t>(&v)) return *n;
    throw Refusal{std::string(field),
                  std::string(pmix_key) + " is a " + type_name(v) + ", not a count"};
}

std::string fixed_text(double v) {
    char buf[400];  // the longest finite double in fixed notation has 309 integer digits
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
    return ec == std::errc{} ? std::string(buf, end) : std::string("nan");
}

template <class T>
void set_once(std::optional<T>& slot, T value, std::string_view field, std::string_view where) {
    if (slot) throw Refusal{std::string(field), "given twice (" + std::string(where) + ")"};
    slot = std::move(value);
}

// The fields of one data array, before they become text.
struct ArrayFields {
    std::optional<std::string> ports, type, plane, qos;
    std::optional<std::uint64_t> endpts, endpts_node;
    std::optional<double> bw;
    std::optional<PmixBytes> key;
    bool prototype = false;  // type or plane came as further elements under the id key
};

// Elements keyed by the id are, in order, the resources, then (pnet/tcp prototype) the type
// and the plane. Unknown keys are skipped: an RM may store more than this reader needs.
ArrayFields collect_fields(std::string_view id, const std::vector<PmixItem>& items) {
    ArrayFields f;
    std::size_t under_id = 0;
    for (const PmixItem& item : items) {
        const std::string_view k = item.key;
        if (k == id) {
            static constexpr std::string_view order[] = {"ports", "type", "plane"};
            if (under_id == std::size(order))
                throw Refusal{"id", "more than three elements under " + quoted(id)};
            const std::string_view field = order[under_id++];
            // Resources may be empty: a verbs or shm allocation has no ports.
            const std::string& s = as_token(field, id, item.value, field == "ports");
            if (field == "ports")
                f.ports = s;
            else if (field == "type")
                set_once(f.type, s, "type", "under the id and as nettype");
            else
                set_once(f.plane, s, "plane", "under the id and as netplane");
            f.prototype = f.prototype || field != "ports";
        } else if (k == type_key) {
            set_once(f.type, as_token("type", k, item.value), "type",
                     "under the id and as nettype");
        } else if (k == plane_key) {
            set_once(f.plane, as_token("plane", k, item.value), "plane",
                     "under the id and as netplane");
        } else if (k == endpts_key) {
            set_once(f.endpts, as_count("endpts", k, item.value), "endpts", k);
        } else if (k == endpts_node_key) {
            set_once(f.endpts_node, as_count("endpts", k, item.value), "endpts", k);
        } else if (k == qos_key) {
            set_once(f.qos, as_token("qos", k, item.value), "qos", k);
        } else if (k == bw_key) {
            if (const auto* d = std::get_if<double>(&item.value))
                set_once(f.bw, *d, "bw", k);
            else
                throw Refusal{"bw", std::string(k) + " is a " + type_name(item.value) +
                                        ", not a real number"};
        } else if (k == key_key) {
            const auto* b = std::get_if<PmixBytes>(&item.value);
            if (b == nullptr)
                throw Refusal{"key", std::string(k) + " is a " + type_name(item.value) +
                                         ", not a byte object"};
            set_once(f.key, *b, "key", k);
        }
    }
    if (under_id == 0)
        throw Refusal{"ports", "no element under " + quoted(id) + " (the resources)"};
    if (!f.type) throw Refusal{"type", "missing (no pmix.alloc.nettype)"};
    if (!f.plane) throw Refusal{"plane", "missing (no pmix.alloc.netplane)"};
    return f;
}

// Endpoints per process. pmix.alloc.endpts wins. Otherwise the node's share (endpts.nd, or for
// the prototype, which carries no count, every port it listed) is split evenly among this
// job's processes on the node, so that local_rank * endpts never runs past the list.
std::uint64_t endpoints_of(const ArrayFields& f, std::uint32_t local_size) {
    if (f.endpts) return *f.endpts;
    const std::uint64_t sharers = local_size == 0 ? 1 : local_size;
    std::uint64_t per_node = 0;
    std::string what;
    if (f.endpts_node) {
        per_node = *f.endpts_node;
        what = "pmix.alloc.endpts.nd " + std::to_string(per_node);
    } else if (f.prototype) {
        std::string why;
        const auto ports = PortRanges::parse(*f.ports, why);
        if (!ports) throw Refusal{"ports", why};
        per_node = ports->count();
        what = std::to_string(per_node) + " port(s)";
    } else {
        throw Refusal{"endpts", "missing (no pmix.alloc.endpts or pmix.alloc.endpts.nd)"};
    }
    if (per_node / sharers == 0)
        throw Refusal{"endpts", what + " cannot give each of " + std::to_string(sharers) +
                                    " local processes an endpoint"};
    return per_node / sharers;
}

PmixConverted convert(std::string_view id, const PmixValue& value, std::uint32_t local_size) {
    PmixConverted out;
    if (!value.array) {
        const auto* s = std::get_if<std::string>(&value.scalar);
        if (s == nullptr)
            throw Refusal{"id", "the value is a " + type_name(value.scalar) +
                                    ", neither a data array of info nor a string"};
        // Resources alone: one tcp endpoint on any address.
        out.text = "id=" + std::string(id) + " type=tcp plane=0.0.0.0/0 endpts=1 ports=" +
                   as_token("ports", id, value.scalar);
        return out;
    }
    const ArrayFields f = collect_fields(id, *value.array);
    out.text = "id=" + std::string(id) + " type=" + *f.type + " plane=" + *f.plane +
               " endpts=" + std::to_string(endpoints_of(f, local_size));
    // Empty resources leave ports out: the parser then asks tcp for them, and refuses them on
    // any other type.
    if (!f.ports->empty()) out.text += " ports=" + *f.ports;
    if (f.qos) out.text += " qos=" + *f.qos;
    if (f.bw) out.text += " bw=" + fixed_text(*f.bw);
    if (f.key) {
        if (f.key->size() < min_key_bytes || f.key->size() > max_key_bytes)
            throw Refusal{"key", "pmix.alloc.nsec holds " + std::to_string(f.key->size()) +
                                     " bytes; a key has 16 to 64"};
        out.key = *f.key;
    }
    return out;
}
}  // namespace

std::optional<PmixConverted> convert_pmix_value(std::string_view id, const PmixValue& value,
                                                std::uint32_t local_size, std::string& field,
                                                std::string& message) {
    try {
        if (id.empty()) throw Refusal{"id", "empty"};
        return convert(id, value, local_size);
    } catch (const Refusal& r) {
        field = r.field;
        message = r.message;
        return std::nullopt;
    }
}

PmixStatus allocations_from_pmix(std::string_view nspace, std::span<const std::string> ids,
                                 std::span<const PmixValue> values, std::uint32_t local_size,
                                 PmixAllocations& out, std::string& note) {
    PmixAllocations read;
    std::string key_owner;  // the first id that carried a key
    for (std::size_t i = 0; i < ids.size() && i < values.size(); ++i) {
        const std::string source = "PMIx " + std::string(nspace) + " " + ids[i];
        std::string field, message;
        const auto converted = convert_pmix_value(ids[i], values[i], local_size, field, message);
        if (!converted) {
            note = source + ": " + field + ": " + message;
            return PmixStatus::malformed;
        }
        ParseError error;
        auto parsed = parse_allocations(converted->text, source, error);
        if (!parsed) {
            note = error.text();
            return PmixStatus::malformed;
        }
        for (const Allocation& earlier : read.entries) {
            if (earlier.id == ids[i]) {
                note = source + ": id: asked twice";
                return PmixStatus::malformed;
            }
        }
        if (!converted->key.empty()) {
            if (key_owner.empty()) {
                key_owner = ids[i];
                read.key = converted->key;
            } else if (converted->key != read.key) {
                note = source + ": key: differs from the key of " + key_owner +
                       " (one instance holds one key)";
                return PmixStatus::malformed;
            }
        }
        read.entries.push_back(std::move(parsed->front()));
    }
    if (ids.size() != values.size()) {
        note = "PMIx " + std::string(nspace) + ": " + std::to_string(ids.size()) + " ids but " +
               std::to_string(values.size()) + " values";
        return PmixStatus::malformed;
    }
    out = std::move(read);
    note = "PMIx " + std::string(nspace) + ": read";
    for (std::size_t i = 0; i < ids.size(); ++i) note += (i == 0 ? " " : ", ") + ids[i];
    return PmixStatus::found;
}

}  // namespace bmi::support::planes
