"""The bottom layer: PCI configuration-space decoding and the records readers produce."""
