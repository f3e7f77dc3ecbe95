"""The framework-free rules of reshard.torch.move_state_dict (reshard/_sync_request.py), without PyTorch: the one-line
messages of bad requests, the members' world the plans run in (checked by running those plans on the host backend
against NumPy), local shapes by mesh position (_StridedShard too), and the agreement on a problem only one rank sees."""

import threading

import numpy as np
import pytest

import reshard
from reshard import _sync_request as rules

TRAIN = rules.Side((2,), (0, 1), ("S0",))
SERVE = rules.Side((2,), (2, 3), ("S1",))


def test_bad_requests_name_the_tensor_in_one_line():
    cases = [
        (lambda: rules.check_ranks("w", "target", (2, 5), 4), "tensor 'w': target rank 5 is outside the world of 4"),
        (lambda: rules.check_pair("w", (8, 6), (8, 4), "bf16", "bf16", {}),
         "tensor 'w': global shape [8, 6] on the source, [8, 4] on the target"),
        (lambda: rules.check_pair("w", (8, 6), (8, 6), "bf16", "f32", {}),
         "tensor 'w': bf16 -> f32 is not a conversion the move makes"),
        (lambda: rules.check_source_mesh("b", rules.Side((4,), (0, 1, 2, 3), ("R",)), "w", TRAIN),
         "tensor 'b': its source mesh 4[0, 1, 2, 3] is not tensor 'w''s 2[0, 1] (one source mesh per call)"),
        (lambda: rules.canonical_placements("w", "target", "S7", 2), "tensor 'w': target placements: shard dim 7"),
    ]
    for call, needle in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value).startswith("move_state_dict: ") and needle in str(e.value), str(e.value)
        assert "\n" not in str(e.value)
    rules.check_pair("w", (8, 6), (8, 6), "bf16", "f32", {"bf16": ("f32",)})  # a conversion the move makes


def test_members_world_runs_the_plans():
    """Members are the sorted union of both meshes' ranks (rank 4 is in neither); the plans, in the members' world,
    move every element (host backend, checked against NumPy)."""
    src = rules.Side((2, 2), (5, 3, 1, 0), ("S0", "S1"))
    dst = rules.Side((2,), (6, 3), ("S1",))
    members = rules.members(src, [dst])
    assert members == (0, 1, 3, 5, 6)
    args = rules.between(reshard._plan_args("2x2", "S0,S1", "S1", [6, 5], "f32", "auto", None, "auto", 8, None, None),
                         src, dst, members)
    assert (args.ranks, args.dst_mesh, args.dst_ranks, args.world_size) == ([3, 2, 1, 0], "2", [4, 2], 5)
    g = np.arange(30, dtype=np.float32).reshape(6, 5)
    shards = [None] * 5
    for position, member in enumerate(args.ranks):
        c0, c1 = divmod(position, 2)
        shards[member] = g[3 * c0:3 * c0 + 3, 3 * c1:min(5, 3 * c1 + 3)]
    outs = reshard.run_host([2, 2], "S0,S1", "S1", shards, ranks=args.ranks, dst_mesh=[2], dst_ranks=args.dst_ranks,
                            world_size=5)
    assert np.array_equal(outs[4], g[:, :3]) and np.array_equal(outs[2], g[:, 3:])
    assert [o is None for o in outs] == [True, True, False, True, False]
    assert reshard._core.budget_groups([args, args], None) == [[0, 1]]


def test_local_shapes_by_mesh_position():
    side = rules.Side((2, 2), (7, 5, 3, 1), ("SS0/2", "S0"))
    assert [rules.local_shape(side, (7, 3), r) for r in (7, 5, 3, 1)] == [(2, 3), (2, 3), (2, 3), (1, 3)]
    assert rules.local_shape(side, (7, 3), 0) is None
    assert rules.local_shape(SERVE, (5, 9), 3) == (5, 4)
    assert rules.local_shape(rules.Side((1,), (4,), ("R",)), (), 4) == ()


def test_buffer_problems():
    assert rules.buffer_problem("w", 3, "destination", (4, 4), (4, 4), "cuda:1", "cuda:1", "bf16", "bf16") == ""
    text = rules.buffer_problem("w", 3, "destination", (3, 3), (4, 4), "cuda:1", "cuda:1", "bf16", "bf16")
    assert text == ("move_state_dict: tensor 'w': rank 3's destination has shape [3, 3] on cuda:1; the layout gives "
                    "shape [4, 4] on cuda:1")
    text = rules.buffer_problem("w", 3, "destination", (4, 4), (4, 4), "cuda:1", "cuda:1", "f32", "bf16")
    assert text.endswith("rank 3's destination is f32; the target's dtype is bf16")


def test_conversion_classes():
    """One batch per conversion pair, one for every tensor that keeps its dtype, in first-tensor order."""
    keys = [("bf16", "f8e4m3"), ("f32", "f32"), ("bf16", "bf16"), ("bf16", "f8e4m3"), ("f32", "bf16")]
    assert rules.conversion_classes(keys) == [[0, 3], [1, 2], [4]]
    assert rules.conversion_classes([]) == []


class _Store:
    """The default store's two calls: set, and a get that blocks until the key is set."""

    def __init__(self):
        self.values = {}
        self.cond = threading.Condition()

    def set(self, key, value):
        with self.cond:
            self.values[key] = value.encode()
            self.cond.notify_all()

    def get(self, key):
        with self.cond:
            self.cond.wait_for(lambda: key in self.values, timeout=10)
            return self.values[key]

    def delete_key(self, key):
        with self.cond:
            return self.values.pop(key, None) is not None


@pytest.mark.parametrize("bad", [[], [3], [1, 3], [0, 1, 3]])
def test_members_agree_on_the_first_problem(bad):
    members = (0, 1, 3)
    store, got = _Store(), {}

    def member(r):
        got[r] = rules.agree(store, "move_state_dict/0-1-3/1", members, r, f"problem of rank {r}" if r in bad else "")

    threads = [threading.Thread(target=member, args=(r,)) for r in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = f"problem of rank {min(bad)}" if bad else ""
    assert got == {r: want for r in members}


@pytest.mark.parametrize("no", [[], [0], [3], [1, 3]])
def test_members_agree_on_every_vote(no):
    """A vote is True on every member only where every member voted True; a problem still comes from the first."""
    members = (0, 1, 3)
    store, got = _Store(), {}

    def member(r):
        got[r] = rules.agree_votes(store, "move_state_dict/0-1-3/1", members, r, "bad" if r == 1 else "", r not in no)

    threads = [threading.Thread(target=member, args=(r,)) for r in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {r: ("bad", not no) for r in members}


def test_members_delete_their_keys_two_syncs_back():
    """Many syncs in a row, members at their own pace: every sync agrees, and the store keeps at most the last two
    syncs' keys (a member's key is deleted only after every member has read it)."""
    members, syncs = (0, 1, 3), 40
    store, got = _Store(), {r: [] for r in (0, 1, 3)}

    def member(r):
        for c in range(1, syncs + 1):
            own = f"problem of rank {r} at {c}" if (c % 7 == 0 and r == 1) else ""
            got[r].append(rules.agree(store, f"sync/{c}", members, r, own, f"sync/{c - 2}" if c > 2 else None))

    threads = [threading.Thread(target=member, args=(r,)) for r in members]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = [f"problem of rank 1 at {c}" if c % 7 == 0 else "" for c in range(1, syncs + 1)]
    assert all(got[r] == want for r in members)
    assert sorted(store.values) == sorted(f"sync/{c}/{r}" for c in (syncs - 1, syncs) for r in members)
