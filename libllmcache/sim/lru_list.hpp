// SPDX-License-Identifier: MIT
// Intrusive, index-based doubly-linked lists for the policies: nodes are u32 indices, a List is just
// {head, tail, size}, and every operation is O(1) with no allocation. Head is the most recently inserted
// end, tail the oldest. A node is on at most one list per Links. Each node also carries the block's key,
// in the same 16 bytes as its links, so evicting a list's tail touches one cache line.
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
	uint32_t add(uint64_t key = 0)
	{
		l_.push_back({key, nil, nil});
		return uint32_t(l_.size() - 1);
	}
	// A node for key: one released earlier if any, else a new one. fresh says it is new, so that the
	// caller's own per-node arrays must grow by one.
	uint32_t acquire(uint64_t key, bool &fresh)
	{
		fresh = free_.empty();
		if (fresh)
			return add(key);
		uint32_t i = free_.back();
		free_.pop_back();
		l_[i].key = key;
		return i;
	}
	// Give an unlinked node back for acquire() to reuse.
	void release(uint32_t i) { free_.push_back(i); }
	uint64_t key(uint32_t i) const { return l_[i].key; }
	void set_key(uint32_t i, uint64_t key) { l_[i].key = key; }
	void reserve(size_t n) { l_.reserve(n); }
	uint32_t nodes() const { return uint32_t(l_.size()); }
	uint32_t next(uint32_t i) const { return l_[i].next; } // towards the tail (older)
	uint32_t prev(uint32_t i) const { return l_[i].prev; } // towards the head (newer)

	void push_front(List &l, uint32_t i)
	{
		l_[i].prev = nil;
		l_[i].next = l.head;
		if (l.head != nil)
			l_[l.head].prev = i;
		else
			l.tail = i;
		l.head = i;
		l.size++;
	}
	void push_back(List &l, uint32_t i)
	{
		l_[i].prev = l.tail;
		l_[i].next = nil;
		if (l.tail != nil)
			l_[l.tail].next = i;
		else
			l.head = i;
		l.tail = i;
		l.size++;
	}
	// Link i right after pos (towards the tail).
	void insert_after(List &l, uint32_t pos, uint32_t i)
	{
		uint32_t n = l_[pos].next;
		l_[i].prev = pos;
		l_[i].next = n;
		l_[pos].next = i;
		(n != nil ? l_[n].prev : l.tail) = i;
		l.size++;
	}
	void remove(List &l, uint32_t i)
	{
		const Node k = l_[i];
		(k.prev != nil ? l_[k.prev].next : l.head) = k.next;
		(k.next != nil ? l_[k.next].prev : l.tail) = k.prev;
		l.size--;
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
	struct Node {
		uint64_t key;
		uint32_t prev, next;
	};
	std::vector<Node> l_;
	std::vector<uint32_t> free_;
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
