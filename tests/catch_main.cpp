// SPDX-License-Identifier: LGPL-2.1-or-later
// The one Catch2 runner, built once, unoptimised and uninstrumented, and linked into every test
// program. Its main also serves the programs whose cases need network namespaces (root).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

// `--netns-or-skip` first: exit 77 (a skip to meson) unless this process may make network
// namespaces, or 1 with BMI_REQUIRE_NETNS=1, where a skip counts as a failure.
int main(int argc, char** argv) {
    if (argc > 1 && std::string_view(argv[1]) == "--netns-or-skip") {
        const pid_t child = fork();
        if (child == 0) _exit(unshare(CLONE_NEWNET) == 0 ? 0 : 1);
        int status = 0;
        const bool ok = child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
                        WEXITSTATUS(status) == 0;
        if (!ok) {
            const char* require = std::getenv("BMI_REQUIRE_NETNS");
            std::printf("SKIP: no network namespaces here (not root?): the test cannot build "
                        "its network\n");
            return require != nullptr && std::string_view(require) == "1" ? 1 : 77;
        }
        argv[1] = argv[0];
        return Catch::Session().run(argc - 1, argv + 1);
    }
    return Catch::Session().run(argc, argv);
}
