"""Properties of the trainer's losses (TRL style): no model needed."""

import pytest
import torch

from clawd.training import losses
from clawd.training.losses import clipped_policy_loss, k3_kl, token_advantages

torch.manual_seed(0)


def ones(b: int, t: int) -> torch.Tensor:
    return torch.ones(b, t)


def test_opd_advantage_is_zero_when_teacher_equals_student() -> None:
    old = -torch.rand(3, 7)
    adv = token_advantages(
        old.clone(), old, torch.zeros(3), torch.ones(3), torch.zeros(3), ones(3, 7)
    )
    assert torch.count_nonzero(adv) == 0


def test_opd_term_only_with_a_hint_and_rl_term_only_with_a_reward() -> None:
    old, teacher = torch.zeros(2, 3), torch.full((2, 3), -0.5)
    adv = token_advantages(
        teacher,
        old,
        torch.tensor([1.0, 1.0]),
        torch.tensor([1.0, 0.0]),
        torch.tensor([0.0, 1.0]),
        ones(2, 3),
        w_opd=1.0,
        w_rl=2.0,
    )
    assert torch.allclose(adv[0], torch.full((3,), -0.5))  # OPD only
    assert torch.allclose(adv[1], torch.full((3,), 2.0))  # RL only


def test_padding_gets_no_advantage() -> None:
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    adv = token_advantages(
        torch.zeros(1, 3), torch.ones(1, 3), torch.ones(1), torch.ones(1), torch.ones(1), mask
    )
    assert adv[0, 2] == 0


@pytest.mark.parametrize("reward", [1.0, -1.0])
def test_the_gradient_follows_the_sign_of_the_reward(reward: float) -> None:
    logp = (-torch.rand(1, 5)).requires_grad_()
    adv = token_advantages(
        torch.zeros(1, 5),
        logp.detach(),
        torch.tensor([reward]),
        torch.zeros(1),
        torch.ones(1),
        ones(1, 5),
    )
    loss, _ = clipped_policy_loss(logp, logp.detach(), adv, ones(1, 5), normalizer=256.0)
    loss.backward()
    # Gradient descent moves log-probs by -grad: up for a positive reward, down for a negative.
    assert torch.all(torch.sign(-logp.grad) == torch.sign(torch.tensor(reward)))


def test_loss_is_zero_at_the_start_with_zero_advantage() -> None:
    logp = -torch.rand(2, 4)
    loss, metrics = clipped_policy_loss(logp, logp, torch.zeros(2, 4), ones(2, 4), 8.0)
    assert loss.item() == 0.0 and metrics["clip_fraction"].item() == 0.0


def test_clipping_bounds_the_ratio_asymmetrically() -> None:
    old = torch.zeros(1, 2)
    adv = torch.tensor([[1.0, -1.0]])
    # Far above 1 + eps_high with A > 0, far below 1 - eps_low with A < 0: both clipped.
    logp = torch.tensor([[1.0, -1.0]], requires_grad=True)
    loss, metrics = clipped_policy_loss(logp, old, adv, ones(1, 2), 1.0, 0.2, 0.28)
    assert loss.item() == pytest.approx(-(1.28 * 1.0) + 0.8 * 1.0)
    assert metrics["clip_fraction"].item() == 1.0
    loss.backward()
    assert torch.all(logp.grad == 0)  # no push beyond the trust region


def test_unclipped_side_keeps_its_gradient() -> None:
    # A ratio below 1 with a positive advantage is not clipped: PPO still pushes it up.
    logp = torch.tensor([[-1.0]], requires_grad=True)
    loss, metrics = clipped_policy_loss(logp, torch.zeros(1, 1), torch.ones(1, 1), ones(1, 1), 1.0)
    loss.backward()
    assert metrics["clip_fraction"].item() == 0.0 and logp.grad.item() < 0


def test_constant_normaliser_weighs_tokens_alike_whatever_the_length() -> None:
    def grad_of_first_token(length: int, per_sequence_mean: bool) -> float:
        logp = torch.zeros(1, length, requires_grad=True)
        adv = -torch.ones(1, length)
        mask = ones(1, length)
        norm = float(length) if per_sequence_mean else 1000.0
        loss, _ = clipped_policy_loss(logp, logp.detach(), adv, mask, normalizer=norm)
        loss.backward()
        return logp.grad[0, 0].item()

    assert grad_of_first_token(100, False) == pytest.approx(grad_of_first_token(1000, False))
    # ...whereas a per-sequence mean would push a token of the long answer 10x less.
    assert grad_of_first_token(100, True) == pytest.approx(10 * grad_of_first_token(1000, True))


def test_k3_kl_is_zero_at_the_reference_and_positive_elsewhere() -> None:
    lp = -torch.rand(2, 6)
    assert k3_kl(lp, lp, ones(2, 6), 12.0).item() == 0.0
    assert k3_kl(lp, lp - 0.3, ones(2, 6), 12.0).item() > 0
    assert k3_kl(lp, lp + 0.3, ones(2, 6), 12.0).item() > 0


def test_normaliser_must_be_positive() -> None:
    with pytest.raises(ValueError):
        clipped_policy_loss(
            torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), ones(1, 1), 0.0
        )


