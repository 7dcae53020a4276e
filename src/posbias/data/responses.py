"""Response-ranking sets from the Hugging Face hub (``source: hf_responses``), UltraFeedback's schema.

Each row is a prompt (``instruction``) with candidate responses (``completions``: ``response`` and
its ``overall_score``), as ``openbmb/UltraFeedback`` has them. A prompt becomes a query
(``<row index>``), its responses documents (``<query id>-<i>``, in the listed order), and each
response's rating its qrels grade (rounded to an integer; unrated responses are left out, and so is
a prompt with fewer than two rated responses). ``split`` takes the hub's slicing syntax
(``train[:60000]``), so one published split can give disjoint training and test sets.

The rows come from the hub (``id``, through the HF cache) or from a local JSON Lines / Parquet file
in the same schema (``path``), both read by ``datasets.load_dataset``.
"""

from __future__ import annotations

import math

from posbias.data.collection import Collection, corpus_frame, qrels_frame, queries_frame
from posbias.errors import PosbiasError

PROMPT, RESPONSES, TEXT, RATING = "instruction", "completions", "response", "overall_score"


def _rows(spec: dict, key: str):
    from posbias import hub

    offline = hub.settle()  # before `import datasets`, which reads HF_HUB_OFFLINE once
    import datasets

    try:
        if spec.get("path"):
            kind = "parquet" if spec["path"].endswith(".parquet") else "json"
            return datasets.load_dataset(kind, data_files=spec["path"], split=spec["split"])
        return datasets.load_dataset(spec["id"], split=spec["split"])
    except FileNotFoundError as exc:
        raise PosbiasError(f"{key}: {spec.get('path') or spec['id']} cannot be read ({str(exc).splitlines()[0]}); "
                           "give a local file as `path` or fill the HF cache on a machine with access") from None
    except (ConnectionError, OSError, ValueError) as exc:
        if offline and not spec.get("path"):
            raise PosbiasError(f"{key}.id: HF dataset {spec['id']!r} is not in the local HF cache and the hub cannot be "
                               f"reached from this node; {hub.fetch_hint(spec['id'], 'dataset')}") from None
        raise PosbiasError(f"{key}: HF dataset {spec.get('path') or spec['id']!r} split {spec['split']!r} cannot be "
                           f"loaded ({type(exc).__name__}: {str(exc).splitlines()[0]}); check `id`, `split` and "
                           "the HF cache (HF_HOME), or give a local file as `path`") from None


def _grade(value) -> int | None:
    try:
        score = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(score) else int(round(score))


def load(spec: dict, key: str) -> Collection:
    """The response sets of ``spec`` (a validated ``hf_responses`` dataset entry) as a collection."""
    rows = _rows(spec, key)
    missing = [c for c in (PROMPT, RESPONSES) if c not in rows.column_names]
    if missing:
        raise PosbiasError(f"{key}: the rows have no {missing} column(s) (found {rows.column_names}); hf_responses "
                           f"reads UltraFeedback's schema: {PROMPT}, {RESPONSES}[{TEXT}, {RATING}]")
    doc_ids, texts, qids, qtexts, rq, rel = [], [], [], [], [], []
    for i, row in enumerate(rows):
        qid = str(i)
        rated = [(j, r[TEXT], _grade(r.get(RATING))) for j, r in enumerate(row[RESPONSES] or [])]
        rated = [(j, text, g) for j, text, g in rated if g is not None and text]
        if len(rated) < 2:
            continue
        qids.append(qid)
        qtexts.append(row[PROMPT])
        for j, text, g in rated:
            doc_ids.append(f"{qid}-{j}")
            texts.append(text)
            rq.append(qid)
            rel.append(g)
    if not qids:
        raise PosbiasError(f"{key}: no prompt has two rated responses; check `split` and the file's schema")
    return Collection(corpus=corpus_frame(doc_ids, texts), queries=queries_frame(qids, qtexts),
                      qrels=qrels_frame(rq, doc_ids, rel))
