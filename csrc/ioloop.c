/* gdsdiag sweep: the timed I/O loop of one worker, so the per-I/O cost is C's, not Python's.
 *
 * Python (gdsdiag/sweep/native.py) compiles this file with the system C compiler into a per-user
 * cache and loads it with cffi in ABI mode (no Python headers needed); cffi releases the GIL for
 * the whole call, so every worker thread runs its loop in parallel. One call = one worker's whole
 * point: issue, wait, record the latency (histogram), check the data outside the latency, repeat
 * until the deadline, the shared byte budget or the shared stop flag.
 *
 * cuFile and CUDA are reached through function pointers the caller takes from the libraries it
 * has already loaded (libcufile through gdsdiag.cufile, libcuda through cupy), so this file has no
 * link-time dependency but libc. io_uring is driven by raw syscalls (no liburing needed).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/io_uring.h>)
#include <linux/io_uring.h>
#define GD_HAVE_URING 1
#endif
#endif

#include "ioloop.h"

#define GOLDEN 0x9E3779B97F4A7C15ULL

int gd_abi_version(void) { return 5; }

int64_t gd_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The pattern's two loops are the sweep's own CPU work per byte (fio, its yardstick, does none): on
 * x86-64 with GCC they are built for AVX2 beside the baseline and the loader picks one at run time
 * (an ifunc), 3x fewer cycles a byte than the baseline's one word a store (docs/benchmarks.md,
 * "Sweep against fio"). Elsewhere the plain loops. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define GD_VECTOR __attribute__((target_clones("avx2", "default"), optimize("O3")))
#else
#define GD_VECTOR
#endif

/* word w of the data region is (w * GOLDEN) ^ seed (gdsdiag/sweep/pattern.py); consecutive words
 * differ by GOLDEN before the xor, so generating and checking is one add per word */
GD_VECTOR void gd_fill(char *buf, int64_t n, int64_t data_off, uint64_t seed)
{
    uint64_t *w = (uint64_t *)buf;
    uint64_t v = (uint64_t)(data_off / 8) * GOLDEN;
    for (int64_t i = 0; i < n / 8; i++, v += GOLDEN)
        w[i] = v ^ seed;
}

GD_VECTOR int64_t gd_check(const char *buf, int64_t n, int64_t data_off, uint64_t seed)
{
    const uint64_t *w = (const uint64_t *)buf;
    uint64_t v = (uint64_t)(data_off / 8) * GOLDEN;
    uint64_t acc = 0;
    int64_t words = n / 8;
    /* branch-free pass first (vectorises); locate the byte only when something differs */
    for (int64_t i = 0; i < words; i++)
        acc |= w[i] ^ (v + (uint64_t)i * GOLDEN) ^ seed;
    if (!acc)
        return -1;
    for (int64_t i = 0; i < words; i++, v += GOLDEN) {
        uint64_t d = w[i] ^ v ^ seed;
        if (d) {
            int b = 0;
            while (!((d >> (8 * b)) & 0xff))
                b++;
            return data_off + i * 8 + b;
        }
    }
    return -1;
}

static inline int hist_bucket(uint64_t v)
{
    if (v < 128)
        return (int)v;
    int msb = 63 - __builtin_clzll(v);
    return (msb - 5) * 64 + (int)((v >> (msb - 6)) & 63);
}

static inline void record(struct gd_job *j, int64_t lat, int64_t now)
{
    j->hist[hist_bucket((uint64_t)lat)]++;
    if (lat < j->lat_min_ns || j->lat_min_ns == 0)
        j->lat_min_ns = lat;
    if (lat > j->lat_max_ns)
        j->lat_max_ns = lat;
    j->lat_sum_ns += lat;
    /* a stall is the storage's silence: time spent on our own data generation/checks since the
     * last completion is not part of it */
    int64_t gap = now - j->last_done_ns - j->own_ns;
    j->own_ns = 0;
    if (gap > j->max_gap_ns)
        j->max_gap_ns = gap;
    __atomic_store_n(&j->last_done_ns, now, __ATOMIC_RELAXED);
    j->t_end_ns = now;
    j->ops++;
    __atomic_store_n(&j->bytes, j->bytes + j->bs, __ATOMIC_RELAXED);
}

/* may another I/O start? (deadline, shared byte budget, stop flag, max ops) */
static int take(struct gd_job *j, int64_t issued)
{
    if (__atomic_load_n(j->stop, __ATOMIC_RELAXED))
        return 0;
    if (j->max_ops && issued >= j->max_ops)
        return 0;
    if (j->deadline_ns && gd_now_ns() >= j->deadline_ns)
        return 0;
    if (j->budget && __atomic_sub_fetch(j->budget, j->bs, __ATOMIC_RELAXED) < 0)
        return 0;
    return 1;
}

static int64_t next_offset(struct gd_job *j, int64_t *seq)
{
    int64_t block;
    if (j->random) {
        uint64_t x = j->rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        j->rng = x;
        block = (int64_t)((x * 0x2545F4914F6CDD1DULL) % (uint64_t)j->file_blocks);
    } else {
        block = j->slice_start + (*seq % j->slice_blocks);
        (*seq)++;
    }
    return block * j->bs;
}

