// SPDX-License-Identifier: LGPL-2.1-or-later
// A FIFO of operations linked through a member hook: queueing never allocates, and an op can be
// unlinked from the middle in O(1) (cancel, test of one id). The queue does not own its elements;
// whoever posted an op owns it and must unlink it before freeing it (safe_link hooks assert that
// in debug builds).
#pragma once

#include <boost/intrusive/list.hpp>

namespace bmi::support {

template <class T, class Hook, Hook T::*member>
using OpQueue = boost::intrusive::list<T, boost::intrusive::member_hook<T, Hook, member>,
                                       boost::intrusive::constant_time_size<true>>;

}  // namespace bmi::support
