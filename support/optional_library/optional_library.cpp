// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/optional_library/optional_library.hpp"

#include <dlfcn.h>

#include <utility>

namespace bmi::support {

OptionalLibrary::OptionalLibrary(std::vector<std::string> files) : files_(std::move(files)) {}

bool OptionalLibrary::open() {
    std::call_once(opened_, [this] {
        std::string tried;
        for (const std::string& file : files_) {
            // RTLD_LOCAL: the library's symbols serve libbmi's tables only and never interpose
            // on an application that loads its own copy.
            handle_ = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (handle_ != nullptr) return;
            const char* why = dlerror();
            tried += (tried.empty() ? "" : "; ") + std::string(why != nullptr ? why : file);
        }
        error_ = tried.empty() ? name() + ": no file to open" : tried;
    });
    return handle_ != nullptr;
}

void* OptionalLibrary::symbol(const char* name) {
    if (handle_ == nullptr) return nullptr;
    void* address = dlsym(handle_, name);
    if (address == nullptr)
        error_ += (error_.empty() ? this->name() + ": lacks " : ", ") + std::string(name);
    return address;
}

}  // namespace bmi::support
