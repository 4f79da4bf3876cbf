// SPDX-License-Identifier: LGPL-2.1-or-later
// bmi::span<T>: the contiguous view the C++ API takes and returns. Under C++20 it is std::span
// itself (an alias: same type, same symbols). Under C++17, where std::span does not exist, it is
// the small class below, so the public headers compile with g++'s default standard; the
// library itself is always built as C++20.
#pragma once

#if __cplusplus >= 202002L

#include <span>

namespace bmi {
template <class T>
using span = std::span<T>;
}  // namespace bmi

#define BMI_SPAN_ABI

#else

#include <cstddef>
#include <iterator>
#include <type_traits>
#include <utility>

// On inline members that return a span: their C++17 definitions get other symbol names than the
// C++20 ones, so C++17 and C++20 code can share a program without mixing the two.
#define BMI_SPAN_ABI [[gnu::abi_tag("bmi_cxx17")]]

namespace bmi {

// The part of std::span<T> (dynamic extent) that the C++ API's callers need: built from a
// pointer and a count, an array, or any contiguous container with data() and size() (vector,
// array, string, another span), read through data(), size(), iterators and operator[]. Element
// conversions are those of std::span: T* must convert to the element pointer by adding const.
template <class T>
class span {
    template <class C>
    using data_of = decltype(std::data(std::declval<C&>()));
    template <class C>
    static constexpr bool fits =
        std::is_convertible_v<std::remove_pointer_t<data_of<C>> (*)[], T (*)[]>;

public:
    using element_type = T;
    using value_type = std::remove_cv_t<T>;
    using size_type = std::size_t;
    using pointer = T*;
    using reference = T&;
    using iterator = T*;

    constexpr span() noexcept = default;
    constexpr span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
    template <std::size_t N>
    constexpr span(T (&array)[N]) noexcept : data_(array), size_(N) {}
    template <class C, class = std::enable_if_t<fits<C>>>
    constexpr span(C&& container) noexcept
        : data_(std::data(container)), size_(std::size(container)) {}

    constexpr T* data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
    constexpr bool empty() const noexcept { return size_ == 0; }
    constexpr T* begin() const noexcept { return data_; }
    constexpr T* end() const noexcept { return data_ + size_; }
    constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }

private:
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace bmi

#endif
