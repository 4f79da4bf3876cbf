// SPDX-License-Identifier: LGPL-2.1-or-later
// Header and HELLO encoding; see tcp_wire.hpp and doc/methods/tcp.md for the layout.
#include "methods/tcp/tcp_wire.hpp"

#include <bit>
#include <cstring>

namespace bmi::method::tcp {

namespace {
// The wire is little-endian. On a little-endian host a field is one load or store (the byte
// loops below do not fold into one at every optimization level, and a round trip decodes and
// encodes a header on each side).
template <class T>
void put_le(std::uint8_t* p, T v) {
    if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(p, &v, sizeof v);
    } else {
        for (std::size_t i = 0; i < sizeof v; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
    }
}
template <class T>
T get_le(const std::uint8_t* p) {
    T v = 0;
    if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(&v, p, sizeof v);
    } else {
        for (std::size_t i = sizeof v; i-- > 0;) v = static_cast<T>((v << 8) | p[i]);
    }
    return v;
}
void put_u16(std::uint8_t* p, std::uint16_t v) { put_le(p, v); }
void put_u32(std::uint8_t* p, std::uint32_t v) { put_le(p, v); }
void put_u64(std::uint8_t* p, std::uint64_t v) { put_le(p, v); }
std::uint16_t get_u16(const std::uint8_t* p) { return get_le<std::uint16_t>(p); }
std::uint32_t get_u32(const std::uint8_t* p) { return get_le<std::uint32_t>(p); }
std::uint64_t get_u64(const std::uint8_t* p) { return get_le<std::uint64_t>(p); }

bool magic_allowed(const Header& h, Dialect d) {
    if (h.mode == Mode::hello)
        return h.magic == hello_magic || (d == Dialect::first_inbound && h.magic == wire_magic);
    if (h.mode == Mode::hello_ack || h.mode == Mode::hello_proof) return h.magic == hello_magic;
    // A connection keeps the framing its first frame chose: the other kind's magic in it is a
    // peer out of step (or two kinds of peer sharing a socket), not a message.
    switch (d) {
        case Dialect::first_inbound:
            return h.magic == wire_magic || h.magic == standalone_magic;
        case Dialect::standalone:
            return h.magic == standalone_magic;
        default:  // legacy, offering, await_hello, v2
            return h.magic == wire_magic;
    }
}

bool mode_allowed(Mode m, Dialect d) {
    switch (d) {
        case Dialect::first_inbound:
            return m == Mode::hello || m == Mode::unexpected || m == Mode::eager ||
                   m == Mode::rendezvous;
        case Dialect::await_ack:
            return m == Mode::hello_ack;
        case Dialect::await_proof:
            return m == Mode::hello_proof;
        case Dialect::legacy:
        case Dialect::standalone:
            return m == Mode::unexpected || m == Mode::eager || m == Mode::rendezvous;
        case Dialect::offering:
        case Dialect::await_hello:
            return m == Mode::unexpected || m == Mode::eager || m == Mode::rendezvous ||
                   m == (d == Dialect::offering ? Mode::hello_ack : Mode::hello);
        case Dialect::v2:
            return m == Mode::unexpected || m == Mode::eager || m == Mode::rts || m == Mode::cts ||
                   m == Mode::nak || m == Mode::data || m == Mode::grant;
    }
    return false;
}
}  // namespace

std::size_t header_size(Framing f) {
    switch (f) {
        case Framing::orangefs:
            return legacy_header_size;
        case Framing::standalone:
            return standalone_header_size;
        case Framing::v2:
            return v2_header_size;
    }
    return legacy_header_size;
}

std::size_t header_bytes_needed(Dialect d, std::span<const std::uint8_t> have) {
    if (d == Dialect::v2) return v2_header_size;
    if (d == Dialect::standalone) return standalone_header_size;
    if (d == Dialect::first_inbound && have.size() >= 4 && get_u32(have.data()) == standalone_magic)
        return standalone_header_size;
    return legacy_header_size;
}

Framing framing_of(Dialect d, std::span<const std::uint8_t> head) {
    if (d == Dialect::v2) return Framing::v2;
    return header_bytes_needed(d, head) == standalone_header_size ? Framing::standalone
                                                                  : Framing::orangefs;
}

std::size_t encode_header(const Header& h, Framing f, std::uint8_t* out) {
    put_u32(out, h.magic);
    put_u32(out + 4, static_cast<std::uint32_t>(h.mode));
    if (f == Framing::standalone) {
        put_u32(out + 8, static_cast<std::uint32_t>(h.tag));
        put_u32(out + 12, h.address_hash);
        put_u64(out + 16, h.size);
        out[24] = h.msg_class;
        return standalone_header_size;
    }
    put_u64(out + 8, h.tag);
    put_u64(out + 16, h.size);
    if (f == Framing::orangefs) return legacy_header_size;
    put_u64(out + 24, h.mode == Mode::unexpected ? std::uint64_t{h.msg_class} : h.cookie);
    return v2_header_size;
}

