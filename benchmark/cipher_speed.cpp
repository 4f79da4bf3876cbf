// SPDX-License-Identifier: LGPL-2.1-or-later
// The record ciphers' own speed on this machine (issue 39): bytes per second one core seals and
// opens with each cipher libbmi can choose, through the RecordCipher its tcp records use
// (in place, a 4-byte header authenticated, a 16-byte tag), so the figures are the ceiling the
// cipher puts on an encrypted connection whatever the network.
//
//   cipher_speed [--seconds S] [--record BYTES]
//
// Prints one row per cipher and the table's '# done' line; a cipher this CPU cannot run (AES-GCM
// without AES-NI) gets a row saying so.
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support/keys/record_cipher.hpp"

using Clock = std::chrono::steady_clock;
namespace keys = bmi::support::keys;

namespace {

constexpr std::size_t header_size = 4;  // the tcp record header (methods/tcp/tcp_records.hpp)
constexpr std::size_t max_record = 64 * 1024;

struct Plan {
    double seconds = 1.0;
    std::size_t record = max_record;
};

int usage(std::FILE* to) {
    std::fprintf(to, "usage: cipher_speed [--seconds S] [--record BYTES]\n"
                     "  --seconds S      time per cipher and direction, 0.01..60 (default 1)\n"
                     "  --record BYTES   plaintext bytes per record, 1..65536 (default 65536)\n");
    return 2;
}

// Fills plan from argv; 0, or the exit code after a message.
int parse(int argc, char** argv, Plan& plan) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--help") return usage(stdout), -1;
        if (i + 1 >= argc) return usage(stderr);
        const char* v = argv[++i];
        char* end = nullptr;
        if (a == "--seconds") {
            plan.seconds = std::strtod(v, &end);
            if (*end != '\0' || !(plan.seconds >= 0.01 && plan.seconds <= 60)) {
                std::fprintf(stderr, "cipher_speed: --seconds %s out of range\n", v);
                return 2;
            }
        } else if (a == "--record") {
            const unsigned long long n = std::strtoull(v, &end, 10);
            if (*end != '\0' || *v == '-' || n < 1 || n > max_record) {
                std::fprintf(stderr, "cipher_speed: --record %s out of range\n", v);
                return 2;
            }
            plan.record = static_cast<std::size_t>(n);
        } else {
            std::fprintf(stderr, "cipher_speed: bad argument %s\n", a.c_str());
            return usage(stderr);
        }
    }
    return 0;
}

struct Speed {
    double seal_bps = 0;
    double open_bps = 0;
    std::uint64_t records = 0;
};

// Seals records for plan.seconds (the clock read once per batch of 64), then opens records for
// as long with a second RecordCipher on the same key, as the peer would. Only the opens are
// timed in the second half: a third cipher, counting nonces as the opener does, seals each batch
// for it. False if a record fails to open, which would make the figures meaningless.
bool measure(keys::Cipher cipher, const Plan& plan, Speed& out) {
    keys::DirectionKey key;
    for (std::size_t i = 0; i < key.key.size(); ++i) key.key[i] = static_cast<std::uint8_t>(i * 7);
    for (std::size_t i = 0; i < key.iv.size(); ++i) key.iv[i] = static_cast<std::uint8_t>(i * 13);
    keys::RecordCipher sealer(cipher, key, keys::default_rekey_interval);
    keys::RecordCipher opener(cipher, key, keys::default_rekey_interval);
    constexpr int batch = 64;
    std::vector<std::uint8_t> header(header_size, 0x5a);
    std::vector<std::vector<std::uint8_t>> data(batch, std::vector<std::uint8_t>(plan.record, 1));
    std::vector<std::array<std::uint8_t, keys::record_tag_size>> tags(batch);

    const auto budget = std::chrono::duration<double>(plan.seconds);
    auto start = Clock::now();
    std::uint64_t sealed = 0;
    do {
        for (int i = 0; i < batch; ++i) sealer.seal(header, data[i], tags[i]);
        sealed += batch;
    } while (Clock::now() - start < budget);
    out.seal_bps = static_cast<double>(sealed * plan.record) /
                   std::chrono::duration<double>(Clock::now() - start).count();
    out.records = sealed;
    if (sealer.failed()) return false;

    keys::RecordCipher resealer(cipher, key, keys::default_rekey_interval);
    std::chrono::duration<double> opening{0};
    std::uint64_t opened = 0;
    while (opening < budget) {
        for (int i = 0; i < batch; ++i) resealer.seal(header, data[i], tags[i]);
        const auto t = Clock::now();
        for (int i = 0; i < batch; ++i)
            if (!opener.open(header, data[i], tags[i])) return false;
        opening += Clock::now() - t;
        opened += batch;
    }
    out.open_bps = static_cast<double>(opened * plan.record) / opening.count();
    return true;
}

const char* name_of(keys::Cipher c) {
    return c == keys::Cipher::aes256gcm ? "aes256gcm" : "chacha20poly1305";
}

}  // namespace

int main(int argc, char** argv) {
    Plan plan;
    if (const int rc = parse(argc, argv, plan); rc != 0) return rc < 0 ? 0 : rc;
    std::printf("# cipher_speed: one core, %zu-byte records in place, %zu-byte header, %g s each\n",
                plan.record, header_size, plan.seconds);
    std::printf("%-18s %14s %14s %12s\n", "# cipher", "seal_MBps", "open_MBps", "records");
    int rc = 0;
    for (auto c : {keys::Cipher::aes256gcm, keys::Cipher::chacha20poly1305}) {
        if (!keys::cipher_available(c)) {
            std::printf("%-18s %14s %14s %12s\n", name_of(c), "n/a", "n/a", "0");
            continue;
        }
        Speed s;
        if (!measure(c, plan, s)) {
            std::fprintf(stderr, "cipher_speed: %s: a sealed record did not open\n", name_of(c));
            rc = 1;
            continue;
        }
        std::printf("%-18s %14.1f %14.1f %12llu\n", name_of(c), s.seal_bps / 1e6, s.open_bps / 1e6,
                    static_cast<unsigned long long>(s.records));
    }
    std::printf("# done: MB = 10^6 bytes of plaintext per second, one thread\n");
    return rc;
}
