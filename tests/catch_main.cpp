// SPDX-License-Identifier: LGPL-2.1-or-later
// The one Catch2 main, built once and linked into every test executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
