"""Training losses of the DebiasFirst and OC-SFT families (torch, autograd).

- :func:`first_rank_loss`: FIRST's weighted RankNet over the first-token identifier logits.
- :func:`rank_ips_loss`: the same with each pair term divided by the propensities of both passages
  (inverse propensity scoring, DebiasFirst); a uniform ω gives exactly :func:`first_rank_loss`.
- :func:`lm_loss`: token-mean negative log-likelihood of the target ``[B] > [A] > …``.
- :func:`ocsft_loss`: OC-SFT's supervised regression on one view plus λ × the order-consistency
  penalty over N views, with :func:`consistency_weight` as its linear λ warm-up.

On the joint weights: the DebiasFirst paper writes L = λ·L_Rank-IPS + L_LM with λ = 0.1, while
FIRST's reference training code computes 10·L_rank + L_LM. Read literally these differ: the first
weights the rank term 1:10 against the LM term, the second 10:1. The trainer takes explicit
(``rank_weight``, ``lm_weight``): the paper preset follows the paper (0.1, 1), FIRST's weighting is
(10, 1), the schema's default; docs/fidelity.md states both.

Shapes: ``scores`` and ``gold_rank`` are (k,) or (B, k): entry p belongs to the passage at input
position p; ``gold_rank[p]`` is its 0-based gold rank.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _pairs(gold_rank: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask of pairs (i, j) with i ranked better than j, and the RankNet weight 1/(r_i + r_j) (1-based)."""
    r = gold_rank.to(torch.float64) + 1.0
    better = r.unsqueeze(-1) < r.unsqueeze(-2)  # [..., i, j]: r_i < r_j
    weight = 1.0 / (r.unsqueeze(-1) + r.unsqueeze(-2))
    return better, weight


