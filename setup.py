from setuptools import find_packages, setup

setup(
    name="gdsdiag",
    version="0.1.0",
    description="Diagnose the NVIDIA GPUDirect Storage data path: P2P, compatibility mode or DRAM bounce",
    packages=find_packages(include=["gdsdiag", "gdsdiag.*"]) + ["gdsdiag._csrc", "gdsdiag._probes"],
    # csrc/ (cffi declarations) and probes/ (eBPF C programs) are read at run time: install them
    package_dir={"gdsdiag._csrc": "csrc", "gdsdiag._probes": "probes"},
    package_data={"gdsdiag._csrc": ["*.h", "*.c"], "gdsdiag._probes": ["*.c"],   # csrc/ioloop.c: the sweep builds it at first use
                  "gdsdiag.explain": ["messages.json"], "gdsdiag.validate": ["*.yaml"]},
    python_requires=">=3.10",
    classifiers=["Programming Language :: Python :: 3 :: Only"] + [
        f"Programming Language :: Python :: 3.{m}" for m in (10, 11, 12)],  # each run by .ci/run
    install_requires=["click>=8", "rich>=12", "psutil>=5", "pyudev>=0.21", "cffi>=1.15", "numpy>=1.22", "PyYAML>=5.4"],
    extras_require={
        "test": ["pytest>=7", "pytest-xdist>=3", "hypothesis>=6", "nvidia-cufile==1.15.1.6", "matplotlib>=3.5",
                 "junitparser>=3", "prometheus-client>=0.16", "kubernetes-validate>=1.28", "nvidia-ml-py>=12"],
        "plot": ["matplotlib>=3.5"],   # gdsdiag sweep --plot, gdsdiag report --png
        "exporter": ["prometheus-client>=0.16"],   # gdsdiag exporter
        "nvml": ["nvidia-ml-py>=12"],   # gdsdiag topology's NVLink reader on a live node (pynvml)
        "cufile": ["nvidia-cufile"],   # libcufile for gdsdiag cufile / check / validate on a node without the CUDA toolkit's
        # a GPU machine: the sweep's and the proof's cupy and kvikio, libcufile, and NVML for NVLink
        "cu12": ["cupy-cuda12x", "kvikio-cu12", "nvidia-cufile-cu12", "nvidia-ml-py>=12"],
        "cu13": ["cupy-cuda13x", "kvikio-cu13", "nvidia-cufile", "nvidia-ml-py>=12"],
    },
    entry_points={"console_scripts": ["gdsdiag=gdsdiag.__main__:main"]}  # signals handled from its first line,
)
