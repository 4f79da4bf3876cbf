// SPDX-License-Identifier: LGPL-2.1-or-later
// The libpmix side of reading allocations: find a launcher, look each id up, copy the values
// into plain types. Everything that decides what a value means is in pmix_value.cpp.
#include "support/planes/pmix_allocation.hpp"

#include "support/pmix_config.hpp"

#if BMI_HAVE_PMIX

#include <pmix.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "support/optional_library/optional_library.hpp"
#include "support/planes/pmix_value.hpp"

namespace bmi::support::planes {

namespace {
// libpmix is opened by the first read that finds a launcher (doc/architecture.md, "What is
// loaded when"); the macros of pmix.h that call into the library are spelled out against this
// table below.
struct Pmix {
    decltype(&::PMIx_Init) init;
    decltype(&::PMIx_Finalize) finalize;
    decltype(&::PMIx_Get) get;
    decltype(&::PMIx_Error_string) error_string;
    decltype(&::PMIx_Data_type_string) data_type_string;
    decltype(&::PMIx_Info_load) info_load;
    decltype(&::PMIx_Value_destruct) value_destruct;
};
Pmix pmix;

// nullptr when libpmix cannot be loaded; `why` then names it and the reason. Once per process.
const Pmix* load_pmix(std::string& why) {
    static OptionalLibrary library(
        {"libpmix.so.2", std::string(BMI_PMIX_LIBDIR) + "/libpmix.so.2"});
    static const bool loaded = [] {
        if (!library.open()) return false;
        SymbolFiller take(library);
        take(pmix.init, "PMIx_Init");
        take(pmix.finalize, "PMIx_Finalize");
        take(pmix.get, "PMIx_Get");
        take(pmix.error_string, "PMIx_Error_string");
        take(pmix.data_type_string, "PMIx_Data_type_string");
        take(pmix.info_load, "PMIx_Info_load");
        take(pmix.value_destruct, "PMIx_Value_destruct");
        return take.complete();
    }();
    if (!loaded) why = library.error();
    return loaded ? &pmix : nullptr;
}

// PMIx_Init without a launcher still succeeds in part: it sets up a singleton, answers
// UNREACH, and must be finalized. A launcher announces itself in the environment, so that is
// checked first and a process that was not launched by one never touches PMIx.
bool launcher_in_environment() {
    const char* ns = std::getenv("PMIX_NAMESPACE");
    if (ns == nullptr || *ns == '\0') return false;
    for (char** e = environ; *e != nullptr; ++e)
        if (std::strncmp(*e, "PMIX_SERVER_URI", 15) == 0) return true;
    return false;
}

// Lookups stay in this process's local store: a key nobody posted must not turn into a remote
// request that waits for a timeout.
struct OptionalGet {
    pmix_info_t info;
    OptionalGet() {
        PMIX_INFO_CONSTRUCT(&info);
        bool yes = true;
        (void)pmix.info_load(&info, PMIX_OPTIONAL, &yes, PMIX_BOOL);
    }
    ~OptionalGet() { pmix.value_destruct(&info.value); }
    OptionalGet(const OptionalGet&) = delete;
    OptionalGet& operator=(const OptionalGet&) = delete;
};

// A value from PMIx_Get, released when it goes out of scope.
struct GotValue {
    pmix_value_t* value = nullptr;
    ~GotValue() {
        if (value == nullptr) return;
        pmix.value_destruct(value);
        std::free(value);
    }
};

pmix_status_t get(const pmix_proc_t& proc, const char* key, GotValue& out) {
    const OptionalGet optional;
    return pmix.get(&proc, key, &optional.info, 1, &out.value);
}

PmixScalar scalar_of(const pmix_value_t& v) {
    const auto signed_count = [](std::int64_t n) -> PmixScalar {
        if (n < 0) return PmixOtherType{"negative integer"};
        return static_cast<std::uint64_t>(n);
    };
    switch (v.type) {
        case PMIX_STRING:
            return std::string(v.data.string != nullptr ? v.data.string : "");
        case PMIX_SIZE:
            return static_cast<std::uint64_t>(v.data.size);
        case PMIX_UINT:
            return static_cast<std::uint64_t>(v.data.uint);
        case PMIX_UINT8:
            return static_cast<std::uint64_t>(v.data.uint8);
        case PMIX_UINT16:
            return static_cast<std::uint64_t>(v.data.uint16);
        case PMIX_UINT32:
            return static_cast<std::uint64_t>(v.data.uint32);
        case PMIX_UINT64:
            return static_cast<std::uint64_t>(v.data.uint64);
        case PMIX_INT:
            return signed_count(v.data.integer);
        case PMIX_INT8:
            return signed_count(v.data.int8);
        case PMIX_INT16:
            return signed_count(v.data.int16);
        case PMIX_INT32:
            return signed_count(v.data.int32);
        case PMIX_INT64:
            return signed_count(v.data.int64);
        case PMIX_FLOAT: {
            // Through the float's shortest text, so 12.3f becomes 12.3 rather than
            // 12.300000190734863.
            char buf[64];
            double d = 0;
            const auto w =
                std::to_chars(buf, buf + sizeof buf, v.data.fval, std::chars_format::fixed);
            if (w.ec != std::errc{} || std::from_chars(buf, w.ptr, d).ec != std::errc{})
                return PmixOtherType{"unprintable float"};
            return d;
        }
        case PMIX_DOUBLE:
            return v.data.dval;
        case PMIX_BYTE_OBJECT: {
            const auto* b = reinterpret_cast<const std::uint8_t*>(v.data.bo.bytes);
            return b == nullptr ? PmixBytes{} : PmixBytes(b, b + v.data.bo.size);
        }
        default:
            return PmixOtherType{pmix.data_type_string(v.type)};
    }
}

PmixValue value_of(const pmix_value_t& v) {
    PmixValue out;
    const pmix_data_array_t* a = v.type == PMIX_DATA_ARRAY ? v.data.darray : nullptr;
    if (a == nullptr) {
        out.scalar = v.type == PMIX_DATA_ARRAY ? PmixScalar{PmixOtherType{"empty data array"}}
                                               : scalar_of(v);
        return out;
    }
    if (a->type != PMIX_INFO) {
        out.scalar = PmixOtherType{std::string("data array of ") + pmix.data_type_string(a->type)};
        return out;
    }
    out.array.emplace();
    const auto* infos = static_cast<const pmix_info_t*>(a->array);
    for (std::size_t i = 0; i < a->size; ++i)
        out.array->push_back({std::string(infos[i].key), scalar_of(infos[i].value)});
    return out;
}

std::uint32_t number_or_zero(const GotValue& got) {
    if (got.value == nullptr) return 0;
    const PmixScalar scalar = scalar_of(*got.value);
    const auto* n = std::get_if<std::uint64_t>(&scalar);
    return n != nullptr && *n <= UINT32_MAX ? static_cast<std::uint32_t>(*n) : 0;
}

std::string id_list(std::span<const std::string> ids) {
    std::string out;
    for (const std::string& id : ids) out += (out.empty() ? "" : ", ") + id;
    return out;
}

// The lookups themselves, with PMIx initialised (process_session below).
PmixStatus read_initialized(const pmix_proc_t& me, std::span<const std::string> ids,
                            PmixAllocations& out, std::string& note) {
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    const std::string nspace = me.nspace;
    std::vector<PmixValue> values;
    for (const std::string& id : ids) {
        GotValue got;
        const pmix_status_t rc = get(job, id.c_str(), got);
        if (rc != PMIX_SUCCESS || got.value == nullptr) {
            note = "PMIx " + nspace + ": " + id + " not in the job information (" +
                   pmix.error_string(rc) + "); asked for " + id_list(ids);
            return PmixStatus::absent;
        }
        values.push_back(value_of(*got.value));
    }
    GotValue local_rank, local_size;
    (void)get(me, PMIX_LOCAL_RANK, local_rank);
    (void)get(job, PMIX_LOCAL_SIZE, local_size);
    const PmixStatus status =
        allocations_from_pmix(nspace, ids, values, number_or_zero(local_size), out, note);
    if (status == PmixStatus::found) {
        out.local_rank = number_or_zero(local_rank);
        note += " (local rank " + std::to_string(out.local_rank) +
                (local_rank.value == nullptr ? ", unknown: taken as 0)" : ")");
    }
    return status;
}
}  // namespace

namespace {
// Once the last PMIx_Finalize of a process has run, PMIx_Init does not bring job information
// back (a second instance's read found nothing), so the process keeps the reference it took at
// its first read until it exits. The reference is counted with the application's own (MPI's),
// so neither ends the other's.
struct ProcessSession {
    pmix_status_t rc = PMIX_ERROR;
    pmix_proc_t me;
};

const ProcessSession& process_session() {
    static const ProcessSession session = [] {
        ProcessSession s;
        PMIX_PROC_CONSTRUCT(&s.me);
        s.rc = pmix.init(&s.me, nullptr, 0);
        // UNREACH still leaves an initialised singleton behind, which must be finalized too.
        if (s.rc == PMIX_SUCCESS || s.rc == PMIX_ERR_UNREACH)
            std::atexit([] { pmix.finalize(nullptr, 0); });
        return s;
    }();
    return session;
}
}  // namespace

PmixStatus read_pmix_allocations(std::span<const std::string> ids, PmixAllocations& out,
                                 std::string& note) {
    if (!launcher_in_environment()) {
        note = "no PMIx launcher (PMIX_NAMESPACE or PMIX_SERVER_URI* unset); not reading " +
               id_list(ids);
        return PmixStatus::unavailable;
    }
    std::string why;
    if (load_pmix(why) == nullptr) {
        note = "a PMIx launcher is in the environment (PMIX_NAMESPACE=" +
               std::string(std::getenv("PMIX_NAMESPACE")) + ") but libpmix cannot be loaded (" +
               why + "); not reading " + id_list(ids);
        return PmixStatus::unloadable;
    }
    const ProcessSession& session = process_session();
    if (session.rc != PMIX_SUCCESS) {
        note = std::string("PMIx_Init failed (") + pmix.error_string(session.rc) + ") although " +
               "PMIX_NAMESPACE=" + std::getenv("PMIX_NAMESPACE") + "; not reading " + id_list(ids);
        return PmixStatus::unavailable;
    }
    return read_initialized(session.me, ids, out, note);
}

}  // namespace bmi::support::planes

#else  // !BMI_HAVE_PMIX

namespace bmi::support::planes {

PmixStatus read_pmix_allocations(std::span<const std::string> ids, PmixAllocations&,
                                 std::string& note) {
    note = "built without PMIx; not reading";
    for (std::size_t i = 0; i < ids.size(); ++i) note += (i == 0 ? " " : ", ") + ids[i];
    return PmixStatus::unavailable;
}

}  // namespace bmi::support::planes

#endif
