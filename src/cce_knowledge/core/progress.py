"""Progress on long steps: a bar on a terminal, calm periodic lines elsewhere.

The mode is resolved once, at the CLI edge (`configure`), from `-q/--quiet`, the
environment and whether stderr is a terminal:

* ``bar``   — stderr is a TTY and not CI: a tqdm bar with counts, rate and ETA;
* ``lines`` — CI (``CI``/``GITHUB_ACTIONS`` set), a pipe or a dumb terminal: one
  plain line every `interval` seconds (count, percent, rate), never a carriage return;
* ``off``   — `-q/--quiet`, and the default for library callers (MCP server, tests).

``CCE_PROGRESS=bar|lines|off`` overrides the detection and ``CCE_PROGRESS_INTERVAL``
(seconds) the pace of the lines and the delay before anything shows. Progress always
goes to stderr, so ``--json`` output on stdout stays pure. tqdm is imported only when
a bar is actually drawn: a cold search never pays for it.

    from cce_knowledge.core import progress
    with progress.task("index", total=n, unit="records") as t:
        for ...:
            t.advance()
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from types import TracebackType
from typing import Any, TextIO, TypeVar

__all__ = [
    "Mode",
    "ProgressSettings",
    "Task",
    "configure",
    "current",
    "note",
    "phase",
    "resolve",
    "task",
]

T = TypeVar("T")


class Mode(Enum):
    OFF = "off"
    BAR = "bar"
    LINES = "lines"


#: Seconds between two CI lines, and before the first line or bar appears: a step
#: that finishes sooner prints nothing at all.
DEFAULT_INTERVAL = 5.0
DEFAULT_BAR_DELAY = 0.5


@dataclass(frozen=True, slots=True)
class ProgressSettings:
    mode: Mode = Mode.OFF
    #: Lines mode: seconds between lines (and before the first one).
    interval: float = DEFAULT_INTERVAL
    #: Bar mode: seconds before the bar appears.
    delay: float = DEFAULT_BAR_DELAY
    #: None means sys.stderr at the time of writing (pytest swaps it per test).
    stream: TextIO | None = None

    def out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr


_OFF = ProgressSettings()
_current: ProgressSettings = _OFF


def _truthy(v: str | None) -> bool:
    return (v or "").strip().lower() not in ("", "0", "false", "no", "off")


def resolve(
    *, quiet: bool = False, env: Mapping[str, str] | None = None, stream: TextIO | None = None
) -> ProgressSettings:
    """The settings for this run (`quiet` wins over everything)."""
    e = os.environ if env is None else env
    s = sys.stderr if stream is None else stream
    interval: float | None = None
    raw_iv = e.get("CCE_PROGRESS_INTERVAL", "").strip()
    if raw_iv:
        try:
            interval = max(0.0, float(raw_iv))
        except ValueError:
            interval = None  # a bad value is not worth failing a command over
    if quiet:
        return _OFF
    forced = e.get("CCE_PROGRESS", "").strip().lower()
    if forced in ("off", "none", "0"):
        return _OFF
    if forced in ("bar", "lines"):
        mode = Mode(forced)
    elif _truthy(e.get("CI")) or e.get("GITHUB_ACTIONS") == "true":
        mode = Mode.LINES
    else:
        try:
            tty = s.isatty()
        except (AttributeError, ValueError):
            tty = False
        mode = Mode.BAR if tty and e.get("TERM", "") != "dumb" else Mode.LINES
    return ProgressSettings(
        mode=mode,
        interval=DEFAULT_INTERVAL if interval is None else interval,
        delay=DEFAULT_BAR_DELAY if interval is None else interval,
        stream=stream,
    )


def configure(settings: ProgressSettings) -> None:
    """Set the process-wide settings (the CLI does this once, after parsing)."""
    global _current
    _current = settings


def current() -> ProgressSettings:
    return _current


def _fmt_count(n: float, unit: str) -> str:
    if unit == "B":
        for suffix in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or suffix == "GiB":
                return f"{n:.0f} {suffix}" if suffix == "B" else f"{n:.1f} {suffix}"
            n /= 1024
    return f"{int(n)}"


def _fmt_rate(rate: float, unit: str) -> str:
    if unit == "B":
        return _fmt_count(rate, "B") + "/s"
    label = unit or "items"
    return f"{rate:.1f} {label}/s" if rate < 100 else f"{rate:.0f} {label}/s"


def _fmt_secs(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(s), 60)
    return f"{m}m{sec:02d}s"


class Task:
    """One long step. Use as a context manager; `advance` as work completes."""

    def __init__(
        self,
        desc: str,
        total: int | None = None,
        unit: str = "",
        settings: ProgressSettings | None = None,
    ) -> None:
        self.desc = desc
        self.total = total
        self.unit = unit
        self.n = 0
        self.settings = current() if settings is None else settings
        self._start = time.monotonic()
        self._last_line = self._start
        self._printed = False
        self._bar: Any = None
        self._closed = False
        self._note = ""
        if self.settings.mode is Mode.BAR:
            self._bar = _make_bar(desc, total, unit, self.settings)

    # -- updates -------------------------------------------------------------------------
    def advance(self, n: int = 1) -> None:
        self.n += n
        mode = self.settings.mode
        if mode is Mode.BAR:
            self._bar.update(n)
        elif mode is Mode.LINES:
            now = time.monotonic()
            if now - self._last_line >= self.settings.interval:
                self._last_line = now
                self._line(now, final=False)

    def set_total(self, total: int | None) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def note(self, text: str) -> None:
        """A short status shown after the counts (e.g. a remaining API budget)."""
        self._note = text
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=False)

    def wrap(self, items: Iterable[T]) -> Iterator[T]:
        """Yield `items`, advancing by one after each."""
        for x in items:
            yield x
            self.advance()

    # -- output --------------------------------------------------------------------------
    def _line(self, now: float, *, final: bool, stopped: bool = False) -> None:
        elapsed = max(now - self._start, 1e-9)
        unit = self.unit
        if self.total is not None and self.total > 0:
            count = f"{_fmt_count(self.n, unit)}/{_fmt_count(self.total, unit)}"
            pct = f" ({100.0 * self.n / self.total:.0f}%)"
        else:
            count, pct = _fmt_count(self.n, unit), ""
        if unit and unit != "B":
            count += f" {unit}"
        rate = _fmt_rate(self.n / elapsed, unit)
        # Past tense on the last line: "done in 8 s" read as time left (#35 §8), and a
        # step that failed or was interrupted is not done at all.
        if stopped:
            tail = f"stopped after {_fmt_secs(elapsed)}"
        elif final:
            tail = f"finished, took {_fmt_secs(elapsed)}"
        else:
            tail = f"{_fmt_secs(elapsed)} elapsed"
        if self.total is None and self.n == 0:
            text = f"{self.desc}: {tail}"  # a step without counts
        else:
            text = f"{self.desc}: {count}{pct}, {rate}, {tail}"
            if self._note:
                text += f"; {self._note}"
        out = self.settings.out()
        try:
            out.write(text + "\n")
            out.flush()
        except (OSError, ValueError):
            pass  # progress is never worth failing the command over
        self._printed = True

    def close(self, *, stopped: bool = False) -> None:
        """The last line: `finished, took …`, or `stopped after …` when the step ended
        by an exception (an interrupt, an error the command then reports)."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self.settings.mode is Mode.LINES:
            now = time.monotonic()
            # A step that printed nothing and ended within the interval stays silent.
            if self._printed or now - self._start >= self.settings.interval:
                self._line(now, final=True, stopped=stopped)

    def __enter__(self) -> Task:
        return self

    def __exit__(
        self,
        et: type[BaseException] | None,
        ev: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(stopped=et is not None)


def _make_bar(desc: str, total: int | None, unit: str, st: ProgressSettings) -> Any:
    # Lazy: tqdm costs ~20-60 ms; only a drawn bar needs it.
    from tqdm import tqdm

    # No monitor thread: the search-index build forks, and a fork wants one thread.
    tqdm.monitor_interval = 0
    out = st.out()
    cols, rows = terminal_size(out)
    kw: dict[str, Any] = {
        "desc": desc,
        "total": total,
        "file": out,
        "delay": st.delay,
        "mininterval": 0.2,
        "leave": True,
    }
    if cols and rows:
        kw["dynamic_ncols"] = True  # follows a resized window
    else:
        # A pseudo-terminal that reports no size (`script -qc`, `docker exec -t`, some
        # CI runners and editors' shells) gives tqdm 0 columns and -1 rows, and it then
        # draws nothing at all: give it a size instead.
        kw["ncols"] = cols or _env_int("COLUMNS") or 80
        kw["nrows"] = rows or _env_int("LINES") or 24
    if unit == "B":
        kw.update(unit="B", unit_scale=True, unit_divisor=1024)
    elif unit:
        kw["unit"] = " " + unit
    elif total is None:
        kw["bar_format"] = "{desc}: {elapsed}"  # a phase: no counts to show
    return tqdm(**kw)


def terminal_size(stream: TextIO) -> tuple[int, int]:
    """(columns, rows) of the terminal behind `stream`; 0 for what it does not report."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return 0, 0
    return size.columns, size.lines


def _env_int(name: str) -> int:
    try:
        return max(0, int(os.environ.get(name, "")))
    except ValueError:
        return 0


def note(text: str) -> None:
    """A one-line report of a finished step (e.g. its time) on stderr; silent when
    progress is off (`-q/--quiet`, library callers)."""
    st = current()
    if st.mode is Mode.OFF:
        return
    out = st.out()
    try:
        out.write(text + "\n")
        out.flush()
    except (OSError, ValueError):
        pass


class _Phase(Task):
    """A step without counts (a git fetch, a push): elapsed time, kept alive by a
    heartbeat thread so the bar keeps ticking and CI still gets its periodic line."""

    def __init__(self, desc: str, settings: ProgressSettings | None = None) -> None:
        super().__init__(desc, None, "", settings)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        if self.settings.mode is not Mode.OFF:
            self._beat = threading.Thread(target=self._run, name="progress", daemon=True)
            self._beat.start()

    def _run(self) -> None:
        step = 0.5 if self.settings.mode is Mode.BAR else max(self.settings.interval, 0.05)
        while not self._stop.wait(step):
            if self._bar is not None:
                self._bar.refresh()
            else:
                self.advance(0)

    def close(self, *, stopped: bool = False) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        super().close(stopped=stopped)


def phase(desc: str) -> Task:
    """A progress task for a step that has no counts (elapsed time only)."""
    return _Phase(desc)


def task(desc: str, total: int | None = None, unit: str = "") -> Task:
    """A progress task under the process-wide settings (silent unless configured)."""
    return Task(desc, total, unit)
