// SPDX-License-Identifier: LGPL-2.1-or-later
// bmi-info: which methods this libbmi has, whether each works here, its limits, the addresses
// a server would listen on, the RDMA devices, libfabric's providers, the planes and the settings
// every method reads.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "bmi.h"
#include "bmi/tools/bmi_info_fabric.hpp"
#include "bmi/tools/bmi_info_planes.hpp"
#include "bmi/tools/bmi_info_rdma.hpp"
#include "bmi/tools/bmi_info_settings.hpp"
#include "methods/method_table.hpp"
#include "support/keys/traffic_keys.hpp"
#include "support/settings/settings.hpp"

namespace {

// What bmi-info says about a method beyond what the library reports. A method not listed
// here still appears, from the method table, with pointers to its documentation. Its
// settings come from the settings table (support/settings/).
struct MethodNotes {
    std::string_view scheme;
    std::string_view probe_listen;  // a listen address for the server probe; "" = none
    std::string_view eager;
};

constexpr MethodNotes method_notes[] = {
    {"tcp", "tcp://127.0.0.1:0",
     "64 KiB eager between libbmi peers (16 KiB with legacy OrangeFS peers); larger messages "
     "go RTS/CTS and stream into the posted buffer"},
    {"shm", "shm://bmi-info-probe",
     "inline through the ring up to 16 KiB (at most half a ring); larger messages either "
     "copied by both processes at once, straight between the buffers "
     "(process_vm_readv/writev), or streamed through the ring, whichever the receiver has "
     "timed faster for that size; two copies through the ring where the kernel refuses "
     "cross-memory attach; BMI_memalloc buffers are mapped by both processes and copied "
     "with memcpy"},
    {"verbs", "verbs://127.0.0.1:0",
     "eager SENDs into the shared receive queue up to 16 KiB, credit-based (16 per peer); "
     "larger messages by RDMA READ of the sender's registered buffers (RTS, READ, FIN)"},
    {"ofi", "ofi+tcp://127.0.0.1:0",
     "one tagged send up to ofi_eager_bytes (8 KiB); larger messages announced (RTS) and "
     "sent in tagged chunks of ofi_chunk_bytes once the receiver has posted them (CTS)"},
};

const MethodNotes* notes_for(std::string_view scheme) {
    for (const auto& n : method_notes)
        if (n.scheme == scheme) return &n;
    return nullptr;
}

int usage(std::ostream& out, int code) {
    out << "usage: bmi-info [--method NAME] [--options OPTIONS] [--markdown]\n"
           "  Lists the methods compiled into libbmi and whether each can start here, their\n"
           "  limits (eager, unexpected, maximum message size), the addresses a server would\n"
           "  listen on, RDMA devices and ports, libfabric's providers, the planes (discovered, "
           "and named in\n"
           "  BMI_INVENTORY's file), and every setting with the value in force\n"
           "  and where it came from. --method bmi_tcp (or tcp) shows one method only.\n"
           "  --options gives BMI_initialize's option string (\"shm_ring_slots=128,...\") to\n"
           "  the probes and the settings. --markdown prints only the settings table, as\n"
           "  doc/SETTINGS.md holds it.\n"
           "  Exit status: 0 if a listed method is usable, 1 if none is, 2 on bad arguments\n"
           "  or an invalid setting.\n";
    return code;
}

std::string size_text(long long bytes) {
    if (bytes == 0x7fffffff) return "2 GiB - 1 B (the int the C API reports; maybe more)";
    if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
    if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
    return std::to_string(bytes) + " B";
}

// The host's up IPv4 and IPv6 addresses, as a tcp server could listen on them.
std::vector<std::string> host_addresses() {
    std::vector<std::string> out;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return out;
    for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
        char text[INET6_ADDRSTRLEN] = {};
        int family = i->ifa_addr->sa_family;
        if (family == AF_INET)
            inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                      sizeof(text));
        else if (family == AF_INET6)
            inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, text,
                      sizeof(text));
        else
            continue;
        // Appends rather than "[" + string: g++ 12 -O3 warns falsely (-Wrestrict) on the latter.
        std::string entry = std::string(i->ifa_name) + " ";
        if (family == AF_INET6) {
            entry.append("[").append(text).append("]");
        } else {
            entry.append(text);
        }
        out.push_back(std::move(entry));
    }
    freeifaddrs(list);
    return out;
}

void print_limits(std::ostream& out) {
    int max_size = 0, unexp = 0;
    int a = BMI_get_info(0, BMI_CHECK_MAXSIZE, &max_size);
    int b = BMI_get_info(0, BMI_GET_UNEXP_SIZE, &unexp);
    out << "  limits:   max message " << (a < 0 ? "n/a" : size_text(max_size))
        << ", unexpected messages up to " << (b < 0 ? "n/a" : size_text(unexp)) << "\n";
    BMI_unexpected_quota_use use{};
    if (BMI_get_info(0, BMI_UNEXPECTED_QUOTA_USE, &use) < 0) return;
    out << "  quota:    unexpected messages " << size_text(use.limit) << " (BMI_UNEXPECTED_QUOTA), "
        << size_text(use.used) << " in use, " << use.blocked_peers
        << " peer(s) held back in the network\n";
}

