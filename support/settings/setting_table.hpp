// SPDX-License-Identifier: LGPL-2.1-or-later
// The rows of the settings table (UCX's ucs_config_field_t): each setting's option-string
// key, environment name, type, default, unit, range and meaning, and the table that gathers
// the rows of several owners. support/ owns the rows no method reads (below); each method
// owns its own rows in its own directory, and methods/method_table.cpp gathers them all
// (method::all_settings()), so this layer names no method. Settings (settings.hpp) parses a
// table once per instance; methods read the result from method::Config, never the
// environment. doc/SETTINGS.md is printed from the gathered table (bmi-info --markdown).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bmi::support {

enum class SettingType : std::uint8_t {
    size,      // bytes; "4096", "64K", "8MiB", "1G"
    duration,  // milliseconds; "250", "250ms", "10s", "2m"
    count,     // a whole number, negative only where min is
    flag,      // 0/1, no/yes, false/true, off/on
    choice,    // one word of SettingSpec::choices; the value is its index
    text,      // any text
};

// Bounds for the rows' ranges, in the rows' own units (bytes, ms).
namespace setting_units {
inline constexpr std::int64_t KiB = 1 << 10, MiB = 1 << 20, GiB = 1 << 30, TiB = GiB << 10;
inline constexpr std::int64_t hour_ms = 3'600'000;
}  // namespace setting_units

// A row's place among its owner's rows, given as the owner's enum value: it lets each owner
// check at compile time that its rows follow its enum (OwnedRows).
struct SettingIndex {
    template <typename Id>
    requires std::is_enum_v<Id>
    // Implicit, so that rows open with their owner's enum value: {I::x, "key", ...}.
    constexpr SettingIndex(Id id) : value(static_cast<std::size_t>(id)) {}
    std::size_t value;
};

struct SettingSpec {
    SettingIndex id;
    std::string_view key;  // in BMI_initialize's option string: "emulate_lists=1"
    std::string_view env;  // "BMI_EMULATE_LISTS"
    SettingType type;
    std::string_view default_text;  // the one place the default is written; parsed like any
                                    // other value (a unit test checks it does)
    std::string_view unit;          // "bytes", "ms", "us", ... ; "" when there is none
    std::int64_t min = 0;           // size, duration (ms), count; ignored for the rest
    std::int64_t max = 0;
    std::string_view choices;  // choice: the words, separated by '|'
    std::string_view meaning;  // one line
    // The row's former environment names, '|'-separated ("BMI_SHM_EARLY_BYTES"), each with
    // its option key by the usual rule (option_key). Still read, with a warning that names
    // the current one; bmi-info and doc/SETTINGS.md list them. "" = none.
    std::string_view former = {};
    // false: read by the process, not per instance (BMI_DEBUG: logging works before any
    // instance exists), so the environment is its only source.
    bool per_instance = true;
    // text rows: the form a value must have (nullptr: any text), checked wherever a value is
    // read, so that a malformed one fails BMI_initialize naming the row, and the form's
    // description for the warning and the range column of doc/SETTINGS.md.
    bool (*text_form)(std::string_view) = nullptr;
    std::string_view text_form_name = {};
};

// The option key that goes with an environment name: without BMI_, in lower case.
std::string option_key(std::string_view env);
// The row's former environment names (SettingSpec::former), in order.
std::vector<std::string_view> former_names(const SettingSpec& row);

// True if rows[i].id is i for every row and there are `count` of them.
template <std::size_t N>
constexpr bool rows_follow_ids(const SettingSpec (&rows)[N], std::size_t count) {
    for (std::size_t i = 0; i < N; ++i)
        if (rows[i].id.value != i) return false;
    return N == count;
}

// One owner's rows, looked up by its enum: the owner writes its rows and
//     constexpr support::OwnedRows owned{rows, SettingId::last_one};
// and its setting_rows() and setting_spec(id) return owned.all() and owned[id]. The
// constructor does not compile unless the rows follow the enum, one each, up to `last`.
template <typename Id>
requires std::is_enum_v<Id>
class OwnedRows {
public:
    template <std::size_t N>
    consteval OwnedRows(const SettingSpec (&rows)[N], Id last) : rows_(rows, N) {
        // A throw is no constant expression: a mismatch stops the compile here.
        if (!rows_follow_ids(rows, static_cast<std::size_t>(last) + 1))
            throw "the rows must follow the owner's SettingId, one each";
    }
    constexpr std::span<const SettingSpec> all() const { return rows_; }
    constexpr const SettingSpec& operator[](Id id) const {
        return rows_[static_cast<std::size_t>(id)];
    }

private:
    std::span<const SettingSpec> rows_;
};

