/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget.h - output budgets (docs/protocol.md, "Output budgets"): a stream
 * that carries the first `head` bytes of a command's output live,
 * withholds the middle, and at the end sends one marker (the withheld
 * range) and the last `tail` bytes. The ring keeps every byte as for any
 * stream; only what this stream is sent changes. stdout, stderr and pty
 * bytes count together, by the one output offset.
 *
 * Pure accounting over offsets; process/output.c sends what it says.
 *
 * Errors: budget_parse returns 0 or -EINVAL with a message.
 */
#ifndef PROCESS_BUDGET_H
#define PROCESS_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The env var for clients that cannot set the field (the unmodified SDK):
 * "head:BYTES,tail:BYTES"; never exported to the command. */
#define BUDGET_ENV "ENVD_OUTPUT_BUDGET"
/* Largest head or tail accepted, bytes. */
#define BUDGET_MAX (1024u * 1024 * 1024)

struct budget {
	uint32_t head, tail;
};

/*
 * "head:BYTES,tail:BYTES" (either part may be left out: 0; BYTES a decimal
 * number, or with a k/K (KiB) or m/M (MiB) suffix) into *b. 0, or -EINVAL
 * with the reason in err.
 */
int budget_parse(const char *s, struct budget *b, char *err, size_t errlen);

enum budget_phase {
	BUDGET_HEAD,   /* sending the head; then holding the rest back */
	BUDGET_TAIL,   /* after the end: the tail (or the short rest) goes out */
};

/* A stream's accounting: where its head ends, how long its tail is. */
struct budget_state {
	bool on;
	enum budget_phase phase;
	uint64_t head_end; /* the offset past the head */
	uint64_t tail;
};

/* Start accounting for a stream whose first byte is at `cursor`. */
void budget_begin(struct budget_state *st, const struct budget *b, uint64_t cursor);

/*
 * The head cannot reach head_end (a character cut there waits for bytes it
 * may not have): it ends at `cursor` instead.
 */
void budget_head_stuck(struct budget_state *st, uint64_t cursor);

/* True while the stream holds output back: it is past its head and the
 * output has not ended. Such a stream never lags (process.h's pacing). */
bool budget_holding(const struct budget_state *st, uint64_t cursor);

enum budget_step {
	BUDGET_PASS,  /* as without a budget, up to *upto */
	BUDGET_HOLD,  /* nothing to send now */
	BUDGET_MARK,  /* send the marker [cursor, *upto), then go on from *upto */
};

/*
 * What the stream at `cursor` does next. `limit` is how far output may be
 * sent now (the ring's end, or the end offset once `end_ready`). PASS sets
 * *upto to the offset data may be sent up to (the head's end while in the
 * head); MARK sets *upto to where the tail starts and moves to the tail.
 */
enum budget_step budget_next(struct budget_state *st, uint64_t cursor, uint64_t limit,
			     bool end_ready, uint64_t *upto);

#endif
