// SPDX-License-Identifier: LGPL-2.1-or-later
// The receiver's choice between split copy and streaming, fed with made-up timings.
#include <catch2/catch.hpp>

#include <vector>

#include "methods/shm/shm_path_choice.hpp"

using namespace bmi::method::shm;

namespace {
constexpr bmi_size_t mib = 1 << 20;

// Records `count` timings of ns_per_byte for path at size.
void feed(PathChoice& choice, LargePath path, bmi_size_t size, double ns_per_byte,
          std::uint32_t count = 1) {
    auto nanoseconds = static_cast<std::uint64_t>(ns_per_byte * static_cast<double>(size));
    for (std::uint32_t i = 0; i < count; ++i) choice.record(path, size, nanoseconds);
}

// The next n picks at size, timing none of them.
std::vector<LargePath> picks(PathChoice& choice, bmi_size_t size, std::uint32_t n) {
    std::vector<LargePath> out;
    for (std::uint32_t i = 0; i < n; ++i) out.push_back(choice.pick(size));
    return out;
}

std::uint32_t count(const std::vector<LargePath>& paths, LargePath path) {
    std::uint32_t n = 0;
    for (auto p : paths) n += p == path;
    return n;
}
}  // namespace

TEST_CASE("path choice: each path is tried before either is trusted, split first", "[shm][path]") {
    PathChoice choice;
    constexpr std::uint32_t warm = PathChoice::warm_samples;
    for (std::uint32_t i = 0; i < warm; ++i) {
        REQUIRE(choice.pick(mib) == LargePath::split);
        feed(choice, LargePath::split, mib, 0.05);
    }
    for (std::uint32_t i = 0; i + 1 < warm; ++i) {
        REQUIRE(choice.pick(mib) == LargePath::stream);
        REQUIRE_FALSE(
            choice.record(LargePath::stream, mib, static_cast<std::uint64_t>(0.10 * mib)));
    }
    REQUIRE(choice.pick(mib) == LargePath::stream);
    // Both warm now: the class has a preference to report.
    REQUIRE(choice.record(LargePath::stream, mib, static_cast<std::uint64_t>(0.10 * mib)));
    REQUIRE(choice.preferred(mib) == LargePath::split);
}

TEST_CASE("path choice: the faster path is taken, the slower one still tried now and then",
          "[shm][path]") {
    PathChoice choice;
    feed(choice, LargePath::split, 4 * mib, 0.08, PathChoice::warm_samples);
    feed(choice, LargePath::stream, 4 * mib, 0.03, PathChoice::warm_samples);
    REQUIRE(choice.preferred(4 * mib) == LargePath::stream);
    // Split has fewer than a window of timings: it gets every explore_early-th message.
    auto early = picks(choice, 4 * mib, 4 * PathChoice::explore_early);
    REQUIRE(count(early, LargePath::split) == 4);
    feed(choice, LargePath::split, 4 * mib, 0.08, PathChoice::window - PathChoice::warm_samples);
    // With a full window, only every explore_every-th.
    auto later = picks(choice, 4 * mib, 4 * PathChoice::explore_every);
    REQUIRE(count(later, LargePath::split) == 4);
    REQUIRE(count(later, LargePath::stream) == 4 * PathChoice::explore_every - 4);
}

TEST_CASE("path choice: slow outliers do not flip the choice, a lasting change does",
          "[shm][path]") {
    PathChoice choice;
    feed(choice, LargePath::split, 16 * mib, 0.20, 2);  // cold first timings, far slower
    feed(choice, LargePath::stream, 16 * mib, 0.30, 2);
    feed(choice, LargePath::split, 16 * mib, 0.05);
    feed(choice, LargePath::stream, 16 * mib, 0.07);
    REQUIRE(choice.preferred(16 * mib) == LargePath::split);
    // A tick or a preemption inside some split transfers: the best recent timing still wins.
    feed(choice, LargePath::split, 16 * mib, 0.50, 2);
    REQUIRE(choice.preferred(16 * mib) == LargePath::split);
    // Split stays slow for a whole window (another process now competes for the copy).
    bool flipped = false;
    for (std::uint32_t i = 0; i < PathChoice::window; ++i)
        flipped |=
            choice.record(LargePath::split, 16 * mib, static_cast<std::uint64_t>(0.40 * 16 * mib));
    REQUIRE(flipped);
    REQUIRE(choice.preferred(16 * mib) == LargePath::stream);
    REQUIRE(choice.cost(LargePath::split, 16 * mib) == Approx(0.40));
    REQUIRE(choice.cost(LargePath::stream, 16 * mib) == Approx(0.07));
}

