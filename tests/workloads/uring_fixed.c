/* io_uring with registered files and buffers (raw syscalls, no liburing), as fast loaders use it:
 * two buffers registered (IORING_REGISTER_BUFFERS2), FILE is written with WRITE_FIXED from registered
 * buffer 1 through registered file 0 (the fd is closed right after IORING_REGISTER_FILES: the ring
 * keeps the file), read back with READ_FIXED into registered buffer 0 and with a plain READ into a
 * buffer of its own, both through the fixed file; then FILE2 replaces entry 0
 * (IORING_REGISTER_FILES_UPDATE) and is read with READ_FIXED, and FILE, opened again, fills the
 * sparse entry 1 (IORING_REGISTER_FILES_UPDATE2) and is read through it. Prints
 * "op <write|read> SIZE OFFSET RESULT BUFFER PATH" per request, for tests/test_trace_names_live.py.
 * With a third argument "gpu" (the GPU machine: libcuda.so.1 loaded with dlopen, no CUDA headers
 * needed) each READ_FIXED's buffer is then copied to the GPU (cuMemcpyHtoD_v2) and "copy BUFFER SIZE"
 * printed: those two reads are DRAM_BOUNCE, the plain READ into the program's own buffer HOST. */
#include <dlfcn.h>
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SZ 65536
static int ring;
static unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_mask;
static struct io_uring_sqe *sqes;
static struct io_uring_cqe *cqes;

static int submit(int op, int index, char *buf, unsigned len, unsigned long long off, int buf_index) {
    unsigned tail = *sq_tail, idx = tail & *sq_mask;
    struct io_uring_sqe *s = &sqes[idx];
    memset(s, 0, sizeof(*s));
    s->opcode = op;
    s->fd = index;
    s->flags = IOSQE_FIXED_FILE;
    s->addr = (unsigned long)buf;
    s->len = len;
    s->off = off;
    s->buf_index = buf_index;
    s->user_data = off + 1;
    sq_array[idx] = idx;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) {
        perror("io_uring_enter");
        exit(2);
    }
    unsigned head = __atomic_load_n(cq_head, __ATOMIC_ACQUIRE);
    int res = cqes[head & *cq_mask].res;
    __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
    return res;
}

/* the GPU side, through the driver API's exported functions (cuda.h's types as plain integers) */
static int (*cu_memcpy_htod)(unsigned long long, const void *, size_t);
static unsigned long long dev_buf;
static int gpu_init(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "no libcuda.so.1: %s\n", dlerror());
        return -1;
    }
    int (*init)(unsigned) = dlsym(h, "cuInit");
    int (*dev_get)(int *, int) = dlsym(h, "cuDeviceGet");
    int (*retain)(void **, int) = dlsym(h, "cuDevicePrimaryCtxRetain");
    int (*set_ctx)(void *) = dlsym(h, "cuCtxSetCurrent");
    int (*alloc)(unsigned long long *, size_t) = dlsym(h, "cuMemAlloc_v2");
    cu_memcpy_htod = dlsym(h, "cuMemcpyHtoD_v2");
    int dev = 0;
    void *ctx = NULL;
    if (!init || !dev_get || !retain || !set_ctx || !alloc || !cu_memcpy_htod || init(0) || dev_get(&dev, 0) ||
        retain(&ctx, dev) || set_ctx(ctx) || alloc(&dev_buf, SZ)) {
        fprintf(stderr, "CUDA driver set-up failed\n");
        return -1;
    }
    return 0;
}
static void to_gpu(char *buf) {
    if (!cu_memcpy_htod)
        return;
    if (cu_memcpy_htod(dev_buf, buf, SZ)) {
        fprintf(stderr, "cuMemcpyHtoD failed\n");
        exit(4);
    }
    printf("copy %#lx %d\n", (unsigned long)buf, SZ);
}

