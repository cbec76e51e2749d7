"""gdsdiag: did this I/O go GPU↔storage by P2P DMA, through cuFile compatibility mode, or via DRAM?"""

__version__ = "0.1.0"
