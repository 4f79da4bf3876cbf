// SPDX-License-Identifier: LGPL-2.1-or-later
// Instance life cycle, method activation, posting, cancelling and the Sink callbacks.
#include "bmi/core/instance.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "bmi/core/instance_slot.hpp"
#include "bmi/core/list_io_emulation.hpp"
#include "bmi/core/op_cache.hpp"
#include "methods/method_table.hpp"
#include "support/logging/log.hpp"
#include "support/method_address/method_address.hpp"

namespace bmi::core {

namespace {
// Every unexpected message costs this much beyond its payload (the record, the allocation):
// with it the quota bounds the count of messages as well as their bytes.
constexpr bmi_size_t unexpected_overhead = 256;
}  // namespace


Instance::Instance(int& error) : wait_point_(error) {}

int Instance::create(const InitParams& params, std::unique_ptr<Instance>& out) {
    int error = 0;
    std::unique_ptr<Instance> instance(new Instance(error));
    if (error != 0) return error;
    instance->flags_ = params.flags;
    instance->dialect_ = params.dialect;
    // Every setting, read once; the log already names each bad one.
    if (instance->settings_.load(params.options) < 0) return -BMI_EINVAL;
    instance->unexpected_quota_ = instance->settings_.number(support::SettingId::unexpected_quota);
    // A peer's share; 0 means an eighth of the quota, never less than a few full-size messages.
    instance->unexpected_peer_share_ =
        instance->settings_.number(support::SettingId::unexpected_peer_quota);
    if (instance->unexpected_peer_share_ == 0)
        instance->unexpected_peer_share_ =
            std::max<bmi_size_t>(instance->unexpected_quota_ / 8, 64 << 10);
    instance->emulate_lists_ = instance->settings_.flag(support::SettingId::emulate_lists);
    if (int rc = instance->take_allocation(params.allocation); rc != 0) return rc;

    auto methods = method::compiled_methods();
    auto wanted = support::split_address_list(params.method_list);
    for (std::size_t i = 0; i < methods.size(); ++i) {
        auto slot = std::make_unique<MethodSlot>();
        slot->descriptor = &methods[i];
        slot->index = static_cast<int>(i);
        slot->allowed = wanted.empty();
        slot->sink = std::make_unique<SlotSink>(*instance, slot->index);
        instance->slots_.push_back(std::move(slot));
    }
    for (auto name : wanted) {
        const method::Descriptor* d = method::find_method(name);
        if (d == nullptr) {
            BMI_LOG(error, "BMI_initialize: method '%.*s' is not compiled in",
                    static_cast<int>(name.size()), name.data());
            return -BMI_ENOPROTOOPT;
        }
        instance->slots_[static_cast<std::size_t>(d - methods.data())]->allowed = true;
    }

    for (auto listen : support::split_address_list(params.listen)) {
        auto parts = support::split_scheme(listen);
        if (!parts) return -BMI_EINVAL;
        int rc = 0;
        MethodSlot* slot = instance->slot_for_scheme(parts->scheme, rc);
        if (slot == nullptr) return rc;
        if (slot->active.load()) return -BMI_EINVAL;  // two listen addresses for one method
        // Listening on ib:// answers ib:// for the listen address too (BMI_GET_METH_ADDR).
        slot->listen_scheme = std::string(parts->scheme);
        rc = instance->activate(slot->index,
                                instance->method_config(*slot, method::canonical_address(listen)));
        if (rc != 0) return rc;
    }
    if (int rc = instance->start_allocated_methods(); rc != 0) return rc;
    if ((params.flags & BMI_INIT_SERVER) && params.listen.empty() && !instance->allocated_)
        return -BMI_EINVAL;
    BMI_LOG(control, "initialized: methods '%s' listen '%s' flags %d",
            params.method_list.c_str(), params.listen.c_str(), params.flags);
    out = std::move(instance);
    return 0;
}

Instance::~Instance() {
    cancel_pending([](const method::Operation&) { return true; });
    direct_index_.store(-1);
    wait_point_.set_direct(-1);
    for (auto& slot : slots_) {
        if (!slot->active.load()) continue;
        support::MutexLock lock(slot->lock);
        wait_point_.remove_fd(slot->method->wait_fd());
        slot->method.reset();
    }
    std::vector<method::Operation*> leftovers;
    {
        support::MutexLock lock(state_mutex_);
        for (auto& context : contexts_) {
            while (!context.completed.empty()) {
                auto& op = context.completed.front();
                context.completed.pop_front();
                leftovers.push_back(&op);
            }
        }
        // A method that broke its contract and kept ops pending: reclaim them anyway.
        while (!pending_.empty()) {
            leftovers.push_back(&pending_.front());
            pending_.pop_front();
        }
        for (auto& [buffer, charge] : unexpected_owned_) std::free(buffer);
        unexpected_owned_.clear();
        unexpected_by_peer_.clear();
        unexpected_.clear();
    }
    for (auto* op : leftovers) free_op(op);
    BMI_LOG(control, "finalized");
}

method::Config Instance::method_config(const MethodSlot& slot, std::string_view listen) const {
    method::Config config;
    config.listen_address = std::string(listen);
    config.flags = flags_;
    config.dialect = dialect_;
    config.unexpected_limit = settings_.number(support::SettingId::unexpected_limit);
    config.settings = settings_;
    config.key = key_;
    config.allocated = allocated_;
    for (const auto& plane : planes_)
        if (support::planes::to_string(plane.type) == slot.descriptor->scheme)
            config.planes.push_back(plane);
    return config;
}

int Instance::activate(int index, const method::Config& config) {
    support::MutexLock activation(activation_mutex_);
    MethodSlot& slot = *slots_[static_cast<std::size_t>(index)];
    if (slot.active.load()) return 0;
    std::unique_ptr<method::Method> created;
    int rc = slot.descriptor->create(config, *slot.sink, created);
    if (rc != 0) {
        BMI_LOG(error, "%.*s: start failed (%d)", static_cast<int>(slot.descriptor->name.size()),
                slot.descriptor->name.data(), rc);
        return rc;
    }
    bool first = true;
    for (auto& other : slots_) first = first && !other->active.load();
    {
        support::MutexLock lock(slot.lock);
        slot.method = std::move(created);
        slot.native_lists = slot.method->native_lists() && !emulate_lists_;
        if (trusted_) (void)slot.method->set_info(nullptr, method::info_trusted_sources, &*trusted_);
        rc = wait_point_.add_fd(slot.method->wait_fd());
        if (rc != 0) {
            slot.method.reset();
            return rc;
        }
        // One method alone: sleep on its own epoll set (no nesting, one epoll_wait per
        // wake-up). A second method brings back the shared set, which holds every fd.
        // Both of our fds must be in the method's set: without the timerfd a sleep there
        // would never time out.
        if (first && slot.method->accept_wake_fd(wait_point_.wake_fd(), WaitPoint::wake_tag) &&
            slot.method->accept_wake_fd(wait_point_.timer_fd(), WaitPoint::timer_tag)) {
            direct_index_.store(index);
            wait_point_.set_direct(slot.method->wait_fd());
        } else if (!first) {
            direct_index_.store(-1);
            wait_point_.set_direct(-1);
        }
    }
    {
        support::MutexLock lock(state_mutex_);
        if (!methods_string_.empty()) methods_string_ += ',';
        methods_string_ += slot.descriptor->name;
    }
    slot.active.store(true);
    return 0;
}

Instance::MethodSlot* Instance::slot_for_scheme(std::string_view scheme, int& error) {
    for (auto& slot : slots_) {
        if (slot->descriptor->scheme != scheme &&
            (slot->descriptor->alias_scheme.empty() || slot->descriptor->alias_scheme != scheme))
            continue;
        if (!slot->allowed) {
            error = -BMI_ENOPROTOOPT;
            return nullptr;
        }
        return slot.get();
    }
    error = -BMI_ENOPROTOOPT;
    return nullptr;
}

int Instance::open_context(bmi_context_id& out) {
    support::MutexLock lock(state_mutex_);
    for (int i = 0; i < max_contexts; ++i) {
        if (contexts_[static_cast<std::size_t>(i)].open) continue;
        contexts_[static_cast<std::size_t>(i)].open = true;
        out = i;
        return 0;
    }
    return -BMI_EBUSY;
}

int Instance::close_context(bmi_context_id context) {
    {
        support::MutexLock lock(state_mutex_);
        if (!context_valid_locked(context)) return -BMI_EINVAL;
    }
    cancel_pending([context](const method::Operation& op) { return op.context == context; });
    std::vector<method::Operation*> done;
    {
        support::MutexLock lock(state_mutex_);
        auto& queue = contexts_[static_cast<std::size_t>(context)].completed;
        while (!queue.empty()) {
            auto& op = queue.front();
            queue.pop_front();
            op_ids_.erase(op.id);
            done.push_back(&op);
        }
        contexts_[static_cast<std::size_t>(context)].open = false;
    }
    for (auto* op : done) free_op(op);
    return 0;
}

bool Instance::context_valid_locked(bmi_context_id context) const {
    return context >= 0 && context < max_contexts &&
           contexts_[static_cast<std::size_t>(context)].open;
}

int Instance::post(const PostRequest& request, bmi_op_id_t& id, bmi_size_t* actual_size) {
    note_caller();
    const bool is_list = request.list_count > 0;
    const bool is_recv = request.kind == method::OpKind::recv;
    if (request.size < 0) return -BMI_EINVAL;
    if (!is_list && request.buffer == nullptr && request.size > 0) return -BMI_EINVAL;
    if (is_list && list_total(request.list, request.sizes, request.list_count) != request.size)
        return -BMI_EINVAL;

    // An op needs an id only while it is pending. A receive almost always stays pending, so
    // it is registered together with the address lookup; a send usually leaves during the
    // call, so it gets an op and an id only if it did not (see below).
    OpPtr op;
    if (is_recv) {
        op.reset(OpCache::take());
        fill_request(*op, request);
    }
    std::shared_ptr<method::Peer> peer;
    int method_index;
    // Read the id only where nobody else can have the op yet: once it completed and was
    // queued, another thread's testcontext may reap and free it at any moment.
    bmi_op_id_t new_id = 0;
    // The fast path carries no class: a classed unexpected send goes through post(). OrangeFS
    // sends every request and reply as a list, mostly of one or two buffers.
    const bool try_now = !is_recv && request.msg_class == 0 &&
                         request.list_count <= static_cast<int>(method::send_now_segments);
    {
        support::MutexLock lock(state_mutex_);
        if (!context_valid_locked(request.context)) return -BMI_EINVAL;
        AddressEntry* entry = addresses_.find(request.addr);
        if (entry == nullptr) return -BMI_EINVAL;
        method_index = entry->method_index;
        if (try_now) {
            // A small contiguous send: let the method try to send it before any operation
            // exists, which is most of what a request costs a PVFS client. While we hold the
            // state lock the address entry keeps the peer alive, so the peer is not copied;
            // the method lock is only tried (progress takes it before the state lock), and
            // a busy method sends the usual way.
            MethodSlot& slot = *slots_[static_cast<std::size_t>(method_index)];
            if (slot.lock.try_lock()) {
                std::array<method::Segment, method::send_now_segments> segments;
                std::size_t count = 1;
                if (is_list) {
                    count = static_cast<std::size_t>(request.list_count);
                    for (std::size_t i = 0; i < count; ++i)
                        segments[i] = {const_cast<void*>(request.list[i]), request.sizes[i]};
                } else {
                    segments[0] = {request.buffer, request.size};
                }
                int rc = slot.method->send_now(*entry->peer, request.kind, request.tag,
                                               {segments.data(), count});
                slot.lock.unlock();
                if (rc != 0) {
                    if (rc == 1) id = 0;
                    return rc;
                }
            }
        }
        peer = entry->peer;
        if (is_recv) {
            op->method_index = method_index;  // everything cancel_pending reads is set
            new_id = op->id = op_ids_.insert(op.get());
            pending_.push_back(*op);
        }
    }
    MethodSlot& slot = *slots_[static_cast<std::size_t>(method_index)];

    if (!is_recv) {
        op.reset(OpCache::take());
        fill_request(*op, request);
        op->method_index = method_index;
    }
    method::Operation* raw = op.release();
    raw->peer_ref = std::move(peer);
    raw->peer = raw->peer_ref.get();
    int rc = fill_lists(*raw, request, slot.native_lists);

    // Registering a send while the method lock is still held keeps every other thread's
    // progress from completing it before it has an id; a completion reported during post()
    // itself finds id 0 and is queued here instead (on_complete).
    bool completed_early = false, orphan = false;
    if (rc == 0) {
        support::MutexLock method_lock(slot.lock);
        rc = slot.method->post(*raw);
        if (rc == 0 && !is_recv) {
            support::MutexLock lock(state_mutex_);
            new_id = raw->id = op_ids_.insert(raw);
            completed_early = raw->completed;
            if (!completed_early)
                pending_.push_back(*raw);
            else
                orphan = !queue_completed_locked(*raw);
        }
    }
    if (rc == 0) {
        id = new_id;
        if (orphan)
            free_op(raw);  // its context closed meanwhile; testing the id finds nothing
        else if (completed_early)
            wait_point_.signal();
        return 0;
    }
    if (is_recv) {
        support::MutexLock lock(state_mutex_);
        pending_.erase(pending_.iterator_to(*raw));
        op_ids_.erase(new_id);
    }
    if (rc == 1 && raw->bounce != nullptr && is_recv)
        unpack_list(raw->bounce, raw->actual_size, raw->user_list, raw->user_sizes,
                    raw->user_count);
    if (rc == 1 && actual_size != nullptr) *actual_size = raw->actual_size;
    free_op(raw);
    if (rc == 1) id = 0;
    return rc;
}

void Instance::fill_request(method::Operation& op, const PostRequest& request) {
    op.kind = request.kind;
    op.tag = request.tag;
    op.msg_class = request.msg_class;
    op.total_size = request.size;
    op.user_ptr = request.user_ptr;
    op.context = request.context;
    op.single = {request.buffer, request.size};
    op.segments = &op.single;
    op.segment_count = 1;
}

int Instance::fill_lists(method::Operation& op, const PostRequest& request, bool native_lists) {
    if (request.list_count == 0) return 0;
    if (native_lists) {
        op.segment_storage = std::make_unique<method::Segment[]>(
            static_cast<std::size_t>(request.list_count));
        for (int i = 0; i < request.list_count; ++i)
            op.segment_storage[static_cast<std::size_t>(i)] = {
                const_cast<void*>(request.list[i]), request.sizes[i]};
        op.segments = op.segment_storage.get();
        op.segment_count = request.list_count;
        return 0;
    }
    op.bounce = request.kind == method::OpKind::recv
                    ? std::malloc(static_cast<std::size_t>(request.size > 0 ? request.size : 1))
                    : pack_list(request.list, request.sizes, request.list_count, request.size);
    if (op.bounce == nullptr) return -BMI_ENOMEM;
    op.single = {op.bounce, request.size};
    op.user_list = request.list;
    op.user_sizes = request.sizes;
    op.user_count = request.list_count;
    return 0;
}

int Instance::cancel(bmi_op_id_t id, bmi_context_id context) {
    note_caller();
    int index;
    {
        support::MutexLock lock(state_mutex_);
        method::Operation* op = find_op_locked(id, context);
        if (op == nullptr) return -BMI_EINVAL;
        if (op->completed) return 0;
        index = op->method_index;
    }
    MethodSlot& slot = *slots_[static_cast<std::size_t>(index)];
    support::MutexLock method_lock(slot.lock);
    method::Operation* op;
    {
        // Look again: it may have completed and been reaped while we took the method lock.
        // Holding that lock now keeps it from completing under us.
        support::MutexLock lock(state_mutex_);
        op = find_op_locked(id, context);
        if (op == nullptr || op->completed) return 0;
        op->cancel_requested = true;
    }
    slot.method->cancel(*op);
    return 0;
}

template <class Pick>
void Instance::cancel_pending(Pick&& pick) {
    for (auto& slot : slots_) {
        if (!slot->active.load()) continue;
        support::MutexLock method_lock(slot->lock);
        std::vector<method::Operation*> victims;
        {
            support::MutexLock lock(state_mutex_);
            for (auto& op : pending_)
                if (op.method_index == slot->index && pick(op)) victims.push_back(&op);
        }
        for (auto* op : victims) slot->method->cancel(*op);
    }
}

method::Operation* Instance::find_op_locked(bmi_op_id_t id, bmi_context_id context) {
    auto* op = static_cast<method::Operation*>(op_ids_.find(id));
    if (op == nullptr || op->context != context) return nullptr;
    return op;
}

void Instance::free_op(method::Operation* op) {
    std::free(op->bounce);
    OpCache::give(op);
}

// --- Sink callbacks -------------------------------------------------------------------------

void Instance::on_complete(method::Operation& op, int error) {
    // A failed operation moved no message the caller may use, whatever the method counted.
    if (error != 0) op.actual_size = 0;
    if (error == 0 && op.bounce != nullptr && op.kind == method::OpKind::recv)
        unpack_list(op.bounce, op.actual_size, op.user_list, op.user_sizes, op.user_count);
    bool orphan;
    {
        support::MutexLock lock(state_mutex_);
        if (op.completed) return;  // a method reporting twice must not corrupt the queues
        op.error = error;
        op.completed = true;
        if (op.id == 0) return;  // still inside post(), which queues it
        if (op.core_hook.is_linked()) pending_.erase(pending_.iterator_to(op));
        orphan = !queue_completed_locked(op);
    }
    if (orphan) {
        free_op(&op);
        return;
    }
    wait_point_.signal();
}

bool Instance::queue_completed_locked(method::Operation& op) {
    auto& context = contexts_[static_cast<std::size_t>(op.context)];
    if (!context.open) {
        op_ids_.erase(op.id);
        return false;
    }
    context.completed.push_back(op);
    return true;
}

BMI_addr_t Instance::on_register_peer(int method_index,
                                      const std::shared_ptr<method::Peer>& peer) {
    support::MutexLock lock(state_mutex_);
    if (peer->addr() != 0 && addresses_.find(peer->addr()) != nullptr) return peer->addr();
    return addresses_.add(method_index, peer, "").addr;
}

void* Instance::on_alloc_unexpected(const method::Peer& peer, bmi_size_t size) {
    support::MutexLock lock(state_mutex_);
    if (size < 0) return nullptr;
    // The fixed part makes a stream of empty messages as bounded as one of full ones.
    const bmi_size_t cost = size + unexpected_overhead;
    if (unexpected_bytes_ + cost > unexpected_quota_) {
        // Backpressure is right, but a server whose application never frees unexpected buffers
        // hangs with it: say so once, without BMI_DEBUG (the method retries every progress call).
        if (!quota_warned_)
            BMI_WARN("unexpected-message quota full (%lld of %lld bytes not yet returned by "
                     "BMI_unexpected_free): a peer's unexpected messages wait in the network "
                     "until memory is freed; raise the quota with BMI_UNEXPECTED_QUOTA=BYTES or "
                     "the unexpected_quota= option of BMI_initialize",
                     static_cast<long long>(unexpected_bytes_),
                     static_cast<long long>(unexpected_quota_));
        quota_warned_ = true;
        return nullptr;
    }
    // One peer cannot crowd every other out of the quota: past its share it waits too.
    auto held = unexpected_by_peer_.find(peer.serial());
    if (held != unexpected_by_peer_.end() && held->second + cost > unexpected_peer_share_)
        return nullptr;
    void* buffer = std::malloc(static_cast<std::size_t>(size > 0 ? size : 1));
    if (buffer == nullptr) return nullptr;
    unexpected_bytes_ += cost;
    unexpected_by_peer_[peer.serial()] += cost;
    unexpected_owned_.emplace(buffer, UnexpectedCharge{cost, peer.serial()});
    return buffer;
}

bool Instance::uncharge_unexpected(void* buffer) {
    auto it = unexpected_owned_.find(buffer);
    if (it == unexpected_owned_.end()) return false;
    unexpected_bytes_ -= it->second.cost;
    auto held = unexpected_by_peer_.find(it->second.peer_serial);
    if (held != unexpected_by_peer_.end() && (held->second -= it->second.cost) <= 0)
        unexpected_by_peer_.erase(held);
    unexpected_owned_.erase(it);
    return true;
}

void Instance::on_deliver_unexpected(int method_index, const std::shared_ptr<method::Peer>& peer,
                                     void* buffer, bmi_size_t size, bmi_msg_tag_t tag,
                                     std::uint8_t msg_class) {
    {
        support::MutexLock lock(state_mutex_);
        AddressEntry* entry = peer->addr() == 0 ? nullptr : addresses_.find(peer->addr());
        if (entry == nullptr) entry = &addresses_.add(method_index, peer, "");
        ++entry->unreported_unexpected;
        unexpected_.push_back(UnexpectedMessage{0, entry->addr, buffer, size, tag, msg_class});
        ++unexpected_arrivals_;
    }
    wait_point_.signal();
}

}  // namespace bmi::core
