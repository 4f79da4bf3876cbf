// SPDX-License-Identifier: LGPL-2.1-or-later
#include "methods/ofi/ofi_settings.hpp"

namespace bmi::method::ofi {

namespace {
using T = support::SettingType;
using I = SettingId;
using namespace support::setting_units;

// Keys and environment names follow the rule of support's rows (setting_table.cpp).
constexpr support::SettingSpec rows[] = {
    {I::eager_bytes, "ofi_eager_bytes", "BMI_OFI_EAGER_BYTES", T::size, "8K", "bytes", 1 * KiB,
     64 * KiB, "",
     "expected messages up to this size leave at once in one tagged message; larger ones wait "
     "for the receiver's clear-to-send"},
    {I::chunk_bytes, "ofi_chunk_bytes", "BMI_OFI_CHUNK_BYTES", T::size, "4M", "bytes", 64 * KiB,
     GiB, "", "a large message leaves in tagged sends of at most this size"},
    {I::recv_buffers, "ofi_recv_buffers", "BMI_OFI_RECV_BUFFERS", T::count, "64", "buffers", 4,
     4096, "",
     "receive buffers kept posted for small and control messages from every peer together"},
    {I::spin_us, "ofi_spin_us", "BMI_OFI_SPIN_US", T::count, "20", "us", 0, 10'000, "",
     "a provider without a wait descriptor (shm): how long a test call polls before it naps; "
     "0 = nap at once"},
    {I::nap_us, "ofi_nap_us", "BMI_OFI_NAP_US", T::count, "1000", "us", 50, 1'000'000, "",
     "a provider without a wait descriptor (shm): the longest nap between polls of an idle "
     "instance (naps start at 50 us and double while nothing comes)"},
};
constexpr support::OwnedRows owned{rows, I::nap_us};
}  // namespace

std::span<const support::SettingSpec> setting_rows() { return owned.all(); }

const support::SettingSpec& setting_spec(SettingId id) { return owned[id]; }

}  // namespace bmi::method::ofi
