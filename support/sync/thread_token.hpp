// SPDX-License-Identifier: LGPL-2.1-or-later
// A token of the calling thread, unique among live threads: the address of a thread-local,
// which costs no call (std::this_thread::get_id() is one into the C library). A thread that
// starts after another has exited may get that thread's token back.
#pragma once

namespace bmi::support {

namespace thread_token_detail {
// initial-exec: a fixed offset from the thread pointer, no __tls_get_addr call.
__attribute__((tls_model("initial-exec"))) inline thread_local char marker = 0;
}  // namespace thread_token_detail

inline const void* this_thread_token() { return &thread_token_detail::marker; }

}  // namespace bmi::support
