// SPDX-License-Identifier: LGPL-2.1-or-later
// One peer's ordered messages (ofi_wire.hpp's numbered kinds) taken in the order it sent
// them: rxm may complete a message it moved by its own protocol after later small ones, and a
// receive must match the first message of its tag, not the first to complete. One that comes
// early waits in its receive buffer until those numbered before it have come.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "methods/ofi/ofi_wire.hpp"

namespace bmi::method::ofi {

struct Request;

class MessageOrder {
public:
    // What may wait for an earlier message: a peer's credits' worth of eager, unexpected and
    // RTS messages, an abort for each RTS, and its bye. More is a broken peer.
    static constexpr std::size_t most_waiting = 2 * peer_credits + 1;

    enum class Turn : std::uint8_t {
        now,    // the next one
        early,  // within what may be on its way before the next one
        stale,  // behind the next one, or further ahead than any peer of ours sends
    };

    // Ours to the peer: the number the next ordered message carries; sent() moves on.
    std::uint8_t next_out() const { return out_; }
    void sent() { ++out_; }

    // Whether the peer numbers its messages (its hello or answer said so); else its messages
    // are taken as they come, as from a libbmi before numbers.
    bool peer_numbers() const { return peer_numbers_; }
    void set_peer_numbers(bool numbers) { peer_numbers_ = numbers; }
    Turn turn_of(std::uint8_t number) const {
        const auto ahead = static_cast<std::uint8_t>(number - in_);
        if (ahead == 0) return Turn::now;
        return ahead <= most_waiting ? Turn::early : Turn::stale;
    }
    // The next one was taken.
    void taken() {
        ++in_;
        ++taken_;
    }
    // Keeps an early message's buffer; false if its number already waits or too many do.
    bool wait(Request& buffer, std::uint8_t number) {
        if (waiting_.size() >= most_waiting ||
            std::any_of(waiting_.begin(), waiting_.end(),
                        [&](const auto& entry) { return entry.first == number; }))
            return false;
        waiting_.emplace_back(number, &buffer);
        return true;
    }
    // The waiting buffer whose turn it is now, no longer kept here; null if it has not come.
    Request* next_waiting() {
        const auto it = std::find_if(waiting_.begin(), waiting_.end(),
                                     [&](const auto& entry) { return entry.first == in_; });
        if (it == waiting_.end()) return nullptr;
        Request* buffer = it->second;
        waiting_.erase(it);
        return buffer;
    }
    bool any_waiting() const { return !waiting_.empty(); }
    // Messages taken in turn so far: what the stall deadline watches move while some wait.
    std::uint64_t taken_count() const { return taken_; }

    // A new handshake: both directions count from 0, until the peer says it numbers. Returns
    // the buffers that waited, which belong to the exchange that ended.
    std::vector<Request*> restart() {
        out_ = 0;
        in_ = 0;
        peer_numbers_ = false;
        return take_all_waiting();
    }
    std::vector<Request*> take_all_waiting() {
        std::vector<Request*> buffers;
        for (const auto& entry : waiting_) buffers.push_back(entry.second);
        waiting_.clear();
        return buffers;
    }

private:
    std::uint8_t out_ = 0;
    std::uint8_t in_ = 0;
    bool peer_numbers_ = false;
    std::uint64_t taken_ = 0;
    std::vector<std::pair<std::uint8_t, Request*>> waiting_;
};

}  // namespace bmi::method::ofi
