/* A stand-in for libcufile's batch and stream calls and libcuda's copies/stream waits, for
 * tests/test_sweep_queued.py on machines without a GPU. It is a mock (the real libraries need a
 * GPU): "device" pointers are host memory, a copy is memcpy, and an I/O is a pread/pwrite done
 * when the caller waits, or on the second poll, so the C loop sees requests still in flight.
 * Signatures and struct layouts are cufile.h's (as csrc/ioloop.c declares them). The real
 * libraries run the same loop in tests/test_sweep_gpu.py on the GPU machine. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

typedef struct { int err; int cu_err; } cf_err_t;
struct cf_params {
    int mode;
    struct { void *dev_base; off_t file_offset; off_t dev_offset; size_t size; } batch;
    void *fh;
    int opcode;
    void *cookie;
};
struct cf_event { void *cookie; int status; size_t ret; };

struct fake_queue {   /* a batch handle or a stream: at most one request */
    int busy, polls;
    int fd, write;
    char *buf;
    size_t size, *size_p;
    off_t off, *off_p, *boff_p;
    ssize_t ret, *done_p;
    void *cookie;
};

long fake_fail_at = -1;   /* this file offset fails with EIO */
long fake_lose_at = -1;   /* this file offset reports success without moving data (a lost transfer) */
long fake_submits, fake_max_busy, fake_busy_now;

static void run(struct fake_queue *q)
{
    if (q->size_p) { /* stream ops read their parameters when the stream runs them */
        q->size = *q->size_p;
        q->off = *q->off_p;
        q->buf += *q->boff_p;
    }
    if (q->off == fake_fail_at) {
        q->ret = -EIO;
    } else if (q->off == fake_lose_at) {
        q->ret = (ssize_t)q->size;
    } else {
        q->ret = q->write ? pwrite(q->fd, q->buf, q->size, q->off) : pread(q->fd, q->buf, q->size, q->off);
        if (q->ret < 0)
            q->ret = -errno;
    }
    if (q->done_p)
        *q->done_p = q->ret;
    q->busy = 0;
    __atomic_sub_fetch(&fake_busy_now, 1, __ATOMIC_RELAXED);
}

static void start(struct fake_queue *q)
{
    q->busy = 1;
    q->polls = 0;
    long n = __atomic_add_fetch(&fake_busy_now, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fake_submits, 1, __ATOMIC_RELAXED);
    long m = fake_max_busy;
    while (n > m && !__atomic_compare_exchange_n(&fake_max_busy, &m, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

cf_err_t fake_submit(void *batch, unsigned nr, struct cf_params *p, unsigned flags)
{
    struct fake_queue *q = batch;
    cf_err_t r = {0, 0};
    (void)flags;
    if (nr != 1 || q->busy || p->mode != 1) {
        r.err = 5001; /* a handle resubmitted while busy: the loop must never do that */
        return r;
    }
    q->fd = *(int *)p->fh;
    q->write = p->opcode == 1;
    q->buf = (char *)p->batch.dev_base + p->batch.dev_offset;
    q->size = p->batch.size;
    q->off = p->batch.file_offset;
    q->size_p = NULL;
    q->done_p = NULL;
    q->cookie = p->cookie;
    start(q);
    return r;
}

cf_err_t fake_status(void *batch, unsigned min_nr, unsigned *nr, struct cf_event *e, struct timespec *t)
{
    struct fake_queue *q = batch;
    cf_err_t r = {0, 0};
    (void)t;
    if (q->busy && (min_nr > 0 || q->polls++ > 0))
        run(q);
    if (q->busy || !q->cookie) {
        *nr = 0;
        return r;
    }
    e->cookie = q->cookie;
    e->status = q->ret < 0 ? 64 : 16;
    e->ret = (size_t)q->ret;
    q->cookie = NULL;
    *nr = 1;
    return r;
}

static cf_err_t async_io(int write, void *fh, void *buf, size_t *size_p, off_t *foff_p, off_t *boff_p, ssize_t *done_p,
                         void *stream)
{
    struct fake_queue *q = stream;
    cf_err_t r = {0, 0};
    if (q->busy) {
        r.err = 5002; /* a second request on a stream before the first was reaped */
        return r;
    }
    q->fd = *(int *)fh;
    q->write = write;
    q->buf = buf;
    q->size_p = size_p;
    q->off_p = foff_p;
    q->boff_p = boff_p;
    q->done_p = done_p;
    start(q);
    return r;
}

cf_err_t fake_read_async(void *fh, void *buf, size_t *s, off_t *f, off_t *b, ssize_t *d, void *st)
{
    return async_io(0, fh, buf, s, f, b, d, st);
}

cf_err_t fake_write_async(void *fh, void *buf, size_t *s, off_t *f, off_t *b, ssize_t *d, void *st)
{
    return async_io(1, fh, buf, s, f, b, d, st);
}

int fake_stream_sync(void *stream)
{
    struct fake_queue *q = stream;
    if (q->busy)
        run(q);
    return 0;
}

int fake_stream_query(void *stream)
{
    struct fake_queue *q = stream;
    if (q->busy && q->polls++ > 0)
        run(q);
    return q->busy ? 600 : 0;
}

int fake_htod(uint64_t dst, const void *src, size_t n)
{
    memcpy((void *)(uintptr_t)dst, src, n);
    return 0;
}

int fake_dtoh(void *dst, uint64_t src, size_t n)
{
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return 0;
}
