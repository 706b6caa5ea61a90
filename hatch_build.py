"""Hatch build hook: compile the optional native accelerators.

* `src/cce_knowledge/sync/_cckfast.c` speeds up `cce knowledge pull` and push's scans
  (see sync/accelerator.py);
* `src/cce_knowledge/retrieval/_analyzefast.c` speeds up the search-index build that
  `index` and `pull` run (see retrieval/search_index_build.py).

Both are optional: without a C compiler or Python headers the build only warns, and
the pure Python paths (same bytes, tested against each other) are used instead.

Each module is compiled next to its source, so an editable install picks it up; a
wheel force-includes it and gets a platform tag. `CCE_NO_NATIVE=1` skips the build.
Re-run `pip install -e .` (or `python hatch_build.py`) after editing a C file.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

SOURCE = Path("src/cce_knowledge/sync/_cckfast.c")
ANALYZE_SOURCE = Path("src/cce_knowledge/retrieval/_analyzefast.c")
SOURCES = (SOURCE, ANALYZE_SOURCE)
#: A debugging build for tools/fuzz_cckfast.py (run it with libasan preloaded).
SANITIZE_FLAGS = (
    "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
)  # fmt: skip


def build_native(
    root: Path,
    out: Path | None = None,
    flags: tuple[str, ...] = ("-O2",),
    source: Path = SOURCE,
) -> Path | None:
    """Compile the extension at `source` (in place unless `out` is given); return its
    path, or None with a warning."""
    src = root / source
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    out = out or src.with_name(src.stem + suffix)
    if sys.platform == "win32":
        print(
            "cce-knowledge: native accelerator not built on Windows (pure Python)", file=sys.stderr
        )
        return None
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    cmd = [
        *cc,
        f'-DNATIVE_SOURCE_SHA256="{digest}"',
        *flags,
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        f"-I{include}",
        str(src),
        "-o",
        str(tmp),
    ]
    if sys.platform == "darwin":
        cmd[1:1] = ["-undefined", "dynamic_lookup"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:  # no compiler, or an unwritable source tree
        print(f"cce-knowledge: no C compiler ({e}); using the pure Python path", file=sys.stderr)
        return None
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        print(
            "cce-knowledge: native accelerator not built; using the pure Python path\n"
            + proc.stderr.strip(),
            file=sys.stderr,
        )
        return None
    try:
        os.replace(tmp, out)  # atomic: a process that has the old one loaded keeps it
    except OSError as e:
        tmp.unlink(missing_ok=True)
        print(f"cce-knowledge: could not install the native accelerator ({e})", file=sys.stderr)
        return None
    return out


try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # running as a script without hatchling
    BuildHookInterface = object  # type: ignore[assignment,misc]


class NativeBuildHook(BuildHookInterface):  # type: ignore[misc,valid-type]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("CCE_NO_NATIVE"):
            return
        for source in SOURCES:
            out = build_native(Path(self.root), source=source)
            if out is None or version == "editable":
                continue
            package = source.parent.relative_to("src").as_posix()
            build_data["force_include"][str(out)] = f"{package}/{out.name}"
            build_data["pure_python"] = False
            build_data["infer_tag"] = True


if __name__ == "__main__":
    # `python hatch_build.py` rebuilds in place; `--sanitize OUT` writes an ASan/UBSan build of
    # _cckfast, `--sanitize-analyzer OUT` one of _analyzefast.
    here = Path(__file__).resolve().parent
    if len(sys.argv) == 3 and sys.argv[1] == "--sanitize":
        built = [build_native(here, Path(sys.argv[2]).resolve(), SANITIZE_FLAGS)]
    elif len(sys.argv) == 3 and sys.argv[1] == "--sanitize-analyzer":
        out = Path(sys.argv[2]).resolve()
        built = [build_native(here, out, SANITIZE_FLAGS, source=ANALYZE_SOURCE)]
    else:
        built = [build_native(here, source=source) for source in SOURCES]
    for b in built:
        print(b or "not built")
    sys.exit(0 if all(built) else 1)
