// SPDX-License-Identifier: LGPL-2.1-or-later
// Shared-buffer offers and withdrawals on an shm connection's socket, then the translations a
// later RTS or HELP asks for (PeerRegions). Offers carry real sealed memfds of a size the
// fuzzer picks, so the claim in the message and the descriptor may disagree.
// Properties: mappings stay within the per-connection budget; every translated segment lies
// inside one mapping the translation keeps alive, and its first and last bytes can be read.
#include <unistd.h>

#include <vector>

#include "methods/shm/shm_region.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace bmi::method::shm;

namespace {
constexpr std::size_t budget_bytes = 256 << 10;
constexpr std::size_t budget_count = 8;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    bmi::fuzz::Input in(data, size);
    // The memory a peer would offer; no pool, so all of it is unmapped when this input is done.
    OwnRegions own(PoolLimits{});
    PeerRegions peer;
    peer.limit(budget_bytes, budget_count);
    for (int op = 0; op < 24 && !in.empty(); ++op) {
        const std::uint8_t kind = in.byte() % 3;
        if (kind == 0) {
            const std::size_t real = std::size_t{4096} * (1 + in.byte() % 16);
            auto message = in.object<RegionMessage>();
            void* base = own.allocate(real);
            if (base == nullptr) continue;
            int fd = dup(own.at(base)->fd);
            FUZZ_CHECK(fd >= 0);
            peer.add(message, fd);  // takes the descriptor whatever it decides
        } else if (kind == 1) {
            peer.remove(in.object<RegionMessage>().id);
        } else {
            std::vector<RemoteIov> remote(in.byte() % 5);
            for (auto& iov : remote) iov = in.object<RemoteIov>();
            std::vector<bmi::method::Segment> out;
            PeerRegions::Keep keep;
            if (!peer.translate(remote, out, keep)) {
                FUZZ_CHECK(out.empty() && keep.empty());
                continue;
            }
            FUZZ_CHECK(out.size() == remote.size());
            for (const auto& segment : out) {
                const auto* first = static_cast<const std::byte*>(segment.data);
                bool inside = false;
                for (const auto& mapping : keep)
                    inside = inside ||
                             (first >= mapping->local &&
                              static_cast<std::size_t>(segment.size) <=
                                  mapping->size - static_cast<std::size_t>(first - mapping->local));
                FUZZ_CHECK(inside);
                if (segment.size > 0) {
                    volatile std::byte sink = first[0];
                    sink = first[segment.size - 1];
                    (void)sink;
                }
            }
        }
        FUZZ_CHECK(peer.mapped_bytes() <= budget_bytes && peer.size() <= budget_count);
    }
    return 0;
}
