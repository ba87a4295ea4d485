"""pipeplan.torch.PlannedLoader and the micro-batch tensors: deterministic plans, padded and
packed rows with their masks and positions, truncation, planning overlapped with training."""
import time

import pytest

torch = pytest.importorskip("torch")
pipeplan = pytest.importorskip("pipeplan")

from torch_cluster import Case, batch_pairs, make_loader, make_planner  # noqa: E402


def _batches(loader, n):
    with loader:
        return [next(loader) for _ in range(n)]


def test_every_rank_gets_the_same_plan_for_the_same_iteration():
    a = _batches(make_loader(Case("adaptive", 2, 2), 0, 3)[0], 3)
    b = _batches(make_loader(Case("adaptive", 2, 2), 3, 3)[0], 3)
    for x, y in zip(a, b):
        assert x.iteration == y.iteration and x.plan.header.iteration == x.iteration
        assert x.plan.to_bytes() == y.plan.to_bytes()
        assert x.dataset_ids == y.dataset_ids and x.loss_tokens == y.loss_tokens
        assert x.rank_plan.rank == 0 and y.rank_plan.rank == 3
    # Each rank holds exactly its replica's micro-batches.
    h = a[0].plan.header
    assert set(a[0].microbatches) == {j for j, m in enumerate(h.microbatches) if m.replica == 0}
    assert set(b[0].microbatches) == {j for j, m in enumerate(h.microbatches) if m.replica == 1}


def test_padded_microbatch_tensors_match_the_plan_and_the_samples():
    loader, dataset = make_loader(Case("1f1b", 2), 0, 1)
    batch = _batches(loader, 1)[0]
    h = batch.plan.header
    total = 0
    for j, d in batch.microbatches.items():
        shape = h.microbatches[j].shape
        assert tuple(d.input_ids.shape) == (shape.microbatch_size, shape.seqlen)
        for r, sid in enumerate(d.sample_ids):
            s = dataset[batch.dataset_ids[sid]]
            n = s.tokens.numel()
            assert torch.equal(d.input_ids[r, :n], s.tokens)
            assert torch.equal(d.labels[r, :n - 1], s.tokens[1:])
            assert torch.equal(d.position_ids[r, :n], torch.arange(n))
            assert int(d.loss_mask[r].sum()) == s.loss_tokens
            assert bool(d.loss_mask[r, s.target_start - 1]) and not d.loss_mask[r, n - 1:].any()
            assert (d.segment_ids[r, n:] == -1).all()
        m = d.attention_mask
        assert not m.triu(1).any()  # causal
        total += int(d.loss_mask.sum())
    assert total == batch.loss_tokens
    assert sum(len(d.sample_ids) for d in batch.microbatches.values()) == len(batch.dataset_ids)


def test_packed_rows_restart_positions_and_never_attend_across_samples():
    loader, dataset = make_loader(Case("1f1b", 2, packing=True), 0, 2)
    batches = _batches(loader, 2)
    packed = 0
    for b in batches:
        for d in b.microbatches.values():
            if not d.packed:
                continue
            packed += 1
            for r, row in enumerate(d.rows):
                at = 0
                for k, sid in enumerate(row):
                    n = dataset[b.dataset_ids[sid]].tokens.numel()
                    assert torch.equal(d.position_ids[r, at:at + n], torch.arange(n))
                    assert (d.segment_ids[r, at:at + n] == k).all()
                    if k > 0:  # no attention from this sample to the previous ones
                        assert not d.attention_mask[r, at:at + n, :at].any()
                    at += n
    assert packed, "the planner packed no micro-batch of these batches"


def test_samples_are_truncated_at_max_seqlen():
    from pipeplan.torch import PlannedLoader, Sample
    data = [Sample(torch.arange(50) % 7, 45), Sample(torch.arange(10) % 7, 3)]
    loader = PlannedLoader(data, [[0, 1]], make_planner(Case("1f1b", 2)), rank=0, max_seqlen=40)
    batch = _batches(loader, 1)[0]
    assert batch.lengths == [40, 10]
    assert batch.loss_tokens == 0 + 7  # sample 0's targets are cut off entirely


def test_planning_overlaps_training_and_stall_is_reported():
    loader = make_loader(Case("adaptive", 2), 0, 6)[0]
    stalls = []
    with loader:
        for b in loader:
            stalls.append(b.stall_ms)
            time.sleep(max(0.05, 3 * b.planning_ms / 1e3))  # "training" takes longer than planning
    assert len(stalls) == 6
    assert all(s < 20.0 for s in stalls[2:]), stalls  # steady state: the next plan is ready


def test_token_budget_batches_are_deterministic_and_within_budget():
    from pipeplan.torch import TokenBudgetBatches
    lengths = [a + b for a, b in batch_pairs()]
    x = list(TokenBudgetBatches(lengths, 100, seed=4, iterations=5))
    y = list(TokenBudgetBatches(lengths, 100, seed=4, iterations=5))
    assert x == y and len(x) == 5
    assert all(sum(lengths[i] for i in b) <= 100 for b in x)
