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

int gd_abi_version(void) { return 2; }

int64_t gd_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* word w of the data region is (w * GOLDEN) ^ seed (gdsdiag/sweep/pattern.py); consecutive words
 * differ by GOLDEN before the xor, so generating and checking is one add per word */
void gd_fill(char *buf, int64_t n, int64_t data_off, uint64_t seed)
{
    uint64_t *w = (uint64_t *)buf;
    uint64_t v = (uint64_t)(data_off / 8) * GOLDEN;
    for (int64_t i = 0; i < n / 8; i++, v += GOLDEN)
        w[i] = v ^ seed;
}

int64_t gd_check(const char *buf, int64_t n, int64_t data_off, uint64_t seed)
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
typedef int (*htod_fn)(uint64_t, const void *, size_t);
typedef int (*dtoh_fn)(void *, uint64_t, size_t);

/* before a write: the pattern of ``off`` into the buffer the write sends (outside the latency) */
static int prepare_write(struct gd_job *j, int slot, int64_t off)
{
    if (!j->verify)
        return 0;
    int64_t t = gd_now_ns();
    if (j->engine == GD_ENGINE_CUFILE) {
        gd_fill(j->scratch, j->bs, off, j->seed);
        int r = ((htod_fn)j->cu_htod)(j->gpu_buf + (uint64_t)slot * j->bs, j->scratch, (size_t)j->bs);
        if (r) {
            fail(j, GD_ERR_COPY, r, 0, off);
            return -1;
        }
    } else if (j->bounce) {
        gd_fill(j->host_buf + slot * j->bs, j->bs, off, j->seed);
        int r = ((htod_fn)j->cu_htod)(j->gpu_buf + (uint64_t)slot * j->bs, j->host_buf + slot * j->bs, (size_t)j->bs);
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
static int after_io(struct gd_job *j, int slot, int64_t off)
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
    if (j->engine == GD_ENGINE_CUFILE || j->bounce) {
        /* check the bytes that reached the GPU, not the host staging copy */
        int r = ((dtoh_fn)j->cu_dtoh)(j->scratch, j->gpu_buf + (uint64_t)slot * j->bs, (size_t)j->bs);
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
        fail(j, GD_ERR_MISMATCH, 0, 0, bad);
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

static int run_sync(struct gd_job *j)
{
    int64_t seq = 0, issued = 0;
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
        if (after_io(j, 0, off))
            break;
    }
    return j->err_kind;
}

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
};

static int ring_setup(struct ring *r, unsigned entries)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    memset(r, 0, sizeof *r);
    r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
    if (r->fd < 0)
        return -errno;
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

static void ring_queue(struct ring *r, struct gd_job *j, struct iovec *iov, int slot, int64_t off)
{
    unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask;
    struct io_uring_sqe *s = &r->sqes[idx];
    memset(s, 0, sizeof *s);
    /* READV/WRITEV (kernel 5.1+) rather than READ/WRITE (5.6+): one iovec per slot */
    s->opcode = j->is_write ? IORING_OP_WRITEV : IORING_OP_READV;
    s->fd = j->fd;
    s->off = (uint64_t)(j->data_base + off);
    s->addr = (uint64_t)(uintptr_t)&iov[slot];
    s->len = 1;
    s->user_data = (uint64_t)slot;
    r->sq_array[idx] = idx;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* fio's default iodepth_batch_submit=1: each I/O is submitted as soon as it is queued (one
 * io_uring_enter each), so adjacent requests are not handed to the kernel together to merge */
static int ring_submit(struct ring *r, struct gd_job *j, int64_t off)
{
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

static int run_uring(struct gd_job *j)
{
    int depth = j->iodepth;
    struct ring r;
    int rc = ring_setup(&r, (unsigned)depth);
    if (rc < 0) {
        fail(j, GD_ERR_SETUP, -rc, 0, 0);
        return j->err_kind;
    }
    struct iovec *iov = calloc((size_t)depth, sizeof *iov);
    int64_t *t_issue = calloc((size_t)depth, sizeof *t_issue);
    int64_t *slot_off = calloc((size_t)depth, sizeof *slot_off);
    int64_t seq = 0, issued = 0, inflight = 0;
    int stopping = 0;
    for (int s = 0; s < depth; s++) {
        iov[s].iov_base = j->host_buf + (int64_t)s * j->bs;
        iov[s].iov_len = (size_t)j->bs;
    }
    /* fill the queue: fio's iodepth (up to depth in flight, submit what is ready, reap >= 1) */
    for (int s = 0; s < depth && take(j, issued); s++) {
        int64_t off = next_offset(j, &seq);
        if (j->is_write && prepare_write(j, s, off)) {
            stopping = 1;
            break;
        }
        if (j->is_write && j->bounce && ((dtoh_fn)j->cu_dtoh)(iov[s].iov_base, j->gpu_buf + (uint64_t)s * j->bs, (size_t)j->bs)) {
            fail(j, GD_ERR_COPY, 0, 0, off);
            stopping = 1;
            break;
        }
        slot_off[s] = off;
        ring_queue(&r, j, iov, s, off);
        t_issue[s] = gd_now_ns();
        if (ring_submit(&r, j, off)) {
            stopping = 1;
            break;
        }
        issued++;
        inflight++;
    }
    while (inflight > 0) {
        __atomic_store_n(&j->inflight, inflight, __ATOMIC_RELAXED);
        int ret = (int)syscall(__NR_io_uring_enter, r.fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0);
        if (ret < 0) {
            if (errno == EINTR)
                continue;
            fail(j, GD_ERR_IO, errno, ret, 0);
            break;     /* in-flight I/Os end with the ring (close waits for them) */
        }
        unsigned head = *r.cq_head;
        unsigned tail = __atomic_load_n(r.cq_tail, __ATOMIC_ACQUIRE);
        while (head != tail) {
            struct io_uring_cqe *c = &r.cqes[head & *r.cq_mask];
            int s = (int)c->user_data;
            int res = c->res;
            head++;
            __atomic_store_n(r.cq_head, head, __ATOMIC_RELEASE);
            inflight--;
            int64_t now = gd_now_ns();
            int64_t off = slot_off[s];
            if (res < 0) {
                fail(j, GD_ERR_IO, -res, res, off);
                stopping = 1;
                continue;
            }
            if (!j->is_write && j->bounce && res == j->bs &&
                ((htod_fn)j->cu_htod)(j->gpu_buf + (uint64_t)s * j->bs, iov[s].iov_base, (size_t)j->bs)) {
                fail(j, GD_ERR_COPY, 0, 0, off);
                stopping = 1;
                continue;
            }
            if (j->bounce && !j->is_write)
                now = gd_now_ns();
            if (res != j->bs) {
                fail(j, GD_ERR_SHORT, 0, res, off);
                stopping = 1;
                continue;
            }
            record(j, now - t_issue[s], now);
            if (after_io(j, s, off)) {
                stopping = 1;
                continue;
            }
            if (stopping || !take(j, issued))
                continue;
            off = next_offset(j, &seq);
            if (j->is_write && prepare_write(j, s, off)) {
                stopping = 1;
                continue;
            }
            if (j->is_write && j->bounce && ((dtoh_fn)j->cu_dtoh)(iov[s].iov_base, j->gpu_buf + (uint64_t)s * j->bs, (size_t)j->bs)) {
                fail(j, GD_ERR_COPY, 0, 0, off);
                stopping = 1;
                continue;
            }
            slot_off[s] = off;
            ring_queue(&r, j, iov, s, off);
            t_issue[s] = gd_now_ns();
            if (ring_submit(&r, j, off)) {
                stopping = 1;
                continue;
            }
            issued++;
            inflight++;
        }
    }
    __atomic_store_n(&j->inflight, 0, __ATOMIC_RELAXED);
    ring_close(&r);
    free(iov);
    free(t_issue);
    free(slot_off);
    return j->err_kind;
}
#else
int gd_have_uring(void) { return 0; }
/* fio's default iodepth_batch_submit=1: each I/O is submitted as soon as it is queued (one
 * io_uring_enter each), so adjacent requests are not handed to the kernel together to merge */
static int ring_submit(struct ring *r, struct gd_job *j, int64_t off)
{
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
    if (j->bs <= 0 || (j->random ? j->file_blocks : j->slice_blocks) <= 0) {
        fail(j, GD_ERR_SETUP, EINVAL, 0, 0);
        return j->err_kind;
    }
    if (j->engine == GD_ENGINE_URING)
        return run_uring(j);
    return run_sync(j);
}