// The row of a listener's per-source admission (methods/kit/acceptor.hpp), which every method
// that listens has as <scheme>_pending_per_source: only the names and the default differ.
constexpr SettingSpec pending_per_source_row(SettingIndex id, std::string_view key,
                                             std::string_view env, std::string_view default_text) {
    return {id,
            key,
            env,
            SettingType::count,
            default_text,
            "handshakes",
            1,
            65'536,
            "",
            "accepted connections one source (an address, or a process for a local method) may "
            "have that have not finished their handshake; a new one beyond it closes that "
            "source's oldest, or waits"};
}

// The deadlines on a peer that every method keeps as <scheme>_setup_timeout_ms,
// _stall_timeout_ms, _send_timeout_ms and _rendezvous_timeout_ms: type, unit, default and
// range are the concept's, written here once; the names, the meaning (what the method waits
// for) and any former names are the method's.
enum class PeerDeadline : std::uint8_t {
    setup,       // a connection's handshake: short, a live peer answers at once
    stall,       // the rest of a transfer the peer started: short, likewise
    send,        // the peer taking our bytes: long, an application may be busy elsewhere
    rendezvous,  // an answer to our RTS: long, likewise
};
constexpr SettingSpec peer_deadline_row(PeerDeadline kind, SettingIndex id, std::string_view key,
                                        std::string_view env, std::string_view meaning,
                                        std::string_view former = {}) {
    const bool brief = kind == PeerDeadline::setup || kind == PeerDeadline::stall;
    return {id,
            key,
            env,
            SettingType::duration,
            brief ? "10s" : "120s",
            "ms",
            1,
            brief ? setting_units::hour_ms : 24 * setting_units::hour_ms,
            "",
            meaning,
            former};
}

// The kernel's bound on a silent peer (methods/kit/socket_options.hpp), which every method whose
// connections have a TCP socket keeps as <scheme>_silent_peer_timeout_ms.
constexpr SettingSpec silent_peer_row(SettingIndex id, std::string_view key, std::string_view env) {
    return {id,
            key,
            env,
            SettingType::duration,
            "8s",
            "ms",
            2'000,
            setting_units::hour_ms,
            "",
            "a peer whose node acknowledges nothing on the connection's TCP socket (data, a "
            "connect, a keepalive probe) for this long loses the connection, and the operations "
            "on it fail with -BMI_ETIMEDOUT; keepalive probes an idle connection from 3 s before "
            "it; raise it on links that lose many packets"};
}

// The rows of several owners, one block each, in the order given. The blocks are static
// arrays; the table refers to them and copies nothing.
class SettingTable {
public:
    explicit SettingTable(std::initializer_list<std::span<const SettingSpec>> blocks);

    // The rows in table order, as references: for (const SettingSpec& row : table.rows()).
    // Written out: clang 14 cannot compile libstdc++ 12's views (the thread-safety build).
    class Rows {
    public:
        class Iterator {
        public:
            explicit Iterator(const SettingSpec* const* at) : at_(at) {}
            const SettingSpec& operator*() const { return **at_; }
            Iterator& operator++() {
                ++at_;
                return *this;
            }
            bool operator==(const Iterator&) const = default;

        private:
            const SettingSpec* const* at_;
        };
        explicit Rows(const std::vector<const SettingSpec*>& rows) : rows_(rows) {}
        Iterator begin() const { return Iterator(rows_.data()); }
        Iterator end() const { return Iterator(rows_.data() + rows_.size()); }
        const SettingSpec& operator[](std::size_t i) const { return *rows_[i]; }

    private:
        const std::vector<const SettingSpec*>& rows_;
    };
    Rows rows() const { return Rows(rows_); }
    std::size_t size() const { return rows_.size(); }
    // The row with this option-string key, or nullptr.
    const SettingSpec* find(std::string_view key) const;
    // The row that had this option key as a former name, or nullptr; former_env gets that
    // former environment name.
    const SettingSpec* find_former(std::string_view key, std::string_view& former_env) const;
    // Where this row (by address, from its owner's block) is in the table; nullopt if its
    // owner's block is not in this table.
    std::optional<std::size_t> position(const SettingSpec& row) const;

private:
    std::vector<std::span<const SettingSpec>> blocks_;
    std::vector<const SettingSpec*> rows_;
};

// The rows support owns: those of the control layer, logging, keys and planes.
enum class SettingId : std::uint8_t {
    debug,
    unexpected_quota,
    unexpected_peer_quota,
    key_file,
    unexpected_limit,
    emulate_lists,
    inventory,
    allocation,
    allocation_file,
    allocation_id,
    encryption,  // choices off|prefer|require, in kit::Encryption's order
    encryption_rekey_records,
    same_node_shm,
};
std::span<const SettingSpec> general_setting_rows();
const SettingSpec& setting_spec(SettingId id);
// A table of these rows alone, for code below the methods that reads only them (tests, and
// tools that start no method).
const SettingTable& general_settings();

}  // namespace bmi::support
