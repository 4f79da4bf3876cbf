// SPDX-License-Identifier: LGPL-2.1-or-later
#include "support/optional_library/optional_library.hpp"

#include <dlfcn.h>

#include <utility>

#include "support/logging/log.hpp"
#include "support/optional_library/kept_signal_handlers.hpp"

namespace bmi::support {

OptionalLibrary::OptionalLibrary(std::vector<std::string> files) : files_(std::move(files)) {}

bool OptionalLibrary::open() {
    std::call_once(opened_, [this] {
        KeptSignalHandlers handlers;
        std::string tried;
        for (const std::string& file : files_) {
            // RTLD_LOCAL: the library's symbols serve libbmi's tables only and never interpose
            // on an application that loads its own copy.
            handle_ = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
            if (handle_ != nullptr) break;
            const char* why = dlerror();
            tried += (tried.empty() ? "" : "; ") + std::string(why != nullptr ? why : file);
        }
        const sigset_t taken = handlers.restore();
        if (sigisemptyset(&taken) == 0)
            BMI_LOG(control, "loading %s set handlers for %s; the application's are kept",
                    name().c_str(), signal_names(taken).c_str());
        if (handle_ == nullptr) error_ = tried.empty() ? name() + ": no file to open" : tried;
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
