"""PyTorch saving a GPU tensor to a file and loading it back onto the GPU, the ordinary way, for
tracing on a GPU machine: python3 torch_load.py DIR [mmap].

write  torch-model.pt (a 16 MiB float32 tensor): torch.save copies it device-to-host, then writes
       the zip archive (DRAM_BOUNCE for the tensor's bytes; the small zip records are below the size
       the tracer counts)
read   torch.load(..., map_location="cuda"): the storage is read into host memory, then copied
       host-to-device (DRAM_BOUNCE); with "mmap", torch.load(mmap=True) maps the file and the copy
       reads the mapped pages (page-cache fills of a mmap'd file, then the copy from the mapping)
"""

import os
import sys

import torch

d = sys.argv[1]
use_mmap = len(sys.argv) > 2 and sys.argv[2] == "mmap"
MiB = 1 << 20
path = os.path.join(d, "torch-model.pt")
x = torch.arange(4 * MiB, dtype=torch.float32, device="cuda")  # 16 MiB
torch.save(x, path)
print("op write", os.path.getsize(path), 0, "torch.save of a GPU tensor", flush=True)
if use_mmap:
    # the pages must come from the disk: written back first (dirty pages are not dropped), then dropped
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
y = torch.load(path, map_location="cuda", mmap=use_mmap, weights_only=True)
torch.cuda.synchronize()
assert y.device.type == "cuda" and bool((y == x).all())
print("op read", os.path.getsize(path), 0, "torch.load map_location=cuda", "mmap" if use_mmap else "", flush=True)
os.unlink(path)
