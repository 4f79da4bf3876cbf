// SPDX-License-Identifier: LGPL-2.1-or-later
// A server's same-node tickets: no offer before its listener is reserved, "ask again" until the
// listener is served, then offers whose tickets, and only those, the listener admits; and how a
// client finds a listener without contacting it.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "methods/kit/same_node.hpp"
#include "support/local_socket/abstract_address.hpp"

using bmi::method::kit::same_node_listener_exists;
using bmi::method::kit::same_node_listener_name;
using bmi::method::kit::SameNodeOffer;
using bmi::method::kit::SameNodeTickets;
using bmi::method::kit::Ticket;
using Answer = SameNodeTickets::Answer;

TEST_CASE("same-node tickets: asked, started, then offered", "[kit][same_node]") {
    SameNodeTickets tickets;
    SameNodeOffer offer;
    CHECK(tickets.answer(3334, offer) == Answer::none);  // nothing reserved
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    tickets.reserve(3334, same_node_listener_name(3334), fd);
    CHECK(tickets.answer(3335, offer) == Answer::none);  // another port's clients
    CHECK_FALSE(tickets.take_request());
    CHECK(tickets.answer(3334, offer) == Answer::later);
    CHECK(tickets.answer(3334, offer) == Answer::later);
    CHECK(tickets.take_request());  // once
    CHECK_FALSE(tickets.take_request());
    std::string name;
    CHECK(tickets.take_listener(name) == fd);
    CHECK(name == "same-node.tcp-3334");
    CHECK(tickets.take_listener(name) == -1);
    close(fd);
    tickets.listener_ready(name, 42);
    REQUIRE(tickets.answer(3334, offer) == Answer::offer);
    CHECK(offer.shm_name == name);
    CHECK(offer.listener_nonce == 42);
    CHECK(tickets.admits(offer.ticket));
    SameNodeOffer second;
    REQUIRE(tickets.answer(3334, second) == Answer::offer);
    CHECK(second.ticket != offer.ticket);
    Ticket forged = offer.ticket;
    forged[0] ^= 1;
    CHECK_FALSE(tickets.admits(forged));
    CHECK_FALSE(tickets.admits(Ticket{}));
}

TEST_CASE("same-node tickets: the oldest is forgotten past the bound", "[kit][same_node]") {
    SameNodeTickets tickets;
    tickets.reserve(1, "n", -1);
    SameNodeOffer first, last;
    CHECK(tickets.answer(1, first) == Answer::later);
    REQUIRE(tickets.take_request());
    tickets.listener_ready("n", 1);
    REQUIRE(tickets.answer(1, first) == Answer::offer);
    for (std::size_t i = 1; i < SameNodeTickets::max_tickets; ++i)
        REQUIRE(tickets.answer(1, last) == Answer::offer);
    CHECK(tickets.admits(first.ticket));
    REQUIRE(tickets.answer(1, last) == Answer::offer);
    CHECK_FALSE(tickets.admits(first.ticket));
    CHECK(tickets.admits(last.ticket));
}

TEST_CASE("same-node tickets: a listener that cannot be served makes no offers",
          "[kit][same_node]") {
    SameNodeTickets tickets;
    tickets.reserve(7, "n", -1);
    SameNodeOffer offer;
    CHECK(tickets.answer(7, offer) == Answer::later);
    REQUIRE(tickets.take_request());
    tickets.listener_unavailable();
    CHECK(tickets.answer(7, offer) == Answer::none);
}

TEST_CASE("same-node listeners are found by name, without contacting them", "[kit][same_node]") {
    const std::string name = "same-node.test-" + std::to_string(getpid());
    CHECK_FALSE(same_node_listener_exists(name));
    const auto at =
        bmi::support::abstract_address("libbmi-shm." + std::to_string(getuid()) + "." + name);
    REQUIRE(at);
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    REQUIRE(bind(fd, reinterpret_cast<const sockaddr*>(&at->address), at->length) == 0);
    CHECK(same_node_listener_exists(name));
    CHECK_FALSE(same_node_listener_exists(name.substr(1)));  // a suffix is not the name
    close(fd);
    CHECK_FALSE(same_node_listener_exists(name));
}

TEST_CASE("same-node routes: filed under a lock, asked outside it, answer kept",
          "[kit][same_node]") {
    using bmi::method::kit::SameNodeRenewals;
    using bmi::method::kit::SameNodeRoute;
    SameNodeOffer first;
    first.shm_name = "same-node.tcp-3340";
    first.listener_nonce = 1;
    first.ticket[0] = 1;
    SameNodeOffer second = first;
    second.listener_nonce = 2;
    second.ticket[0] = 2;
    int asked = 0;
    bool answers = false;
    auto renewals = std::make_shared<SameNodeRenewals>();
    auto route = std::make_shared<SameNodeRoute>(
        first,
        [&]() -> std::optional<SameNodeOffer> {
            ++asked;
            if (!answers) return std::nullopt;
            return second;
        },
        renewals);
    CHECK_FALSE(renewals->pending());
    // Filing asks nothing yet: that waits for whoever takes the question, with no lock held.
    REQUIRE(route->want_renewal());
    CHECK(renewals->pending());
    CHECK(asked == 0);
    auto wanted = renewals->take();
    CHECK_FALSE(renewals->pending());
    REQUIRE(wanted.size() == 1);
    CHECK(wanted[0] == route);
    // A server that does not answer leaves the offer held; one that does replaces it.
    wanted[0]->renew();
    CHECK(asked == 1);
    CHECK(route->offer() == first);
    answers = true;
    route->renew();
    CHECK(route->offer() == second);
    // With the instance's renewals gone nobody could ask: the connect goes ahead as it is.
    renewals.reset();
    CHECK_FALSE(route->want_renewal());
    CHECK(asked == 2);
}