def _pairwise_terms(scores: torch.Tensor, gold_rank: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    better, weight = _pairs(gold_rank)
    diff = scores.unsqueeze(-2) - scores.unsqueeze(-1)  # [..., i, j] = s_j - s_i
    terms = F.softplus(diff) * weight.to(scores.dtype)
    return terms, better


def first_rank_loss(scores: torch.Tensor, gold_rank: torch.Tensor) -> torch.Tensor:
    """Σ over pairs r_i < r_j of softplus(s_j − s_i) / (r_i + r_j), divided by the number of such pairs.

    For a batch, the pair terms of all lists are pooled and averaged over all their pairs.
    """
    terms, better = _pairwise_terms(scores, gold_rank)
    n_pairs = better.sum()
    if n_pairs == 0:
        return scores.sum() * 0.0
    return (terms * better).sum() / n_pairs


def ips_weights(gold_rank: torch.Tensor, propensity: torch.Tensor, clip: float | None = None,
                floor: float | None = 1e-3, normalize: bool = False) -> torch.Tensor:
    """1 / (ω̂[p_i, r_i] · ω̂[p_j, r_j]) for every pair, with ω̂ = k²·ω.

    ``floor``: ω̂ is floored there, so that an unseen (position, rank) cell cannot produce an infinite
    weight (None: no floor; an unseen cell is then an error). ``clip``: weights above it are cut to
    it (None: unclipped, the paper's estimator). ``normalize``: self-normalised IPS, the weights
    divided by their mean over the ranked pairs (r_i < r_j), so they average 1.
    """
    k = gold_rank.shape[-1]
    omega_hat = propensity.to(torch.float64) * k * k
    if floor is not None:
        omega_hat = omega_hat.clamp_min(floor)
    positions = torch.arange(k, device=gold_rank.device)
    per_passage = omega_hat[positions, gold_rank.long()]  # ω̂[p, r_p], shape like gold_rank
    weights = 1.0 / (per_passage.unsqueeze(-1) * per_passage.unsqueeze(-2))
    better, _ = _pairs(gold_rank)
    if not torch.isfinite(weights[better]).all():
        raise ValueError("IPS: a (position, rank) cell of the propensity estimate is 0 and no floor is set; "
                         "set training.<name>.hyper.ips_floor or propensity.smoothing")
    if clip is not None:
        weights = weights.clamp_max(clip)
    if normalize and better.any():
        weights = weights / weights[better].mean()
    return weights


def ips_weight_stats(gold_rank: torch.Tensor, propensity: torch.Tensor, clip: float | None = None,
                     floor: float | None = 1e-3, normalize: bool = False) -> dict[str, float]:
    """What clipping and normalisation did to one list's IPS weights (over its ranked pairs): the
    share of pairs whose weight was clipped, and the mean and maximum weight applied."""
    better, _ = _pairs(gold_rank)
    raw = ips_weights(gold_rank, propensity, None, floor)[better]
    used = ips_weights(gold_rank, propensity, clip, floor, normalize)[better]
    if not len(raw):
        return {"ips_clipped_share": 0.0, "ips_weight_mean": float("nan"), "ips_weight_max": float("nan")}
    clipped = float((raw > clip).double().mean()) if clip is not None else 0.0
    return {"ips_clipped_share": clipped, "ips_weight_mean": float(used.mean()), "ips_weight_max": float(used.max())}


def rank_ips_loss(scores: torch.Tensor, gold_rank: torch.Tensor, propensity: torch.Tensor,
                  clip: float | None = None, floor: float | None = 1e-3, normalize: bool = False) -> torch.Tensor:
    """:func:`first_rank_loss` with pair (i, j) divided by ω̂[p_i, r_i]·ω̂[p_j, r_j], ω̂ = k²·ω.

    ``propensity`` is the raw k × k ω (rows: input position, columns: output rank; sums to 1), as
    estimated by the propensity stage. Rows index input positions, columns the *gold* rank.
    ``clip``, ``floor`` and ``normalize`` as in :func:`ips_weights`.
    """
    if propensity.shape != (scores.shape[-1], scores.shape[-1]):
        raise ValueError(f"propensity must be {scores.shape[-1]}x{scores.shape[-1]}, got {tuple(propensity.shape)}")
    terms, better = _pairwise_terms(scores, gold_rank)
    weights = ips_weights(gold_rank, propensity, clip, floor, normalize).to(scores.dtype)
    n_pairs = better.sum()
    if n_pairs == 0:
        return scores.sum() * 0.0
    return (terms * weights * better).sum() / n_pairs


def lm_loss(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """Token-mean NLL of the labelled tokens (prompt tokens carry ``ignore_index``).

    ``logits`` (B, T, V) predict ``labels`` (B, T) shifted by one, as in causal LM training.
    """
    shift_logits = logits[:, :-1, :].reshape(-1, logits.shape[-1])
    shift_labels = labels[:, 1:].reshape(-1)
    return F.cross_entropy(shift_logits.float(), shift_labels, ignore_index=ignore_index)


def first_identifier_loss(scores: torch.Tensor, gold_rank: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the teacher's top passage under a softmax over the window's identifier logits:
    the first answer token's NLL with decoding constrained to the identifiers. ``scores`` (B, k) and
    ``gold_rank`` (B, k), ranks -1 on padding (lists shorter than k), the top passage has rank 0."""
    valid = gold_rank >= 0
    masked = scores.masked_fill(~valid, float("-inf"))
    return F.cross_entropy(masked, gold_rank.masked_fill(~valid, gold_rank.max() + 1).argmin(dim=-1))


CONSISTENCY_FORMS = ("variance", "pairwise")


def ocsft_terms(view_scores: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
                form: str = "variance", anchor: bool = True, centre: torch.Tensor | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """The two terms of :func:`ocsft_loss`: the supervised error of view 0 (``anchor=False``: the mean
    error over all views, the no-anchor ablation) and the spread over views, ``variance``
    (Σ_i mean_d (s_i − s̄)²) or ``pairwise`` (mean over view pairs i < j of mean_d (s_i − s_j)²).
    ``centre`` (B, no gradient; variance form only) replaces s̄: the EMA mean teacher's ablation."""
    if view_scores.dim() != 2 or view_scores.shape[1] != target.shape[-1]:
        raise ValueError(f"view_scores must be N x B with B = {target.shape[-1]}, got {tuple(view_scores.shape)}")
    if form not in CONSISTENCY_FORMS:
        raise ValueError(f"consistency form {form!r}: use one of {', '.join(CONSISTENCY_FORMS)}")
    supervised_views = view_scores[:1] if anchor else view_scores
    error = ((supervised_views - target.to(view_scores.dtype)) ** 2).mean(0)
    supervised = (error * weight.to(error.dtype)).mean() if weight is not None else error.mean()
    n = view_scores.shape[0]
    if centre is not None:
        if form != "variance":
            raise ValueError("an EMA teacher's centre replaces the views' mean of the variance penalty; "
                             "set consistency_form: variance")
        return supervised, ((view_scores - centre.to(view_scores.dtype)) ** 2).mean(1).sum()
    if form == "pairwise" and n > 1:
        i, j = torch.triu_indices(n, n, offset=1)
        spread = ((view_scores[i] - view_scores[j]) ** 2).mean()
    else:
        spread = ((view_scores - view_scores.mean(0, keepdim=True)) ** 2).mean(1).sum()
    return supervised, spread


def ocsft_loss(view_scores: torch.Tensor, target: torch.Tensor, lam: float,
               weight: torch.Tensor | None = None, form: str = "variance") -> torch.Tensor:
    """OC-SFT for one window: mean_d w(d)·(s₁(d) − ỹ(d))² + λ · Σ_i mean_d (s_i(d) − s̄(d))².

    ``view_scores`` is N × B: the scores of N presentations of the same B documents, aligned back
    to one document order; only view 0 (the anchor) is supervised (more views add no labelling cost).
    ``target`` (B) holds the silver labels ỹ; s̄ is the mean over views. ``weight`` (B, default 1)
    weights the supervised term per document (the inverse slot propensity of ``debiasfirst_pointwise``).
    ``form="pairwise"`` takes the reference code's penalty instead, λ · mean_d (s_A(d) − s_B(d))² for two
    views (the mean over view pairs for more): for two views it is twice the variance form.
    With λ = 0 (or N = 1) this is the single-order regression loss.
    """
    supervised, spread = ocsft_terms(view_scores, target, weight, form)
    return supervised + lam * spread


def consistency_weight(step: int, lam: float, warmup_steps: int) -> float:
    """λ at optimiser step ``step``: rises linearly from 0 to ``lam`` over ``warmup_steps``, then stays."""
    if warmup_steps <= 0:
        return lam
    return lam * min(1.0, step / warmup_steps)
