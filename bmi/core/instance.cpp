// SPDX-License-Identifier: LGPL-2.1-or-later
// Instance life cycle, the Sink its methods report through, posting and cancelling.
#include "bmi/core/instance.hpp"

#include <array>
#include <cstdlib>
#include <cstring>

#include "bmi/core/list_io_emulation.hpp"
#include "bmi/core/op_cache.hpp"
#include "support/logging/log.hpp"

namespace bmi::core {

namespace {
// Copies a post's request into op (everything but the peer).
void fill_request(method::Operation& op, const PostRequest& request) {
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

// Sets up op's segments for a list post, natively or packed; 0, or -BMI_ENOMEM.
int fill_lists(method::Operation& op, const PostRequest& request, bool native_lists) {
    if (request.list_count == 0) return 0;
    if (native_lists) {
        op.segment_storage =
            std::make_unique<method::Segment[]>(static_cast<std::size_t>(request.list_count));
        for (int i = 0; i < request.list_count; ++i)
            op.segment_storage[static_cast<std::size_t>(i)] = {const_cast<void*>(request.list[i]),
                                                               request.sizes[i]};
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

// Offers a send to Method::send_now. Only a list pays for the array of segments: the
// contiguous send is the latency path of every ping-pong.
int offer_send_now(method::Method& m, method::Peer& peer, const PostRequest& request,
                   bool is_list) {
    if (!is_list) {
        const method::Segment whole{request.buffer, request.size};
        return m.send_now(peer, request.kind, request.tag, {&whole, 1});
    }
    std::array<method::Segment, method::send_now_segments> segments;
    const auto count = static_cast<std::size_t>(request.list_count);
    for (std::size_t i = 0; i < count; ++i)
        segments[i] = {const_cast<void*>(request.list[i]), request.sizes[i]};
    return m.send_now(peer, request.kind, request.tag, {segments.data(), count});
}

// Offers a send to send_now if the method's lock is free (progress takes it before the state
// lock, so it is only tried). With send_now_started the lock stays held, for PostLock.
int try_send_now(MethodSlot& slot, method::Peer& peer, const PostRequest& request,
                 bool is_list) BMI_NO_THREAD_SAFETY_ANALYSIS {
    if (!slot.lock.try_lock()) return 0;
    const int rc = offer_send_now(*slot.method, peer, request, is_list);
    if (rc != method::Method::send_now_started) slot.lock.unlock();
    return rc;
}

void release_started(MethodSlot& slot) BMI_NO_THREAD_SAFETY_ANALYSIS { slot.lock.unlock(); }

// The method's lock around post(): taken here, or still held since send_now started the send,
// so that no other call into the method comes between the two.
class BMI_SCOPED_CAPABILITY PostLock {
public:
    PostLock(support::Mutex& mutex, bool held) BMI_ACQUIRE(mutex) BMI_NO_THREAD_SAFETY_ANALYSIS
        : mutex_(mutex) {
        if (!held) mutex_.lock();
    }
    ~PostLock() BMI_RELEASE() { mutex_.unlock(); }
    PostLock(const PostLock&) = delete;
    PostLock& operator=(const PostLock&) = delete;

private:
    support::Mutex& mutex_;
};

}  // namespace

// What a method reports goes to the part it concerns; whatever a waiter may want wakes it.
class Instance::SlotSink final : public method::Sink {
public:
    SlotSink(Instance& instance, int index) : instance_(instance), index_(index) {}

    void complete(method::Operation& op, int error) override {
        if (instance_.ops_.complete(op, error)) instance_.wait_point_.signal();
    }
    BMI_addr_t register_peer(const std::shared_ptr<method::Peer>& peer) override {
        return instance_.addresses_.register_peer(index_, peer);
    }
    void* alloc_unexpected(const method::Peer& peer, bmi_size_t size) override {
        return instance_.inbox_.allocate(peer, size);
    }
    void deliver_unexpected(const std::shared_ptr<method::Peer>& peer, void* buffer,
                            bmi_size_t size, bmi_msg_tag_t tag, std::uint8_t msg_class) override {
        instance_.inbox_.deliver(instance_.addresses_, index_, peer, buffer, size, tag, msg_class);
        instance_.wait_point_.signal();
    }
    void peer_gone(const method::Peer& peer) override { instance_.addresses_.peer_gone(peer); }

private:
    Instance& instance_;
    int index_;
};

Instance::Instance(int& error)
    : wait_point_(error),
      methods_(wait_point_),
      addresses_(state_mutex_, methods_),
      inbox_(state_mutex_),
      ops_(state_mutex_),
      waiter_(state_mutex_, wait_point_, methods_, addresses_, ops_, inbox_) {}

int Instance::create(const InitParams& params, std::unique_ptr<Instance>& out) {
    int error = 0;
    std::unique_ptr<Instance> instance(new Instance(error));
    if (error != 0) return error;
    Instance& self = *instance;
    if (int rc = self.methods_.configure(params); rc != 0) return rc;
    const support::Settings& settings = self.methods_.settings();
    self.inbox_.set_quota(settings.number(support::SettingId::unexpected_quota),
                          settings.number(support::SettingId::unexpected_peer_quota));
    int rc = self.methods_.start(params, [&self](int index) -> method::Sink& {
        return *self.sinks_.emplace_back(std::make_unique<SlotSink>(self, index));
    });
    if (rc != 0) return rc;
    BMI_LOG(control, "initialized: methods '%s' listen '%s' flags %d", params.method_list.c_str(),
            params.listen.c_str(), params.flags);
    out = std::move(instance);
    return 0;
}

Instance::~Instance() {
    cancel_pending([](const method::Operation&) { return true; });
    methods_.close_all();
    // The op table and the inbox free what is left as they go.
    BMI_LOG(control, "finalized");
}

int Instance::close_context(bmi_context_id context) {
    if (!ops_.context_valid(context)) return -BMI_EINVAL;
    cancel_pending([context](const method::Operation& op) { return op.context == context; });
    ops_.close_context(context);
    return 0;
}

int Instance::post(const PostRequest& request, bmi_op_id_t& id, bmi_size_t* actual_size) {
    waiter_.note_caller();
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
    // send_now started the message: the method's lock stays held until post() adopts it.
    bool started = false;
    // The fast path carries no class: a classed unexpected send goes through post(). OrangeFS
    // sends every request and reply as a list, mostly of one or two buffers.
    const bool try_now = !is_recv && request.msg_class == 0 &&
                         request.list_count <= static_cast<int>(method::send_now_segments);
    {
        support::MutexLock lock(state_mutex_);
        ops_.assert_held();  // the same lock, under the parts' own name
        addresses_.assert_held();
        if (!ops_.context_valid_locked(request.context)) return -BMI_EINVAL;
        AddressEntry* entry = addresses_.find_locked(request.addr);
        if (entry == nullptr) return -BMI_EINVAL;
        method_index = entry->method_index;
        if (try_now) {
            // A small contiguous send: let the method try to send it before any operation
            // exists, which is most of what a request costs a PVFS client. While we hold the
            // state lock the address entry keeps the peer alive, so the peer is not copied;
            // the method lock is only tried (progress takes it before the state lock), and
            // a busy method sends the usual way.
            const int rc =
                try_send_now(methods_.slot(method_index), *entry->peer, request, is_list);
            started = rc == method::Method::send_now_started;
            if (rc != 0 && !started) {
                if (rc == 1) id = 0;
                return rc;
            }
        }
        peer = entry->peer;
        if (is_recv) {
            op->method_index = method_index;  // everything cancel_pending reads is set
            // Read before the op can complete: a test of it by this thread may then sleep
            // without first looking for it (OpTable::await_posted).
            const std::uint64_t seen = wait_point_.sequence();
            new_id = ops_.add_pending_locked(*op);
            ops_.note_posted_locked(*op, seen);
        }
    }
    MethodSlot& slot = methods_.slot(method_index);

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
    // itself finds id 0 and is queued here instead (OpTable::complete).
    bool completed_early = false, orphan = false;
    if (rc == 0) {
        PostLock method_lock(slot.lock, started);
        rc = slot.method->post(*raw);
        if (rc == 0 && !is_recv) {
            support::MutexLock lock(state_mutex_);
            ops_.assert_held();
            completed_early = raw->completed;
            orphan = !ops_.add_posted_locked(*raw);
            new_id = raw->id;
        }
    } else if (started) {
        release_started(slot);  // the method completes what it started without an operation
    }
    // A connect this post began may wait for a same-node ticket, asked for here, unlocked.
    methods_.renew_same_node_if_asked();
    if (rc == 0) {
        id = new_id;
        if (orphan)
            OpTable::free_op(raw);  // its context closed meanwhile; testing the id finds nothing
        else if (completed_early)
            wait_point_.signal();
        return 0;
    }
    if (is_recv) {
        support::MutexLock lock(state_mutex_);
        ops_.assert_held();
        ops_.remove_pending_locked(*raw);
    }
    if (rc == 1 && raw->bounce != nullptr && is_recv)
        unpack_list(raw->bounce, raw->actual_size, raw->user_list, raw->user_sizes,
                    raw->user_count);
    if (rc == 1 && actual_size != nullptr) *actual_size = raw->actual_size;
    OpTable::free_op(raw);
    if (rc == 1) id = 0;
    return rc;
}

int Instance::cancel(bmi_op_id_t id, bmi_context_id context) {
    waiter_.note_caller();
    int index;
    {
        support::MutexLock lock(state_mutex_);
        ops_.assert_held();
        method::Operation* op = ops_.find_locked(id, context);
        if (op == nullptr) return -BMI_EINVAL;
        if (op->completed) return 0;
        index = op->method_index;
    }
    MethodSlot& slot = methods_.slot(index);
    support::MutexLock method_lock(slot.lock);
    method::Operation* op;
    {
        // Look again: it may have completed and been reaped while we took the method lock.
        // Holding that lock now keeps it from completing under us.
        support::MutexLock lock(state_mutex_);
        ops_.assert_held();
        op = ops_.find_locked(id, context);
        if (op == nullptr || op->completed) return 0;
        op->cancel_requested = true;
    }
    slot.method->cancel(*op);
    return 0;
}

template <class Pick>
void Instance::cancel_pending(Pick&& pick) {
    for (auto& slot : methods_.slots()) {
        if (!slot->active.load()) continue;
        support::MutexLock method_lock(slot->lock);
        std::vector<method::Operation*> victims;
        {
            support::MutexLock lock(state_mutex_);
            ops_.assert_held();
            victims = ops_.pending_locked(slot->index, pick);
        }
        for (auto* op : victims) slot->method->cancel(*op);
    }
}

void* Instance::memalloc(BMI_addr_t addr, bmi_size_t size) {
    const int index = size < 0 ? -1 : addresses_.method_of(addr);
    if (index < 0) return nullptr;
    void* buffer = methods_.allocate_memory(index, size);
    // OrangeFS's request encoder leaves bytes unwritten and counts on its BMI_memalloc having
    // zeroed them; the standalone library's BMI_memalloc is plain malloc (doc/dialects.md).
    if (buffer != nullptr && methods_.dialect() == method::ApiDialect::orangefs)
        std::memset(buffer, 0, static_cast<std::size_t>(size));
    return buffer;
}

int Instance::unexpected_free(void* buffer) {
    waiter_.note_caller();
    bool refused_before = false;
    if (int rc = inbox_.release(buffer, refused_before); rc != 0) return rc;
    // A method stopped reading because the quota was full: wake a sleeper to let it try
    // again. Otherwise nothing waits for this, and a server frees a buffer per request.
    if (refused_before) wait_point_.signal();
    return 0;
}

}  // namespace bmi::core