def test_an_all_negative_batch_does_not_push_every_token_down_alike() -> None:
    from clawd.training.losses import centred_rewards

    reward, has = torch.tensor([-1.0, -1.0, -1.0]), ones(3, 1)[:, 0]
    assert torch.equal(centred_rewards(reward, has), torch.zeros(3))
    old = -torch.rand(3, 6)
    teacher = old + torch.randn(3, 6)  # the hint makes some tokens likelier, others less
    adv = token_advantages(teacher, old, centred_rewards(reward, has), has, has, ones(3, 6))
    assert torch.allclose(adv, teacher - old)  # only the per-token signal is left
    assert (adv > 0).any() and (adv < 0).any()
    # Mixed rewards keep their order around the run's mean; unrewarded sequences stay at 0.
    mixed = centred_rewards(torch.tensor([1.0, -1.0, -1.0, 0.0]), torch.tensor([1.0, 1, 1, 0]))
    assert mixed.tolist() == pytest.approx([4 / 3, -2 / 3, -2 / 3, 0.0])


def test_the_kl_coefficient_adapts_to_its_target() -> None:
    from clawd.training.losses import adapt_kl_coef

    assert adapt_kl_coef(0.1, kl=1.0, target=0.5) == pytest.approx(0.2)
    assert adapt_kl_coef(0.1, kl=0.1, target=0.5) == pytest.approx(0.05)
    assert adapt_kl_coef(0.1, kl=0.5, target=0.5) == pytest.approx(0.1)
    assert adapt_kl_coef(1e-4, kl=0.0, target=0.5) == pytest.approx(1e-4)  # a floor to grow from


def test_the_opd_baseline_leaves_no_expected_push_on_the_students_own_answers() -> None:
    from clawd.training.losses import opd_kl_baseline

    student = torch.log_softmax(torch.randn(2, 5, 11), -1)
    teacher = torch.log_softmax(student + torch.randn(2, 5, 11), -1)
    base = opd_kl_baseline(student, teacher)
    kl = (student.exp() * (student - teacher)).sum(-1)
    assert torch.allclose(base, -kl) and (base < 0).all()  # -KL: uncentred, a push down
    assert torch.allclose(opd_kl_baseline(student, student), torch.zeros(2, 5), atol=1e-6)
    # Every token the student could write, as if written: without the baseline the OPD term's
    # expectation under the student is -KL at each position; with it, 0.
    v = student.shape[-1]
    hint, none = torch.ones(2 * v), torch.zeros(2 * v)
    for t in range(5):
        old = student[:, t, :].reshape(-1, 1)
        teach = teacher[:, t, :].reshape(-1, 1)
        b = base[:, t].repeat_interleave(v)[:, None]
        plain = token_advantages(teach, old, none, hint, none, ones(2 * v, 1))
        centred = token_advantages(teach, old, none, hint, none, ones(2 * v, 1), opd_base=b)
        p = student[:, t, :].exp().reshape(-1)
        for adv, expected in ((plain, base[:, t]), (centred, torch.zeros(2))):
            assert torch.allclose((p * adv[:, 0]).reshape(2, v).sum(-1), expected, atol=1e-5)
        # Each position keeps the order of its tokens: only the level moves.
        assert torch.equal(centred.reshape(2, v).argsort(-1), plain.reshape(2, v).argsort(-1))


def test_unlikelihood_pushes_down_the_marked_tokens_only_and_stays_finite() -> None:
    """-log(1 - p) on marked tokens: 0 where nothing is marked, the gradient on a marked
    token's log-prob is positive (descent lowers it), an unmarked one gets none, and a token
    the model is certain of gives a large finite loss."""
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.5]], requires_grad=True)
    targets = torch.tensor([[0, 1, 2], [0, 1, 2]])
    logp = torch.log_softmax(logits, -1).gather(1, targets)  # (2, 3) log-probs of the targets
    marked = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    loss = losses.unlikelihood_loss(logp, marked, 4.0)
    p = torch.softmax(logits.detach(), -1)[0, 0]
    assert loss.item() == pytest.approx(-torch.log(1 - p).item() / 4.0, rel=1e-5)
    loss.backward()
    assert logits.grad[0, 0] > 0 and logits.grad[1].abs().sum() == 0  # down, and only row 0
    assert losses.unlikelihood_loss(logp.detach(), torch.zeros(2, 3), 4.0).item() == 0.0
    certain = losses.unlikelihood_loss(torch.zeros(1, 1), torch.ones(1, 1), 1.0)
    assert torch.isfinite(certain) and certain.item() > 10
    with pytest.raises(ValueError):
        losses.unlikelihood_loss(logp, marked, 0.0)


def test_likelihood_raises_the_marked_tokens_alike_whatever_their_probability() -> None:
    """-sum(marked * logp) / normaliser: the gradient on each marked token's log-prob is
    -1 / normaliser, a token at 1e-5 as much as one at 0.5; unmarked ones get none."""
    logp = torch.log(torch.tensor([[1e-5, 0.5, 0.2]])).requires_grad_()
    marked = torch.tensor([[1.0, 1.0, 0.0]])
    loss = losses.likelihood_loss(logp, marked, 4.0)
    assert loss.item() == pytest.approx(-(logp[0, 0] + logp[0, 1]).item() / 4.0)
    loss.backward()
    assert logp.grad.tolist() == [[-0.25, -0.25, 0.0]]
    assert losses.likelihood_loss(logp.detach(), torch.zeros(1, 3), 4.0).item() == 0.0
    with pytest.raises(ValueError):
        losses.likelihood_loss(logp, marked, 0.0)
