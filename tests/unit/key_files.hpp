// SPDX-License-Identifier: LGPL-2.1-or-later
// Key files for tests: a private temporary directory that holds them and is removed, with every
// file in it, when the fixture goes.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>
#include <vector>

namespace bmi::test {

class KeyFiles {
public:
    KeyFiles() {
        std::string pattern = (std::filesystem::temp_directory_path() / "bmi-keys-XXXXXX").string();
        if (mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
    }
    ~KeyFiles() {
        std::error_code ignored;
        if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
    }
    KeyFiles(const KeyFiles&) = delete;
    KeyFiles& operator=(const KeyFiles&) = delete;

    // Writes bytes to a file named `name` with permission bits `mode`; returns its path.
    std::string write(const std::string& name, const std::vector<std::uint8_t>& bytes,
                      mode_t mode = 0600) const {
        const std::string path = dir_ + "/" + name;
        {
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            out.write(reinterpret_cast<const char*>(bytes.data()),
                      static_cast<std::streamsize>(bytes.size()));
        }
        chmod(path.c_str(), mode);
        return path;
    }
    // A 32-byte key whose every byte is `fill`, in a private file.
    std::string key(const std::string& name, std::uint8_t fill) const {
        return write(name, std::vector<std::uint8_t>(32, fill));
    }
    // A FIFO named `name`, with no writer; returns its path.
    std::string fifo(const std::string& name) const {
        const std::string path = dir_ + "/" + name;
        mkfifo(path.c_str(), 0600);
        return path;
    }
    std::string dir() const { return dir_; }

private:
    std::string dir_;
};

// What read() returns, or nullopt if it had not returned within `deadline` (it waits on the
// FIFO at fifo_path): it is then released by a writer that opens and closes the FIFO.
template <class Read>
std::optional<int> returns_within(std::chrono::milliseconds deadline, const std::string& fifo_path,
                                  Read read) {
    auto pending = std::async(std::launch::async, read);
    if (pending.wait_for(deadline) == std::future_status::ready) return pending.get();
    const int writer = open(fifo_path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (writer >= 0) close(writer);
    pending.wait();
    return std::nullopt;
}

}  // namespace bmi::test
