/*
 * fw_layout.h - what the TIPS framework keeps in the pool, byte for byte.
 *
 * Root area (struct fw_header at its start): the framework's identity and sizes
 * (immutable after create, covered by a checksum) and, on their own cache line, the
 * mutable words: the index's root object, the life-cycle state, flush_done and the ULog
 * generation.
 *
 * Log area: [OLog slot headers][ULog ring][OLog rings, one per slot].
 *  - An OLog is a circular buffer of 64-byte-aligned records addressed by logical
 *    offsets that only grow (physical = logical % size). Records from head on are live.
 *    A single write's record is sealed (OLOG_SEALED): it carries its lap and a CRC32C
 *    seeded with its position and the pool's olog_salt, so its own fence makes it
 *    durable and recovery finds it without a tail. A batch's records are not sealed:
 *    they are durable once the persistent tail covers them (TIPS §4.1.5). So the
 *    persistent tail is a lower bound written by batches, recovery and close, and the
 *    live records are [head, end), where end is found by walking from max(head, tail)
 *    over sealed records (olog_recover, olog.c). A record never wraps: when it does not
 *    fit before the end, a PAD record fills the rest of the ring.
 *  - The ULog is a sequence of undo records from offset 0, each stamped with the ULog
 *    generation and a checksum; the first record that fails either check ends it.
 *    Records come in groups persisted by one fence each; a record gives its distance
 *    from its group's first record, so that a torn last group is told from damage.
 *    Bumping the generation empties the ULog (TIPS §4.3.2).
 * Invariant kept across every crash: the index equals (its state at the last
 * reclamation) + (the effects of records in the OLogs since their heads), where the
 * first term is recovered by undoing the ULog and rolling back the heap's MLog.
 */
#ifndef TIPS_FRAMEWORK_FW_LAYOUT_H
#define TIPS_FRAMEWORK_FW_LAYOUT_H

#include <stdint.h>

#define FW_MAGIC 0x314b524f57504954ull /* "TIPWORK1" */
#define FW_MAGIC_FORMATTING 0x3f4b524f57504954ull /* "TIPWORK?": a format in progress */
#define FW_LAYOUT_VERSION 3u /* 3: sealed OLog records, a lazy tail, olog_salt (2: ULog
                                records in groups, CRC32C; 1: one record per fence,
                                zlib crc32) */
#define FW_NAME_MAX 32u

/* Life-cycle states (fw_header.state). */
#define FW_STATE_CREATING 1ull /* the index is being created; roll back and retry */
#define FW_STATE_OPEN 2ull     /* in use, or crashed while in use: recover */
#define FW_STATE_CLEAN 3ull    /* closed cleanly: every log is empty */

struct fw_header {
	uint64_t magic;             /* FW_MAGIC (FW_MAGIC_FORMATTING while formatting) */
	uint32_t layout_version;    /* FW_LAYOUT_VERSION */
	uint32_t olog_slots;        /* OLog slots (writer threads at once) */
	char index_name[FW_NAME_MAX]; /* ops->name of the index the pool holds */
	uint64_t olog_size;         /* bytes of each OLog ring (multiple of 64) */
	uint64_t ulog_size;         /* bytes of the ULog ring */
	uint64_t expected_keys;     /* the sizing hint the index was created with */
	uint64_t olog_salt;         /* random, drawn at format: seeds sealed records' CRC */
	uint64_t checksum;          /* crc32 of the fields above */
	/* Mutable words, own cache line. */
	uint64_t index_root __attribute__((aligned(64))); /* the index's root object */
	uint64_t state;             /* FW_STATE_*; 0 until the format is complete */
	uint64_t flush_done;        /* 1: reclamation step 1 is durable, step 2 pending */
	uint64_t ulog_gen;          /* ULog records of another generation are void */
	uint64_t grown_block;       /* largest block (> a size class) the index allocated
	                               after its creation: a table it grew into, which may
	                               double again; admission keeps room for that. 0 in
	                               pools older than this word (it was padding) */
};

/* One OLog slot's persistent words; tail alone on its line (written per batch). */
struct olog_slot_pm {
	uint64_t tail __attribute__((aligned(64))); /* every record below is persistent;
	                                                sealed ones may follow */
	uint64_t head __attribute__((aligned(64))); /* start of the live records */
	uint64_t pending_head;      /* head to install in reclamation step 2 */
};

/* OLog record header; key then value follow; the record is padded to 64 bytes. */
struct olog_rec {
	uint64_t ts_op;  /* commit timestamp << 8 | the writer's pending slot << 7 | op
	                    (OLOG_OP_*) */
	uint32_t len;    /* bytes of the whole record, a multiple of 64 */
	uint16_t klen;
	uint16_t seal;   /* OLOG_SEALED | lap % OLOG_LAP_MOD for a sealed record, else 0 */
	uint32_t vlen;
	uint32_t crc;    /* sealed: CRC32C of the fields above, the key and the value,
	                    seeded with the position and olog_salt; else 0 */
	uint64_t entry;  /* DRAM cache entry of this write; meaningful only in the process
	                    that wrote it (recovery ignores it) */
	unsigned char data[];
};

#define OLOG_OP_INSERT 1u
#define OLOG_OP_UPDATE 2u
#define OLOG_OP_PUT 3u
#define OLOG_OP_DELETE 4u
#define OLOG_OP_PAD 5u /* fills the ring's end; no operation */

#define OLOG_SEALED 0x8000u  /* olog_rec.seal: durable by its own fence */
#define OLOG_LAP_MOD 0x8000u /* laps are told apart modulo this */

/* The op byte's top bit: the cache's unapplied count the write is in (cache_entry's
 * pending_slot), so that replay need not read the entry for it. Meaningless in a
 * record written before this open. */
#define OLOG_OP_SLOT_BIT 0x80u

#define OLOG_REC_TS(r) ((r)->ts_op >> 8)
#define OLOG_REC_OP(r) ((unsigned)((r)->ts_op & 0x7f))
#define OLOG_REC_PENDING_SLOT(r) ((unsigned)((r)->ts_op >> 7) & 1u)
/* The op byte of a record for op @op written in pending slot @slot. */
#define OLOG_OP_IN_SLOT(op, slot) ((op) | ((slot) ? OLOG_OP_SLOT_BIT : 0u))

/* ULog record header; the old bytes follow, padded to 8. */
struct ulog_rec {
	uint64_t addr;  /* where the bytes were */
	uint32_t size;  /* how many (at most TIPS_MAX_VALUE) */
	uint32_t back;  /* bytes from the first record of its group to this one */
	uint64_t gen;   /* ULog generation that wrote it */
	uint64_t check; /* CRC32C over addr, size, back, gen and the bytes */
	unsigned char data[];
};

#endif /* TIPS_FRAMEWORK_FW_LAYOUT_H */
