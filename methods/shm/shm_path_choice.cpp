// SPDX-License-Identifier: LGPL-2.1-or-later
// Per-size timing of the two large-message paths.
#include "methods/shm/shm_path_choice.hpp"

#include <algorithm>
#include <bit>

namespace bmi::method::shm {

namespace {
constexpr std::size_t index(LargePath path) { return static_cast<std::size_t>(path); }
}  // namespace

const char* path_name(LargePath path) { return path == LargePath::split ? "split" : "stream"; }

std::size_t PathChoice::class_of(bmi_size_t size) {
    return static_cast<std::size_t>(std::bit_width(static_cast<std::uint64_t>(size))) &
           (size_classes - 1);
}

double PathChoice::Estimate::best() const {
    if (samples == 0) return 0.0;
    return *std::min_element(ns_per_byte.begin(), ns_per_byte.begin() + samples);
}

LargePath PathChoice::faster(const SizeClass& c) {
    return c.paths[index(LargePath::stream)].best() < c.paths[index(LargePath::split)].best()
               ? LargePath::stream
               : LargePath::split;
}

bool PathChoice::warm(const SizeClass& c) {
    return c.paths[0].samples >= warm_samples && c.paths[1].samples >= warm_samples;
}

bool PathChoice::neighbour_lean(std::size_t k, LargePath& lean) const {
    for (std::size_t d = 1; d < classes_.size(); ++d) {
        for (std::size_t n : {k - d, k + d}) {
            if (n >= classes_.size() || !warm(classes_[n])) continue;
            lean = faster(classes_[n]);
            return true;
        }
    }
    return false;
}

LargePath PathChoice::pick(bmi_size_t size) {
    const std::size_t k = class_of(size);
    SizeClass& c = classes_[k];
    LargePath lean{};
    if (!warm(c) && neighbour_lean(k, lean)) {
        if (c.paths[index(lean)].samples < warm_samples) return lean;
        return ++c.picks % explore_leaned == 0 ? other_path(lean) : lean;
    }
    // Split first: it is what the receiver did before there was a choice, and it leaves the
    // receiver able to finish alone if the sender stops polling.
    for (LargePath path : {LargePath::split, LargePath::stream})
        if (c.paths[index(path)].samples < warm_samples) return path;
    LargePath best = faster(c);
    std::uint32_t every = c.paths[index(other_path(best))].samples < window ? explore_early
                                                                            : explore_every;
    return ++c.picks % every == 0 ? other_path(best) : best;
}

bool PathChoice::record(LargePath path, bmi_size_t size, std::uint64_t nanoseconds) {
    if (size <= 0) return false;
    SizeClass& c = classes_[class_of(size)];
    bool warm_before = warm(c);
    LargePath before = faster(c);
    Estimate& e = c.paths[index(path)];
    e.ns_per_byte[e.next] =
        static_cast<float>(static_cast<double>(nanoseconds) / static_cast<double>(size));
    e.next = (e.next + 1) % window;
    if (e.samples < window) ++e.samples;
    return warm(c) && (!warm_before || faster(c) != before);
}

double PathChoice::cost(LargePath path, bmi_size_t size) const {
    return classes_[class_of(size)].paths[index(path)].best();
}

LargePath PathChoice::preferred(bmi_size_t size) const { return faster(classes_[class_of(size)]); }

}  // namespace bmi::method::shm
