// SPDX-License-Identifier: LGPL-2.1-or-later
// Private pieces of Instance shared by its .cpp files: a method slot and the Sink it hands to
// its method. Not part of any public interface.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "bmi/core/instance.hpp"
#include "support/sync/mutex.hpp"

namespace bmi::core {

class Instance::SlotSink final : public method::Sink {
public:
    SlotSink(Instance& instance, int index) : instance_(instance), index_(index) {}

    void complete(method::Operation& op, int error) override { instance_.on_complete(op, error); }
    BMI_addr_t register_peer(const std::shared_ptr<method::Peer>& peer) override {
        return instance_.on_register_peer(index_, peer);
    }
    void* alloc_unexpected(const method::Peer& peer, bmi_size_t size) override {
        return instance_.on_alloc_unexpected(peer, size);
    }
    void deliver_unexpected(const std::shared_ptr<method::Peer>& peer, void* buffer,
                            bmi_size_t size, bmi_msg_tag_t tag,
                            std::uint8_t msg_class) override {
        instance_.on_deliver_unexpected(index_, peer, buffer, size, tag, msg_class);
    }
    void peer_gone(const method::Peer& peer) override { instance_.on_peer_gone(peer); }

private:
    Instance& instance_;
    int index_;
};

struct Instance::MethodSlot {
    const method::Descriptor* descriptor = nullptr;
    int index = 0;
    bool allowed = false;            // named in BMI_initialize's method list (or list empty)
    std::atomic<bool> active{false}; // method created; set once, never cleared before teardown
    support::Mutex lock;             // held around every call into method
    std::unique_ptr<method::Method> method BMI_PT_GUARDED_BY(lock);
    std::unique_ptr<SlotSink> sink;
    bool native_lists = false;
    std::string listen_scheme;       // the listen address's scheme as given (alias or own)
};

}  // namespace bmi::core