static void fail(struct gd_job *j, int kind, int err, int64_t ret, int64_t off)
{
    if (!j->err_kind) {
        j->err_kind = kind;
        j->err = err;
        j->err_ret = ret;
        j->err_offset = off;
    }
    __atomic_store_n(j->stop, 1, __ATOMIC_RELAXED);
}

typedef ssize_t (*cufile_io_fn)(void *, void *, size_t, off_t, off_t);

/* cuFile's batch and stream types, declared here with the layout of cufile.h (1.14-1.20 alike,
 * docs/research: cufile-kvikio.md) so this file builds without CUDA headers; gd_sizeof_cufile lets
 * a test hold them against gdsdiag's cffi declarations of the same structs (csrc/cufile_cdef.h) */
typedef struct { int err; int cu_err; } cf_err_t;                     /* CUfileError_t */
struct cf_params {                                                      /* CUfileIOParams_t */
    int mode;                                                           /* CUFILE_BATCH = 1 */
    struct { void *dev_base; off_t file_offset; off_t dev_offset; size_t size; } batch;
    void *fh;
    int opcode;                                                         /* CUFILE_READ 0, CUFILE_WRITE 1 */
    void *cookie;
};
struct cf_event { void *cookie; int status; size_t ret; };              /* CUfileIOEvents_t */
#define CF_COMPLETE 16
#define CF_WAITING 1
#define CF_PENDING 2
#define CU_NOT_READY 600                                                /* CUDA_ERROR_NOT_READY */
typedef cf_err_t (*cf_submit_fn)(void *batch, unsigned nr, struct cf_params *p, unsigned flags);
typedef cf_err_t (*cf_status_fn)(void *batch, unsigned min_nr, unsigned *nr, struct cf_event *e, struct timespec *t);
typedef cf_err_t (*cf_async_fn)(void *fh, void *buf, size_t *size, off_t *foff, off_t *boff, ssize_t *done, void *stream);
typedef int (*cu_stream_fn)(void *stream);

int gd_sizeof_cufile(int which)
{
    return which == 0 ? (int)sizeof(struct cf_params) : which == 1 ? (int)sizeof(struct cf_event) : (int)sizeof(cf_err_t);
}

/* GPU memory of a slot: its own allocation (slot_buf), else its part of gpu_buf */
static uint64_t slot_dev(const struct gd_job *j, int slot)
{
    return j->slot_buf ? j->slot_buf[slot] : j->gpu_buf + (uint64_t)slot * (uint64_t)j->bs;
}

/* the data is in GPU memory (the cuFile engines): generated / checked through the scratch copy */
static int on_gpu(const struct gd_job *j)
{
    return j->engine == GD_ENGINE_CUFILE || j->engine == GD_ENGINE_CUFILE_BATCH || j->engine == GD_ENGINE_CUFILE_STREAM;
}
typedef int (*htod_fn)(uint64_t, const void *, size_t);
typedef int (*dtoh_fn)(void *, uint64_t, size_t);

/* before a write: the pattern of ``off`` into the buffer the write sends (outside the latency) */
static int prepare_write(struct gd_job *j, int slot, int64_t off)
{
    if (!j->verify)
        return 0;
    int64_t t = gd_now_ns();
    if (on_gpu(j)) {
        gd_fill(j->scratch, j->bs, off, j->seed);
        int r = ((htod_fn)j->cu_htod)(slot_dev(j, slot), j->scratch, (size_t)j->bs);
        if (r) {
            fail(j, GD_ERR_COPY, r, 0, off);
            return -1;
        }
    } else if (j->bounce) {
        gd_fill(j->host_buf + slot * j->bs, j->bs, off, j->seed);
        int r = ((htod_fn)j->cu_htod)(slot_dev(j, slot), j->host_buf + slot * j->bs, (size_t)j->bs);
        if (r) {
            fail(j, GD_ERR_COPY, r, 0, off);
            return -1;
        }
    } else {
        gd_fill(j->host_buf + slot * j->bs, j->bs, off, j->seed);
    }
    int64_t d = gd_now_ns() - t;
    j->verify_ns += d;
    j->own_ns += d;
    return 0;
}

/* after a completed I/O: check what was read (GPU data through scratch), note what was written */
static int after_io(struct gd_job *j, int slot, int64_t off, int64_t prev)
{
    if (!j->verify)
        return 0;
    if (j->is_write) {
        if (j->written) {
            int64_t b = off / j->bs;
            __atomic_fetch_or(&j->written[b >> 3], (uint8_t)(1u << (b & 7)), __ATOMIC_RELAXED);
        }
        return 0;
    }
    int64_t t = gd_now_ns();
    const char *data = j->host_buf + slot * j->bs;
    if (on_gpu(j) || j->bounce) {
        /* check the bytes that reached the GPU, not the host staging copy */
        int r = ((dtoh_fn)j->cu_dtoh)(j->scratch, slot_dev(j, slot), (size_t)j->bs);
        if (r) {
            fail(j, GD_ERR_COPY, r, 0, off);
            return -1;
        }
        data = j->scratch;
    }
    int64_t bad = gd_check(data, j->bs, off, j->seed);
    int64_t d = gd_now_ns() - t;
    j->verify_ns += d;
    j->own_ns += d;
    if (bad >= 0) {
        /* what the wrong bytes are tells stale data (this slot's previous block), a block from
         * elsewhere, or bytes no I/O of this sweep wrote apart: the word is kept for the report */
        uint64_t word;
        memcpy(&word, data + ((bad - off) & ~(int64_t)7), sizeof word);
        if (!j->err_kind)
            j->err_aux = prev;
        fail(j, GD_ERR_MISMATCH, slot + 1, (int64_t)word, bad);
        return -1;
    }
    j->verified_bytes += j->bs;
    return 0;
}

