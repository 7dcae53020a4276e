"""Inference-time debiasing, one package (since 0.14.0; before, ``debias``, ``debiasing``, ``permsc`` and
``rerankers.debiased`` held its parts):

- :mod:`~posbias.debias.catalog`: the registry of debias methods (the ``debias`` wildcard's grammar, each
  method's level, settings, wrapper or combine step); nothing else lists their names.
- :mod:`~posbias.debias.wrappers`: the window-level methods, each a :class:`posbias.rerankers.Reranker`
  around the base reranker (PermSC per window, BSC, slot rotation, round-robin windowing, marker
  renaming, CapCal); imported when a job wraps a reranker.
- :mod:`~posbias.debias.list_level`: the list-level methods' combine steps (PermSC over the K reranked
  shuffled lists) and their summed costs.
- :mod:`~posbias.debias.maths`: the maths they share (Kemeny, Borda, RRF, local search; CapCal's scores
  and α; BSC).

The registry's names and the maths are re-exported here: ``debias.parse``, ``debias.wrap``,
``debias.kemeny``, ``debias.capcal_scores``, ``debias.bsc``.
"""

from posbias.debias.catalog import (
    AGGREGATE_LISTS,
    AVERAGE_SCORES,
    GRAMMAR,
    DEBIAS_METHODS,
    PATTERN,
    VARIANT,
    DebiasMethod,
    DebiasSpec,
    combine,
    lists,
    options,
    parse,
    pattern,
    placeholder,
    probe_channel,
    shuffle_combine,
    wrap,
)
from posbias.debias.maths import (
    CAPCAL_COUNTERS,
    EXACT_KEMENY_MAX,
    aggregate,
    borda,
    bsc,
    capcal_alpha,
    capcal_scores,
    capcal_slot_scores,
    kemeny,
    kendall_distance_total,
    local_search,
    pairwise_counts,
    rrf_consensus,
)

__all__ = ["AGGREGATE_LISTS", "AVERAGE_SCORES", "CAPCAL_COUNTERS", "EXACT_KEMENY_MAX", "GRAMMAR", "DEBIAS_METHODS",
           "PATTERN", "VARIANT", "DebiasMethod", "DebiasSpec", "aggregate", "borda", "bsc", "capcal_alpha",
           "capcal_scores", "capcal_slot_scores", "combine", "kemeny", "kendall_distance_total", "lists", "local_search", "options",
           "pairwise_counts", "parse", "pattern", "placeholder", "probe_channel", "rrf_consensus", "shuffle_combine", "wrap"]
