"""``gdsdiag explain``: what the lines of cufile.log, gdsio, gdscheck -p, nvidia-fs stats and dmesg
mean, their likely cause and fix, each with its source (messages.json)."""

from .analyse import Report, explain_paths, explain_texts, matters  # noqa: F401
from .readers import MAX_BYTES, detect  # noqa: F401
