"""Which addresses does the CUDA driver hand out for its copy entry points, and are they the
exported symbols? (python3 cuda_doors.py [LIBCUDA]) — a diagnostic for gdsdiag trace's uprobes."""

import sys

sys.path.insert(0, ".")
from gdsdiag.trace.probes.bpf import _find_libcuda
from gdsdiag.trace.probes.cudadoors import proc_address_sites
from gdsdiag.trace.probes.elfsyms import dynamic_symbol_addresses

lib = sys.argv[1] if len(sys.argv) > 1 else _find_libcuda()
print("libcuda", lib)
exported = {a: n for n, a in dynamic_symbol_addresses(lib).items() if n.startswith("cuMemcpy")}
sites, why = proc_address_sites(lib)
print("cuGetProcAddress:", why or f"{len(sites)} addresses")
for a, fn in sorted(sites.items()):
    print(f"  {a:#x} {fn:12} exported as: {exported.get(a, '(not an exported symbol)')}")
