import math

import pytest
import torch

from posbias import losses
from posbias.losses import (
    first_rank_loss,
    ips_weights,
    lm_loss,
    rank_ips_loss,
)


def softplus(x):
    return math.log1p(math.exp(x))


def test_first_rank_loss_by_hand():
    scores = torch.tensor([2.0, 0.5, 1.0])
    gold = torch.tensor([1, 2, 0])  # passage at position 2 is best, then 0, then 1
    # 1-based ranks r = [2, 3, 1]; pairs (better, worse): (2,0), (2,1), (0,1)
    expected = (softplus(2.0 - 1.0) / (1 + 2) + softplus(0.5 - 1.0) / (1 + 3) + softplus(0.5 - 2.0) / (2 + 3)) / 3
    assert first_rank_loss(scores, gold).item() == pytest.approx(expected)


def test_batch_pools_pairs():
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 3.0, 1.0])
    la, lb = first_rank_loss(a, torch.tensor([0, 1])), first_rank_loss(b, torch.tensor([2, 0, 1]))
    batch = first_rank_loss(torch.stack([a, torch.tensor([0.0, 0.0])]), torch.tensor([[0, 1], [0, 1]]))
    assert batch.item() == pytest.approx((la.item() * 1 + softplus(0.0) / 3) / 2)
    assert lb.item() > 0


def test_gradients_flow_and_push_the_right_way():
    scores = torch.tensor([0.0, 0.0, 0.0], requires_grad=True)
    first_rank_loss(scores, torch.tensor([0, 1, 2])).backward()
    assert scores.grad[0] < 0 < scores.grad[2]  # descending the loss raises the best, lowers the worst


def test_uniform_propensity_gives_exactly_the_rank_loss():
    torch.manual_seed(0)
    for k in (2, 5, 20):
        scores = torch.randn(3, k)
        gold = torch.stack([torch.randperm(k) for _ in range(3)])
        uniform = torch.full((k, k), 1.0 / k**2)
        assert torch.equal(rank_ips_loss(scores, gold, uniform), first_rank_loss(scores, gold))


def test_ips_weights_by_hand_and_clip():
    omega = torch.tensor([[0.3, 0.2], [0.2, 0.3]])  # k = 2: omega_hat = 4 * omega
    gold = torch.tensor([1, 0])  # position 0 has gold rank 1, position 1 rank 0
    w = ips_weights(gold, omega)
    assert w[0, 1].item() == pytest.approx(1 / ((4 * 0.2) * (4 * 0.2)))
    scores = torch.tensor([0.3, -0.2])
    expected = softplus(0.3 - -0.2) / 3 * w[1, 0].item()
    assert rank_ips_loss(scores, gold, omega).item() == pytest.approx(expected)
    assert ips_weights(gold, omega, clip=1.2)[0, 1].item() == pytest.approx(1.2)


def test_nan_guard_for_unseen_cells():
    k = 4
    omega = torch.zeros(k, k)
    omega[:, 0] = 1.0 / k  # every position always ends at rank 0: most cells are 0
    scores = torch.randn(k, requires_grad=True)
    loss = rank_ips_loss(scores, torch.arange(k), omega, clip=10.0)
    assert torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(scores.grad).all()


def test_wrong_propensity_shape():
    with pytest.raises(ValueError):
        rank_ips_loss(torch.zeros(3), torch.arange(3), torch.zeros(4, 4))