/* one synchronous I/O (psync or cuFile, plus the bounce copy); returns bytes or -1 (failed) */
static int64_t sync_io(struct gd_job *j, int64_t off)
{
    int64_t foff = j->data_base + off;
    if (j->engine == GD_ENGINE_CUFILE) {
        ssize_t r = ((cufile_io_fn)j->cufile_io)(j->cufile_handle, (void *)(uintptr_t)j->gpu_buf, (size_t)j->bs,
                                                 (off_t)foff, 0);
        if (r < 0) {
            /* -1: errno is set; other negatives: -CUfileOpError (cufile.h) */
            fail(j, GD_ERR_IO, r == -1 ? errno : (int)-r, r, off);
            return -1;
        }
        return r;
    }
    if (j->is_write && j->bounce) {
        int c = ((dtoh_fn)j->cu_dtoh)(j->host_buf, j->gpu_buf, (size_t)j->bs);
        if (c) {
            fail(j, GD_ERR_COPY, c, 0, off);
            return -1;
        }
    }
    ssize_t r = j->is_write ? pwrite(j->fd, j->host_buf, (size_t)j->bs, (off_t)foff)
                            : pread(j->fd, j->host_buf, (size_t)j->bs, (off_t)foff);
    if (r < 0) {
        fail(j, GD_ERR_IO, errno, r, off);
        return -1;
    }
    if (!j->is_write && j->bounce && r == j->bs) {
        int c = ((htod_fn)j->cu_htod)(j->gpu_buf, j->host_buf, (size_t)j->bs);
        if (c) {
            fail(j, GD_ERR_COPY, c, 0, off);
            return -1;
        }
    }
    return r;
}

/* ---- a read's check overlapped with the next read (j->pipeline; fio's verify_async) -------------
 * A psync worker waits for each read, then checks it: the check (~60 us for 1 MiB here, the DMA'd
 * bytes read from memory) was the worker's own time between two reads, so a 1 MiB x 1 read point
 * ran ~10 % below fio, which checks nothing (docs/benchmarks-history.md). With a pipeline the worker
 * hands block k in one half of host_buf to a helper thread and reads block k+1 into the other half;
 * it hands k+1 over only once k is checked, so a buffer is never read into while it is checked.
 * Every byte is still checked; a mismatch stops the point one block later, with the same report.
 * The helper only checks: fail() and every counter of the job stay the worker's. */

struct checker {
    struct gd_job *j;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int has, quit;             /* a block waits to be checked (or is being checked: busy); the worker is done */
    int busy;                  /* the helper has taken the block and is checking it */
    const char *buf;
    int slot;
    int64_t off, prev;
    int64_t ns, checked;       /* time spent checking (helper and worker), and the bytes found right */
    int64_t bad, word, bad_prev; /* the first mismatch (bad >= 0): data offset, its word, the slot's previous I/O */
    int bad_slot;
};

/* check the block handed over (by whichever thread holds it: c->busy keeps the other off it) */
static void checker_check(struct checker *c)
{
    int64_t t = gd_now_ns();
    int64_t bad = gd_check(c->buf, c->j->bs, c->off, c->j->seed);
    int64_t d = gd_now_ns() - t;
    pthread_mutex_lock(&c->mu);
    c->ns += d;
    if (bad < 0) {
        c->checked += c->j->bs;
    } else if (c->bad < 0) {
        c->bad = bad;
        memcpy(&c->word, c->buf + ((bad - c->off) & ~(int64_t)7), sizeof c->word);
        c->bad_slot = c->slot;
        c->bad_prev = c->prev;
    }
    pthread_mutex_unlock(&c->mu);
}

