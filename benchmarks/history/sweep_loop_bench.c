/* Where does a 4 KiB O_DIRECT read's time go? A bare pread loop, the same loop with two clock reads
 * per I/O (what fio's psync engine does: issue time, completion time), and the sweep's own C loop
 * (csrc/ioloop.c's gd_run, linked in), each with JOBS workers as threads or as forked processes,
 * into 4 KiB-page (malloc, fio's) or 2 MiB-aligned MADV_HUGEPAGE (the sweep's) buffers.
 *
 *   cc -O2 -pthread -I csrc -o /tmp/loopbench benchmarks/history/sweep_loop_bench.c csrc/ioloop.c
 *   /tmp/loopbench clock                                   # cost of one clock read (and which clock)
 *   /tmp/loopbench FILE BS SECONDS JOBS thread|fork pages|huge bare|clock2|sweep
 *
 * Sequential reads, each worker on its own slice of FILE after a 4 KiB header (fio's
 * offset_increment). One JSON line per run: IOPS, I/Os per worker, and for clock2/sweep the mean
 * latency measured around pread and the mean time per I/O outside it (wall / I/Os - latency). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ioloop.h"

#define MAXJOBS 64
#define HUGE (2u << 20)

struct shared {
    volatile int go, stop;
    int64_t ops[MAXJOBS], lat_sum[MAXJOBS], wall[MAXJOBS], err[MAXJOBS];
};

static struct shared *sh;
static const char *path, *variant, *buffers;
static int64_t bs, slice_blocks, seconds;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static char *buffer(void)
{
    char *p;
    if (!strcmp(buffers, "huge")) {
        char *m = mmap(NULL, (size_t)bs + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return NULL;
        p = (char *)(((uintptr_t)m + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
        madvise(p, (size_t)bs, MADV_HUGEPAGE);
    } else if (posix_memalign((void **)&p, 4096, (size_t)bs))
        return NULL;
    for (int64_t o = 0; o < bs; o += 4096)
        p[o] = 0; /* touched in order, as fio fills its buffers */
    return p;
}

static void worker(int idx)
{
    int fd = open(path, O_RDONLY | O_DIRECT); /* each worker its own descriptor, as fio's jobs */
    char *buf = buffer();
    if (fd < 0 || !buf) {
        sh->err[idx] = errno ? errno : ENOMEM;
        return;
    }
    int64_t base = 4096 + (int64_t)idx * slice_blocks * bs, ops = 0, lat = 0, seq = 0;
    while (!sh->go)
        ;
    int64_t t0 = now_ns();
    if (!strcmp(variant, "sweep")) {
        uint64_t *hist = calloc(GD_HIST_N, sizeof *hist);
        int stop = 0;
        struct gd_job j;
        memset(&j, 0, sizeof j);
        j.engine = GD_ENGINE_PSYNC;
        j.iodepth = 1;
        j.fd = fd;
        j.host_buf = buf;
        j.bs = bs;
        j.data_base = base;
        j.slice_blocks = slice_blocks;
        j.file_blocks = slice_blocks;
        j.seed = 1;
        j.rng = 1;
        j.deadline_ns = t0 + seconds * 1000000000LL;
        j.stop = &stop;
        j.hist = hist;
        gd_run(&j);
        ops = j.ops;
        lat = j.lat_sum_ns;
        sh->err[idx] = j.err_kind;
    } else if (!strcmp(variant, "clock2")) {
        while (!sh->stop) {
            int64_t t = now_ns();
            ssize_t r = pread(fd, buf, (size_t)bs, (off_t)(base + (seq++ % slice_blocks) * bs));
            lat += now_ns() - t;
            if (r != bs) {
                sh->err[idx] = r < 0 ? errno : EIO;
                break;
            }
            ops++;
        }
    } else { /* bare: no clock in the loop */
        while (!sh->stop) {
            ssize_t r = pread(fd, buf, (size_t)bs, (off_t)(base + (seq++ % slice_blocks) * bs));
            if (r != bs) {
                sh->err[idx] = r < 0 ? errno : EIO;
                break;
            }
            ops++;
        }
    }
    sh->wall[idx] = now_ns() - t0;
    sh->ops[idx] = ops;
    sh->lat_sum[idx] = lat;
    close(fd);
}

