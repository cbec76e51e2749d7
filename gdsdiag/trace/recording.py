"""A --record file: written by the live trace, read back (bounded, twice) by --replay. The events'
form and how one line is checked are the model's (model/events.py); the file is opened here."""

from __future__ import annotations

import json

from ..errors import GdsdiagError
from .model.events import (
    RECORD_VERSION,
    Event,
    NewerRecording,
    NotARecording,
    check_header,
    event_of,
    leading_int,
)

MAX_REPLAY_EVENTS = 2_000_000  # ~1 GiB of Event objects; a longer run is recorded in parts


def write_record(f, header: dict, events) -> None:
    f.write(json.dumps({"gdsdiag_trace_record": RECORD_VERSION, **header}) + "\n")
    for e in events:
        f.write(json.dumps(e.to_list()) + "\n")


def read_record(path: str) -> tuple[dict, list[Event]]:
    """(header, events) of a --record file (plain or .gz), all in memory (see Recording)."""
    rec = Recording(path)
    return rec.header, list(rec.events())


class Recording:
    """A --record file (plain or .gz), read as a bounded stream, twice: ``Recording(path)`` reads it
    once without keeping it — the header, the number of events, how far out of time order an event
    comes (``disorder_ns``) — and ``events()`` streams the validated events on the second read.
    Refuses FIFOs and devices, lines over 64 KiB, more than MAX_REPLAY_EVENTS events, a damaged gzip
    stream, invalid UTF-8, JSON nested deeper than 64 or numbers out of range, and values of the
    wrong type — each as "not a gdsdiag recording: line N" instead of an internal error or a
    MemoryError. What the first read finds (everything but an event's JSON and types) is refused
    before any event is handed out."""

    FIX = "record one with gdsdiag trace --record FILE"

    def __init__(self, path: str):
        self.path = path
        self.header: dict = {}
        self.count = 0  # events (less a cut last line, once events() has found it unparsable)
        self.disorder_ns = 0  # the most an event's time lies before an earlier line's
        # --record ends every line with a newline: a last line without one was cut as it was written
        # (the tracer killed, the disk full). If it does not parse it is left out, and named here.
        self.unterminated: int | None = None
        self.cut_at: int | None = None
        self.content_lines = 0  # lines of content checks (content.py): read before any event is fed
        newest = None
        for n, text in self._lines():
            if n == 0:
                continue
            if '"content"' in text:
                self.content_lines += 1
            self.count += 1
            if self.count > MAX_REPLAY_EVENTS:
                raise self._error(n, f"more than {MAX_REPLAY_EVENTS} events")
            ts = leading_int(text)
            if ts is None:
                continue  # (not an event: the second read names the line)
            if newest is None or ts > newest:
                newest = ts
            elif newest - ts > self.disorder_ns:
                self.disorder_ns = newest - ts

    def events(self):
        """The events in file order, each validated (the second read of the file)."""
        from ..bounded import loads_json

        count = 0
        for n, text in self._lines():
            if n == 0:
                continue
            try:
                # (the C parser: a line is at most 64 KiB, so its numbers and nesting are bounded by
                # Python's own limits, and _event rejects every non-integer; a line it refuses is
                # parsed again with gdsdiag's limits for the reason)
                v = json.loads(text)
            except (ValueError, RecursionError):
                if n == self.unterminated:
                    self.cut_at = n  # (the last line, cut as it was written: left out, and said)
                    self.count -= 1
                    return
                try:
                    v = loads_json(text)
                except ValueError as e:
                    raise self._error(n, f"not an event record ({e})") from None
            try:
                event = event_of(v, n)
            except NotARecording as bad:
                try:  # (a number out of gdsdiag's limits is the better reason, as before the fast path)
                    loads_json(text)
                except ValueError as limit:
                    raise self._error(n, f"not an event record ({limit})") from None
                raise self._error(bad.line, bad.why) from None
            yield event
            count += 1
            if count > self.count:
                raise self._error(n, "the file grew while it was replayed")

    def content_events(self):
        """The recording's content checks (a third read, only of recordings that have them)."""
        return (e for e in self.events() if e.kind == "content")

    def _error(self, line: int, why: str) -> GdsdiagError:
        return GdsdiagError(f"{self.path} is not a gdsdiag trace record: line {line}: {why}", self.FIX)

    def _lines(self):
        """(line number, text) of every event line; (0, "") once the header is read (into
        self.header). Byte-level bounds, the gzip stream and UTF-8 are checked here."""
        import gzip
        import zlib

        from ..bounded import MAX_RECORD_LINE, MAX_RECORDING, loads_json, open_user_file

        raw = open_user_file(self.path, "trace recording", MAX_RECORDING, self.FIX)
        n = 0
        try:
            with raw:
                magic = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
                f = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw
                header = None
                total = 0
                while True:
                    try:
                        line = f.readline(MAX_RECORD_LINE + 1)
                    except EOFError:
                        if header is None:
                            raise
                        # a gzip stream that ends early (the tracer killed, the disk full): what came
                        # before the cut is read, and the cut said, as for a plain file's cut last line
                        self.cut_at = n + 1
                        break
                    if not line:
                        break
                    n += 1
                    total += len(line)
                    if len(line) > MAX_RECORD_LINE:
                        raise NotARecording(n, f"line longer than {MAX_RECORD_LINE >> 10} KiB")
                    if not line.endswith(b"\n"):
                        self.unterminated = n  # (readline returns a line without one only at the end)
                    if total > MAX_RECORDING:
                        raise NotARecording(n, f"more than {MAX_RECORDING >> 30} GiB of events")
                    try:
                        text = line.decode("utf-8").strip()
                    except UnicodeDecodeError:
                        raise NotARecording(n, "invalid UTF-8") from None
                    if header is None:
                        try:
                            header = loads_json(text)
                        except ValueError:
                            header = None
                        check_header(header, n)
                        self.header = header if isinstance(header, dict) else {}  # (checked: a dict)
                        yield 0, ""
                        continue
                    if not text or text.startswith("#"):
                        continue
                    yield n, text
                if header is None:
                    raise NotARecording(max(n, 1), "empty file")
        except NotARecording as e:
            raise self._error(e.line, e.why) from None
        except NewerRecording as e:
            raise GdsdiagError(
                f"{self.path} was recorded by a newer gdsdiag (record version {e.version}; this one reads "
                f"versions 1 to {RECORD_VERSION})",
                "replay it with the gdsdiag that recorded it, or a newer one",
            ) from None
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise self._error(n + 1, f"damaged gzip stream ({e})") from None
        except OSError as e:
            raise GdsdiagError(f"cannot read {self.path}: {e.strerror or e}", "check the path") from None
