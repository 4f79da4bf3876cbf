// SPDX-License-Identifier: LGPL-2.1-or-later
// verbs instances started from an allocation (doc/planes.md): the plane's device:port chooses
// the RDMA device, its QoS becomes every queue pair's service level and traffic class, and its
// key file is the instance's key. Real instances on the soft-RoCE device.
#include <catch2/catch.hpp>

#include <infiniband/verbs.h>

#include <string>

#include "../../key_files.hpp"
#include "both_paths.hpp"
#include "harness.hpp"
#include "verbs_test_support.hpp"

using namespace bmi;
using namespace bmi::test;

namespace {
[[maybe_unused]] const bool device_present = verbs::skip_without_device();

// The device the suite runs on: BMI_VERBS_DEVICE (the guest sets rxe0), else the first one.
std::string test_device() {
    if (const char* named = std::getenv("BMI_VERBS_DEVICE"); named && *named) return named;
    int count = 0;
    ibv_device** list = ibv_get_device_list(&count);
    std::string name = list && count > 0 ? ibv_get_device_name(list[0]) : "";
    if (list) ibv_free_device_list(list);
    return name;
}

int start_server(const std::string& options) {
    std::unique_ptr<core::Instance> instance;
    core::InitParams params;
    params.listen = "verbs://127.0.0.1:0";
    params.flags = BMI_INIT_SERVER;
    params.options = options;
    return core::Instance::create(params, instance);
}
}  // namespace

TEST_CASE("verbs: an allocated plane with QoS and a key carries eager and RDMA messages",
          "[verbs][planes]") {
    KeyFiles files;
    const std::string text = "id=bmi.ib type=verbs plane=" + test_device() +
                             ":1 endpts=1 qos=cs3 key_file=" + files.key("k", 3) + "\n";
    const std::string path = files.write("alloc", {text.begin(), text.end()});
    Pair pair = make_peers("verbs", "allocation_file=" + path);
    both_paths_work(pair, 11);
}

TEST_CASE("verbs: a plane this node has no device for, or a GID prefix, starts nothing",
          "[verbs][planes]") {
    KeyFiles files;
    auto with = [&](const std::string& plane) {
        const std::string text = "id=bmi.ib type=verbs plane=" + plane + " endpts=1\n";
        return "allocation_file=" + files.write("alloc", {text.begin(), text.end()});
    };
    CHECK(start_server(with("nosuchdev0:1")) < 0);
    CHECK(start_server(with(test_device() + ":9")) < 0);  // soft-RoCE has one port
    CHECK(start_server(with("fe80::/64")) == -BMI_EINVAL);
    CHECK(start_server(with(test_device() + ":1")) == 0);
}