static void *checker_main(void *arg)
{
    struct checker *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while ((!c->has || c->busy) && !c->quit) /* busy: the worker took it back */
            pthread_cond_wait(&c->cv, &c->mu);
        if (!c->has || c->busy)
            break;
        c->busy = 1;
        pthread_mutex_unlock(&c->mu);
        checker_check(c);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        c->has = 0;
        pthread_cond_broadcast(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* wait until the block handed over last is checked; -1 if it (or an earlier one) was wrong. A
 * block the helper has not taken yet (no CPU for it: a loaded machine) the worker checks itself,
 * as without the helper, rather than wait for the helper to be scheduled. */
static int checker_wait(struct gd_job *j, struct checker *c)
{
    int64_t t = gd_now_ns();
    pthread_mutex_lock(&c->mu);
    if (c->has && !c->busy) {
        c->busy = 1; /* taken back: the helper, woken later, finds nothing to do */
        pthread_mutex_unlock(&c->mu);
        checker_check(c);
        pthread_mutex_lock(&c->mu);
        c->busy = 0;
        c->has = 0;
    }
    while (c->has)
        pthread_cond_wait(&c->cv, &c->mu);
    int bad = c->bad >= 0;
    pthread_mutex_unlock(&c->mu);
    j->own_ns += gd_now_ns() - t; /* our own check, or waiting for it, is not the storage's silence */
    return bad ? -1 : 0;
}

static int checker_give(struct gd_job *j, struct checker *c, int slot, int64_t off, int64_t prev)
{
    if (checker_wait(j, c))
        return -1;
    pthread_mutex_lock(&c->mu);
    c->buf = j->host_buf + slot * j->bs;
    c->slot = slot;
    c->off = off;
    c->prev = prev;
    c->has = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* the worker's end: the last block checked, the helper gone, its results the job's */
static void checker_end(struct gd_job *j, struct checker *c, pthread_t th)
{
    checker_wait(j, c);
    pthread_mutex_lock(&c->mu);
    c->quit = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(th, NULL);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    j->verify_ns += c->ns;
    j->verified_bytes += c->checked;
    if (c->bad >= 0) {
        if (!j->err_kind)
            j->err_aux = c->bad_prev;
        fail(j, GD_ERR_MISMATCH, c->bad_slot + 1, c->word, c->bad);
    }
}

static int checker_start(struct gd_job *j, struct checker *c, pthread_t *th)
{
    memset(c, 0, sizeof *c);
    c->j = j;
    c->bad = -1;
    if (pthread_mutex_init(&c->mu, NULL) || pthread_cond_init(&c->cv, NULL) ||
        pthread_create(th, NULL, checker_main, c)) {
        fail(j, GD_ERR_SETUP, errno ? errno : EAGAIN, 0, 0);
        return -1;
    }
    return 0;
}

static int run_sync_pipelined(struct gd_job *j)
{
    struct checker c;
    pthread_t th;
    if (checker_start(j, &c, &th))
        return j->err_kind;
    int64_t seq = 0, issued = 0, prev[2] = {-1, -1};
    int slot = 0;
    char *base = j->host_buf;
    while (take(j, issued)) {
        int64_t off = next_offset(j, &seq);
        issued++;
        __atomic_store_n(&j->inflight, 1, __ATOMIC_RELAXED);
        int64_t t = gd_now_ns();
        ssize_t n = pread(j->fd, base + slot * j->bs, (size_t)j->bs, (off_t)(j->data_base + off));
        int64_t now = gd_now_ns();
        __atomic_store_n(&j->inflight, 0, __ATOMIC_RELAXED);
        if (n < 0) {
            fail(j, GD_ERR_IO, errno, n, off);
            break;
        }
        if (n != j->bs) {
            fail(j, GD_ERR_SHORT, 0, n, off);
            break;
        }
        record(j, now - t, now);
        if (checker_give(j, &c, slot, off, prev[slot]))
            break;
        prev[slot] = off;
        slot ^= 1;
    }
    checker_end(j, &c, th);
    return j->err_kind;
}

static int run_sync(struct gd_job *j)
{
    if (j->pipeline && j->verify && !j->is_write && j->engine == GD_ENGINE_PSYNC && !j->bounce)
        return run_sync_pipelined(j);
    int64_t seq = 0, issued = 0, prev = -1;
    while (take(j, issued)) {
        int64_t off = next_offset(j, &seq);
        if (j->is_write && prepare_write(j, 0, off))
            break;
        issued++;
        __atomic_store_n(&j->inflight, 1, __ATOMIC_RELAXED);
        int64_t t = gd_now_ns();
        int64_t n = sync_io(j, off);
        int64_t now = gd_now_ns();
        __atomic_store_n(&j->inflight, 0, __ATOMIC_RELAXED);
        if (n < 0)
            break;
        if (n != j->bs) {
            fail(j, GD_ERR_SHORT, 0, n, off);
            break;
        }
        record(j, now - t, now);
        if (after_io(j, 0, off, prev))
            break;
        prev = off;
    }
    return j->err_kind;
}

/* ---- queued engines: iodepth I/Os in flight per worker (fio's iodepth) --------------------------
 * One loop (run_queued) for every engine that keeps several I/Os in flight: fill the slots, then
 * wait for completions and refill each completed slot at once. An engine gives three functions:
 * issue one I/O in a slot, reap (wait for at least one completion, return them) and drain (let
 * whatever is still in flight end before its buffers go away). */

struct qstate;
struct qops {
    int (*issue)(struct gd_job *j, struct qstate *q, int slot, int64_t off); /* 0, or -1 after fail() */
    int (*reap)(struct gd_job *j, struct qstate *q);                         /* completions in done_*, or -1 */
    void (*drain)(struct gd_job *j, struct qstate *q);
};

struct qstate {
    int depth;
    int64_t *t_issue, *slot_off;
    int64_t *slot_prev;           /* the slot's previous I/O (data offset), -1 before its first */
    int *busy;
    int *done_slot;               /* reap's output: slots completed, their result (bytes or -errno/-code), */
    int64_t *done_res, *done_t;   /* and when the completion was seen */
    int ndone;
    int *fifo;                    /* slots in issue order (batch, stream: completions are reaped oldest first) */
    int fifo_head, fifo_len;
    void *eng;                    /* the engine's own state */
};

static int q_alloc(struct qstate *q, int depth)
{
    memset(q, 0, sizeof *q);
    q->depth = depth;
    q->t_issue = calloc((size_t)depth, sizeof(int64_t));
    q->slot_off = calloc((size_t)depth, sizeof(int64_t));
    q->slot_prev = malloc((size_t)depth * sizeof(int64_t));
    for (int i = 0; q->slot_prev && i < depth; i++)
        q->slot_prev[i] = -1;
    q->done_res = calloc((size_t)depth, sizeof(int64_t));
    q->done_t = calloc((size_t)depth, sizeof(int64_t));
    q->busy = calloc((size_t)depth, sizeof(int));
    q->done_slot = calloc((size_t)depth, sizeof(int));
    q->fifo = calloc((size_t)depth, sizeof(int));
    return q->t_issue && q->slot_off && q->slot_prev && q->done_res && q->done_t && q->busy && q->done_slot && q->fifo ? 0 : -1;
}

static void q_free(struct qstate *q)
{
    free(q->t_issue);
    free(q->slot_off);
    free(q->slot_prev);
    free(q->done_res);
    free(q->done_t);
    free(q->busy);
    free(q->done_slot);
    free(q->fifo);
}

static void q_done(struct qstate *q, int slot, int64_t res)
{
    q->done_slot[q->ndone] = slot;
    q->done_res[q->ndone] = res;
    q->done_t[q->ndone] = gd_now_ns();
    q->ndone++;
}

static void fifo_push(struct qstate *q, int slot)
{
    q->fifo[(q->fifo_head + q->fifo_len) % q->depth] = slot;
    q->fifo_len++;
}

static int fifo_pop(struct qstate *q)
{
    int s = q->fifo[q->fifo_head];
    q->fifo_head = (q->fifo_head + 1) % q->depth;
    q->fifo_len--;
    return s;
}

/* take the next offset for ``slot`` and issue it: 0 started, 1 nothing to start (deadline, budget,
 * stop), -1 failed (fail() was called) */
static int start_slot(struct gd_job *j, const struct qops *ops, struct qstate *q, int slot, int64_t *seq,
                      int64_t *issued)
{
    if (!take(j, *issued))
        return 1;
    int64_t off = next_offset(j, seq);
    if (j->is_write && prepare_write(j, slot, off))
        return -1;
    q->slot_off[slot] = off;
    q->t_issue[slot] = gd_now_ns();
    if (ops->issue(j, q, slot, off))
        return -1;
    q->busy[slot] = 1;
    (*issued)++;
    return 0;
}

/* after a read's completion, bounce: the host data goes on to the GPU (part of the I/O's latency) */
static int bounce_in(struct gd_job *j, int slot, int64_t res)
{
    if (j->is_write || !j->bounce || res != j->bs)
        return 0;
    int c = ((htod_fn)j->cu_htod)(slot_dev(j, slot), j->host_buf + slot * j->bs, (size_t)j->bs);
    if (c)
        fail(j, GD_ERR_COPY, c, 0, 0);
    return c ? -1 : 1;
}

static int run_queued(struct gd_job *j, const struct qops *ops, struct qstate *q)
{
    int64_t seq = 0, issued = 0, inflight = 0;
    int stopping = 0;
    for (int s = 0; s < q->depth; s++) {
        int r = start_slot(j, ops, q, s, &seq, &issued);
        if (r) {
            stopping = 1;
            break;
        }
        inflight++;
    }
    while (inflight > 0) {
        __atomic_store_n(&j->inflight, inflight, __ATOMIC_RELAXED);
        q->ndone = 0;
        if (ops->reap(j, q) < 0)
            break; /* failed: what is in flight is drained below */
        for (int i = 0; i < q->ndone; i++) {
            int s = q->done_slot[i];
            int64_t res = q->done_res[i], now = q->done_t[i], off = q->slot_off[s];
            q->busy[s] = 0;
            inflight--;
            if (res < 0) {
                fail(j, GD_ERR_IO, (int)-res, res, off);
                stopping = 1;
                continue;
            }
            int b = bounce_in(j, s, res);
            if (b < 0) {
                stopping = 1;
                continue;
            }
            if (b)
                now = gd_now_ns();
            if (res != j->bs) {
                fail(j, GD_ERR_SHORT, 0, res, off);
                stopping = 1;
                continue;
            }
            record(j, now - q->t_issue[s], now);
            if (after_io(j, s, off, q->slot_prev[s])) {
                stopping = 1;
                continue;
            }
            q->slot_prev[s] = off;
            if (stopping)
                continue;
            int r = start_slot(j, ops, q, s, &seq, &issued);
            if (r < 0)
                stopping = 1;
            else if (r == 0)
                inflight++;
        }
    }
    if (ops->drain)
        ops->drain(j, q);
    __atomic_store_n(&j->inflight, 0, __ATOMIC_RELAXED);
    return j->err_kind;
}

/* ---- cufile-batch: one batch handle per slot, each holding one request at a time. A handle is
 * only ever resubmitted after its request completed (the reuse NVIDIA's samples show); the oldest
 * request is waited for, and younger ones already complete are reaped with it. */

struct batch_eng {
    struct cf_params *params;
    struct cf_event ev;
};

static int batch_issue(struct gd_job *j, struct qstate *q, int slot, int64_t off)
{
    struct batch_eng *e = q->eng;
    struct cf_params *p = &e->params[slot];
    memset(p, 0, sizeof *p);
    p->mode = 1;
    p->batch.dev_base = (void *)(uintptr_t)j->gpu_buf;
    p->batch.file_offset = (off_t)(j->data_base + off);
    p->batch.dev_offset = (off_t)((int64_t)slot * j->bs);
    p->batch.size = (size_t)j->bs;
    p->fh = j->cufile_handle;
    p->opcode = j->is_write ? 1 : 0;
    p->cookie = (void *)(uintptr_t)(slot + 1);
    cf_err_t r = ((cf_submit_fn)j->cf_batch_submit)(j->queues[slot], 1, p, 0);
    if (r.err) {
        fail(j, GD_ERR_IO, r.err, 0, off);
        return -1;
    }
    fifo_push(q, slot);
    return 0;
}

/* poll (wait = 0) or wait for slot's request: 1 complete (q_done called), 0 not yet, -1 failed */
static int batch_poll(struct gd_job *j, struct qstate *q, int slot, int wait)
{
    struct batch_eng *e = q->eng;
    for (;;) {
        unsigned nr = 1;
        struct timespec ts = {wait ? 1 : 0, wait ? 0 : 1000};
        memset(&e->ev, 0, sizeof e->ev);
        cf_err_t r = ((cf_status_fn)j->cf_batch_status)(j->queues[slot], wait ? 1 : 0, &nr, &e->ev, &ts);
        if (r.err) {
            fail(j, GD_ERR_IO, r.err, 0, q->slot_off[slot]);
            return -1;
        }
        if (nr >= 1 && e->ev.status != CF_WAITING && e->ev.status != CF_PENDING) {
            ssize_t ret = (ssize_t)e->ev.ret;
            if (e->ev.status == CF_COMPLETE)
                q_done(q, slot, ret);
            else /* failed, canceled, timed out, invalid: the cuFile code if ret carries one */
                q_done(q, slot, ret < 0 ? ret : -EIO);
            return 1;
        }
        if (!wait)
            return 0;
    }
}

static int fifo_reap(struct gd_job *j, struct qstate *q, int (*poll)(struct gd_job *, struct qstate *, int, int))
{
    int r = poll(j, q, q->fifo[q->fifo_head], 1);
    if (r < 0)
        return -1;
    fifo_pop(q);
    while (q->fifo_len > 0) {
        r = poll(j, q, q->fifo[q->fifo_head], 0);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        fifo_pop(q);
    }
    return q->ndone;
}

static int batch_reap(struct gd_job *j, struct qstate *q) { return fifo_reap(j, q, batch_poll); }

static void fifo_drain(struct gd_job *j, struct qstate *q, int (*poll)(struct gd_job *, struct qstate *, int, int))
{
    while (q->fifo_len > 0) {
        q->ndone = 0;
        poll(j, q, fifo_pop(q), 1);
    }
}

static void batch_drain(struct gd_job *j, struct qstate *q) { fifo_drain(j, q, batch_poll); }

/* ---- cufile-async: cuFileReadAsync/WriteAsync, one registered stream per slot; the size/offset/
 * result words are read and written by the stream when it runs, so each slot keeps its own */

struct stream_eng {
    size_t *size;
    off_t *foff, *boff;
    ssize_t *done;
};

static int stream_issue(struct gd_job *j, struct qstate *q, int slot, int64_t off)
{
    struct stream_eng *e = q->eng;
    e->size[slot] = (size_t)j->bs;
    e->foff[slot] = (off_t)(j->data_base + off);
    /* slot_buf: each request names its own buffer with offset 0, else one base and an offset
     * (GDSDIAG_SWEEP_ASYNC_BUFFERS, gdsdiag/sweep/engines/cufile.py says which libcufile gets right) */
    e->boff[slot] = j->slot_buf ? 0 : (off_t)((int64_t)slot * j->bs);
    e->done[slot] = 0;
    uint64_t base = j->slot_buf ? j->slot_buf[slot] : j->gpu_buf;
    cf_err_t r = ((cf_async_fn)j->cf_async_io)(j->cufile_handle, (void *)(uintptr_t)base, &e->size[slot],
                                               &e->foff[slot], &e->boff[slot], &e->done[slot], j->queues[slot]);
    if (r.err) {
        fail(j, GD_ERR_IO, r.err, 0, off);
        return -1;
    }
    fifo_push(q, slot);
    return 0;
}

static int stream_poll(struct gd_job *j, struct qstate *q, int slot, int wait)
{
    struct stream_eng *e = q->eng;
    int r = wait ? ((cu_stream_fn)j->cu_stream_sync)(j->queues[slot]) : ((cu_stream_fn)j->cu_stream_query)(j->queues[slot]);
    if (r == CU_NOT_READY && !wait)
        return 0;
    if (r) {
        fail(j, GD_ERR_CUDA, r, 0, q->slot_off[slot]);
        return -1;
    }
    /* the stream wrote the byte count: -1 with errno, or -CUfileOpError */
    ssize_t n = __atomic_load_n(&e->done[slot], __ATOMIC_ACQUIRE);
    q_done(q, slot, n == -1 ? -EIO : n);
    return 1;
}

static int stream_reap(struct gd_job *j, struct qstate *q) { return fifo_reap(j, q, stream_poll); }
static void stream_drain(struct gd_job *j, struct qstate *q) { fifo_drain(j, q, stream_poll); }

static const struct qops batch_ops = {batch_issue, batch_reap, batch_drain};
static const struct qops stream_ops = {stream_issue, stream_reap, stream_drain};

static int run_cufile_queued(struct gd_job *j)
{
    struct qstate q;
    int rc = q_alloc(&q, j->iodepth);
    struct batch_eng be = {0};
    struct stream_eng se = {0};
    const struct qops *ops;
    if (j->engine == GD_ENGINE_CUFILE_BATCH) {
        be.params = calloc((size_t)j->iodepth, sizeof *be.params);
        rc |= be.params ? 0 : -1;
        q.eng = &be;
        ops = &batch_ops;
    } else {
        se.size = calloc((size_t)j->iodepth, sizeof *se.size);
        se.foff = calloc((size_t)j->iodepth, sizeof *se.foff);
        se.boff = calloc((size_t)j->iodepth, sizeof *se.boff);
        se.done = calloc((size_t)j->iodepth, sizeof *se.done);
        rc |= se.size && se.foff && se.boff && se.done ? 0 : -1;
        q.eng = &se;
        ops = &stream_ops;
    }
    if (rc)
        fail(j, GD_ERR_SETUP, ENOMEM, 0, 0);
    else
        run_queued(j, ops, &q);
    free(be.params);
    free(se.size);
    free(se.foff);
    free(se.boff);
    free(se.done);
    q_free(&q);
    return j->err_kind;
}

/* ---- io_uring (host, bounce) --------------------------------------------------------------------- */
#ifdef GD_HAVE_URING
int gd_have_uring(void) { return 1; }

struct ring {
    int fd;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
    unsigned *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
    void *sq_ptr, *cq_ptr;
    size_t sq_len, cq_len, sqes_len;
    struct iovec *iov;
    int nonvectored;
};

#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN 0
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER 0
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN 0
#endif

/* the ring as fio 3.33's io_uring engine sets it up, so --iodepth points compare like for like:
 * CQ sized to the SQ, COOP_TASKRUN (no IPI to run completion work), SINGLE_ISSUER|DEFER_TASKRUN
 * (completion work runs when the one thread that submits reaps), each dropped where the kernel
 * refuses it (EINVAL), in fio's order */
static int ring_open(unsigned entries, struct io_uring_params *p)
{
    unsigned flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    for (;;) {
        memset(p, 0, sizeof *p);
        p->flags = flags;
        p->cq_entries = entries;
        int fd = (int)syscall(__NR_io_uring_setup, entries, p);
        if (fd >= 0 || errno != EINVAL)
            return fd;
        if (flags & (IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER))
            flags &= ~(unsigned)(IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER);
        else if (flags & IORING_SETUP_COOP_TASKRUN)
            flags &= ~(unsigned)IORING_SETUP_COOP_TASKRUN;
        else if (flags & IORING_SETUP_CQSIZE)
            flags &= ~(unsigned)IORING_SETUP_CQSIZE;
        else
            return fd;
    }
}

/* READ/WRITE (5.6+) where the kernel has them, as fio ("nonvectored"), else READV/WRITEV (5.1+) */
static int ring_nonvectored(int fd)
{
    size_t len = sizeof(struct io_uring_probe) + 256 * sizeof(struct io_uring_probe_op);
    struct io_uring_probe *pr = calloc(1, len);
    int ok = 0;
    if (pr && syscall(__NR_io_uring_register, fd, IORING_REGISTER_PROBE, pr, 256) >= 0 &&
        pr->ops_len > IORING_OP_WRITE)
        ok = (pr->ops[IORING_OP_READ].flags & IO_URING_OP_SUPPORTED) &&
             (pr->ops[IORING_OP_WRITE].flags & IO_URING_OP_SUPPORTED);
    free(pr);
    return ok;
}

static int ring_setup(struct ring *r, unsigned entries)
{
    struct io_uring_params p;
    memset(r, 0, sizeof *r);
    r->fd = ring_open(entries, &p);
    if (r->fd < 0)
        return -errno;
    r->nonvectored = ring_nonvectored(r->fd);
    r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if ((p.features & IORING_FEAT_SINGLE_MMAP) && r->cq_len > r->sq_len)
        r->sq_len = r->cq_len;
    r->sq_ptr = mmap(0, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    if (r->sq_ptr == MAP_FAILED)
        goto fail;
    if (p.features & IORING_FEAT_SINGLE_MMAP) {
        r->cq_ptr = r->sq_ptr;
        r->cq_len = 0;
    } else {
        r->cq_ptr = mmap(0, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
        if (r->cq_ptr == MAP_FAILED)
            goto fail;
    }
    r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
    r->sqes = mmap(0, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED)
        goto fail;
    char *sq = r->sq_ptr, *cq = r->cq_ptr;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
fail:;
    int e = errno;
    close(r->fd);
    return -e;
}

static void ring_close(struct ring *r)
{
    if (r->sqes && r->sqes != MAP_FAILED)
        munmap(r->sqes, r->sqes_len);
    if (r->cq_len && r->cq_ptr && r->cq_ptr != MAP_FAILED)
        munmap(r->cq_ptr, r->cq_len);
    if (r->sq_ptr && r->sq_ptr != MAP_FAILED)
        munmap(r->sq_ptr, r->sq_len);
    close(r->fd);
}

/* queue one read/write and submit it at once: fio's default
 * iodepth_batch_submit=1, so adjacent requests are not handed to the kernel together to merge */
static int uring_issue(struct gd_job *j, struct qstate *q, int slot, int64_t off)
{
    struct ring *r = q->eng;
    if (j->is_write && j->bounce) {
        int c = ((dtoh_fn)j->cu_dtoh)(r->iov[slot].iov_base, slot_dev(j, slot), (size_t)j->bs);
        if (c) {
            fail(j, GD_ERR_COPY, c, 0, off);
            return -1;
        }
    }
    unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask;
    struct io_uring_sqe *s = &r->sqes[idx];
    memset(s, 0, sizeof *s);
    s->fd = j->fd;
    s->off = (uint64_t)(j->data_base + off);
    if (r->nonvectored) {
        s->opcode = j->is_write ? IORING_OP_WRITE : IORING_OP_READ;
        s->addr = (uint64_t)(uintptr_t)r->iov[slot].iov_base;
        s->len = (unsigned)j->bs;
    } else {
        s->opcode = j->is_write ? IORING_OP_WRITEV : IORING_OP_READV;
        s->addr = (uint64_t)(uintptr_t)&r->iov[slot];
        s->len = 1;
    }
    s->user_data = (uint64_t)slot;
    r->sq_array[idx] = idx;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
    for (;;) {
        int ret = (int)syscall(__NR_io_uring_enter, r->fd, 1, 0, 0, NULL, 0);
        if (ret == 1)
            return 0;
        if (ret < 0 && errno == EINTR)
            continue;
        fail(j, GD_ERR_IO, ret < 0 ? errno : EAGAIN, ret, off);
        return -1;
    }
}

static int uring_reap(struct gd_job *j, struct qstate *q)
{
    struct ring *r = q->eng;
    for (;;) {
        int ret = (int)syscall(__NR_io_uring_enter, r->fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0);
        if (ret >= 0)
            break;
        if (errno != EINTR) {
            fail(j, GD_ERR_IO, errno, ret, 0);
            return -1;
        }
    }
    unsigned head = *r->cq_head;
    unsigned tail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
    while (head != tail && q->ndone < q->depth) {
        struct io_uring_cqe *c = &r->cqes[head & *r->cq_mask];
        q_done(q, (int)c->user_data, c->res);
        head++;
    }
    __atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
    return q->ndone;
}

static const struct qops uring_ops = {uring_issue, uring_reap, NULL}; /* ring_close waits for in-flight I/O */

static int run_uring(struct gd_job *j)
{
    struct ring r;
    struct qstate q;
    int rc = ring_setup(&r, (unsigned)j->iodepth);
    if (rc < 0) {
        fail(j, GD_ERR_SETUP, -rc, 0, 0);
        return j->err_kind;
    }
    r.iov = calloc((size_t)j->iodepth, sizeof *r.iov);
    if (q_alloc(&q, j->iodepth) || !r.iov) {
        fail(j, GD_ERR_SETUP, ENOMEM, 0, 0);
    } else {
        for (int s = 0; s < j->iodepth; s++) {
            r.iov[s].iov_base = j->host_buf + (int64_t)s * j->bs;
            r.iov[s].iov_len = (size_t)j->bs;
        }
        q.eng = &r;
        run_queued(j, &uring_ops, &q);
    }
    ring_close(&r);
    free(r.iov);
    q_free(&q);
    return j->err_kind;
}
#else
int gd_have_uring(void) { return 0; }

static int run_uring(struct gd_job *j)
{
    fail(j, GD_ERR_SETUP, ENOSYS, 0, 0);
    return j->err_kind;
}
#endif

int gd_run(struct gd_job *j)
{
    j->t_start_ns = gd_now_ns();
    j->last_done_ns = j->t_start_ns;
    j->t_end_ns = j->t_start_ns;
    if (j->bs <= 0 || (j->random ? j->file_blocks : j->slice_blocks) <= 0 || j->iodepth < 1) {
        fail(j, GD_ERR_SETUP, EINVAL, 0, 0);
        return j->err_kind;
    }
    if (j->engine == GD_ENGINE_URING)
        return run_uring(j);
    if (j->engine == GD_ENGINE_CUFILE_BATCH || j->engine == GD_ENGINE_CUFILE_STREAM) {
        if (!j->queues || !j->cufile_handle ||
            (j->engine == GD_ENGINE_CUFILE_BATCH ? !j->cf_batch_submit || !j->cf_batch_status
                                                 : !j->cf_async_io || !j->cu_stream_sync || !j->cu_stream_query)) {
            fail(j, GD_ERR_SETUP, EINVAL, 0, 0);
            return j->err_kind;
        }
        return run_cufile_queued(j);
    }
    return run_sync(j);
}
