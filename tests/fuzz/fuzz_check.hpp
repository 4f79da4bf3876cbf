// SPDX-License-Identifier: LGPL-2.1-or-later
// What every fuzz target may use: its oracle and a bounded reader of the fuzzer's bytes.
// FUZZ_CHECK aborts in every build (plain, ASan, TSan and libFuzzer), so a broken property
// fails the replay test in CI as surely as a crash does, and is never compiled out by NDEBUG.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>

#define FUZZ_CHECK(cond)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, #cond); \
            std::abort();                                                                         \
        }                                                                                         \
    } while (0)

namespace bmi::fuzz {

// Hands out the input front to back; past its end every read yields zeros or nothing, so a
// target never reads beyond what the fuzzer wrote.
class Input {
public:
    Input(const std::uint8_t* data, std::size_t size) : rest_(data, size) {}

    std::uint8_t byte() {
        if (rest_.empty()) return 0;
        std::uint8_t b = rest_.front();
        rest_ = rest_.subspan(1);
        return b;
    }
    // sizeof(T) bytes into a trivially copyable T, zero-filled past the end.
    template <class T>
    T object() {
        T out{};
        std::size_t n = rest_.size() < sizeof out ? rest_.size() : sizeof out;
        std::memcpy(&out, rest_.data(), n);
        rest_ = rest_.subspan(n);
        return out;
    }
    std::span<const std::uint8_t> bytes(std::size_t n) {
        if (n > rest_.size()) n = rest_.size();
        auto out = rest_.first(n);
        rest_ = rest_.subspan(n);
        return out;
    }
    std::span<const std::uint8_t> rest() { return bytes(rest_.size()); }
    std::string_view text() {
        auto all = rest();
        return {reinterpret_cast<const char*>(all.data()), all.size()};
    }
    bool empty() const { return rest_.empty(); }

private:
    std::span<const std::uint8_t> rest_;
};

}  // namespace bmi::fuzz
