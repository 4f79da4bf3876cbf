// SPDX-License-Identifier: LGPL-2.1-or-later
// Result<T>: a value or a std::error_code. std::expected is C++23; the member names mirror it
// (has_value, value, error, operator*, operator->) so moving to it later is a rename.
#pragma once

#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

namespace bmi {

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
    Result(std::error_code error) : state_(std::in_place_index<1>, error) {}

    bool has_value() const noexcept { return state_.index() == 0; }
    explicit operator bool() const noexcept { return has_value(); }

    // Calling value() on an error is a programming error: it throws std::system_error.
    T& value() & {
        check();
        return std::get<0>(state_);
    }
    const T& value() const& {
        check();
        return std::get<0>(state_);
    }
    T&& value() && {
        check();
        return std::get<0>(std::move(state_));
    }
    T& operator*() & { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    std::error_code error() const noexcept {
        return has_value() ? std::error_code{} : std::get<1>(state_);
    }

private:
    void check() const {
        if (!has_value()) throw std::system_error(std::get<1>(state_));
    }
    std::variant<T, std::error_code> state_;
};

}  // namespace bmi
