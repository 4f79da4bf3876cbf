// SPDX-License-Identifier: LGPL-2.1-or-later
// Key files for tests: a private temporary directory that holds them and is removed, with every
// file in it, when the fixture goes.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
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
    std::string dir() const { return dir_; }

private:
    std::string dir_;
};

}  // namespace bmi::test
