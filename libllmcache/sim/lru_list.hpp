// SPDX-License-Identifier: MIT
// Intrusive, index-based doubly-linked lists for the policies: nodes are u32 indices into arrays the
// policy owns, a List is just {head, tail, size}, and every operation is O(1) with no allocation.
// Head is the most recently inserted end, tail the oldest. A node is on at most one list per Links.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmcache::sim {

constexpr uint32_t nil = ~uint32_t(0);

struct List {
	uint32_t head = nil, tail = nil, size = 0;
	bool empty() const { return size == 0; }
};

class Links {
public:
	// Append a new unlinked node; returns its index.
	uint32_t add()
	{
		prev_.push_back(nil);
		next_.push_back(nil);
		return uint32_t(prev_.size() - 1);
	}
	void reserve(size_t n)
	{
		prev_.reserve(n);
		next_.reserve(n);
	}
	uint32_t nodes() const { return uint32_t(prev_.size()); }
	uint32_t next(uint32_t i) const { return next_[i]; } // towards the tail (older)
	uint32_t prev(uint32_t i) const { return prev_[i]; } // towards the head (newer)

	void push_front(List &l, uint32_t i)
	{
		prev_[i] = nil;
		next_[i] = l.head;
		if (l.head != nil)
			prev_[l.head] = i;
		else
			l.tail = i;
		l.head = i;
		l.size++;
	}
	void push_back(List &l, uint32_t i)
	{
		next_[i] = nil;
		prev_[i] = l.tail;
		if (l.tail != nil)
			next_[l.tail] = i;
		else
			l.head = i;
		l.tail = i;
		l.size++;
	}
	void remove(List &l, uint32_t i)
	{
		uint32_t p = prev_[i], n = next_[i];
		(p != nil ? next_[p] : l.head) = n;
		(n != nil ? prev_[n] : l.tail) = p;
		l.size--;
	}
	// Link i right after pos (towards the tail).
	void insert_after(List &l, uint32_t pos, uint32_t i)
	{
		uint32_t n = next_[pos];
		prev_[i] = pos;
		next_[i] = n;
		next_[pos] = i;
		(n != nil ? prev_[n] : l.tail) = i;
		l.size++;
	}
	void move_to_front(List &l, uint32_t i)
	{
		if (l.head == i)
			return;
		remove(l, i);
		push_front(l, i);
	}
	uint32_t pop_back(List &l)
	{
		uint32_t i = l.tail;
		remove(l, i);
		return i;
	}
	uint32_t pop_front(List &l)
	{
		uint32_t i = l.head;
		remove(l, i);
		return i;
	}

private:
	std::vector<uint32_t> prev_, next_;
};

// Policies index nodes with u32 and may track up to 3x capacity entries (cache plus ghosts).
inline uint32_t checked_capacity(uint64_t capacity, const char *policy)
{
	if (capacity == 0 || capacity > (uint64_t(1) << 30))
		throw std::invalid_argument(std::string(policy) + ": capacity must be 1 to 2^30 blocks, got " +
					    std::to_string(capacity));
	return uint32_t(capacity);
}

// Initial size of per-policy tables: grow on demand so a huge capacity on a small trace stays cheap.
inline uint64_t initial_slots(uint64_t bound) { return bound < (uint64_t(1) << 16) ? bound : uint64_t(1) << 16; }

} // namespace llmcache::sim
