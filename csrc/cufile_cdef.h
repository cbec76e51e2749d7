/* cffi (ABI mode) declarations for libcufile, written from NVIDIA's cufile.h as shipped in the
 * nvidia-cufile 1.15.1.6 wheel (nvidia/cu13/include/cufile.h). tests/test_cufile_header.py checks
 * every function, enum value and struct field below against that header, and the struct sizes and
 * offsets against the header compiled by the C compiler.
 *
 * Differences from the header, all ABI-neutral:
 *  - CUresult (an enum in cuda.h) and the CUfileOpError enum are spelled int;
 *  - cuFileDriverClose is the macro name of the exported symbol cuFileDriverClose_v2;
 *  - off_t/loff_t are 64-bit on every platform libcufile ships for (x86-64, aarch64);
 *  - the statistics structs exist twice: as in the 1.15 header, and with the 1.19 readv/writev
 *    block appended to level 1 (suffix _v1190); the loader picks by cuFileGetVersion().
 */
typedef int CUresult;
typedef struct CUstream_st *CUstream;
typedef int64_t off_t;
typedef int64_t loff_t;
struct timespec { long tv_sec; long tv_nsec; };
struct sockaddr;
typedef struct sockaddr sockaddr_t;

typedef struct CUfileError { int err; CUresult cu_err; } CUfileError_t;

typedef enum CUfileDriverStatusFlags {
    CU_FILE_LUSTRE_SUPPORTED = 0, CU_FILE_WEKAFS_SUPPORTED = 1, CU_FILE_NFS_SUPPORTED = 2,
    CU_FILE_GPFS_SUPPORTED = 3, CU_FILE_NVME_SUPPORTED = 4, CU_FILE_NVMEOF_SUPPORTED = 5,
    CU_FILE_SCSI_SUPPORTED = 6, CU_FILE_SCALEFLUX_CSD_SUPPORTED = 7, CU_FILE_NVMESH_SUPPORTED = 8,
    CU_FILE_BEEGFS_SUPPORTED = 9, CU_FILE_NVME_P2P_SUPPORTED = 11, CU_FILE_SCATEFS_SUPPORTED = 12
} CUfileDriverStatusFlags_t;

typedef enum CUfileDriverControlFlags {
    CU_FILE_USE_POLL_MODE = 0, CU_FILE_ALLOW_COMPAT_MODE = 1
} CUfileDriverControlFlags_t;

typedef enum CUfileFeatureFlags {
    CU_FILE_DYN_ROUTING_SUPPORTED = 0, CU_FILE_BATCH_IO_SUPPORTED = 1,
    CU_FILE_STREAMS_SUPPORTED = 2, CU_FILE_PARALLEL_IO_SUPPORTED = 3
} CUfileFeatureFlags_t;

typedef struct CUfileDrvProps {
    struct {
        unsigned int major_version;
        unsigned int minor_version;
        size_t poll_thresh_size;
        size_t max_direct_io_size;
        unsigned int dstatusflags;
        unsigned int dcontrolflags;
    } nvfs;
    unsigned int fflags;
    unsigned int max_device_cache_size;
    unsigned int per_buffer_cache_size;
    unsigned int max_device_pinned_mem_size;
    unsigned int max_batch_io_size;
    unsigned int max_batch_io_timeout_msecs;
} CUfileDrvProps_t;

typedef struct cufileRDMAInfo { int version; int desc_len; const char *desc_str; } cufileRDMAInfo_t;

typedef struct CUfileFSOps {
    const char *(*fs_type)(void *handle);
    int (*getRDMADeviceList)(void *handle, sockaddr_t **hostaddrs);
    int (*getRDMADevicePriority)(void *handle, char *, size_t, loff_t, sockaddr_t *hostaddr);
    ssize_t (*read)(void *handle, char *, size_t, loff_t, cufileRDMAInfo_t *);
    ssize_t (*write)(void *handle, const char *, size_t, loff_t, cufileRDMAInfo_t *);
} CUfileFSOps_t;

enum CUfileFileHandleType {
    CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1, CU_FILE_HANDLE_TYPE_OPAQUE_WIN32 = 2, CU_FILE_HANDLE_TYPE_USERSPACE_FS = 3
};

typedef struct CUfileDescr_t {
    enum CUfileFileHandleType type;
    union { int fd; void *handle; } handle;
    const CUfileFSOps_t *fs_ops;
} CUfileDescr_t;

typedef void *CUfileHandle_t;
typedef void *CUfileBatchHandle_t;

typedef enum CUfileOpcode { CUFILE_READ = 0, CUFILE_WRITE = 1 } CUfileOpcode_t;
typedef enum CUFILEStatus_enum {
    CUFILE_WAITING = 1, CUFILE_PENDING = 2, CUFILE_INVALID = 4, CUFILE_CANCELED = 8,
    CUFILE_COMPLETE = 16, CUFILE_TIMEOUT = 32, CUFILE_FAILED = 64
} CUfileStatus_t;
typedef enum cufileBatchMode { CUFILE_BATCH = 1 } CUfileBatchMode_t;

