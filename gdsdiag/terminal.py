"""What reaches the terminal from data: never a control sequence (docs/security.md, "Text into the
terminal").

Hostnames, process names, mount paths, device names, cufile.json values and model names come from
the node or from files strangers send. Written to a terminal as they are, ``ESC ] 8 ; ; URL``
makes a hyperlink, ``ESC [ 2 J`` clears the screen, OSC 0 retitles the window, BEL rings; rich
adds its own styles around them, so a renderer cannot tell its text from the data's afterwards.
Two places see all of it, and the process entry filters both: ``install`` (gdsdiag/__main__.py)
rich's, ``filtered`` click's (put in place by cli.main: only the command line imports click):

- rich renders every ``print`` into segments (text, style, control) and only then turns styles
  into escape codes: the text of each non-control segment has its control characters replaced by
  '?' (bounded.printable) before that, so rich's own colours, spinners and cursor moves stay and
  the data's sequences never reach the terminal; a hyperlink style (gdsdiag makes none: one can
  only come from data read as markup) is dropped;
- ``click.echo`` (the plain-text renderers: diff, kv, explain, error lines) gets the same filter.

Markup (``[bold]``, ``[link=…]`` inside data) is a different matter: it is escaped where data is
put into rich markup (bounded.shown), as it must be interpreted for gdsdiag's own styles.
"""

from __future__ import annotations

from .bounded import printable

_installed = False


def _clean(buffer):
    from rich.segment import Segment

    for seg in buffer:
        text, style, control = seg
        if control:
            yield seg
            continue
        if style is not None and style.link:
            style = style.clear_meta_and_links()
        yield Segment(printable(text), style, control)


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from rich.console import Console

    render = Console._render_buffer

    def _render_buffer(self, buffer):
        return render(self, _clean(buffer))

    Console._render_buffer = _render_buffer


def filtered(echo):
    """``echo`` (click's) with the control characters of a text message replaced, as rich's segments
    are; once filtered, it is returned as it is."""
    if getattr(echo, "_gdsdiag_filtered", False):
        return echo

    def safe_echo(message=None, *args, **kwargs):
        if isinstance(message, str):
            message = printable(message)
        return echo(message, *args, **kwargs)

    safe_echo._gdsdiag_filtered = True  # type: ignore[attr-defined]
    return safe_echo
