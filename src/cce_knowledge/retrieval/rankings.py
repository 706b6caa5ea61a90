"""Which ranking runs, and its score floor: `--ranking`, else `knowledge.ranking`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cce_knowledge.core.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from cce_knowledge.config.settings import Settings

RANKINGS = ("default", "reference", "hybrid")

#: The reference ranking's floor (`knowledge.min_score` default, docs/spec/core.md §10.1).
REFERENCE_MIN_SCORE = 0.30
#: The default ranking's floor. Its scores are the share of the query's idf mass a
#: record matches (0..1), so a much lower floor only drops near-noise matches.
DEFAULT_MIN_SCORE = 0.05


def configured_min_score(settings: Settings | None, ranking: str) -> float:
    """The floor when none is given: `knowledge.min_score` for reference, else our default."""
    if ranking == "reference" and settings is not None:
        return settings.knowledge.min_score
    return default_min_score(ranking)


def check_ranking(ranking: str) -> str:
    if ranking not in RANKINGS:
        raise UsageError(f"unknown ranking {ranking!r} (expected one of: {', '.join(RANKINGS)})")
    return ranking


def default_min_score(ranking: str) -> float:
    return REFERENCE_MIN_SCORE if ranking == "reference" else DEFAULT_MIN_SCORE


def resolve_ranking(settings: Settings | None, cli_value: str | None) -> str:
    """`--ranking` wins; else `knowledge.ranking` from `.cce/config`; else default."""
    if cli_value is not None:
        return check_ranking(cli_value)
    if settings is not None and settings.knowledge.ranking_problem is not None:
        raise ConfigError(settings.knowledge.ranking_problem)
    if settings is not None and settings.knowledge.ranking is not None:
        return settings.knowledge.ranking
    return "default"


def hybrid_fallback_note(why: str) -> str:
    """What `hybrid` says (stderr, MCP `_meta`) when it shows the default ranking."""
    return f"hybrid ranking unavailable ({why}); showing the default ranking"