def test_lm_loss_by_hand():
    logits = torch.zeros(1, 4, 5)
    logits[0, 1, 3] = 10.0  # position 1 predicts token 3 strongly
    labels = torch.tensor([[-100, -100, 3, 2]])  # tokens 2 and 3 are the target
    loss = lm_loss(logits, labels)
    expected = (-torch.log_softmax(logits[0, 1], -1)[3] - torch.log_softmax(logits[0, 2], -1)[2]) / 2
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_the_joint_objective_weighs_a_pair_mean_rank_term_and_a_token_mean_lm_term():
    """DebiasFirst's L = λ·L_Rank-IPS + L_LM as the trainer computes it: rank_weight and lm_weight
    multiply the two terms; the rank term is a mean over the ranked pairs with ω̂ = k²·ω, so the
    paper's literal sum over pairs with the raw ω is (pairs · k⁴) times ours (k = 20: 190 · 20⁴ ≈
    3·10⁷), and λ = 0.1 does not carry the paper's balance literally (docs/fidelity.md)."""
    from posbias.training import TrainSpec
    from posbias.training.listwise import objective

    k, vocab = 20, 30
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(1, 4, vocab, generator=gen)
    gold = torch.randperm(k, generator=gen)
    omega = torch.rand(k, k, generator=gen) + 0.5
    omega = omega / omega.sum()
    batch = {"rank_position": torch.tensor([1]), "gold_rank": gold.unsqueeze(0),
             "labels": torch.tensor([[-100, 4, 7, 9]])}
    ids = list(range(5, 5 + k))
    scores = logits[0, 1, ids]
    rank = rank_ips_loss(scores, gold, omega, None, None)
    lm = lm_loss(logits, batch["labels"])
    for rank_weight, lm_weight in ((0.1, 1.0), (10.0, 1.0), (0.0, 2.0)):
        spec = TrainSpec.create(method="debiasfirst", rank_weight=rank_weight, lm_weight=lm_weight, ips_floor=None)
        total, parts = objective(logits, batch, ids, spec, omega)
        assert float(total) == pytest.approx(rank_weight * float(rank) + lm_weight * float(lm), rel=1e-5)
        assert parts["rank_loss"] == pytest.approx(float(rank), rel=1e-5) and parts["lm_loss"] == pytest.approx(float(lm))
    r = gold.double() + 1  # the paper's sum: δ(s_j − s_i) / ((r_i + r_j) ω_{p_i, r_i} ω_{p_j, r_j})
    w = omega.double()[torch.arange(k), gold]
    literal = sum(float(torch.nn.functional.softplus(scores[j] - scores[i])) / ((r[i] + r[j]) * w[i] * w[j])
                  for i in range(k) for j in range(k) if r[i] < r[j])
    assert literal == pytest.approx(float(rank) * (k * (k - 1) / 2) * k ** 4, rel=1e-4)


def test_ocsft_loss_by_hand():
    from posbias.losses import ocsft_loss

    views = torch.tensor([[0.2, 0.8], [0.4, 0.6]])
    target = torch.tensor([0.0, 1.0])
    supervised = ((0.2 - 0.0) ** 2 + (0.8 - 1.0) ** 2) / 2  # view 0 only: 0.04
    mean = torch.tensor([0.3, 0.7])
    spread = sum(float(((v - mean) ** 2).mean()) for v in views)  # 0.01 + 0.01
    assert float(ocsft_loss(views, target, 0.0)) == pytest.approx(supervised)
    assert float(ocsft_loss(views, target, 5.0)) == pytest.approx(supervised + 5.0 * spread)
    assert float(ocsft_loss(views, target, 5.0)) == pytest.approx(0.04 + 5 * 0.02)
    # identical views add no penalty; lambda = 0 is the single-order loss on view 0 alone
    assert float(ocsft_loss(views[:1].repeat(3, 1), target, 7.0)) == pytest.approx(supervised)
    assert float(ocsft_loss(views, target, 0.0)) == pytest.approx(float(ocsft_loss(views[:1], target, 3.0)))
    weight = torch.tensor([2.0, 0.0])
    assert float(ocsft_loss(views, target, 0.0, weight)) == pytest.approx((2 * 0.04 + 0) / 2)
    with pytest.raises(ValueError, match="N x B"):
        ocsft_loss(views, torch.zeros(3), 1.0)


def test_ocsft_pairwise_penalty_by_hand():
    """The reference code's penalty: λ · mean_d (s_A − s_B)² for two views (twice the variance form),
    the mean over view pairs for more."""
    from posbias.losses import ocsft_loss, ocsft_terms

    views = torch.tensor([[0.2, 0.8], [0.4, 0.6]])
    target = torch.tensor([0.0, 1.0])
    pairwise = ((0.2 - 0.4) ** 2 + (0.8 - 0.6) ** 2) / 2  # 0.04
    assert float(ocsft_terms(views, target, form="pairwise")[1]) == pytest.approx(pairwise)
    assert float(ocsft_loss(views, target, 5.0, form="pairwise")) == pytest.approx(0.04 + 5 * pairwise)
    assert float(ocsft_terms(views, target, form="pairwise")[1]) == pytest.approx(
        2 * float(ocsft_terms(views, target)[1]))
    three = torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    pairs = [float(((three[i] - three[j]) ** 2).mean()) for i, j in ((0, 1), (0, 2), (1, 2))]  # 1, 0.5, 0.5
    assert float(ocsft_terms(three, target, form="pairwise")[1]) == pytest.approx(sum(pairs) / 3)
    with pytest.raises(ValueError, match="consistency form 'l1'"):
        ocsft_terms(views, target, form="l1")


def test_ocsft_gradient_reaches_every_view():
    from posbias.losses import ocsft_loss

    views = torch.tensor([[0.2, 0.8, 0.5], [0.4, 0.6, 0.1], [0.9, 0.3, 0.3]], requires_grad=True)
    ocsft_loss(views, torch.tensor([0.0, 1.0, 0.5]), 2.0).backward()
    assert all(float(g.abs().sum()) > 0 for g in views.grad)
    views.grad = None
    ocsft_loss(views, torch.tensor([0.0, 1.0, 0.5]), 0.0).backward()
    assert float(views.grad[1:].abs().sum()) == 0.0  # unsupervised views get no gradient without the penalty


