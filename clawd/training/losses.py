"""Losses of the trainer, as pure functions on tensors (no model, no state).

Shapes: ``B`` sequences, ``T`` response tokens (right-padded); ``mask`` is 1.0 on real
response tokens and 0.0 on padding. All log-probs are of the tokens actually served.

References: OpenClaw-RL (arXiv 2603.10165) for the judge reward and hindsight-guided on-policy
distillation (OPD); PPO (Schulman et al., 2017) for the clipped surrogate; DAPO (Yu et al., 2025)
for asymmetric "Clip-Higher" bounds; Dr. GRPO (Liu et al., 2025) for the constant normaliser;
Schulman's k3 estimator for the KL penalty; Welleck et al. (2019) for unlikelihood training.

Run alone to print the loss of a toy batch::

    python -m clawd.training.losses
"""

from __future__ import annotations

import torch


def token_advantages(
    teacher_lp: torch.Tensor,
    old_lp: torch.Tensor,
    reward: torch.Tensor,
    has_hint: torch.Tensor,
    has_reward: torch.Tensor,
    mask: torch.Tensor,
    w_opd: float = 1.0,
    w_rl: float = 1.0,
    opd_base: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token advantage ``A_t = w_opd * (teacher_lp_t - old_lp_t - b_t) + w_rl * r``.

    The OPD term applies only to sequences with a hint (``has_hint``), the RL term only to
    sequences with an evaluative reward (``has_reward``). ``b_t`` is the OPD term's baseline,
    0 without one. On the student's own answer its expectation over the student's next token
    is ``-KL(student_t || teacher_t) <= 0``: uncentred, it pushes a sampled answer down on
    average wherever the hint changes anything. With ``b_t`` that expectation
    (``opd_kl_baseline``) it is 0 at every position, and only which tokens the teacher likes
    more or less than the student's average moves.

    Args:
        teacher_lp: (B, T) log-probs of the response under the hinted context, no gradient.
        old_lp: (B, T) log-probs under the plain context with the pre-update weights.
        reward: (B,) scalar reward per sequence (-1, 0 or +1).
        has_hint, has_reward: (B,) 0/1 flags.
        mask: (B, T) 1.0 on response tokens.
        opd_base: (B, T) baseline of the OPD term, or None (0).
    Returns:
        (B, T) advantages, 0 on padding.
    """
    opd = teacher_lp - old_lp if opd_base is None else teacher_lp - old_lp - opd_base
    opd = opd * has_hint[:, None]
    rl = (reward * has_reward)[:, None].expand_as(old_lp)
    return (w_opd * opd + w_rl * rl) * mask


def opd_kl_baseline(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """The OPD term's expectation over the student's next token at each position,

        b_t = sum_v p_S(v) (log p_T(v) - log p_S(v)) = -KL(p_S,t || p_T,t)   (nats, <= 0),

    a baseline that depends on the position only, not on the token written, so subtracting it
    leaves the expected gradient unchanged and removes the pull that pushes every sampled
    answer down (Williams, 1992).

    Args:
        student: (B, T, V) log-softmax of the plain context at the response positions.
        teacher: (B, T, V) log-softmax of the hinted context at the same positions.
    Returns:
        (B, T) baselines.
    """
    return (student.exp() * (teacher - student)).sum(-1)


def centred_rewards(reward: torch.Tensor, has_reward: torch.Tensor) -> torch.Tensor:
    """The reward term's baseline: ``r_i - mean_j r_j`` over the rewarded sequences.

    Without a baseline an all-negative batch gives every token of every answer the same -1,
    which swamps the per-token OPD signal and pushes whole answers down alike; centred, only
    what sets a sequence apart from the others of its run moves it. An all-equal set of rewards
    becomes 0 (nothing to tell apart).

    Args:
        reward: (N,) rewards (-1, 0 or +1), usually every example of one run.
        has_reward: (N,) 0/1 flags: which of them carry an evaluative reward.
    Returns:
        (N,) centred rewards, 0 where ``has_reward`` is 0.
    """
    n = has_reward.sum()
    if n == 0:
        return torch.zeros_like(reward)
    mean = (reward * has_reward).sum() / n
    return (reward - mean) * has_reward


def clipped_policy_loss(
    logp: torch.Tensor,
    old_lp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    normalizer: float,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """PPO clipped surrogate with asymmetric clipping, summed over tokens / a constant.

    ``ratio_t = exp(logp_t - old_lp_t)``;
    ``loss_t = -min(ratio_t * A_t, clip(ratio_t, 1 - eps_low, 1 + eps_high) * A_t)``;
    ``loss = sum_{b,t} mask * loss_t / normalizer``.

    Reduction: the sum over every response token of the batch divided by a *constant*
    (Dr. GRPO), never a per-sequence mean. With ``1/|o|`` a bad habit inside a 1000-token answer
    would be pushed 10x less per token than inside a 100-token answer, teaching "when wrong, be
    long"; with a constant every token weighs the same whatever the length of its answer.

    Args:
        logp: (B, T) log-probs under the weights being trained (with gradient).
        old_lp, advantages, mask: (B, T), without gradient.
        normalizer: a constant, e.g. sequences per batch x a fixed token budget.
    Returns:
        the scalar loss and detached metrics (clip fraction, mean ratio).
    """
    if normalizer <= 0:
        raise ValueError("normalizer must be positive")
    ratio = torch.exp(logp - old_lp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    per_token = -torch.minimum(unclipped, clipped) * mask
    loss = per_token.sum() / normalizer
    n = mask.sum().clamp(min=1.0)
    with torch.no_grad():
        was_clipped = ((clipped < unclipped) & (mask > 0)).float().sum() / n
        metrics = {"clip_fraction": was_clipped, "ratio_mean": (ratio * mask).sum() / n}
    return loss, metrics


def unlikelihood_loss(
    logp: torch.Tensor, marked: torch.Tensor, normalizer: float, floor: float = 1e-6
) -> torch.Tensor:
    """Unlikelihood of marked tokens (Welleck et al., 2019, "Neural Text Generation with
    Unlikelihood Training", sequence level): push the probability of each marked token down,

        loss_t = -log(1 - p_t),  p_t = exp(logp_t);
        loss = sum_{b,t} marked_bt * loss_t / normalizer.

    Used on the tokens that repeat an earlier n-gram of their own answer (a loop, ``"Don't
    drive alone. Don't drive alone. ..."``): the gradient on the token's logit is ``p_t``, so a
    token the model is sure of is pushed hard and an unlikely one hardly at all, and nothing
    says what to write instead. ``1 - p_t`` is kept above ``floor`` so that a certain token
    gives a large, finite loss.

    Args:
        logp: (B, T) log-probs of the marked answers' tokens under the weights being trained.
        marked: (B, T) 1.0 on the tokens to push down, 0.0 elsewhere (and on padding).
        normalizer: the policy loss's constant, so that a token weighs the same in both.
    Returns:
        the scalar loss (0 when nothing is marked).
    """
    if normalizer <= 0:
        raise ValueError("normalizer must be positive")
    rest = (-torch.expm1(logp)).clamp(min=floor)  # 1 - p, exact near p = 1
    return (-torch.log(rest) * marked).sum() / normalizer


def likelihood_loss(logp: torch.Tensor, marked: torch.Tensor, normalizer: float) -> torch.Tensor:
    """Negative log-likelihood of marked tokens (supervised fine-tuning on them):

        loss = -sum_{b,t} marked_bt * logp_bt / normalizer.

    Used on the tokens that decoding forced for a memory (``greedy.shaped_answer``): the name
    that opens the answer, the end where a length limit falls. The clipped surrogate cannot
    teach them: a token at probability 1e-5 moves by at most ``1 + eps_high`` a run, and the
    memory, not a sample, says what it should be. The gradient on the token's log-prob is 1 per
    token, whatever its probability.

    Args:
        logp: (B, T) log-probs under the weights being trained.
        marked: (B, T) 1.0 on the tokens to raise, 0.0 elsewhere (and on padding).
        normalizer: the policy loss's constant, so that a token weighs the same in both.
    Returns:
        the scalar loss (0 when nothing is marked).
    """
    if normalizer <= 0:
        raise ValueError("normalizer must be positive")
    return -(logp * marked).sum() / normalizer


def k3_kl(
    logp: torch.Tensor, ref_lp: torch.Tensor, mask: torch.Tensor, normalizer: float
) -> torch.Tensor:
    """k3 estimator of KL(policy || reference): ``exp(ref - logp) - (ref - logp) - 1``.

    Non-negative per token, unbiased for the KL under samples from the policy. Shapes (B, T);
    reduced like the policy loss: token sum / the same constant.
    """
    delta = ref_lp - logp
    return ((torch.exp(delta) - delta - 1.0) * mask).sum() / normalizer


def mean_k3_kl(logp: torch.Tensor, ref_lp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The k3 KL per response token (``k3_kl`` with the token count as normaliser), the
    figure a trust region compares with its target. Shapes (B, T); returns a scalar."""
    return k3_kl(logp, ref_lp, mask, float(mask.sum().clamp(min=1.0)))


def adapt_kl_coef(coef: float, kl: float, target: float, floor: float = 1e-4) -> float:
    """Adaptive KL coefficient (Ziegler et al., 2019; PPO paper, section 4): double the
    penalty when the measured KL is over 1.5x its target, halve it under target / 1.5.

    Returns the coefficient for the next step, never below ``floor`` (so it can grow again)
    and never above 100.
    """
    if target <= 0:
        return coef
    if kl > 1.5 * target:
        coef *= 2.0
    elif kl < target / 1.5:
        coef /= 2.0
    return min(max(coef, floor), 100.0)


if __name__ == "__main__":
    torch.manual_seed(0)
    old = -torch.rand(2, 5)
    teacher = old + 0.5 * torch.randn(2, 5)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.float32)
    adv = token_advantages(
        teacher, old, torch.tensor([-1.0, 1.0]), torch.ones(2), torch.ones(2), mask
    )
    loss, metrics = clipped_policy_loss(old.clone().requires_grad_(), old, adv, mask, 2 * 256)
    print("advantages\n", adv, "\nloss", loss.item(), {k: v.item() for k, v in metrics.items()})
