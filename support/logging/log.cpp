// SPDX-License-Identifier: LGPL-2.1-or-later
// Mask parsing and the one output routine for BMI_LOG.
#include "log.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>

#include <unistd.h>

namespace bmi::support {

namespace {
struct AreaName {
    std::string_view name;
    LogArea area;
};
constexpr AreaName area_names[] = {
    {"control", LogArea::control}, {"address", LogArea::address}, {"tcp", LogArea::tcp},
    {"shm", LogArea::shm},         {"verbs", LogArea::verbs},     {"error", LogArea::error},
    {"warning", LogArea::warning}, {"ofi", LogArea::ofi},
};

std::string_view name_of(LogArea area) {
    for (const auto& entry : area_names)
        if (entry.area == area) return entry.name;
    return "?";
}
}  // namespace

std::uint32_t parse_log_mask(const char* text) {
    if (text == nullptr) return 0;
    std::uint32_t mask = 0;
    std::string_view rest(text);
    while (!rest.empty()) {
        auto cut = rest.find_first_of(", ");
        std::string_view word = rest.substr(0, cut);
        rest = cut == std::string_view::npos ? std::string_view{} : rest.substr(cut + 1);
        if (word == "all") mask = ~0u;
        for (const auto& entry : area_names)
            if (word == entry.name) mask |= static_cast<std::uint32_t>(entry.area);
    }
    return mask;
}

std::uint32_t log_mask() {
    // Function-local static: initialised once, thread-safely, on first use.
    static const std::uint32_t mask = parse_log_mask(std::getenv("BMI_DEBUG"));
    return mask;
}

bool log_enabled(LogArea area) { return (log_mask() & static_cast<std::uint32_t>(area)) != 0; }

void log_print(LogArea area, const char* format, ...) {
    char line[1024];
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    int head = std::snprintf(line, sizeof line, "[bmi %ld.%06ld %d %.*s] ",
                             static_cast<long>(now.tv_sec), now.tv_nsec / 1000,
                             static_cast<int>(getpid()), static_cast<int>(name_of(area).size()),
                             name_of(area).data());
    va_list args;
    va_start(args, format);
    std::vsnprintf(line + head, sizeof line - static_cast<std::size_t>(head) - 1, format, args);
    va_end(args);
    std::size_t len = std::strlen(line);
    line[len++] = '\n';
    // One write per line keeps lines from several threads whole.
    ssize_t ignored = write(STDERR_FILENO, line, len);
    (void)ignored;
}

}  // namespace bmi::support
