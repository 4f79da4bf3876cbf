// SPDX-License-Identifier: LGPL-2.1-or-later
// OptionalLibrary: opens the first file that loads, once; says which library and what it lacks.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "support/optional_library/kept_signal_handlers.hpp"
#include "support/optional_library/optional_library.hpp"

using bmi::support::OptionalLibrary;
using bmi::support::resolve_symbol;

TEST_CASE("a library that is not there fails to open, naming every file tried") {
    OptionalLibrary lib({"libbmi-no-such-library.so.9", "/nonexistent/libalso-missing.so"});
    CHECK_FALSE(lib.open());
    CHECK(lib.error().find("libbmi-no-such-library.so.9") != std::string::npos);
    CHECK(lib.error().find("/nonexistent/libalso-missing.so") != std::string::npos);
    CHECK(lib.symbol("strlen") == nullptr);
    CHECK_FALSE(lib.open());  // the first answer stands
}

TEST_CASE("a fallback file is tried when the first does not open") {
    OptionalLibrary lib({"libbmi-no-such-library.so.9", "libc.so.6"});
    REQUIRE(lib.open());
    CHECK(lib.error().empty());
}

TEST_CASE("symbols resolve typed; a missing one is named in the error") {
    OptionalLibrary lib({"libc.so.6"});
    REQUIRE(lib.open());
    decltype(&std::strlen) length = nullptr;
    REQUIRE(resolve_symbol(lib, length, "strlen"));
    CHECK(length("four") == 4);
    int (*missing)(void) = nullptr;
    CHECK_FALSE(resolve_symbol(lib, missing, "bmi_no_such_symbol"));
    CHECK(missing == nullptr);
    CHECK(lib.error() == "libc.so.6: lacks bmi_no_such_symbol");
}

TEST_CASE("threads racing to open it all get the one answer") {
    OptionalLibrary lib({"libc.so.6"});
    std::vector<std::thread> threads;
    std::vector<int> opened(8, 0);
    for (std::size_t i = 0; i < opened.size(); ++i)
        threads.emplace_back([&, i] { opened[i] = lib.open() ? 1 : 0; });
    for (auto& t : threads) t.join();
    for (int o : opened) CHECK(o == 1);
}

namespace {

volatile std::sig_atomic_t application_saw = 0;
void application_handler(int) { application_saw = application_saw + 1; }

void (*handler_of(int sig))(int) {
    struct sigaction now {};
    sigaction(sig, nullptr, &now);
    return now.sa_handler;
}

// The signal-taking library, copied under a fresh name so that each load is a first one and
// runs its constructor.
std::string fresh_signal_taker() {
    const char* path = std::getenv("BMI_TEST_SIGNAL_TAKER");
    REQUIRE(path != nullptr);
    char name[] = "/tmp/bmi-signal-taker-XXXXXX";
    const int fd = mkstemp(name);
    REQUIRE(fd >= 0);
    close(fd);
    std::ifstream in(path, std::ios::binary);
    std::ofstream(name, std::ios::binary) << in.rdbuf();
    return name;
}

// The application's SIGTERM handler and SIGUSR1 at its default, put back as they were at the
// end of the case.
class ApplicationSignals {
public:
    ApplicationSignals() {
        struct sigaction mine {};
        mine.sa_handler = application_handler;
        sigemptyset(&mine.sa_mask);
        REQUIRE(sigaction(SIGTERM, &mine, &term_) == 0);
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        REQUIRE(sigaction(SIGUSR1, &dfl, &usr1_) == 0);
    }
    ~ApplicationSignals() {
        sigaction(SIGTERM, &term_, nullptr);
        sigaction(SIGUSR1, &usr1_, nullptr);
    }

private:
    struct sigaction term_ {
    }, usr1_{};
};

}  // namespace

TEST_CASE("the signal-taking library, loaded by hand, takes the application's signals") {
    // The control for the case below: without OptionalLibrary the handlers change.
    ApplicationSignals signals;
    const std::string copy = fresh_signal_taker();
    void* handle = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::remove(copy.c_str());
    REQUIRE(handle != nullptr);
    CHECK(handler_of(SIGTERM) != application_handler);
    CHECK(handler_of(SIGUSR1) != SIG_DFL);
    dlclose(handle);
}

TEST_CASE("a library whose constructor takes signals leaves the application's handlers") {
    ApplicationSignals signals;
    const std::string copy = fresh_signal_taker();
    OptionalLibrary lib({copy});
    const bool opened = lib.open();
    std::remove(copy.c_str());
    REQUIRE(opened);
    int (*taken)(void) = nullptr;
    REQUIRE(resolve_symbol(lib, taken, "signal_taker_count"));
    CHECK(handler_of(SIGTERM) == application_handler);
    CHECK(handler_of(SIGUSR1) == SIG_DFL);
    application_saw = 0;
    REQUIRE(raise(SIGTERM) == 0);
    CHECK(application_saw == 1);
    CHECK(taken() == 0);
    // This thread's mask is as it was: SIGTERM was not left blocked.
    sigset_t mask;
    pthread_sigmask(SIG_SETMASK, nullptr, &mask);
    CHECK_FALSE(sigismember(&mask, SIGTERM));
}

TEST_CASE("the guard reports which handlers it put back, once") {
    ApplicationSignals signals;
    sigset_t taken;
    {
        bmi::support::KeptSignalHandlers guard;
        struct sigaction other {};
        other.sa_handler = SIG_IGN;
        REQUIRE(sigaction(SIGUSR1, &other, nullptr) == 0);
        REQUIRE(sigaction(SIGTERM, &other, nullptr) == 0);
        taken = guard.restore();
        const sigset_t again = guard.restore();
        CHECK(sigisemptyset(&again) == 1);
    }
    CHECK(bmi::support::signal_names(taken) == "SIGUSR1, SIGTERM");
    CHECK(handler_of(SIGTERM) == application_handler);
    CHECK(handler_of(SIGUSR1) == SIG_DFL);
}
