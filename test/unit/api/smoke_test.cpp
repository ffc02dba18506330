#include <catch2/catch.hpp>

#include "tessera/api/quantity.h"

TEST_CASE("quantity smoke", "[quantity]") { CHECK(tessera::api::parseQuantityMilli("1").value() == 1000); }
