"""The process entry: ``gdsdiag`` (the console script) and ``python3 -m gdsdiag``.

Signal handling starts here, at the first line gdsdiag runs, before the heavy imports (click,
rich, the command's modules: ~0.1-0.3 s): a SIGINT then ended in a KeyboardInterrupt traceback
from inside an import, and SIGTERM/SIGHUP killed the process without a word. Until cli.main puts
the cleanup handlers in place (gdsdiag.signals.install), a signal ends the process at once with
its exit code (130/143/129) and one line: nothing has been created yet, so there is nothing to
remove. The same handlers are back in place once the command has ended, so a signal during the
interpreter's teardown is no traceback either.
"""

from __future__ import annotations

from . import signals

signals.before_start()


def main() -> None:
    try:
        from . import terminal
        from .cli import main as run

        terminal.install()  # data's control sequences never reach the terminal (gdsdiag/terminal.py)
        run()
    except KeyboardInterrupt as e:  # outside the command's own handling (its imports, the error path)
        signals.exit_now(signals.exit_code(e), signals.signal_name(e))
    finally:
        signals.before_start()


if __name__ == "__main__":
    main()
