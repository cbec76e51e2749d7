/* gdsdiag sweep: the timed I/O loop of one worker (csrc/ioloop.c). This header is both the C
 * declaration and the cffi cdef (gdsdiag/sweep/native.py reads it), so it holds only plain
 * declarations: no #include, no #if, integer #defines only. */

#define GD_HIST_N 4096            /* latency histogram buckets: exact below 128 ns, then 64 per power of 2 */

#define GD_ENGINE_PSYNC 0         /* pread/pwrite on a file descriptor, one I/O at a time */
#define GD_ENGINE_CUFILE 1        /* cuFileRead/cuFileWrite through function pointers, one at a time */
#define GD_ENGINE_URING 2         /* io_uring read/write on a file descriptor, iodepth in flight */
#define GD_ENGINE_CUFILE_BATCH 3  /* cuFileBatchIOSubmit/GetStatus: one batch handle per slot, iodepth in flight */
#define GD_ENGINE_CUFILE_STREAM 4 /* cuFileReadAsync/WriteAsync: one registered CUDA stream per slot, iodepth in flight */

#define GD_ERR_NONE 0
#define GD_ERR_IO 1               /* the call failed: err = errno (or cuFile error code for cufile) */
#define GD_ERR_SHORT 2            /* fewer bytes than asked: err_ret = bytes done */
#define GD_ERR_MISMATCH 3         /* data differs: err_offset = first bad byte (data offset), err = slot + 1,
                                     err_ret = the 8 bytes found in its word, err_aux = the slot's previous I/O */
#define GD_ERR_COPY 4             /* a CUDA copy (bounce / GPU verification) failed: err = CUresult */
#define GD_ERR_SETUP 5            /* io_uring could not be set up: err = errno */
#define GD_ERR_CUDA 6             /* a CUDA stream call (synchronize/query) failed: err = CUresult */

struct gd_job {
    /* what to do (set by Python) */
    int engine;
    int is_write;
    int random;
    int verify;
    int bounce;                   /* host I/O plus a copy to (read) / from (write) gpu_buf in the timed op */
    int iodepth;
    int fd;
    void *cufile_handle;          /* CUfileHandle_t */
    void *cufile_io;              /* cuFileRead or cuFileWrite (ssize_t (*)(void*, void*, size_t, off_t, off_t)) */
    void *cu_htod;                /* cuMemcpyHtoD_v2 (int (*)(uint64_t dst, const void *src, size_t)) or NULL */
    void *cu_dtoh;                /* cuMemcpyDtoH_v2 (int (*)(void *dst, uint64_t src, size_t)) or NULL */
    char *host_buf;               /* iodepth x bs bytes, page aligned (pinned for bounce) */
    uint64_t gpu_buf;             /* device pointer, iodepth x bs bytes (cufile, bounce), else 0 */
    char *scratch;                /* bs host bytes: GPU data is checked / generated here */
    int64_t bs;
    int64_t data_base;            /* file offset of data offset 0 (the sweep file's header size) */
    int64_t slice_start;          /* sequential: first block of this worker's slice */
    int64_t slice_blocks;         /* sequential: blocks in the slice (wraps) */
    int64_t file_blocks;          /* random: blocks in the whole data region */
    uint64_t seed;                /* pattern seed */
    uint64_t rng;                 /* random offsets: xorshift64* state (nonzero) */
    int64_t deadline_ns;          /* CLOCK_MONOTONIC; 0 = none */
    int64_t max_ops;              /* stop after this many I/Os of this worker; 0 = none */
    int64_t *budget;              /* shared bytes left for the point (atomic), or NULL */
    int *stop;                    /* shared: set nonzero to stop every worker */
    uint8_t *written;             /* shared bitmap of blocks written (set atomically), or NULL */
    uint64_t *hist;               /* GD_HIST_N buckets of latency in ns */
    /* results (and live state read by the watchdog / progress poller while it runs) */
    int64_t ops;
    int64_t bytes;
    int64_t t_start_ns;           /* when the loop began issuing */
    int64_t t_end_ns;             /* last completion */
    int64_t last_done_ns;         /* live: last completion (or t_start) */
    int64_t inflight;             /* live: I/Os outstanding now */
    int64_t max_gap_ns;           /* longest wait for a completion, the loop's own work (checks) excluded */
    int64_t lat_min_ns;
    int64_t lat_max_ns;
    int64_t lat_sum_ns;
    int64_t verify_ns;            /* time spent generating / checking data, outside the latencies */
    int64_t verified_bytes;
    int err_kind;
    int err;
    int64_t err_ret;
    int64_t err_offset;
    int64_t err_aux;              /* mismatch: data offset of the slot's previous I/O, -1 if none */
    int64_t own_ns;               /* internal: own work (data generation/checks) since the last completion */
    /* cufile-batch / cufile-async (set by Python; NULL otherwise) */
    void **queues;                /* iodepth entries: CUfileBatchHandle_t (each set up for 1) or CUstream (registered) */
    void *cf_batch_submit;        /* cuFileBatchIOSubmit */
    void *cf_batch_status;        /* cuFileBatchIOGetStatus */
    void *cf_async_io;            /* cuFileReadAsync or cuFileWriteAsync */
    void *cu_stream_sync;         /* cuStreamSynchronize (int (*)(void *stream)) */
    void *cu_stream_query;        /* cuStreamQuery */
    uint64_t *slot_buf;           /* cufile-async: iodepth device pointers, one buffer per slot (base, offset 0); NULL: gpu_buf + slot x bs */
    int pipeline;                 /* psync host reads with verify: block k is checked on a helper thread while
                                     block k+1 is read (fio's verify_async); host_buf then holds 2 x bs */
};

int gd_run(struct gd_job *j);
int gd_have_uring(void);
int64_t gd_now_ns(void);
void gd_fill(char *buf, int64_t n, int64_t data_off, uint64_t seed);
int64_t gd_check(const char *buf, int64_t n, int64_t data_off, uint64_t seed);
int gd_abi_version(void);
int gd_sizeof_cufile(int which);   /* 0: CUfileIOParams_t, 1: CUfileIOEvents_t, 2: CUfileError_t as this file declares them */