typedef struct CUfileIOParams {
    CUfileBatchMode_t mode;
    union {
        struct { void *devPtr_base; off_t file_offset; off_t devPtr_offset; size_t size; } batch;
    } u;
    CUfileHandle_t fh;
    CUfileOpcode_t opcode;
    void *cookie;
} CUfileIOParams_t;

typedef struct CUfileIOEvents { void *cookie; CUfileStatus_t status; size_t ret; } CUfileIOEvents_t;

typedef enum CUFileSizeTConfigParameter_t {
    CUFILE_PARAM_PROFILE_STATS = 0, CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH = 1,
    CUFILE_PARAM_EXECUTION_MAX_IO_THREADS = 2, CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB = 3,
    CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM = 4, CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB = 5,
    CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB = 6, CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB = 7,
    CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB = 8, CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE = 9,
    CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB = 10, CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS = 11
} CUFileSizeTConfigParameter_t;

typedef enum CUFileBoolConfigParameter_t {
    CUFILE_PARAM_PROPERTIES_USE_POLL_MODE = 0, CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE = 1,
    CUFILE_PARAM_FORCE_COMPAT_MODE = 2, CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE = 3,
    CUFILE_PARAM_EXECUTION_PARALLEL_IO = 4, CUFILE_PARAM_PROFILE_NVTX = 5,
    CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY = 6, CUFILE_PARAM_USE_PCIP2PDMA = 7,
    CUFILE_PARAM_PREFER_IO_URING = 8, CUFILE_PARAM_FORCE_ODIRECT_MODE = 9,
    CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION = 10, CUFILE_PARAM_STREAM_MEMOPS_BYPASS = 11
} CUFileBoolConfigParameter_t;

typedef enum CUFileStringConfigParameter_t {
    CUFILE_PARAM_LOGGING_LEVEL = 0, CUFILE_PARAM_ENV_LOGFILE_PATH = 1, CUFILE_PARAM_LOG_DIR = 2
} CUFileStringConfigParameter_t;

typedef enum CUFileArrayConfigParameter_t {
    CUFILE_PARAM_POSIX_POOL_SLAB_SIZE_KB = 0, CUFILE_PARAM_POSIX_POOL_SLAB_COUNT = 1
} CUFileArrayConfigParameter_t;

typedef struct CUfileOpCounter { uint64_t ok; uint64_t err; } CUfileOpCounter_t;

typedef struct CUfileStatsLevel1 {
    CUfileOpCounter_t read_ops, write_ops, hdl_register_ops, hdl_deregister_ops, buf_register_ops, buf_deregister_ops;
    uint64_t read_bytes, write_bytes, read_bw_bytes_per_sec, write_bw_bytes_per_sec, read_lat_avg_us, write_lat_avg_us;
    uint64_t read_ops_per_sec, write_ops_per_sec, read_lat_sum_us, write_lat_sum_us;
    CUfileOpCounter_t batch_submit_ops, batch_complete_ops, batch_setup_ops, batch_cancel_ops, batch_destroy_ops;
    CUfileOpCounter_t batch_enqueued_ops, batch_posix_enqueued_ops, batch_processed_ops, batch_posix_processed_ops;
    CUfileOpCounter_t batch_nvfs_submit_ops, batch_p2p_submit_ops, batch_aio_submit_ops, batch_iouring_submit_ops;
    CUfileOpCounter_t batch_mixed_io_submit_ops, batch_total_submit_ops;
    uint64_t batch_read_bytes, batch_write_bytes, batch_read_bw_bytes, batch_write_bw_bytes;
    uint64_t batch_submit_lat_avg_us, batch_completion_lat_avg_us, batch_submit_ops_per_sec, batch_complete_ops_per_sec;
    uint64_t batch_submit_lat_sum_us, batch_completion_lat_sum_us, last_batch_read_bytes, last_batch_write_bytes;
} CUfileStatsLevel1_t;

typedef struct CUfileStatsLevel2 {
    CUfileStatsLevel1_t basic;
    uint64_t read_size_kb_hist[32];
    uint64_t write_size_kb_hist[32];
} CUfileStatsLevel2_t;

typedef struct CUfilePerGpuStats {
    char uuid[16];
    uint64_t read_bytes, read_bw_bytes_per_sec, read_utilization, read_duration_us, n_total_reads;
    uint64_t n_p2p_reads, n_nvfs_reads, n_posix_reads, n_unaligned_reads, n_dr_reads;
    uint64_t n_sparse_regions, n_inline_regions, n_reads_err;
    uint64_t writes_bytes, write_bw_bytes_per_sec, write_utilization, write_duration_us, n_total_writes;
    uint64_t n_p2p_writes, n_nvfs_writes, n_posix_writes, n_unaligned_writes, n_dr_writes, n_writes_err;
    uint64_t n_mmap, n_mmap_ok, n_mmap_err, n_mmap_free, reg_bytes;
} CUfilePerGpuStats_t;

