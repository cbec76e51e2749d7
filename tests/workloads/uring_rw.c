/* io_uring with raw syscalls (no liburing): IORING_OP_WRITE 64 KiB at 0 and at 65536, then
 * IORING_OP_READ 64 KiB at 65536, on FILE. Prints "op <write|read> SIZE OFFSET RESULT" per request,
 * so a trace can be checked against it (tests/test_trace_live.py builds and runs it). */
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ring;
static unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_mask;
static struct io_uring_sqe *sqes;
static struct io_uring_cqe *cqes;

static int submit(int op, int fd, void *buf, unsigned len, unsigned long long off) {
    unsigned tail = *sq_tail, idx = tail & *sq_mask;
    struct io_uring_sqe *s = &sqes[idx];
    memset(s, 0, sizeof(*s));
    s->opcode = op;
    s->fd = fd;
    s->addr = (unsigned long)buf;
    s->len = len;
    s->off = off;
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

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
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
    int fd = open(argv[1], O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0) {
        perror("open");
        return 3;
    }
    static char buf[65536];
    memset(buf, 'u', sizeof(buf));
    printf("op write 65536 0 %d\n", submit(IORING_OP_WRITE, fd, buf, 65536, 0));
    printf("op write 65536 65536 %d\n", submit(IORING_OP_WRITE, fd, buf, 65536, 65536));
    printf("op read 65536 65536 %d\n", submit(IORING_OP_READ, fd, buf, 65536, 65536));
    close(fd);
    return 0;
}
