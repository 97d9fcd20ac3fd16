/* Split-anywhere feeding for the fuzz targets of stream parsers: piece sizes
 * from a small generator seeded by the input itself, so a crash reproduces
 * from the input alone. */
#ifndef DESKBOX_TESTS_FUZZ_SPLIT_H
#define DESKBOX_TESTS_FUZZ_SPLIT_H

#include <stddef.h>
#include <stdint.h>

struct split {
	uint32_t state;
	size_t max; /* largest piece; 1 feeds byte by byte */
};

/* Seeds from one input byte: its low bits choose the largest piece (1 to
 * 64 bytes, or unbounded), all of it the sequence. */
static inline void split_init(struct split *s, uint8_t seed)
{
	static const size_t maxes[8] = {1, 2, 3, 7, 16, 64, 4096, (size_t)-1};
	s->state = 0x9e3779b9u ^ seed;
	s->max = maxes[seed & 7];
}

/* The next piece's size, 1 to min(left, max). */
static inline size_t split_next(struct split *s, size_t left)
{
	s->state ^= s->state << 13;
	s->state ^= s->state >> 17;
	s->state ^= s->state << 5;
	size_t cap = left < s->max ? left : s->max;
	return cap ? 1 + s->state % cap : 0;
}

#endif
