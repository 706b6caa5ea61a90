"""Remote URLs fit to show to a person or a log: credentials never printed.

One helper for every place that displays a remote (status, adapters' messages):
userinfo (`user:token@`) and the query string are removed; scp-like `git@host:o/r`
has no secret and passes unchanged.
"""

from __future__ import annotations

import urllib.parse


def display_url(url: str) -> str:
    """`https://x-access-token:ghp_…@github.com/o/r.git?t=1` → `https://github.com/o/r.git`."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or parts.scheme == "file" or "@" not in parts.netloc:
        return url if not parts.query else urllib.parse.urlunsplit(parts._replace(query=""))
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=host, query=""))