// Starts the method alone as a client, then as a server (a client instance starts its
// method only on first use, so the limits come from the server); prints what it learns.
bool probe(std::ostream& out, const bmi::method::Descriptor& d, std::string options) {
    std::string name(d.name);
    int rc = BMI_initialize(name.c_str(), nullptr, 0, options.data());
    if (rc < 0) {
        out << "  usable:   no (BMI_initialize: " << bmi_status_string(rc) << ")\n";
        return false;
    }
    BMI_finalize();
    const MethodNotes* n = notes_for(d.scheme);
    if (n == nullptr || n->probe_listen.empty()) {
        out << "  usable:   as a client (no server probe known for this method)\n";
        return true;
    }
    std::string listen(n->probe_listen);
    if (d.scheme == "shm") listen.append("-").append(std::to_string(::getpid()));
    rc = BMI_initialize(name.c_str(), listen.c_str(), BMI_INIT_SERVER, options.data());
    if (rc < 0) {
        out << "  usable:   as a client; cannot listen on " << listen << ": "
            << bmi_status_string(rc) << "\n";
        return true;
    }
    out << "  usable:   yes\n";
    print_limits(out);
    const char* addr = nullptr;
    if (BMI_get_info(0, BMI_GET_METH_ADDR, &addr) >= 0 && addr != nullptr)
        out << "  server:   listening on " << listen << " gave " << addr << "\n";
    BMI_finalize();
    return true;
}

// What the encryption setting means for this method here (doc/security.md).
void print_encryption(std::ostream& out, std::string_view scheme, const std::string& options) {
    using bmi::support::keys::Cipher;
    bmi::support::Settings settings(bmi::method::all_settings());
    settings.load(options);
    const std::string policy = settings.shown(bmi::support::SettingId::encryption);
    out << "  encrypt:  ";
    if (scheme == "shm") {
        out << "never (one user, one node: the kernel protects the rings)\n";
    } else if (scheme == "tcp" || scheme == "verbs" || scheme == "ofi") {
        const std::uint8_t ours = bmi::support::keys::ciphers_available();
        const Cipher best = bmi::support::keys::choose_cipher(ours, ours);
        out << "policy " << policy << " (encryption; prefer and require need key_file); cipher "
            << (best == Cipher::aes256gcm ? "AES-256-GCM (this CPU has AES-NI)"
                                          : "ChaCha20-Poly1305 (no AES-NI here)")
            << " where both peers run it, a new key every "
            << settings.shown(bmi::support::SettingId::encryption_rekey_records)
            << (scheme == "tcp"     ? " records of up to 64 KiB\n"
                : scheme == "verbs" ? " messages; rendezvous data sealed in 64 KiB chunks, read "
                                      "as ciphertext from a staging area\n"
                                    : " messages, each numbered; large messages sealed in 64 KiB "
                                      "chunks between staging buffers\n");
    } else {
        out << "no\n";
    }
}

void print_method(std::ostream& out, const bmi::method::Descriptor& d, const std::string& options,
                  bool& any_usable) {
    out << "\n" << d.name << " (" << d.scheme << "://)\n";
    any_usable = probe(out, d, options) || any_usable;
    const MethodNotes* n = notes_for(d.scheme);
    if (d.scheme == "tcp") {
        out << "  listen:   tcp://HOST:PORT on any of these (port 0 = any free port; "
               "OrangeFS uses 3334):\n";
        for (const auto& a : host_addresses()) out << "              " << a << "\n";
    } else if (d.scheme == "shm") {
        out << "  listen:   shm://NAME, one node only (an abstract Unix socket rendezvous, "
               "nothing in /dev/shm)\n";
    } else if (d.scheme == "ofi") {
        out << "  listen:   ofi+PROVIDER://ADDRESS, one provider per instance: "
               "ofi+tcp://HOST:PORT (tcp;ofi_rxm), ofi+verbs://HOST:PORT (verbs;ofi_rxm), "
               "ofi+shm://NAME (shm, one node: /dev/shm/NAME; polled, no wait descriptor)\n";
    }
    out << "  eager:    " << (n ? n->eager : "see doc/methods/") << "\n";
    print_encryption(out, d.scheme, options);
    out << "  settings: ";
    bmi::info::print_setting_names(out, d.scheme);
    out << " (values below)\n";
}

}  // namespace

int main(int argc, char** argv) {
    std::string only, options;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "-h" || a == "--help") return usage(std::cout, 0);
        if (a == "--markdown") {
            bmi::info::print_settings_markdown(std::cout);
            return 0;
        }
        if ((a == "--method" || a == "--options") && i + 1 < argc) {
            (a == "--method" ? only : options) = argv[++i];
            continue;
        }
        std::cerr << "bmi-info: bad argument " << a << "\n";
        return usage(std::cerr, 2);
    }
    const bmi::method::Descriptor* one = nullptr;
    if (!only.empty() && (one = bmi::method::find_method(only)) == nullptr) {
        std::cerr << "bmi-info: method " << only << " is not compiled into this libbmi\n";
        return 2;
    }
    std::cout << "libbmi methods compiled in (preference order):";
    for (const auto& d : bmi::method::compiled_methods()) std::cout << " " << d.name;
    std::cout << "\n";
    bool any_usable = false;
    for (const auto& d : bmi::method::compiled_methods())
        if (one == nullptr || one == &d) print_method(std::cout, d, options, any_usable);
    std::cout << "\nRDMA devices:\n";
    bmi::info::print_rdma_devices(std::cout);
    std::cout << "\nlibfabric providers (fi_getinfo):\n";
    bmi::info::print_fabric_providers(std::cout);
    std::cout << "\n";
    const bool planes_ok = bmi::info::print_planes(std::cout, options);
    std::cout << "\n";
    const bool allocation_ok = bmi::info::print_allocation(std::cout, options);
    std::cout << "\n";
    if (!bmi::info::print_settings(std::cout, options) || !planes_ok || !allocation_ok) return 2;
    return any_usable ? 0 : 1;
}
