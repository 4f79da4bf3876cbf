// SPDX-License-Identifier: LGPL-2.1-or-later
// The main of a fuzz target outside libFuzzer: runs LLVMFuzzerTestOneInput once on every file
// under the directories given (the target's seed corpus and its regression inputs), so the
// corpora are regression tests in every build. Fails if a directory holds no input at all: an
// empty or misnamed corpus would otherwise pass without testing anything.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" [[gnu::weak]] int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
    if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
    namespace fs = std::filesystem;
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s DIR...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; ++i) {
        std::error_code ec;
        std::size_t count = 0;
        for (const auto& entry : fs::recursive_directory_iterator(argv[i], ec)) {
            if (!entry.is_regular_file()) continue;
            std::ifstream in(entry.path(), std::ios::binary);
            std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
            // A copy of exactly the file's size: ASan then sees any read past the input.
            std::vector<std::uint8_t> input(bytes.begin(), bytes.end());
            LLVMFuzzerTestOneInput(input.data(), input.size());
            ++count;
        }
        if (ec || count == 0) {
            std::fprintf(stderr, "%s: no inputs in %s\n", argv[0], argv[i]);
            return 1;
        }
        std::printf("%s: %zu inputs from %s\n", argv[0], count, argv[i]);
    }
    return 0;
}
