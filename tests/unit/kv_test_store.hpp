// SPDX-License-Identifier: MIT
// Opening a KvStore in a unit test: the open must succeed, and when it does not, its error is printed
// before the assertion fails.
#pragma once
#include "cmocka_cpp.hpp"

#include "kv/kv_store.hpp"

#include <cstdio>
#include <memory>
#include <string>

namespace kv_test {

inline std::unique_ptr<llmcache::kv::KvStore> open_store(const llmcache::kv::KvShape &shape,
							 const llmcache::kv::KvOptions &options)
{
	std::unique_ptr<llmcache::kv::KvStore> kv;
	std::string err;
	const int r = llmcache::kv::KvStore::open(shape, options, kv, err);
	if (r)
		fprintf(stderr, "open: %s\n", err.c_str());
	assert_int_equal(r, 0);
	return kv;
}

} // namespace kv_test
