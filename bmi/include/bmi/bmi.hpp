// SPDX-License-Identifier: LGPL-2.1-or-later
// The C++ API: RAII owners over the same control layer as the C API, with no global state, so
// one process may run several independent sessions (a server and a client in one test, two
// libraries in one program). Semantics are those of bmi.h; errors come back as
// std::error_code (bmi::errc) inside a Result, never as exceptions.
//
// The header compiles as C++17 and later. Spans are bmi::span (bmi/span.hpp): std::span under
// C++20, where the calls below are the library's own functions; under C++17 a small stand-in,
// and the span calls are inline wrappers (end of this file) over pointer-and-size members.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bmi-types.h"
#include "bmi/error.hpp"
#include "bmi/result.hpp"
#include "bmi/span.hpp"

namespace bmi {

namespace core {
class Instance;
}

class Session;

// A peer as the session knows it; a thin strong type over BMI_addr_t.
class Address {
public:
    constexpr Address() = default;
    constexpr explicit Address(BMI_addr_t value) : value_(value) {}
    constexpr BMI_addr_t value() const { return value_; }
    constexpr explicit operator bool() const { return value_ != 0; }
    friend constexpr bool operator==(Address a, Address b) { return a.value_ == b.value_; }
    friend constexpr bool operator!=(Address a, Address b) { return !(a == b); }

private:
    BMI_addr_t value_ = 0;
};
static_assert(sizeof(Address) == sizeof(BMI_addr_t), "Address is a BMI_addr_t");

// A completion context. Closing it (destructor) cancels what is still pending on it.
// Must not outlive its Session.
class Context {
public:
    Context() = default;
    Context(Context&& other) noexcept;
    Context& operator=(Context&& other) noexcept;
    ~Context();
    bmi_context_id id() const { return id_; }
    explicit operator bool() const { return session_ != nullptr; }

private:
    friend class Session;
    Context(Session* session, bmi_context_id id) : session_(session), id_(id) {}
    Session* session_ = nullptr;
    bmi_context_id id_ = 0;
};

// What a post returned: either pending (test for id) or already complete.
struct Posted {
    bmi_op_id_t id = 0;          // 0 when immediate
    bool immediate = false;      // finished during the post: do not test
    bmi_size_t actual_size = 0;  // receives that finished immediately
};

struct Completion {
    bmi_op_id_t id = 0;
    std::error_code error;
    bmi_size_t actual_size = 0;
    void* user_ptr = nullptr;
};

// The class of an unexpected message (the standalone BMI dialect's message classes): a receiver
// asking for one class sees only messages sent with it. Plain calls use class 0.
enum class MessageClass : std::uint8_t {};

// An unexpected message; owns its buffer and frees it (BMI_unexpected_free) on destruction.
class UnexpectedMessage {
public:
    UnexpectedMessage() = default;
    UnexpectedMessage(UnexpectedMessage&& other) noexcept;
    UnexpectedMessage& operator=(UnexpectedMessage&& other) noexcept;
    ~UnexpectedMessage();
    Address from() const { return from_; }
    bmi_msg_tag_t tag() const { return tag_; }
    MessageClass message_class() const { return class_; }
    std::error_code error() const { return error_; }
    BMI_SPAN_ABI span<const std::byte> data() const {
        return {static_cast<const std::byte*>(buffer_), static_cast<std::size_t>(size_)};
    }

private:
    friend class Session;
    Session* session_ = nullptr;
    Address from_;
    void* buffer_ = nullptr;
    bmi_size_t size_ = 0;
    bmi_msg_tag_t tag_ = 0;
    MessageClass class_{};
    std::error_code error_;
};

// Memory from BMI_memalloc for one peer's method, freed on destruction.
class Buffer {
public:
    Buffer() = default;
    Buffer(Buffer&& other) noexcept;
    Buffer& operator=(Buffer&& other) noexcept;
    ~Buffer();
    BMI_SPAN_ABI span<std::byte> bytes() const {
        return {static_cast<std::byte*>(data_), static_cast<std::size_t>(size_)};
    }

private:
    friend class Session;
    Session* session_ = nullptr;
    Address addr_;
    void* data_ = nullptr;
    bmi_size_t size_ = 0;
};

struct SessionOptions {
    std::string methods;  // "bmi_tcp"; empty = every compiled method
    std::string listen;   // "tcp://127.0.0.1:0"; empty = client only
    int flags = 0;        // BMI_INIT_SERVER, BMI_AUTO_REF_COUNT, ...
    std::string options;  // "unexpected_quota=BYTES,unexpected_limit=BYTES"
};

// One independent BMI instance (what BMI_initialize/BMI_finalize bracket in C).
class Session {
public:
    static Result<std::unique_ptr<Session>> create(const SessionOptions& options);
    // The same, living in a network allocation given in the text form of doc/planes.md
    // ("id=bmi.pfs type=tcp plane=10.20.0.0/16 endpts=2 ports=32000-32099 bw=200"; entries
    // separated by ';' or lines). A server (BMI_INIT_SERVER) listens on each allocated plane's
    // address and ports and nowhere else, lookups off those planes fail with
    // errc::network_unreachable, and the allocation's key is the session's key. An allocation
    // file or PMIx ids go in options instead ("allocation_file=PATH", "allocation_id=ID").
    static Result<std::unique_ptr<Session>> create(const SessionOptions& options,
                                                   std::string_view allocation);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    Result<Address> lookup(std::string_view address);
    std::string rev_lookup(Address addr);
    std::string listen_address();