static void report(const char *what, unsigned len, unsigned long long off, int res, char *buf, const char *path) {
    printf("op %s %u %llu %d %#lx %s\n", what, len, off, res, (unsigned long)buf, path);
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    if (argc > 3 && strcmp(argv[3], "gpu") == 0 && gpu_init() != 0)
        return 77;
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    ring = syscall(__NR_io_uring_setup, 4, &p);
    if (ring < 0) {
        perror("io_uring_setup");
        return 3;
    }
    char *sq = mmap(0, p.sq_off.array + p.sq_entries * sizeof(unsigned), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
    char *cq = mmap(0, p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
    sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) {
        perror("mmap");
        return 3;
    }
    sq_tail = (unsigned *)(sq + p.sq_off.tail);
    sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    sq_array = (unsigned *)(sq + p.sq_off.array);
    cq_head = (unsigned *)(cq + p.cq_off.head);
    cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);

    /* two registered buffers; a third buffer of the program's own */
    char *bufs = aligned_alloc(4096, 2 * SZ), *own = aligned_alloc(4096, SZ);
    memset(bufs, 'r', 2 * SZ);
    memset(own, 'o', SZ);
    struct iovec iov[2] = {{bufs, SZ}, {bufs + SZ, SZ}};
    struct io_uring_rsrc_register reg = {.nr = 2, .data = (unsigned long)iov};
    if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS2, &reg, sizeof(reg)) < 0) {
        perror("IORING_REGISTER_BUFFERS2");
        return 3;
    }
    int fd = open(argv[1], O_CREAT | O_RDWR | O_TRUNC, 0600);
    int fd2 = open(argv[2], O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || fd2 < 0) {
        perror("open");
        return 3;
    }
    /* FILE2's bytes, written with plain write() before it is registered */
    for (int i = 0; i < 2; i++)
        if (write(fd2, own, SZ) != SZ)
            return 3;
    int files[2] = {fd, -1};        /* entry 1 sparse */
    if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_FILES, files, 2) < 0) {
        perror("IORING_REGISTER_FILES");
        return 3;
    }
    close(fd);                      /* the ring keeps the file */
    report("write", SZ, 0, submit(IORING_OP_WRITE_FIXED, 0, bufs + SZ, SZ, 0, 1), bufs + SZ, argv[1]);
    report("write", SZ, SZ, submit(IORING_OP_WRITE_FIXED, 0, bufs + SZ, SZ, SZ, 1), bufs + SZ, argv[1]);
    report("read", SZ, SZ, submit(IORING_OP_READ_FIXED, 0, bufs, SZ, SZ, 0), bufs, argv[1]);
    to_gpu(bufs);
    report("read", SZ, 0, submit(IORING_OP_READ, 0, own, SZ, 0, 0), own, argv[1]);
    /* entry 0 becomes FILE2 */
    int upd_fd = fd2;
    struct io_uring_files_update up = {.offset = 0, .fds = (unsigned long)&upd_fd};
    if (syscall(__NR_io_uring_register, ring, IORING_REGISTER_FILES_UPDATE, &up, 1) < 0) {
        perror("IORING_REGISTER_FILES_UPDATE");
        return 3;
    }
    close(fd2);
    report("read", SZ, SZ, submit(IORING_OP_READ_FIXED, 0, bufs + SZ, SZ, SZ, 1), bufs + SZ, argv[2]);
    to_gpu(bufs + SZ);
    /* entry 1 (sparse until now) becomes FILE, opened again (IORING_REGISTER_FILES_UPDATE2) */
    int again = open(argv[1], O_RDONLY);
    struct io_uring_rsrc_update2 up2 = {.offset = 1, .data = (unsigned long)&again, .nr = 1};
    if (again < 0 || syscall(__NR_io_uring_register, ring, IORING_REGISTER_FILES_UPDATE2, &up2, sizeof(up2)) < 0) {
        perror("IORING_REGISTER_FILES_UPDATE2");
        return 3;
    }
    close(again);
    report("read", SZ, 0, submit(IORING_OP_READ_FIXED, 1, bufs, SZ, 0, 0), bufs, argv[1]);
    return 0;
}
