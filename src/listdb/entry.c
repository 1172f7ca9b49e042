/*
 * entry.c - the checksum that tells a complete log entry from a torn or stale one
 * (entry.h). It covers everything the writer sets once (LSN, lengths, op, height, key,
 * value) and nothing that changes later (flags, next pointers); and the digest of a
 * write batch's entries that its header keeps (entry.h), so that a batch whose entries
 * did not all reach PM is told from a complete one.
 */
#include "listdb/entry.h"
#include "util/kv.h"

uint32_t ld_entry_checksum(const struct ld_entry *e)
{
	/* key and value (zero padded, contiguous), then the header fields */
	uint64_t h = hash_key(ld_key(e), ld_pad8(e->klen) + ld_pad8(e->vlen));
	h = mix64(h ^ e->lsn);
	h = mix64(h ^ ((uint64_t)e->klen << 32 | e->vlen));
	h = mix64(h ^ ((uint64_t)e->op << 8 | e->height));
	return (uint32_t)(h ^ (h >> 32));
}

uint64_t ld_batch_digest(uint64_t h, const struct ld_entry *e)
{
	return mix64(h ^ ((uint64_t)e->csum << 16) ^ e->lsn);
}