typedef struct CUfileStatsLevel3 {
    CUfileStatsLevel2_t detailed;
    uint32_t num_gpus;
    CUfilePerGpuStats_t per_gpu_stats[16];
} CUfileStatsLevel3_t;

/* libcufile >= 1.19 (1190): level 1 grows by the readv/writev counters; 2 and 3 embed it. */
typedef struct CUfileStatsLevel1_v1190 {
    CUfileStatsLevel1_t v1150;
    CUfileOpCounter_t readv_ops, writev_ops;
    uint64_t readv_bytes, writev_bytes, readv_bw_bytes_per_sec, writev_bw_bytes_per_sec;
    uint64_t readv_lat_avg_us, writev_lat_avg_us, readv_ops_per_sec, writev_ops_per_sec;
    uint64_t readv_lat_sum_us, writev_lat_sum_us;
} CUfileStatsLevel1_v1190_t;
typedef struct CUfileStatsLevel2_v1190 {
    CUfileStatsLevel1_v1190_t basic;
    uint64_t read_size_kb_hist[32];
    uint64_t write_size_kb_hist[32];
} CUfileStatsLevel2_v1190_t;
typedef struct CUfileStatsLevel3_v1190 {
    CUfileStatsLevel2_v1190_t detailed;
    uint32_t num_gpus;
    CUfilePerGpuStats_t per_gpu_stats[16];
} CUfileStatsLevel3_v1190_t;

CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr);
void cuFileHandleDeregister(CUfileHandle_t fh);
CUfileError_t cuFileBufRegister(const void *bufPtr_base, size_t length, int flags);
CUfileError_t cuFileBufDeregister(const void *bufPtr_base);
ssize_t cuFileRead(CUfileHandle_t fh, void *bufPtr_base, size_t size, off_t file_offset, off_t bufPtr_offset);
ssize_t cuFileWrite(CUfileHandle_t fh, const void *bufPtr_base, size_t size, off_t file_offset, off_t bufPtr_offset);
CUfileError_t cuFileDriverOpen(void);
CUfileError_t cuFileDriverClose_v2(void);
long cuFileUseCount(void);
CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props);
CUfileError_t cuFileDriverSetPollMode(bool poll, size_t poll_threshold_size);
CUfileError_t cuFileDriverSetMaxDirectIOSize(size_t max_direct_io_size);
CUfileError_t cuFileDriverSetMaxCacheSize(size_t max_cache_size);
CUfileError_t cuFileDriverSetMaxPinnedMemSize(size_t max_pinned_size);
CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch_idp, unsigned nr);
CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch_idp, unsigned nr, CUfileIOParams_t *iocbp, unsigned int flags);
CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch_idp, unsigned min_nr, unsigned *nr, CUfileIOEvents_t *iocbp, struct timespec *timeout);
CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch_idp);
void cuFileBatchIODestroy(CUfileBatchHandle_t batch_idp);
CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p, off_t *file_offset_p, off_t *bufPtr_offset_p, ssize_t *bytes_read_p, CUstream stream);
CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p, off_t *file_offset_p, off_t *bufPtr_offset_p, ssize_t *bytes_written_p, CUstream stream);
CUfileError_t cuFileStreamRegister(CUstream stream, unsigned flags);
CUfileError_t cuFileStreamDeregister(CUstream stream);
CUfileError_t cuFileGetVersion(int *version);
CUfileError_t cuFileGetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t *value);
CUfileError_t cuFileGetParameterBool(CUFileBoolConfigParameter_t param, bool *value);
CUfileError_t cuFileGetParameterString(CUFileStringConfigParameter_t param, char *desc_str, int len);
CUfileError_t cuFileGetParameterMinMaxValue(CUFileSizeTConfigParameter_t param, size_t *min_value, size_t *max_value);
CUfileError_t cuFileSetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t value);
CUfileError_t cuFileSetParameterBool(CUFileBoolConfigParameter_t param, bool value);
CUfileError_t cuFileSetParameterString(CUFileStringConfigParameter_t param, const char *desc_str);
CUfileError_t cuFileSetStatsLevel(int level);
CUfileError_t cuFileGetStatsLevel(int *level);
CUfileError_t cuFileStatsStart(void);
CUfileError_t cuFileStatsStop(void);
CUfileError_t cuFileStatsReset(void);
CUfileError_t cuFileGetStatsL1(void *stats);
CUfileError_t cuFileGetStatsL2(void *stats);
CUfileError_t cuFileGetStatsL3(void *stats);
CUfileError_t cuFileGetBARSizeInKB(int gpuIndex, size_t *barSize);
CUfileError_t cuFileSetParameterPosixPoolSlabArray(const size_t *size_values, const size_t *count_values, int len);
CUfileError_t cuFileGetParameterPosixPoolSlabArray(size_t *size_values, size_t *count_values, int len);
