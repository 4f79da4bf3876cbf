// SPDX-License-Identifier: LGPL-2.1-or-later
// BMI_TRUSTED_CONNECTION (doc/security.md, "Trusted connections"). Its argument is OrangeFS's
// server configuration, whose layout only OrangeFS knows; OrangeFS's own accessors read it. They
// are weak references: a process that defines them (OrangeFS's server and clients, which link
// server-config.c) binds them at load time, any other process leaves them null and the option
// answers -BMI_ENOSYS. Only OrangeFS's server sets the option; its clients bind their source
// port instead, which libbmi's tcp does for them (tcp_source_ports.hpp).
#include "bmi/core/method_set.hpp"

#include <atomic>
#include <string>

#include "support/keys/trusted_sources.hpp"
#include "support/logging/log.hpp"

struct server_configuration_s;

extern "C" {
// server-config.h of OrangeFS built with --enable-trusted-connections.
[[gnu::weak]] int PINT_config_get_allowed_ports(server_configuration_s* config, int* enabled,
                                                unsigned long* allowed_ports);
[[gnu::weak]] int PINT_config_get_allowed_networks(server_configuration_s* config, int* enabled,
                                                   int* count, char*** networks, int** masks);
}

namespace bmi::core {

bool orangefs_trusted_build() {
    return PINT_config_get_allowed_ports != nullptr && PINT_config_get_allowed_networks != nullptr;
}

namespace {
int read_trusted_sources(void* config, support::keys::TrustedSources& out) {
    if (!orangefs_trusted_build()) {
        // Said once: a program may set the option again (OrangeFS's server at every reload).
        static std::atomic<bool> said{false};
        if (!said.exchange(true))
            BMI_WARN("BMI_TRUSTED_CONNECTION: this process does not define OrangeFS's "
                     "PINT_config_get_allowed_ports/networks, so no source is refused; use keys "
                     "(doc/security.md)");
        return -BMI_ENOSYS;
    }
    auto* server_config = static_cast<server_configuration_s*>(config);
    int ports_enabled = 0, networks_enabled = 0, count = 0;
    unsigned long ports[2] = {0, 0};
    char** networks = nullptr;
    int* masks = nullptr;
    if (PINT_config_get_allowed_ports(server_config, &ports_enabled, ports) != 0 ||
        PINT_config_get_allowed_networks(server_config, &networks_enabled, &count, &networks,
                                         &masks) != 0) {
        BMI_WARN("BMI_TRUSTED_CONNECTION: OrangeFS's configuration could not be read");
        return -BMI_EINVAL;
    }
    std::string error;
    const int rc = support::keys::make_trusted_sources(ports_enabled, ports, networks_enabled,
                                                       count, networks, masks, out, error);
    // OrangeFS ignores what this option returns: the warning is what an operator sees.
    if (rc != 0)
        BMI_WARN("BMI_TRUSTED_CONNECTION: %s; the connections allowed stay as they were",
                 error.c_str());
    return rc;
}
}  // namespace

int MethodSet::trust_sources(void* config) {
    if (dialect_ != method::ApiDialect::orangefs) {
        BMI_LOG(error, "BMI_TRUSTED_CONNECTION is OrangeFS's option: use keys (doc/security.md)");
        return -BMI_ENOSYS;
    }
    if (config == nullptr) return -BMI_EINVAL;
    support::keys::TrustedSources sources;
    if (int rc = read_trusted_sources(config, sources); rc != 0) return rc;
    support::MutexLock activation(activation_mutex_);
    trusted_ = std::move(sources);
    for (auto& slot : slots_) {
        if (!slot->active.load()) continue;
        support::MutexLock lock(slot->lock);
        (void)slot->method->set_info(nullptr, method::info_trusted_sources, &*trusted_);
    }
    BMI_LOG(control, "trusted connections: %s", trusted_->text().c_str());
    return 0;
}

}  // namespace bmi::core
