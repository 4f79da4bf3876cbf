// SPDX-License-Identifier: LGPL-2.1-or-later
// The C++ API over bmi::core::Instance; each member converts and forwards, like c_api.cpp.
#include "bmi/bmi.hpp"

#include <new>
#include <utility>

#include "bmi/core/instance.hpp"
#include "support/error/error_map.hpp"

namespace bmi {

namespace {
class Category final : public std::error_category {
public:
    const char* name() const noexcept override { return "bmi"; }
    std::string message(int code) const override { return support::error_name(code); }
    std::error_condition default_error_condition(int code) const noexcept override {
        const support::ErrorEntry* entry = support::find_error(code);
        if (entry != nullptr && entry->errno_value != 0)
            return {entry->errno_value, std::generic_category()};
        return {code, *this};
    }
};

template <class T>
Result<T> failure(int rc) {
    return Result<T>(error_from_code(rc));
}
}  // namespace

const std::error_category& error_category() noexcept {
    static const Category category;
    return category;
}

// --- Context, UnexpectedMessage, Buffer: move-only owners --------------------------------

Context::Context(Context&& other) noexcept
    : session_(std::exchange(other.session_, nullptr)), id_(other.id_) {}

Context& Context::operator=(Context&& other) noexcept {
    if (this != &other) {
        this->~Context();
        session_ = std::exchange(other.session_, nullptr);
        id_ = other.id_;
    }
    return *this;
}

Context::~Context() {
    if (session_ != nullptr) session_->impl_->close_context(id_);
    session_ = nullptr;
}

UnexpectedMessage::UnexpectedMessage(UnexpectedMessage&& other) noexcept
    : session_(std::exchange(other.session_, nullptr)),
      from_(other.from_),
      buffer_(std::exchange(other.buffer_, nullptr)),
      size_(other.size_),
      tag_(other.tag_),
      error_(other.error_) {}

UnexpectedMessage& UnexpectedMessage::operator=(UnexpectedMessage&& other) noexcept {
    if (this != &other) {
        this->~UnexpectedMessage();
        new (this) UnexpectedMessage(std::move(other));
    }
    return *this;
}

UnexpectedMessage::~UnexpectedMessage() {
    if (session_ != nullptr && buffer_ != nullptr) session_->impl_->unexpected_free(buffer_);
    buffer_ = nullptr;
}

Buffer::Buffer(Buffer&& other) noexcept
    : session_(std::exchange(other.session_, nullptr)),
      addr_(other.addr_),
      data_(std::exchange(other.data_, nullptr)),
      size_(other.size_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
    if (this != &other) {
        this->~Buffer();
        new (this) Buffer(std::move(other));
    }
    return *this;
}

Buffer::~Buffer() {
    if (session_ != nullptr && data_ != nullptr) session_->impl_->memfree(addr_.value(), data_);
    data_ = nullptr;
}

// --- Session ---------------------------------------------------------------------------------

Result<std::unique_ptr<Session>> Session::create(const SessionOptions& options) {
    return create(options, "");
}

Result<std::unique_ptr<Session>> Session::create(const SessionOptions& options,
                                                 std::string_view allocation) {
    try {
        core::InitParams params{options.methods, options.listen, options.flags, options.options,
                                std::string(allocation)};
        std::unique_ptr<core::Instance> impl;
        int rc = core::Instance::create(params, impl);
        if (rc != 0) return failure<std::unique_ptr<Session>>(rc);
        std::unique_ptr<Session> session(new Session());
        session->impl_ = std::move(impl);
        return session;
    } catch (const std::bad_alloc&) {
        return failure<std::unique_ptr<Session>>(-BMI_ENOMEM);
    }
}

Session::~Session() = default;

Result<Address> Session::lookup(std::string_view address) {
    BMI_addr_t addr = 0;
    int rc = impl_->addr_lookup(address, addr);
    if (rc != 0) return failure<Address>(rc);
    return Address(addr);
}

std::string Session::rev_lookup(Address addr) {
    const char* text = impl_->rev_lookup(addr.value());
    return text ? text : "";
}

std::string Session::listen_address() { return impl_->listen_addresses(); }

Result<Context> Session::open_context() {
    bmi_context_id id = 0;
    int rc = impl_->open_context(id);
    if (rc != 0) return failure<Context>(rc);
    return Context(this, id);
}

Result<Buffer> Session::allocate(Address addr, bmi_size_t size) {
    void* data = impl_->memalloc(addr.value(), size);
    if (data == nullptr) return failure<Buffer>(size < 0 ? -BMI_EINVAL : -BMI_ENOMEM);
    Buffer buffer;
    buffer.session_ = this;
    buffer.addr_ = addr;
    buffer.data_ = data;
    buffer.size_ = size;
    return buffer;
}

namespace {
Result<Posted> post_with(core::Instance& impl, core::PostRequest request) {
    Posted posted;
    int rc = impl.post(request, posted.id, &posted.actual_size);
    if (rc < 0) return failure<Posted>(rc);
    posted.immediate = rc == 1;
    if (!posted.immediate) posted.actual_size = 0;
    return posted;
}

core::PostRequest make_request(method::OpKind kind, Context& ctx, Address addr, void* data,
                               std::size_t size, bmi_msg_tag_t tag, void* user_ptr) {
    core::PostRequest r;
    r.kind = kind;
    r.addr = addr.value();
    r.buffer = data;
    r.size = static_cast<bmi_size_t>(size);
    r.tag = tag;
    r.user_ptr = user_ptr;
    r.context = ctx.id();
    return r;
}
}  // namespace

Result<Posted> Session::post_send_bytes(Context& ctx, Address to, const std::byte* data,
                                        std::size_t size, bmi_msg_tag_t tag, void* user_ptr,
                                        bool unexpected, MessageClass message_class) {
    auto kind = unexpected ? method::OpKind::send_unexpected : method::OpKind::send;
    auto request = make_request(kind, ctx, to, const_cast<std::byte*>(data), size, tag, user_ptr);
    request.msg_class = static_cast<std::uint8_t>(message_class);
    return post_with(*impl_, request);
}

Result<Posted> Session::post_recv_bytes(Context& ctx, Address from, std::byte* buffer,
                                        std::size_t size, bmi_msg_tag_t tag, void* user_ptr) {
    return post_with(*impl_,
                     make_request(method::OpKind::recv, ctx, from, buffer, size, tag, user_ptr));
}

Result<Posted> Session::post_send(Context& ctx, Address to, std::span<const std::byte> data,
                                  bmi_msg_tag_t tag, void* user_ptr) {
    return post_send_bytes(ctx, to, data.data(), data.size(), tag, user_ptr, false);
}

Result<Posted> Session::post_send_unexpected(Context& ctx, Address to,
                                             std::span<const std::byte> data, bmi_msg_tag_t tag,
                                             void* user_ptr) {
    return post_send_bytes(ctx, to, data.data(), data.size(), tag, user_ptr, true);
}

Result<Posted> Session::post_send_unexpected(Context& ctx, Address to,
                                             std::span<const std::byte> data, bmi_msg_tag_t tag,
                                             MessageClass message_class, void* user_ptr) {
    return post_send_bytes(ctx, to, data.data(), data.size(), tag, user_ptr, true, message_class);
}

Result<Posted> Session::post_recv(Context& ctx, Address from, std::span<std::byte> buffer,
                                  bmi_msg_tag_t tag, void* user_ptr) {
    return post_recv_bytes(ctx, from, buffer.data(), buffer.size(), tag, user_ptr);
}

Result<std::optional<Completion>> Session::test(Context& ctx, bmi_op_id_t id,
                                                std::chrono::milliseconds idle) {
    int outcount = 0;
    core::Completion c;
    int rc = impl_->test(id, ctx.id(), static_cast<int>(idle.count()), outcount, c);
    if (rc != 0) return failure<std::optional<Completion>>(rc);
    if (outcount == 0) return std::optional<Completion>{};
    return std::optional<Completion>(
        Completion{c.id, error_from_code(c.error), c.actual_size, c.user_ptr});
}

Result<std::size_t> Session::test_context(Context& ctx, std::span<Completion> out,
                                          std::chrono::milliseconds idle) {
    return test_context_into(ctx, out.data(), out.size(), idle);
}

Result<std::size_t> Session::test_context_into(Context& ctx, Completion* out, std::size_t count,
                                               std::chrono::milliseconds idle) {
    std::vector<core::Completion> done(count);
    int outcount = 0;
    int rc = impl_->testcontext(ctx.id(), static_cast<int>(idle.count()), outcount, done);
    if (rc != 0) return failure<std::size_t>(rc);
    for (int i = 0; i < outcount; ++i) {
        const auto& c = done[static_cast<std::size_t>(i)];
        out[static_cast<std::size_t>(i)] =
            Completion{c.id, error_from_code(c.error), c.actual_size, c.user_ptr};
    }
    return static_cast<std::size_t>(outcount);
}

Result<std::vector<UnexpectedMessage>> Session::test_unexpected(std::size_t max,
                                                                std::chrono::milliseconds idle) {
    return test_unexpected_of(max, idle, nullptr);
}

Result<std::vector<UnexpectedMessage>> Session::test_unexpected(std::size_t max,
                                                                std::chrono::milliseconds idle,
                                                                MessageClass message_class) {
    return test_unexpected_of(max, idle, &message_class);
}

Result<std::vector<UnexpectedMessage>> Session::test_unexpected_of(
    std::size_t max, std::chrono::milliseconds idle, const MessageClass* message_class) {
    std::vector<core::UnexpectedMessage> raw(max);
    int outcount = 0;
    std::optional<std::uint8_t> only;
    if (message_class != nullptr) only = static_cast<std::uint8_t>(*message_class);
    int rc = impl_->testunexpected(static_cast<int>(idle.count()), outcount, raw, only);
    if (rc != 0) return failure<std::vector<UnexpectedMessage>>(rc);
    std::vector<UnexpectedMessage> out(static_cast<std::size_t>(outcount));
    for (int i = 0; i < outcount; ++i) {
        auto& m = out[static_cast<std::size_t>(i)];
        const auto& r = raw[static_cast<std::size_t>(i)];
        m.session_ = this;
        m.from_ = Address(r.addr);
        m.buffer_ = r.buffer;
        m.size_ = r.size;
        m.tag_ = r.tag;
        m.class_ = MessageClass{r.msg_class};
        m.error_ = error_from_code(r.error);
    }
    return out;
}

std::error_code Session::cancel(Context& ctx, bmi_op_id_t id) {
    return error_from_code(impl_->cancel(id, ctx.id()));
}

std::error_code Session::drop(Address addr) {
    return error_from_code(impl_->set_info(addr.value(), BMI_DROP_ADDR, nullptr));
}

std::error_code Session::hold(Address addr) {
    return error_from_code(impl_->set_info(addr.value(), BMI_INC_ADDR_REF, nullptr));
}

std::error_code Session::release(Address addr) {
    return error_from_code(impl_->set_info(addr.value(), BMI_DEC_ADDR_REF, nullptr));
}

std::size_t Session::address_count() {
    int count = 0;
    // Cannot fail with addr 0 and an int to fill.
    (void)impl_->get_info(0, BMI_ADDRESS_COUNT, &count);
    return static_cast<std::size_t>(count);
}

}  // namespace bmi
