/*
 * The pacer of nova-rdt-pktgen: which frames are due, how many to send
 * now, and which the sender gives up on.  Pure arithmetic on a clock
 * value passed in, so tests drive it with any schedule (see
 * tests/unit/test_pktgen_pacer.py, which builds this file as a shared
 * library with -DPACER_API=).
 *
 * Frame n (0-based) is due at n / rate seconds after the start; a trial
 * of D seconds owes round(rate * D) frames, no more, however late it
 * ends.  A sender kept off the CPU owes what fell due meanwhile: it sends
 * up to `window` frames of that back to back (those over a millisecond
 * behind count as "late"), since spreading them out would leave the
 * trial's mean rate below the offered one; owed
 * frames beyond the window are given up ("skipped") rather than sent as
 * an ever longer burst, and are not sent at all, so the count of frames
 * really sent stays the truth the search reads.  After the trial's
 * duration the sender may finish what it owes for at most the window's
 * length of time; what is then still owed is reported, not sent.
 */
#ifndef NOVA_RDT_PACER_H
#define NOVA_RDT_PACER_H

#include <stdint.h>

#define LATE_S 1e-3

#ifndef PACER_API
#define PACER_API static inline
#endif

struct pacer {
	double rate;            /* frames per second, > 0 */
	double duration;        /* seconds of the trial, > 0 */
	double window_s;        /* seconds of owed traffic made up at most */
	uint64_t total;         /* frames the trial owes in all */
	uint64_t window;        /* frames: at most this many are made up */
	uint64_t batch;         /* frames per send when on time */
	uint64_t lag;           /* frames behind beyond which one is late */
	uint64_t sent, skipped, late;
};

/* A pacer for `rate` frames/s over `duration` s, making up at most
 * `window_s` s of owed traffic, sending `batch` frames at a time when on
 * time.  The window is never under one batch: an on-time sender is
 * always up to a batch behind. */
PACER_API void pacer_init(struct pacer *p, double rate, double duration,
			  double window_s, uint64_t batch)
{
	double w = rate * window_s;

	p->rate = rate;
	p->duration = duration;
	p->window_s = window_s;
	p->total = (uint64_t)(rate * duration + 0.5);
	p->batch = batch ? batch : 1;
	p->window = w < (double)p->batch ? p->batch : (uint64_t)w;
	/* Late: sent over a millisecond (or a batch) after it was due;
	 * less is the pacing's own grain. */
	w = rate * LATE_S;
	p->lag = w < (double)p->batch ? p->batch : (uint64_t)w;
	p->sent = p->skipped = p->late = 0;
}

/* Frames due `t` seconds after the start (frame 0 at t = 0). */
PACER_API uint64_t pacer_due(const struct pacer *p, double t)
{
	double n;

	if (t < 0)
		return 0;
	n = t * p->rate + 1;
	return n >= (double)p->total ? p->total : (uint64_t)n;
}

/* Frames owed at `t`: due, neither sent nor given up. */
PACER_API uint64_t pacer_owed(const struct pacer *p, double t)
{
	uint64_t due = pacer_due(p, t), done = p->sent + p->skipped;

	return due > done ? due - done : 0;
}

/* How many frames to send now, at most `most`; first gives up what is
 * owed beyond the window. */
PACER_API uint64_t pacer_plan(struct pacer *p, double t, uint64_t most)
{
	uint64_t owed = pacer_owed(p, t);

	if (owed > p->window) {
		p->skipped += owed - p->window;
		owed = p->window;
	}
	return owed < most ? owed : most;
}

/* `n` frames of a plan made at `t` went out. */
PACER_API void pacer_sent(struct pacer *p, double t, uint64_t n)
{
	uint64_t owed = pacer_owed(p, t);

	/* The oldest owed frames go first: those more than `lag` frames
	 * behind the schedule are late. */
	if (owed > p->lag) {
		uint64_t behind = owed - p->lag;

		p->late += n < behind ? n : behind;
	}
	p->sent += n;
}

/* `n` frames counted by pacer_sent did not go out after all (the
 * kernel's ring was full): owed again. */
PACER_API void pacer_unsend(struct pacer *p, uint64_t n)
{
	p->sent -= n < p->sent ? n : p->sent;
	if (p->late > p->sent)
		p->late = p->sent;
}

/* When (seconds after the start) the next batch falls due. */
PACER_API double pacer_next(const struct pacer *p)
{
	uint64_t want = p->sent + p->skipped + p->batch;

	if (want > p->total)
		want = p->total;
	/* A millionth of a frame later: (n / rate) * rate may round to
	 * just under n, and a sender woken then would find nothing due. */
	return ((double)(want - 1) + 1e-6) / p->rate;
}

/* Whether the sender stops at `t`: everything owed is sent or given up,
 * or the window's grace after the trial's end is over. */
PACER_API int pacer_done(const struct pacer *p, double t)
{
	if (p->sent + p->skipped >= p->total)
		return 1;
	return t >= p->duration + p->window_s;
}

/* Frames still owed when the sender stopped: neither sent nor skipped. */
PACER_API uint64_t pacer_unsent(const struct pacer *p)
{
	uint64_t done = p->sent + p->skipped;

	return p->total > done ? p->total - done : 0;
}

#endif
