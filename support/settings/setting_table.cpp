// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/settings/setting_table.hpp"

#include <cctype>
#include <functional>

namespace bmi::support {

namespace {
using T = SettingType;
using I = SettingId;
using namespace setting_units;

// The option key is always the environment name without BMI_, in lower case (a unit test
// checks it), so a reader who knows one knows the other.
constexpr SettingSpec rows[] = {
    {I::debug, "debug", "BMI_DEBUG", T::text, "", "", 0, 0, "",
     "log areas: control,address,tcp,shm,verbs,ofi,error or all (read once per process, from the "
     "environment only: logging works before any instance exists)",
     "", false},
    {I::unexpected_quota, "unexpected_quota", "BMI_UNEXPECTED_QUOTA", T::size, "64M", "bytes", 0,
     TiB, "", "unexpected messages an instance holds before it stops reading their senders"},
    {I::unexpected_peer_quota, "unexpected_peer_quota", "BMI_UNEXPECTED_PEER_QUOTA", T::size, "0",
     "bytes", 0, TiB, "",
     "what one peer's unexpected messages may hold of the quota; 0 = an eighth of it, at least "
     "64 KiB"},
    {I::key_file, "key_file", "BMI_KEY_FILE", T::text, "", "", 0, 0, "",
     "security key file (32 bytes, or 64 hex digits; mode 0600): only peers that prove the "
     "same key get in (doc/security.md); empty = no key"},
    {I::unexpected_limit, "unexpected_limit", "BMI_UNEXPECTED_LIMIT", T::size, "0", "bytes", 0, GiB,
     "", "largest unexpected message a method accepts; 0 = each method's own (16 KiB)"},
    {I::emulate_lists, "emulate_lists", "BMI_EMULATE_LISTS", T::flag, "0", "", 0, 0, "",
     "pack list I/O into one buffer even for methods that send lists natively"},
    {I::inventory, "inventory", "BMI_INVENTORY", T::text, "", "", 0, 0, "",
     "inventory file that names and pins the cluster's planes (doc/planes.md); bmi-info lists "
     "them beside the discovered ones; empty = discovered planes only"},
    {I::allocation, "allocation", "BMI_ALLOCATION", T::text, "", "", 0, 0, "",
     "the network allocation this instance lives in, in the text form of doc/planes.md (entries "
     "separated by ';'); commas in port lists keep it out of option strings: use "
     "allocation_file= there; empty = none"},
    {I::allocation_file, "allocation_file", "BMI_ALLOCATION_FILE", T::text, "", "", 0, 0, "",
     "a file holding the allocation in the text form of doc/planes.md; empty = none"},
    {I::allocation_id, "allocation_id", "BMI_ALLOCATION_ID", T::text, "", "", 0, 0, "",
     "allocation ids to read from PMIx job information, separated by '+' (doc/planes.md); "
     "without a PMIx launcher or the ids the instance starts as if none were given, and logs "
     "it; a launcher without a loadable libpmix is an error; empty = none"},
    {I::encryption, "encryption", "BMI_ENCRYPTION", T::choice, "off", "", 0, 0,
     "off|prefer|require",
     "encrypt keyed tcp, verbs and ofi connections (doc/security.md): off; prefer = with every "
     "peer "
     "that can; "
     "require = refuse every peer that cannot; prefer and require need a key"},
    {I::encryption_rekey_records, "encryption_rekey_records", "BMI_ENCRYPTION_REKEY_RECORDS",
     T::count, "1048576", "records", 1, std::int64_t{1} << 32, "",
     "records (tcp: up to 64 KiB; verbs and ofi: one message each) sealed under one traffic key "
     "before both sides step to the next"},
    {I::same_node_shm, "same_node_shm", "BMI_SAME_NODE_SHM", T::flag, "1", "", 0, 0, "",
     "a tcp lookup of a libbmi server on this node, of this user and network namespace, "
     "carries its messages over shm once the server's tcp side offers it (doc/architecture.md, "
     "Same-node peers); 0 = stay on tcp, and a server makes no offers"},
};
constexpr OwnedRows owned{rows, I::same_node_shm};

constexpr std::less<const SettingSpec*> before;
}  // namespace

std::string option_key(std::string_view env) {
    if (env.starts_with("BMI_")) env.remove_prefix(4);
    std::string key;
    for (char c : env) key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return key;
}

std::vector<std::string_view> former_names(const SettingSpec& row) {
    std::vector<std::string_view> names;
    for (std::string_view rest = row.former; !rest.empty();) {
        const auto bar = rest.find('|');
        names.push_back(rest.substr(0, bar));
        rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
    }
    return names;
}

SettingTable::SettingTable(std::initializer_list<std::span<const SettingSpec>> blocks)
    : blocks_(blocks) {
    for (auto block : blocks_)
        for (const SettingSpec& row : block) rows_.push_back(&row);
}

const SettingSpec* SettingTable::find(std::string_view key) const {
    for (const SettingSpec* row : rows_)
        if (row->key == key) return row;
    return nullptr;
}

const SettingSpec* SettingTable::find_former(std::string_view key,
                                             std::string_view& former_env) const {
    for (const SettingSpec* row : rows_)
        for (std::string_view name : former_names(*row))
            if (option_key(name) == key) {
                former_env = name;
                return row;
            }
    return nullptr;
}

std::optional<std::size_t> SettingTable::position(const SettingSpec& row) const {
    std::size_t offset = 0;
    for (auto block : blocks_) {
        // std::less: a total order even between rows of different arrays.
        if (!before(&row, block.data()) && before(&row, block.data() + block.size()))
            return offset + static_cast<std::size_t>(&row - block.data());
        offset += block.size();
    }
    return std::nullopt;
}

std::span<const SettingSpec> general_setting_rows() { return owned.all(); }

const SettingSpec& setting_spec(SettingId id) { return owned[id]; }

const SettingTable& general_settings() {
    static const SettingTable table{general_setting_rows()};
    return table;
}

}  // namespace bmi::support
