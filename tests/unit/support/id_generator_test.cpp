// SPDX-License-Identifier: LGPL-2.1-or-later
// Unit tests for IdGenerator: lookup, stale and foreign ids, slot reuse and generations.
#include "support/id_generator/id_generator.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <random>
#include <unordered_set>
#include <vector>

using bmi::support::IdGenerator;

TEST_CASE("insert, find and erase", "[id_generator]") {
    IdGenerator ids;
    int a = 0;
    int b = 0;
    IdGenerator::Id id_a = ids.insert(&a);
    IdGenerator::Id id_b = ids.insert(&b);
    CHECK(id_a > 0);
    CHECK(id_b > 0);
    CHECK(id_a != id_b);
    CHECK(ids.size() == 2);
    CHECK(ids.find(id_a) == &a);
    CHECK(ids.find(id_b) == &b);

    CHECK(ids.erase(id_a));
    CHECK(ids.size() == 1);
    CHECK(ids.find(id_a) == nullptr);
    CHECK(ids.find(id_b) == &b);
}

TEST_CASE("erasing twice fails the second time", "[id_generator]") {
    IdGenerator ids;
    int a = 0;
    IdGenerator::Id id = ids.insert(&a);
    CHECK(ids.erase(id));
    CHECK_FALSE(ids.erase(id));
    CHECK(ids.size() == 0);
}

TEST_CASE("a reused slot gets a new id and the stale one stays dead", "[id_generator]") {
    IdGenerator ids;
    int a = 0;
    int b = 0;
    IdGenerator::Id old_id = ids.insert(&a);
    REQUIRE(ids.erase(old_id));
    IdGenerator::Id new_id = ids.insert(&b);
    CHECK(new_id > 0);
    CHECK(new_id != old_id);
    CHECK(ids.find(new_id) == &b);
    CHECK(ids.find(old_id) == nullptr);
    CHECK_FALSE(ids.erase(old_id));
    CHECK(ids.find(new_id) == &b);  // the failed erase of the stale id changed nothing
}

TEST_CASE("zero, negative and made-up ids are rejected", "[id_generator]") {
    IdGenerator ids;
    int a = 0;
    IdGenerator::Id id = ids.insert(&a);

    for (IdGenerator::Id bad :
         {IdGenerator::Id{0}, IdGenerator::Id{-1}, -id, std::numeric_limits<IdGenerator::Id>::min(),
          std::numeric_limits<IdGenerator::Id>::max(), id + 1, id - 1,
          id ^ (IdGenerator::Id{1} << 40)}) {
        CAPTURE(bad);
        CHECK(ids.find(bad) == nullptr);
        CHECK_FALSE(ids.erase(bad));
    }
    CHECK(ids.find(id) == &a);

    std::mt19937_64 rng(12345);
    std::uniform_int_distribution<IdGenerator::Id> any;
    for (int i = 0; i < 10000; ++i) {
        IdGenerator::Id guess = any(rng);
        if (guess == id) continue;
        CAPTURE(guess);
        CHECK(ids.find(guess) == nullptr);
    }
    CHECK(ids.size() == 1);
}

TEST_CASE("an id from another generator is rejected", "[id_generator]") {
    IdGenerator one;
    IdGenerator two;
    int a = 0;
    int b = 0;
    int c = 0;
    IdGenerator::Id id_a = one.insert(&a);
    one.erase(id_a);
    IdGenerator::Id id_b = one.insert(&b);  // slot 0 of "one" is now one generation on
    IdGenerator::Id id_c = two.insert(&c);  // slot 0 of "two" is fresh
    REQUIRE(id_b != id_c);
    CHECK(two.find(id_b) == nullptr);
    CHECK(one.find(id_c) == nullptr);
    CHECK(two.find(IdGenerator::Id{1} << 40) == nullptr);  // index 0 at a foreign generation
}

TEST_CASE("100k live ids all resolve and all erase", "[id_generator]") {
    constexpr int count = 100000;
    IdGenerator ids;
    std::vector<int> objects(count);
    std::vector<IdGenerator::Id> issued;
    issued.reserve(count);
    std::unordered_set<IdGenerator::Id> unique;
    for (int& object : objects) {
        IdGenerator::Id id = ids.insert(&object);
        REQUIRE(id > 0);
        issued.push_back(id);
        unique.insert(id);
    }
    CHECK(unique.size() == count);
    CHECK(ids.size() == count);
    for (int i = 0; i < count; ++i) REQUIRE(ids.find(issued[i]) == &objects[i]);
    // Erase every other one, then check both halves.
    for (int i = 0; i < count; i += 2) REQUIRE(ids.erase(issued[i]));
    CHECK(ids.size() == count / 2);
    for (int i = 0; i < count; ++i)
        REQUIRE(ids.find(issued[i]) == (i % 2 == 0 ? nullptr : &objects[i]));
    for (int i = 1; i < count; i += 2) REQUIRE(ids.erase(issued[i]));
    CHECK(ids.size() == 0);
}

TEST_CASE("many reuse cycles of one slot never repeat a stale id", "[id_generator]") {
    IdGenerator ids;
    int object = 0;
    std::unordered_set<IdGenerator::Id> stale;
    IdGenerator::Id first = ids.insert(&object);
    REQUIRE(ids.erase(first));
    stale.insert(first);
    for (int cycle = 0; cycle < 10000; ++cycle) {
        IdGenerator::Id id = ids.insert(&object);
        REQUIRE(id > 0);
        REQUIRE(stale.count(id) == 0);
        REQUIRE(ids.find(first) == nullptr);
        REQUIRE(ids.erase(id));
        stale.insert(id);
    }
    CHECK(ids.size() == 0);
    for (IdGenerator::Id id : stale) REQUIRE(ids.find(id) == nullptr);
}
