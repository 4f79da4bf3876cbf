// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_handshake.hpp"

#include <cstdint>
#include <cstring>

namespace bmi::method::ofi {

namespace {
enum : std::uint8_t {
    bit_proof = 1,
    bit_binding = 2,
    bit_required = 4,
    bit_ciphers = 8,
    bit_limits = 16,
    bit_numbers = 32,
    known_bits = 63
};

std::uint8_t feature_byte(const kit::KeyFeatures& f, bool cipher_fields, bool limits,
                          bool numbers) {
    return static_cast<std::uint8_t>((f.proof ? bit_proof : 0) | (f.binding ? bit_binding : 0) |
                                     (f.required ? bit_required : 0) |
                                     (cipher_fields ? bit_ciphers : 0) | (limits ? bit_limits : 0) |
                                     (numbers ? bit_numbers : 0));
}

std::optional<kit::KeyFeatures> features_of(std::uint8_t byte) {
    if ((byte & ~known_bits) != 0) return std::nullopt;
    kit::KeyFeatures f;
    f.proof = (byte & bit_proof) != 0;
    f.binding = (byte & bit_binding) != 0;
    f.required = (byte & bit_required) != 0;
    return f;
}

// Grows `out` first and copies after: gcc 12 at -O3 misreads an insert into a vector that
// starts empty as an overflow (-Wstringop-overflow).
void append(std::vector<std::byte>& out, const void* data, std::size_t size) {
    if (size == 0) return;
    const std::size_t at = out.size();
    out.resize(at + size);
    std::memcpy(out.data() + at, data, size);
}

// Reads fixed fields off the front of a body; every read checks what is left.
class Reader {
public:
    explicit Reader(std::span<const std::byte> body) : rest_(body) {}
    bool take(void* out, std::size_t size) {
        if (rest_.size() < size) return false;
        std::memcpy(out, rest_.data(), size);
        rest_ = rest_.subspan(size);
        return true;
    }
    std::span<const std::byte> rest() const { return rest_; }
    void skip(std::size_t size) { rest_ = rest_.subspan(size); }

private:
    std::span<const std::byte> rest_;
};

bool take_stated(Reader& in, std::string& out) {
    if (in.rest().size() > max_stated_bytes) return false;
    out.assign(reinterpret_cast<const char*>(in.rest().data()), in.rest().size());
    return true;
}

void append_cipher_fields(std::vector<std::byte>& out, const kit::KeyFeatures& f,
                          const support::keys::PublicKey& key) {
    append(out, &f.ciphers, 1);
    append(out, key.data(), key.size());
}

bool take_cipher_fields(Reader& in, kit::KeyFeatures& f, support::keys::PublicKey& key) {
    return in.take(&f.ciphers, 1) && in.take(key.data(), key.size());
}

void append_limits(std::vector<std::byte>& out, const std::optional<BufferLimits>& limits) {
    if (!limits) return;
    append(out, &limits->eager, sizeof limits->eager);
    append(out, &limits->unexpected, sizeof limits->unexpected);
}

bool take_limits(Reader& in, std::uint8_t features, std::optional<BufferLimits>& out) {
    if ((features & bit_limits) == 0) return true;
    BufferLimits limits;
    if (!in.take(&limits.eager, sizeof limits.eager) ||
        !in.take(&limits.unexpected, sizeof limits.unexpected))
        return false;
    out = limits;
    return true;
}
}  // namespace

kit::KeyFeatures checked_features(const kit::KeyFeatures& sent, bool cipher_fields) {
    kit::KeyFeatures f = sent;
    f.binding = sent.binding && cipher_fields;
    if (!cipher_fields) f.ciphers = 0;
    return f;
}

std::string proven_text(const std::string& stated, const std::optional<BufferLimits>& limits,
                        bool numbers, std::uint64_t token) {
    const BufferLimits sizes = limits.value_or(BufferLimits{});
    std::string text = stated;
    text.push_back(limits ? '\1' : '\0');
    text.append(reinterpret_cast<const char*>(&sizes.eager), sizeof sizes.eager);
    text.append(reinterpret_cast<const char*>(&sizes.unexpected), sizeof sizes.unexpected);
    text.push_back(numbers ? '\1' : '\0');
    if (token != 0) text.append(reinterpret_cast<const char*>(&token), sizeof token);
    return text;
}

std::vector<std::byte> encode(const Hello& hello) {
    std::vector<std::byte> out;
    const std::uint8_t features =
        feature_byte(hello.features, hello.cipher_fields, hello.limits.has_value(), hello.numbers);
    const auto length = static_cast<std::uint16_t>(hello.name.size());
    append(out, &features, 1);
    append(out, &length, sizeof length);
    append(out, hello.name.data(), hello.name.size());
    if (hello.features.proof) append(out, hello.nonce.data(), hello.nonce.size());
    if (hello.cipher_fields) append_cipher_fields(out, hello.features, hello.public_key);
    append_limits(out, hello.limits);
    append(out, hello.stated.data(), hello.stated.size());
    return out;
}

std::vector<std::byte> encode(const Answer& answer) {
    std::vector<std::byte> out;
    const std::uint8_t features = feature_byte(answer.features, answer.cipher_fields,
                                               answer.limits.has_value(), answer.numbers);
    append(out, &features, 1);
    if (answer.features.proof) {
        append(out, answer.nonce.data(), answer.nonce.size());
        append(out, answer.proof.data(), answer.proof.size());
    }
    if (answer.cipher_fields) append_cipher_fields(out, answer.features, answer.public_key);
    append_limits(out, answer.limits);
    append(out, answer.stated.data(), answer.stated.size());
    return out;
}

std::optional<Hello> decode_hello(std::span<const std::byte> body) {
    Reader in(body);
    std::uint8_t byte = 0;
    std::uint16_t length = 0;
    if (!in.take(&byte, 1) || !in.take(&length, sizeof length)) return std::nullopt;
    auto features = features_of(byte);
    if (!features || length == 0 || length > max_name_bytes || in.rest().size() < length)
        return std::nullopt;
    Hello hello;
    hello.features = *features;
    hello.name.assign(in.rest().begin(), in.rest().begin() + length);
    in.skip(length);
    if (hello.features.proof && !in.take(hello.nonce.data(), hello.nonce.size()))
        return std::nullopt;
    hello.cipher_fields = (byte & bit_ciphers) != 0;
    hello.numbers = (byte & bit_numbers) != 0;
    if (hello.cipher_fields && !take_cipher_fields(in, hello.features, hello.public_key))
        return std::nullopt;
    if (!take_limits(in, byte, hello.limits) || !take_stated(in, hello.stated)) return std::nullopt;
    return hello;
}

std::optional<Answer> decode_answer(std::span<const std::byte> body) {
    Reader in(body);
    std::uint8_t byte = 0;
    if (!in.take(&byte, 1)) return std::nullopt;
    auto features = features_of(byte);
    if (!features) return std::nullopt;
    Answer answer;
    answer.features = *features;
    if (answer.features.proof && (!in.take(answer.nonce.data(), answer.nonce.size()) ||
                                  !in.take(answer.proof.data(), answer.proof.size())))
        return std::nullopt;
    answer.cipher_fields = (byte & bit_ciphers) != 0;
    answer.numbers = (byte & bit_numbers) != 0;
    if (answer.cipher_fields && !take_cipher_fields(in, answer.features, answer.public_key))
        return std::nullopt;
    if (!take_limits(in, byte, answer.limits) || !take_stated(in, answer.stated))
        return std::nullopt;
    return answer;
}

std::vector<std::byte> encode(const Probe& probe) {
    std::vector<std::byte> out;
    append(out, probe.nonce.data(), probe.nonce.size());
    append(out, probe.name.data(), probe.name.size());
    return out;
}

std::vector<std::byte> encode(const Reset& reset) {
    std::vector<std::byte> out;
    append(out, reset.nonce.data(), reset.nonce.size());
    append(out, reset.proof.data(), reset.proof.size());
    return out;
}

std::optional<Probe> decode_probe(std::span<const std::byte> body) {
    Reader in(body);
    Probe probe;
    if (!in.take(probe.nonce.data(), probe.nonce.size())) return std::nullopt;
    if (in.rest().empty() || in.rest().size() > max_name_bytes) return std::nullopt;
    probe.name.assign(in.rest().begin(), in.rest().end());
    return probe;
}

std::optional<Reset> decode_reset(std::span<const std::byte> body) {
    Reader in(body);
    Reset reset;
    if (!in.take(reset.nonce.data(), reset.nonce.size()) ||
        !in.take(reset.proof.data(), reset.proof.size()) || !in.rest().empty())
        return std::nullopt;
    return reset;
}

}  // namespace bmi::method::ofi