static void *thread_main(void *arg)
{
    worker((int)(intptr_t)arg);
    return NULL;
}

static void clock_cost(void)
{
    const char *cs = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    char name[64] = "?";
    FILE *f = fopen(cs, "r");
    if (f) {
        if (fscanf(f, "%63s", name) != 1)
            strcpy(name, "?");
        fclose(f);
    }
    const int n = 2000000;
    int64_t t = now_ns();
    for (int i = 0; i < n; i++)
        (void)now_ns();
    double mono = (double)(now_ns() - t) / n;
    struct timespec ts;
    t = now_ns();
    for (int i = 0; i < n; i++)
        clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    double coarse = (double)(now_ns() - t) / n;
    printf("{\"variant\": \"clock\", \"clocksource\": \"%s\", \"clock_monotonic_ns\": %.1f, \"clock_monotonic_coarse_ns\": %.1f}\n",
           name, mono, coarse);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "clock")) {
        clock_cost();
        return 0;
    }
    if (argc != 8) {
        fprintf(stderr, "usage: %s clock | FILE BS SECONDS JOBS thread|fork pages|huge bare|clock2|sweep\n", argv[0]);
        return 2;
    }
    path = argv[1];
    bs = atoll(argv[2]);
    seconds = atoll(argv[3]);
    int jobs = atoi(argv[4]);
    const char *spawn = argv[5];
    buffers = argv[6];
    variant = argv[7];
    struct stat st;
    if (stat(path, &st) || jobs < 1 || jobs > MAXJOBS || bs < 4096 || bs % 4096) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    slice_blocks = (st.st_size - 4096) / bs / jobs;
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(sh, 0, sizeof *sh);
    pthread_t th[MAXJOBS];
    pid_t pid[MAXJOBS];
    for (int i = 0; i < jobs; i++) {
        if (!strcmp(spawn, "fork")) {
            pid[i] = fork();
            if (pid[i] == 0) {
                worker(i);
                _exit(0);
            }
        } else
            pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i);
    }
    usleep(200000); /* let every worker open its file and touch its buffer */
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    if (strcmp(variant, "sweep"))
        usleep((useconds_t)(seconds * 1000000));
    __atomic_store_n(&sh->stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < jobs; i++) {
        if (!strcmp(spawn, "fork"))
            waitpid(pid[i], NULL, 0);
        else
            pthread_join(th[i], NULL);
    }
    int64_t ops = 0, lat = 0, wall = 0, err = 0;
    printf("{\"variant\": \"%s\", \"spawn\": \"%s\", \"buffers\": \"%s\", \"bs\": %" PRId64 ", \"jobs\": %d, \"per_job\": [",
           variant, spawn, buffers, bs, jobs);
    for (int i = 0; i < jobs; i++) {
        printf("%s%" PRId64, i ? ", " : "", sh->ops[i]);
        ops += sh->ops[i];
        lat += sh->lat_sum[i];
        wall += sh->wall[i];
        err |= sh->err[i];
    }
    double iops = 0;
    for (int i = 0; i < jobs; i++)
        iops += sh->wall[i] ? (double)sh->ops[i] * 1e9 / (double)sh->wall[i] : 0;
    printf("], \"iops\": %.0f, \"us_per_io\": %.3f", iops, ops ? (double)wall / (double)ops / 1000.0 : 0.0);
    if (strcmp(variant, "bare"))
        printf(", \"lat_mean_us\": %.3f, \"outside_us\": %.3f", ops ? (double)lat / (double)ops / 1000.0 : 0.0,
               ops ? (double)(wall - lat) / (double)ops / 1000.0 : 0.0);
    printf(", \"error\": %" PRId64 "}\n", err);
    return 0;
}
