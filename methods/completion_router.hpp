// SPDX-License-Identifier: LGPL-2.1-or-later
// The Method contract says an operation that finishes inside its own post() is reported by
// post() returning 1 (or its error), never through Sink::complete. A method's single finish()
// path sends every completion here, and this routes it: the op being posted to post()'s
// return value, every other op to the Sink. Shared by the methods that can finish an op
// deep inside post() (tcp's direct write, verbs' pump).
#pragma once

#include "methods/method.hpp"

namespace bmi::method {

class CompletionRouter {
public:
    explicit CompletionRouter(Sink& sink) : sink_(sink) {}

    void begin_post(Operation& op) {
        posting_ = &op;
        finished_ = false;
    }

    // What post() returns: 1 or the op's error if it finished during the call, else rc.
    int end_post(int rc) {
        posting_ = nullptr;
        if (!finished_) return rc;
        return error_ == 0 ? 1 : error_;
    }

    void complete(Operation& op, int error) {
        if (&op == posting_) {
            finished_ = true;
            error_ = error;
            return;
        }
        sink_.complete(op, error);
    }

private:
    Sink& sink_;
    Operation* posting_ = nullptr;
    bool finished_ = false;
    int error_ = 0;
};

}  // namespace bmi::method