Header decode_header(const std::uint8_t* in, Framing f) {
    Header h;
    h.magic = get_u32(in);
    h.mode = static_cast<Mode>(get_u32(in + 4));
    h.size = get_u64(in + 16);
    if (f == Framing::standalone) {
        // Sign-extended like an OrangeFS tag, so both framings give one tag the same value.
        h.tag = static_cast<std::uint64_t>(
            static_cast<std::int64_t>(static_cast<std::int32_t>(get_u32(in + 8))));
        h.address_hash = get_u32(in + 12);
        h.msg_class = in[24];
        return h;
    }
    h.tag = get_u64(in + 8);
    if (f == Framing::v2) {
        h.cookie = get_u64(in + 24);
        if (h.mode == Mode::unexpected) h.msg_class = static_cast<std::uint8_t>(h.cookie);
    }
    return h;
}

int check_header(const Header& h, Dialect d, bmi_size_t unexpected_limit, bmi_size_t v2_eager) {
    if (!mode_allowed(h.mode, d) || !magic_allowed(h, d)) return -BMI_EPROTO;
    // Compare as unsigned so a size with the top bit set cannot pass as negative.
    const auto limit = [&](bmi_size_t l) { return h.size <= static_cast<std::uint64_t>(l); };
    switch (h.mode) {
        case Mode::unexpected:
            // A v2 UNEXP's cookie is its class: anything over a byte is a peer out of step.
            if (d == Dialect::v2 && h.cookie > 0xff) return -BMI_EPROTO;
            return limit(unexpected_limit) ? 0 : -BMI_EPROTO;
        case Mode::eager:
            // Under a GRANT (a cookie) up to any grant's size; whether it names one of ours,
            // and one large enough, only the connection knows.
            if (d == Dialect::v2 && h.cookie != 0) return limit(grant_size_limit) ? 0 : -BMI_EPROTO;
            return limit(d == Dialect::v2 ? v2_eager : eager_limit) ? 0 : -BMI_EPROTO;
        case Mode::grant:
            return h.size > 0 && limit(grant_size_limit) && h.cookie != 0 && h.tag == 0
                       ? 0
                       : -BMI_EPROTO;
        case Mode::rendezvous:
            return limit(legacy_message_limit) ? 0 : -BMI_EPROTO;
        case Mode::rts:
            // Any size: a peer with another eager limit may announce small messages this way.
            // The cap keeps sums from overflowing.
            return h.size < (1ull << 62) ? 0 : -BMI_EPROTO;
        case Mode::cts:
        case Mode::nak:
            return h.size == 0 ? 0 : -BMI_EPROTO;
        case Mode::data:
            return h.size > 0 && limit(data_chunk_limit) ? 0 : -BMI_EPROTO;
        case Mode::hello:
        case Mode::hello_ack:
            return h.size >= hello_fixed_size && h.size <= hello_max_body ? 0 : -BMI_EPROTO;
        case Mode::hello_proof:
            return h.size == support::keys::proof_size ? 0 : -BMI_EPROTO;
    }
    return -BMI_EPROTO;
}

std::string hello_address(std::string_view address) {
    return std::string(address.substr(0, BMI_MAX_ADDR_LEN));
}

std::vector<std::uint8_t> encode_hello(const Hello& hello, bool ack, std::uint32_t magic) {
    const std::size_t addr_len = std::min<std::size_t>(hello.address.size(), BMI_MAX_ADDR_LEN);
    const std::size_t proof_len = hello.proof ? support::keys::proof_size : 0;
    const std::size_t cipher_len = (hello.features & feature_key_ciphers) ? hello_cipher_size : 0;
    const std::size_t offer_len = hello.offer ? same_node_offer_size : 0;
    const std::size_t body = hello_fixed_size + addr_len + cipher_len + proof_len + offer_len;
    std::vector<std::uint8_t> frame(legacy_header_size + body, 0);
    Header h;
    h.magic = magic;
    h.mode = ack ? Mode::hello_ack : Mode::hello;
    h.tag = protocol_version;
    h.size = body;
    encode_header(h, Framing::orangefs, frame.data());
    std::uint8_t* p = frame.data() + legacy_header_size;
    put_u64(p, hello.features);
    put_u16(p + 8, static_cast<std::uint16_t>(addr_len));
    std::memcpy(p + 10, hello.address.data(), addr_len);
    // The reserved bytes after the address: the nonce of a keyed sender, zero from a keyless one.
    std::memcpy(p + 10 + addr_len, hello.nonce.data(), hello.nonce.size());
    std::uint8_t* rest = p + hello_fixed_size + addr_len;
    if (cipher_len != 0) {
        rest[0] = hello.ciphers;
        std::memcpy(rest + 1, hello.public_key.data(), hello.public_key.size());
        rest += cipher_len;
    }
    if (hello.proof) {
        std::memcpy(rest, hello.proof->data(), hello.proof->size());
        rest += proof_len;
    }
    if (hello.offer) {
        const std::string& name = hello.offer->shm_name;
        const std::size_t name_len = std::min(name.size(), same_node_name_room);
        rest[0] = static_cast<std::uint8_t>(name_len);
        std::memcpy(rest + 1, name.data(), name_len);
        put_u64(rest + 1 + same_node_name_room, hello.offer->listener_nonce);
        std::memcpy(rest + 1 + same_node_name_room + 8, hello.offer->ticket.data(),
                    kit::ticket_size);
    }
    return frame;
}

