// SPDX-License-Identifier: MIT
// An open-addressing hash map from a 64-bit key to a small value, for hot paths (the policies, the trace
// readers, the userspace mode's file table): linear probing, backward-shift deletion, power-of-two
// capacity sized once, no allocation per operation. Keys must not equal empty_key (all ones), which no
// request key can be.
#pragma once

#include <cstdint>
#include <vector>

namespace llmcache::util {

template <typename V> class FlatMap {
public:
	static constexpr uint64_t empty_key = ~uint64_t(0);

	explicit FlatMap(uint64_t expected = 16)
	{
		uint64_t cap = 16;
		while (cap < expected * 2)
			cap <<= 1;
		slots_.assign(cap, Slot{empty_key, V{}});
		mask_ = cap - 1;
	}

	V *find(uint64_t key)
	{
		for (uint64_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
			if (slots_[i].key == key)
				return &slots_[i].value;
			if (slots_[i].key == empty_key)
				return nullptr;
		}
	}
	const V *find(uint64_t key) const { return const_cast<FlatMap *>(this)->find(key); }

	// The value of key, inserted as V{} if absent (inserted says which): one probe for a miss that is
	// then filled in, where find() + put() take two. The reference is valid until the next change.
	V &find_or_insert(uint64_t key, bool &inserted)
	{
		if ((size_ + 1) * 2 > slots_.size())
			grow();
		uint64_t i = hash(key) & mask_;
		for (; slots_[i].key != empty_key; i = (i + 1) & mask_)
			if (slots_[i].key == key) {
				inserted = false;
				return slots_[i].value;
			}
		slots_[i] = Slot{key, V{}};
		size_++;
		inserted = true;
		return slots_[i].value;
	}

	// Insert or overwrite; returns the stored value.
	V &put(uint64_t key, V value)
	{
		if ((size_ + 1) * 2 > slots_.size())
			grow();
		uint64_t i = hash(key) & mask_;
		for (; slots_[i].key != empty_key; i = (i + 1) & mask_)
			if (slots_[i].key == key)
				return slots_[i].value = value;
		slots_[i] = Slot{key, value};
		size_++;
		return slots_[i].value;
	}

	bool erase(uint64_t key)
	{
		uint64_t i = hash(key) & mask_;
		for (; slots_[i].key != key; i = (i + 1) & mask_)
			if (slots_[i].key == empty_key)
				return false;
		// Backward-shift: move later entries of the probe run into the hole so lookups stay correct.
		for (uint64_t j = (i + 1) & mask_; slots_[j].key != empty_key; j = (j + 1) & mask_) {
			uint64_t home = hash(slots_[j].key) & mask_;
			if (((j - home) & mask_) >= ((j - i) & mask_)) {
				slots_[i] = slots_[j];
				i = j;
			}
		}
		slots_[i].key = empty_key;
		size_--;
		return true;
	}

	uint64_t size() const { return size_; }

	void clear()
	{
		for (auto &s : slots_)
			s.key = empty_key;
		size_ = 0;
	}

private:
	struct Slot {
		uint64_t key;
		V value;
	};

	static uint64_t hash(uint64_t k)
	{
		k ^= k >> 33;
		k *= 0xff51afd7ed558ccdULL;
		k ^= k >> 33;
		return k;
	}

	void grow()
	{
		std::vector<Slot> old;
		old.swap(slots_);
		slots_.assign(old.size() * 2, Slot{empty_key, V{}});
		mask_ = slots_.size() - 1;
		size_ = 0;
		for (auto &s : old)
			if (s.key != empty_key)
				put(s.key, s.value);
	}

	std::vector<Slot> slots_;
	uint64_t mask_ = 0;
	uint64_t size_ = 0;
};

} // namespace llmcache::util