    Result<Context> open_context();
    Result<Buffer> allocate(Address addr, bmi_size_t size);

    Result<Posted> post_send(Context& ctx, Address to, span<const std::byte> data,
                             bmi_msg_tag_t tag, void* user_ptr = nullptr);
    Result<Posted> post_send_unexpected(Context& ctx, Address to, span<const std::byte> data,
                                        bmi_msg_tag_t tag, void* user_ptr = nullptr);
    // The same with a message class, for a receiver that sorts by class.
    Result<Posted> post_send_unexpected(Context& ctx, Address to, span<const std::byte> data,
                                        bmi_msg_tag_t tag, MessageClass message_class,
                                        void* user_ptr = nullptr);
    Result<Posted> post_recv(Context& ctx, Address from, span<std::byte> buffer, bmi_msg_tag_t tag,
                             void* user_ptr = nullptr);

    // Waits up to idle for id; nullopt if it is still pending then.
    Result<std::optional<Completion>> test(Context& ctx, bmi_op_id_t id,
                                           std::chrono::milliseconds idle);
    // Fills out with up to out.size() completions of ctx; returns how many.
    Result<std::size_t> test_context(Context& ctx, span<Completion> out,
                                     std::chrono::milliseconds idle);
    // Unexpected messages of every class, or of one class only.
    Result<std::vector<UnexpectedMessage>> test_unexpected(std::size_t max,
                                                           std::chrono::milliseconds idle);
    Result<std::vector<UnexpectedMessage>> test_unexpected(std::size_t max,
                                                           std::chrono::milliseconds idle,
                                                           MessageClass message_class);
    std::error_code cancel(Context& ctx, bmi_op_id_t id);
    // Frees addr now, whatever holds it: its connections close, its operations fail.
    std::error_code drop(Address addr);
    // An address's reference count (BMI_INC_ADDR_REF / BMI_DEC_ADDR_REF). With
    // BMI_AUTO_REF_COUNT each message test_unexpected returns holds one reference to its
    // sender until release(); an address with no reference whose peer can never be reached
    // again (a client that left) is freed by the session (doc/guide-server.md).
    std::error_code hold(Address addr);
    std::error_code release(Address addr);
    // How many addresses the session holds (BMI_ADDRESS_COUNT).
    std::size_t address_count();

private:
    friend class Context;
    friend class UnexpectedMessage;
    friend class Buffer;
    Session() = default;
    // What the span calls do, in types every standard has; C++17 callers reach these through
    // the inline wrappers below.
    Result<Posted> post_send_bytes(Context& ctx, Address to, const std::byte* data,
                                   std::size_t size, bmi_msg_tag_t tag, void* user_ptr,
                                   bool unexpected, MessageClass message_class = {});
    Result<std::vector<UnexpectedMessage>> test_unexpected_of(std::size_t max,
                                                              std::chrono::milliseconds idle,
                                                              const MessageClass* message_class);
    Result<Posted> post_recv_bytes(Context& ctx, Address from, std::byte* buffer, std::size_t size,
                                   bmi_msg_tag_t tag, void* user_ptr);
    Result<std::size_t> test_context_into(Context& ctx, Completion* out, std::size_t count,
                                          std::chrono::milliseconds idle);
    std::unique_ptr<core::Instance> impl_;
};

#if __cplusplus < 202002L
// Under C++20 the library defines these (bmi/core/cpp_api.cpp) with std::span; a C++17 caller's
// bmi::span is another type, so its calls are wrapped here instead.
inline Result<Posted> Session::post_send(Context& ctx, Address to, span<const std::byte> data,
                                         bmi_msg_tag_t tag, void* user_ptr) {
    return post_send_bytes(ctx, to, data.data(), data.size(), tag, user_ptr, false);
}
inline Result<Posted> Session::post_send_unexpected(Context& ctx, Address to,
                                                    span<const std::byte> data, bmi_msg_tag_t tag,
                                                    void* user_ptr) {
    return post_send_bytes(ctx, to, data.data(), data.size(), tag, user_ptr, true);
}
inline Result<Posted> Session::post_send_unexpected(Context& ctx, Address to,
                                                    span<const std::byte> data, bmi_msg_tag_t tag,
                                                    MessageClass message_class, void* user_ptr) {
    return post_send_bytes(ctx, to, data.data(), data.size(), tag, user_ptr, true, message_class);
}
inline Result<Posted> Session::post_recv(Context& ctx, Address from, span<std::byte> buffer,
                                         bmi_msg_tag_t tag, void* user_ptr) {
    return post_recv_bytes(ctx, from, buffer.data(), buffer.size(), tag, user_ptr);
}
inline Result<std::size_t> Session::test_context(Context& ctx, span<Completion> out,
                                                 std::chrono::milliseconds idle) {
    return test_context_into(ctx, out.data(), out.size(), idle);
}
#endif

}  // namespace bmi
