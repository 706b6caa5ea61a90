"""Write `src/cce_knowledge/engine/redaction/secret_rules.json` from the installed `detect-secrets`.

Extended redaction uses the regex plugins of Yelp's `detect-secrets` (Apache-2.0), a
secret-scanning rule set kept up by a project in that field, as data: their patterns,
flags and secret types, with the licence noted in the file. Importing detect-secrets at
run time costs seconds of interpreter start per `cce knowledge index`; the data file
costs nothing, and `tests/engine/test_secret_rules.py` fails when it no longer matches
the installed package. Re-run after upgrading detect-secrets:

    python tools/gen_secret_rules.py

then check `engine/redaction/extended.LINEAR_FORMS`: a changed pattern loses its
linear-time form (`tests/engine/test_redaction_linear.py` says which).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

OUT = (
    Path(__file__).resolve().parents[1]
    / "src"
    / "cce_knowledge"
    / "engine"
    / "redaction"
    / "secret_rules.json"
)

#: Regex plugins left out, and why (recorded in the data file too).
EXCLUDED = {
    "IPPublicDetector": "a public IP address is not a credential",
}


def label(secret_type: str) -> str:
    """`AWS Access Key` -> `AWS_ACCESS_KEY` (the `[REDACTED:<LABEL>]` label)."""
    return re.sub(r"[^A-Z0-9]+", "_", secret_type.upper()).strip("_")


def render() -> str:
    from importlib.metadata import version

    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    rules: list[dict[str, Any]] = []
    plugins = sorted(get_mapping_from_secret_type_to_class().values(), key=lambda c: c.__name__)
    for cls in plugins:
        if not issubclass(cls, RegexBasedDetector) or cls.__name__ in EXCLUDED:
            continue
        for rx in cls.denylist:
            rules.append(
                {
                    "plugin": cls.__name__,
                    "label": label(cls.secret_type),
                    "pattern": rx.pattern,
                    # Only the flags a pattern was compiled with, not re's implicit UNICODE.
                    "flags": int(rx.flags & ~re.UNICODE),
                }
            )
    doc = {
        "source": f"detect-secrets {version('detect-secrets')} (Yelp, Inc.)",
        "homepage": "https://github.com/Yelp/detect-secrets",
        "licence": "Apache-2.0; the patterns below are the regex plugins' denylists, unchanged",
        "generated_by": "tools/gen_secret_rules.py",
        "excluded": EXCLUDED,
        "rules": rules,
    }
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def main() -> int:
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