def test_consistency_weight_warms_up_linearly():
    from posbias.losses import consistency_weight

    assert [consistency_weight(s, 5.0, 500) for s in (0, 100, 250, 500, 1000)] == [0.0, 1.0, 2.5, 5.0, 5.0]
    assert consistency_weight(0, 3.0, 0) == 3.0


def test_first_identifier_loss_is_constrained_cross_entropy():
    scores = torch.tensor([[0.0, 2.0, 1.0, 5.0], [1.0, 0.0, 3.0, 0.0]])
    gold = torch.tensor([[1, 0, 2, 3], [0, 1, -1, -1]])  # row 2: a list of 2, padded
    expected = (torch.logsumexp(scores[0], 0) - 2.0 + torch.logsumexp(scores[1, :2], 0) - 1.0) / 2
    assert losses.first_identifier_loss(scores, gold).item() == pytest.approx(expected.item(), rel=1e-6)
    # padding logits do not matter
    padded = scores.clone()
    padded[1, 2:] = 100.0
    assert losses.first_identifier_loss(padded, gold).item() == pytest.approx(expected.item(), rel=1e-6)


def test_ips_weights_unclipped_by_default_with_clip_floor_and_self_normalisation_as_options():
    from posbias.losses import ips_weight_stats, ips_weights

    k = 3
    omega = torch.full((k, k), 1.0 / (k * k))
    omega[0, 0], omega[1, 0] = 0.5 / (k * k), 1.5 / (k * k)  # ω̂ = k²ω: 0.5 and 1.5 in rank column 0
    gold = torch.tensor([0, 1, 2])  # passage p has gold rank p
    w = ips_weights(gold, omega)
    assert w[0, 1].item() == pytest.approx(1 / (0.5 * 1.0))  # ω̂[0, 0] · ω̂[1, 1]
    assert ips_weights(gold, omega, clip=1.5)[0, 1].item() == pytest.approx(1.5)
    normalized = ips_weights(gold, omega, normalize=True)
    better = torch.tensor([[False, True, True], [False, False, True], [False, False, False]])
    assert normalized[better].mean().item() == pytest.approx(1.0)
    stats = ips_weight_stats(gold, omega, clip=1.5)
    assert stats == pytest.approx({"ips_clipped_share": 2 / 3, "ips_weight_mean": 1.5 * 2 / 3 + 1 / 3,
                                   "ips_weight_max": 1.5})
    omega[2, 2] = 0.0  # an unseen cell: floored by default, an error without a floor
    assert torch.isfinite(ips_weights(gold, omega)).all()
    with pytest.raises(ValueError, match="ips_floor or propensity.smoothing"):
        ips_weights(gold, omega, floor=None)


def test_ocsft_without_anchor_supervises_every_view():
    """The no-anchor ablation: the supervised term is the mean error over all N views; the penalty is
    unchanged; with identical views it equals the anchored loss."""
    views = torch.tensor([[0.2, 0.8], [0.6, 0.4]])
    target = torch.tensor([0.0, 1.0])
    sup, spread = losses.ocsft_terms(views, target, anchor=False)
    # view 0 errors 0.04, 0.04; view 1 errors 0.36, 0.36: mean over views per doc 0.2
    assert float(sup) == pytest.approx(0.2)
    assert float(spread) == pytest.approx(float(losses.ocsft_terms(views, target)[1]))
    same = views[:1].repeat(2, 1)
    assert float(losses.ocsft_terms(same, target, anchor=False)[0]) == pytest.approx(
        float(losses.ocsft_terms(same, target)[0]))


def test_an_ema_centre_replaces_the_views_mean_of_the_variance_penalty():
    """With the views' own mean as the centre the penalty is OC-SFT's; another centre c gives Σ_i mean_d
    (s_i − c)² (known answer); the pairwise form takes no centre."""
    views = torch.tensor([[0.2, 0.8], [0.4, 0.6]])
    target = torch.tensor([0.0, 1.0])
    _, own = losses.ocsft_terms(views, target)
    _, same = losses.ocsft_terms(views, target, centre=views.mean(0))
    assert torch.isclose(own, same)
    _, other = losses.ocsft_terms(views, target, centre=torch.tensor([0.0, 1.0]))
    assert torch.isclose(other, torch.tensor((0.04 + 0.04) / 2 + (0.16 + 0.16) / 2))
    with pytest.raises(ValueError, match="consistency_form: variance"):
        losses.ocsft_terms(views, target, form="pairwise", centre=views.mean(0))
