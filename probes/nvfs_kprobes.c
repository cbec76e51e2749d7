/* gdsdiag trace: kernel-side proof of P2P, for nodes with nvidia-fs or PCI P2PDMA and kprobes.
 * Attached only when the symbol is in /proc/kallsyms and the kernel has kprobes; on other kernels
 * the programs are still compiled and loaded through the verifier (tests) but not attached.
 *
 * Return conventions (gds-nvidia-fs src/nvfs-dma.c; ../shared/research/nvidia-fs.md §1.5, §7):
 *  nvfs_blk_rq_map_sg / nvfs_nvme_blk_rq_map_sg:   >0 GPU pages mapped, 0 CPU pages, -1 error
 *  nvfs_dma_map_sg_attrs(_nvme):                    nents for GPU pages, -2 (NVFS_CPU_REQ) CPU request
 *  nvfs_blk_rq_dma_map_iter_start (kernel >= 6.17): 1 GPU, 0 CPU (or error)
 *  nvfs_get_dma:                                    0 = a GPU BAR address was handed to the peer device
 *  pci_p2pdma_map_segment (6.2-6.15):               enum pci_p2pdma_map_type (3 BUS_ADDR, 4 THRU_HOST_BRIDGE)
 * No kernel struct is read: only return values and the current task, so any headers compile it.
 */
#include <uapi/linux/ptrace.h>

/* K_* ids, EV_KPROBE and struct kev_t (the layout of event_t) come from gdsdiag/trace/model/eventdefs.py */
/*EVENTDEFS*/
BPF_PERF_OUTPUT(kevents);

static __always_inline int kemit(struct pt_regs *ctx, u32 id, s64 ret) {
    u64 pt = bpf_get_current_pid_tgid();
    struct kev_t e = {};
    e.ts = bpf_ktime_get_ns();
    e.pid = pt >> 32;
    e.tid = (u32)pt;
    e.type = EV_KPROBE;
    e.id = id;
    e.a[0] = ret;
    bpf_get_current_comm(&e.comm, sizeof(e.comm));
    kevents.perf_submit(ctx, &e, sizeof(e));
    return 0;
}

int kret_nvfs_blk_rq_map_sg(struct pt_regs *ctx) { return kemit(ctx, K_MAP_SG, PT_REGS_RC(ctx)); }
int kret_nvfs_dma_map_sg_attrs(struct pt_regs *ctx) { return kemit(ctx, K_DMA_MAP_SG, PT_REGS_RC(ctx)); }
int kret_nvfs_iter_start(struct pt_regs *ctx) { return kemit(ctx, K_ITER_START, PT_REGS_RC(ctx)); }
int kret_nvfs_get_dma(struct pt_regs *ctx) { return kemit(ctx, K_GET_DMA, PT_REGS_RC(ctx)); }
int kret_pci_p2pdma_map_segment(struct pt_regs *ctx) { return kemit(ctx, K_P2PDMA_SEGMENT, PT_REGS_RC(ctx)); }
int kprobe_nvfs_io_start_op(struct pt_regs *ctx) { return kemit(ctx, K_IO_START, 0); }