std::string hello_terms(std::uint64_t initiator_features, std::uint64_t acceptor_features) {
    std::uint8_t bytes[16];
    put_u64(bytes, initiator_features);
    put_u64(bytes + 8, acceptor_features);
    return std::string(reinterpret_cast<const char*>(bytes), sizeof bytes);
}

std::vector<std::uint8_t> encode_hello_proof(const support::keys::Proof& proof) {
    std::vector<std::uint8_t> frame(legacy_header_size + proof.size(), 0);
    Header h;
    h.magic = hello_magic;
    h.mode = Mode::hello_proof;
    h.tag = protocol_version;
    h.size = proof.size();
    encode_header(h, Framing::orangefs, frame.data());
    std::memcpy(frame.data() + legacy_header_size, proof.data(), proof.size());
    return frame;
}

std::optional<Hello> decode_hello_body(std::span<const std::uint8_t> body) {
    if (body.size() < hello_fixed_size || body.size() > hello_max_body) return std::nullopt;
    Hello out;
    out.features = get_u64(body.data());
    const std::size_t addr_len = get_u16(body.data() + 8);
    // encode_hello never sends more, and both sides bind hello_address() into their proofs:
    // a longer address would be believed beyond what the proof covers (found by fuzzing).
    if (addr_len > BMI_MAX_ADDR_LEN) return std::nullopt;
    // A keyed sender may append its proof; nobody else appends anything.
    const bool keyed = (out.features & feature_key_proof) != 0;
    // The cipher fields come with a key proof only: a keyless sender has nothing to derive from.
    const bool ciphered = (out.features & feature_key_ciphers) != 0;
    if (ciphered && !keyed) return std::nullopt;
    const std::size_t plain = hello_fixed_size + addr_len + (ciphered ? hello_cipher_size : 0);
    // After the plain part: a keyed sender's proof, then, with feature_same_node, an offer.
    // The four sizes differ, so the size says which are there.
    const std::size_t offer_len =
        (out.features & feature_same_node) != 0 &&
                (body.size() == plain + same_node_offer_size ||
                 body.size() == plain + support::keys::proof_size + same_node_offer_size)
            ? same_node_offer_size
            : 0;
    const std::size_t before_offer = body.size() - offer_len;
    if (before_offer != plain && !(keyed && before_offer == plain + support::keys::proof_size))
        return std::nullopt;
    out.address.assign(reinterpret_cast<const char*>(body.data() + 10), addr_len);
    std::memcpy(out.nonce.data(), body.data() + 10 + addr_len, out.nonce.size());
    if (ciphered) {
        const std::uint8_t* fields = body.data() + hello_fixed_size + addr_len;
        out.ciphers = fields[0];
        std::memcpy(out.public_key.data(), fields + 1, out.public_key.size());
    }
    if (before_offer > plain) {
        out.proof.emplace();
        std::memcpy(out.proof->data(), body.data() + plain, out.proof->size());
    }
    if (offer_len != 0) {
        const std::uint8_t* block = body.data() + before_offer;
        const std::size_t name_len = block[0];
        if (name_len == 0 || name_len > same_node_name_room) return std::nullopt;
        // The padding is zero, as encode_hello writes it: nothing rides in it.
        for (std::size_t i = name_len; i < same_node_name_room; ++i)
            if (block[1 + i] != 0) return std::nullopt;
        kit::SameNodeOffer offer;
        offer.shm_name.assign(reinterpret_cast<const char*>(block + 1), name_len);
        offer.listener_nonce = get_u64(block + 1 + same_node_name_room);
        std::memcpy(offer.ticket.data(), block + 1 + same_node_name_room + 8, kit::ticket_size);
        out.offer = std::move(offer);
    }
    return out;
}

}  // namespace bmi::method::tcp