TEST_CASE("path choice: size classes learn apart", "[shm][path]") {
    PathChoice choice;
    feed(choice, LargePath::split, 64 << 10, 0.30, PathChoice::warm_samples);
    feed(choice, LargePath::stream, 64 << 10, 0.10, PathChoice::warm_samples);
    feed(choice, LargePath::split, 64 * mib, 0.06, PathChoice::warm_samples);
    feed(choice, LargePath::stream, 64 * mib, 0.09, PathChoice::warm_samples);
    REQUIRE(choice.preferred(64 << 10) == LargePath::stream);
    REQUIRE(choice.preferred((64 << 10) + 1000) == LargePath::stream);  // same power of two
    REQUIRE(choice.preferred(64 * mib) == LargePath::split);
    REQUIRE(choice.cost(LargePath::split, 2 * mib) == 0.0);  // nothing timed at this size yet
    // 2 MiB is nearer to 64 KiB (five classes) than to 64 MiB (five, the lower wins the tie)
    REQUIRE(choice.pick(2 * mib) == LargePath::stream);
}

TEST_CASE("path choice: a new size starts on the path its neighbour found faster", "[shm][path]") {
    PathChoice choice;
    constexpr std::uint32_t warm = PathChoice::warm_samples;
    feed(choice, LargePath::split, 4 * mib, 0.12, warm);
    feed(choice, LargePath::stream, 4 * mib, 0.05, warm);
    // 8 MiB has no timings, 4 MiB prefers streaming: no split copies to warm up first.
    auto first = picks(choice, 8 * mib, warm);
    REQUIRE(count(first, LargePath::stream) == warm);
    feed(choice, LargePath::stream, 8 * mib, 0.05, warm);
    // Split is still tried, at the leaned rate, until it has enough timings of its own; a
    // size sent fewer times than that never pays for a cold split.
    auto few = picks(choice, 8 * mib, PathChoice::explore_leaned - 1);
    REQUIRE(count(few, LargePath::split) == 0);
    auto next = picks(choice, 8 * mib, PathChoice::explore_leaned);
    REQUIRE(count(next, LargePath::split) == 1);
    REQUIRE(next.front() == LargePath::split);
    // Its own timings then decide, even against the neighbour.
    feed(choice, LargePath::split, 8 * mib, 0.02, warm);
    REQUIRE(choice.preferred(8 * mib) == LargePath::split);
    auto after = picks(choice, 8 * mib, PathChoice::explore_early);
    REQUIRE(count(after, LargePath::split) == PathChoice::explore_early - 1);
    // Sizes without timings of both paths lean like the nearest size that has them.
    REQUIRE(choice.pick(2 * mib) == LargePath::stream);
    REQUIRE(choice.pick(64 * mib) == LargePath::split);
}

TEST_CASE("path choice: a run up the sizes never warms the slower path first", "[shm][path]") {
    PathChoice choice;
    constexpr std::uint32_t warm = PathChoice::warm_samples;
    std::uint32_t splits = 0;
    // Streaming is faster everywhere; each size gets 16 messages, as pingpong sends from 4 MiB.
    static_assert(PathChoice::explore_leaned > 16);
    for (bmi_size_t size = mib; size <= 64 * mib; size *= 2) {
        for (std::uint32_t i = 0; i < 16; ++i) {
            LargePath path = choice.pick(size);
            splits += path == LargePath::split;
            feed(choice, path, size, path == LargePath::split ? 0.12 : 0.05);
        }
    }
    // The first size times both; the later ones, 16 messages each, send none down the split.
    REQUIRE(splits <= warm + 16 / PathChoice::explore_early);
}
