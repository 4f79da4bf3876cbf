// SPDX-License-Identifier: LGPL-2.1-or-later
// A shared library only some instances need (libibverbs, libpmix): libbmi does not link it, but
// opens it with dlopen the first time an instance asks, and keeps it until the process exits.
#pragma once

#include <mutex>
#include <string>
#include <vector>

namespace bmi::support {

class OptionalLibrary {
public:
    // `files` go to dlopen in order until one opens: the SONAME first, then fallbacks (a
    // library directory known at build time). The first one names the library in messages.
    explicit OptionalLibrary(std::vector<std::string> files);
    OptionalLibrary(const OptionalLibrary&) = delete;
    OptionalLibrary& operator=(const OptionalLibrary&) = delete;

    // Opens the library on the first call and resolves nothing else; later calls return the
    // first call's answer without trying again. Thread-safe. False: error() says why.
    bool open();

    // The address of an exported function, or nullptr (the name is added to error()). Only
    // after open() returned true; call it while filling a table, once per symbol.
    void* symbol(const char* name);

    // What went wrong, as one phrase naming the library ("libibverbs.so.1: cannot open shared
    // object file: ..."), or "" while nothing has.
    const std::string& error() const { return error_; }

    const std::string& name() const { return files_.front(); }

private:
    const std::vector<std::string> files_;
    std::once_flag opened_;
    void* handle_ = nullptr;  // never closed: function pointers into it live in static tables
    std::string error_;
};

// Looks `name` up in `lib` and stores it, typed, in `slot`; false when absent. Pointers to
// functions from dlsym are the POSIX way; the cast is what the platform guarantees.
template <class Fn>
bool resolve_symbol(OptionalLibrary& lib, Fn*& slot, const char* name) {
    slot = reinterpret_cast<Fn*>(lib.symbol(name));
    return slot != nullptr;
}

// Fills a table of function pointers from an opened library, one call per entry. Every name is
// tried even after one is missing, so a too-old library is reported with all it lacks at once.
class SymbolFiller {
public:
    explicit SymbolFiller(OptionalLibrary& lib) : lib_(lib) {}
    template <class Fn>
    void operator()(Fn*& slot, const char* name) {
        complete_ = resolve_symbol(lib_, slot, name) && complete_;
    }
    bool complete() const { return complete_; }

private:
    OptionalLibrary& lib_;
    bool complete_ = true;
};

// The table of one library, opened and filled by `fill` on the first call of the process
// (thread-safe: a static's initialisation runs once even when threads race); later calls give
// the first answer. nullptr when it cannot be loaded; `why` (if given) then says why. One
// table type per library.
template <class Table>
const Table* load_table(OptionalLibrary& library, Table& table, void (*fill)(SymbolFiller&, Table&),
                        std::string* why) {
    static const bool loaded = [&] {
        if (!library.open()) return false;
        SymbolFiller take(library);
        fill(take, table);
        return take.complete();
    }();
    if (!loaded && why != nullptr) *why = library.error();
    return loaded ? &table : nullptr;
}

}  // namespace bmi::support
