// SPDX-License-Identifier: LGPL-2.1-or-later
// bmi-alloc: plays the resource manager for a batch of requests.
//   bmi-alloc --inventory FILE --requests FILE [--key-dir DIR]
// Prints one allocation per line on stdout (the text form of doc/planes.md), each degraded
// value as a "# degraded" line on stderr, and each refused request on stderr naming the value
// that could not be met; exits 1 if any request was refused, 2 on bad usage or input.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "bmi/tools/allocator.hpp"
#include "support/planes/allocation.hpp"
#include "support/planes/inventory.hpp"

using namespace bmi::support::planes;

namespace {
constexpr std::size_t max_file_bytes = 1 << 20;  // inventories and requests are a few lines

bool read_text(const std::string& path, std::string& text) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::cerr << "bmi-alloc: cannot read " << path << "\n";
        return false;
    }
    std::ostringstream s;
    s << in.rdbuf();
    text = s.str();
    if (text.size() > max_file_bytes) {
        std::cerr << "bmi-alloc: " << path << ": larger than " << max_file_bytes << " bytes\n";
        return false;
    }
    return true;
}

int usage() {
    std::cerr << "usage: bmi-alloc --inventory FILE --requests FILE [--key-dir DIR]\n";
    return 2;
}
}  // namespace

int main(int argc, char** argv) {
    std::string inventory_path, requests_path, key_dir;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (i + 1 >= argc) return usage();
        if (arg == "--inventory")
            inventory_path = argv[++i];
        else if (arg == "--requests")
            requests_path = argv[++i];
        else if (arg == "--key-dir")
            key_dir = argv[++i];
        else
            return usage();
    }
    if (inventory_path.empty() || requests_path.empty()) return usage();

    std::string inventory_text, requests_text;
    if (!read_text(inventory_path, inventory_text) || !read_text(requests_path, requests_text))
        return 2;
    ParseError error;
    auto inventory = parse_inventory(inventory_text, inventory_path, error);
    if (!inventory) {
        std::cerr << "bmi-alloc: " << error.text() << "\n";
        return 2;
    }
    const auto requests = parse_requests(requests_text, requests_path, error);
    if (!requests) {
        std::cerr << "bmi-alloc: " << error.text() << "\n";
        return 2;
    }
    bmi::tools::Allocator allocator(std::move(*inventory), key_dir);
    int status = 0;
    for (const RequestEntry& request : *requests) {
        const auto outcome = allocator.allocate(request);
        if (!outcome.allocation) {
            std::cerr << "bmi-alloc: request " << request.id << " refused: " << outcome.error
                      << "\n";
            status = 1;
            continue;
        }
        for (const std::string& d : outcome.degradations)
            std::cerr << "# degraded " << request.id << ": " << d << "\n";
        std::cout << format_allocation(*outcome.allocation) << "\n";
    }
    return status;
}
