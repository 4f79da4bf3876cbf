// SPDX-License-Identifier: LGPL-2.1-or-later
// The SENDs a verbs peer puts on the queue pair, as VerbsMethod::on_message checks them: a
// header (type, credits returned, tag, size, cookie, segment count) and a body. The input is
// a credit window, then messages, each a length byte and that many bytes (up to an eager
// buffer), checked in order on one connection until one breaks the protocol.
// Properties: the credits we hold never leave 0..window; the peer never spends more than we
// granted; a data message is accepted only if its body is the size it claims, and an RTS only
// if its segments sum exactly to its size, without wrapping, within the message limit; on an
// encrypted connection (the first byte's bit 6) an RTS offers one segment, exactly the sealed
// size of the message.
#include <vector>

#include "methods/verbs/verbs_peer_checks.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::verbs;

namespace {
// The method's limit (max_message_size) and a small one, so both sides of the bound are hit.
constexpr std::uint64_t limits[] = {std::uint64_t{1} << 62, 1 << 20};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    bmi::fuzz::Input in(data, size);
    const std::uint8_t first = in.byte();
    const int window = 1 + first % 32;  // the peer's HELLO window (small, so it is reached)
    const std::uint64_t limit = limits[first >> 7];
    const bool sealed = (first & 0x40) != 0;
    int send_credits = in.byte() % (window + 1);
    int granted = 1 + in.byte() % 16;  // what we granted the peer
    std::vector<RemoteSegment> segs;
    while (!in.empty()) {
        // A length byte counts 16-byte units so a full RTS (64 segments) fits in one message.
        auto message = in.bytes(std::size_t{in.byte()} * 16);
        if (message.size() < sizeof(MsgHeader)) return 0;  // too short: connection failed
        MsgHeader h;
        std::memcpy(&h, message.data(), sizeof h);
        const auto body = message.subspan(sizeof h);
        if (h.credits > 0 && !take_returned_credits(send_credits, h.credits, window)) return 0;
        FUZZ_CHECK(send_credits >= 0 && send_credits <= window);
        const auto type = static_cast<MsgType>(h.type);
        if (type == MsgType::credit) continue;
        if (!spend_granted_credit(granted)) return 0;
        FUZZ_CHECK(granted >= 0);
        if (type != MsgType::eager && type != MsgType::unexpected && type != MsgType::rts) {
            if (type != MsgType::fin && type != MsgType::cancel) return 0;
            continue;
        }
        if (!data_message_well_formed(h, body, limit, segs, sealed)) return 0;
        if (type == MsgType::rts && sealed) {
            FUZZ_CHECK(segs.size() == 1 && h.size <= limit);
            FUZZ_CHECK(segs[0].length == sealed_size(h.size));
        } else if (type == MsgType::rts) {
            FUZZ_CHECK(segs.size() == h.seg_count && h.seg_count <= max_rts_segments);
            std::uint64_t sum = 0;
            for (const auto& s : segs) {
                FUZZ_CHECK(s.length > 0 && s.length <= limit - sum);
                sum += s.length;
            }
            FUZZ_CHECK(sum == h.size);
        } else {
            FUZZ_CHECK(body.size() == h.size);
        }
    }
    return 0;
}
