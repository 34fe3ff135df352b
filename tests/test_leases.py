"""Tenant leases on a real folder: acquire, renew, release, expiry, takeover, and races of
many threads and of several processes for one expired lease (exactly one wins each epoch)."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from proxy.cluster.leases import KEEP_EPOCHS, FileLeaseStore, Lease, LeaseError, Leases, lease_store

pytestmark = pytest.mark.cluster

T0 = 1_700_000_000.0


@pytest.fixture
def leases(tmp_path: Path) -> Leases:
    return Leases(lease_store(f"file://{tmp_path}"))


def epoch_files(root: Path, tenant: str) -> list[str]:
    return sorted(n for n in os.listdir(root / "leases" / tenant) if not n.startswith("."))


def test_the_first_acquire_creates_epoch_one(leases: Leases, tmp_path: Path) -> None:
    lease = leases.acquire("alice", "n1", 10, T0)
    assert lease == Lease("alice", "n1", 1, T0 + 10, T0, previous_node=None, holder=leases.holder)
    assert leases.current("alice") == lease
    [name] = epoch_files(tmp_path, "alice")
    assert name == "00000000000000000001.json"
    stored = json.loads((tmp_path / "leases" / "alice" / name).read_text())
    assert stored == {
        "node": "n1", "epoch": 1, "expires_at": T0 + 10, "acquired_at": T0, "holder": leases.holder
    }
    assert leases.current("bob") is None


def test_a_valid_lease_of_another_node_cannot_be_taken(leases: Leases) -> None:
    held = leases.acquire("alice", "n1", 10, T0)
    assert leases.acquire("alice", "n2", 10, T0 + 9.9) is None
    assert leases.current("alice") == held


def test_acquiring_a_lease_already_held_renews_it(leases: Leases) -> None:
    leases.acquire("alice", "n1", 10, T0)
    again = leases.acquire("alice", "n1", 10, T0 + 5)
    assert again is not None and (again.epoch, again.expires_at) == (1, T0 + 15)
    assert again.acquired_at == T0


def test_renew_extends_a_valid_lease_only(leases: Leases) -> None:
    lease = leases.acquire("alice", "n1", 10, T0)
    assert lease is not None
    renewed = leases.renew(lease, 10, T0 + 8)
    assert renewed is not None and renewed.expires_at == T0 + 18
    assert leases.current("alice") == renewed
    assert leases.renew(renewed, 10, T0 + 18) is None  # expired: never resurrected
    assert leases.current("alice") == renewed


def test_an_expired_lease_is_taken_over_and_the_loser_knows(leases: Leases) -> None:
    old = leases.acquire("alice", "n1", 10, T0)
    assert old is not None
    new = leases.acquire("alice", "n2", 10, T0 + 10)
    assert new is not None and (new.epoch, new.node, new.previous_node) == (2, "n2", "n1")
    assert leases.renew(old, 10, T0 + 11) is None
    assert not leases.release(old)
    assert leases.current("alice") == new
    assert leases.acquire("alice", "n1", 10, T0 + 12) is None


def test_a_stale_renewal_loses_to_a_successor(leases: Leases) -> None:
    """The renewal of an old epoch, even with a clock that says it is still valid, returns
    None once a higher epoch exists."""
    old = leases.acquire("alice", "n1", 10, T0)
    assert old is not None
    assert leases.acquire("alice", "n2", 10, T0 + 10) is not None
    assert leases.renew(old, 10, T0 + 1) is None


def test_release_hands_the_tenant_over_at_once(leases: Leases) -> None:
    lease = leases.acquire("alice", "n1", 60, T0)
    assert lease is not None
    assert leases.release(lease)
    current = leases.current("alice")
    assert current is not None and current.released and not current.valid(T0)
    assert leases.renew(lease, 60, T0 + 1) is None  # released: never resurrected
    taken = leases.acquire("alice", "n2", 60, T0 + 1)
    assert taken is not None and (taken.epoch, taken.previous_node) == (2, "n1")


def test_a_node_that_lost_its_lease_to_expiry_gets_a_new_epoch(leases: Leases) -> None:
    """Its own name as ``previous_node`` tells the node nobody wrote the tenant since."""
    leases.acquire("alice", "n1", 10, T0)
    again = leases.acquire("alice", "n1", 10, T0 + 30)
    assert again is not None and (again.epoch, again.previous_node) == (2, "n1")


def test_old_epochs_are_pruned(leases: Leases, tmp_path: Path) -> None:
    for i in range(7):
        lease = leases.acquire("alice", f"n{i}", 10, T0 + 100 * i)
        assert lease is not None and lease.epoch == i + 1
    assert epoch_files(tmp_path, "alice") == [f"{e:020d}.json" for e in (5, 6, 7)]
    assert len(epoch_files(tmp_path, "alice")) == KEEP_EPOCHS
    current = leases.current("alice")
    assert current is not None and (current.node, current.previous_node) == ("n6", "n5")


def test_validity_keeps_a_safety_margin() -> None:
    lease = Lease("alice", "n1", 1, T0 + 10, T0)
    assert lease.valid(T0 + 7, margin=2) and not lease.valid(T0 + 8, margin=2)
    assert lease.valid(T0 + 9.99) and not lease.valid(T0 + 10)


@pytest.mark.parametrize("tenant", ["../x", "a/b", "..", ".", "", ".hidden", "a\\b", "x" * 65])
def test_unsafe_tenant_names_are_refused(leases: Leases, tenant: str) -> None:
    with pytest.raises(LeaseError, match="invalid tenant"):
        leases.acquire(tenant, "n1", 10, T0)
    with pytest.raises(LeaseError, match="invalid tenant"):
        leases.current(tenant)


def test_bad_arguments_are_refused(leases: Leases) -> None:
    with pytest.raises(LeaseError, match="invalid node"):
        leases.acquire("alice", "", 10, T0)
    with pytest.raises(ValueError, match="ttl_s"):
        leases.acquire("alice", "n1", 0, T0)


def test_lease_stores_by_root(tmp_path: Path) -> None:
    store = lease_store(f"file://{tmp_path}/")
    assert isinstance(store, FileLeaseStore) and store.root == tmp_path
    with pytest.raises(LeaseError, match="If-None-Match"):
        lease_store("s3://bucket/prefix")
    with pytest.raises(LeaseError, match="absolute local path"):
        lease_store("file://otherhost/x")


def test_a_malformed_lease_file_is_an_error(leases: Leases, tmp_path: Path) -> None:
    folder = tmp_path / "leases" / "alice"
    folder.mkdir(parents=True)
    (folder / f"{1:020d}.json").write_text("{not json")
    with pytest.raises(LeaseError, match="malformed lease 1"):
        leases.current("alice")


def test_many_threads_racing_for_an_expired_lease_make_one_winner_per_epoch(
    leases: Leases,
) -> None:
    threads, rounds = 16, 6
    barrier = threading.Barrier(threads)
    won: list[list[int]] = [[] for _ in range(rounds)]

    def contend(i: int) -> None:
        for r in range(rounds):
            barrier.wait()
            lease = leases.acquire("alice", f"n{i}", 10, T0 + 100 * r)
            if lease is not None:
                won[r].append(lease.epoch)

    workers = [threading.Thread(target=contend, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    assert won == [[r + 1] for r in range(rounds)]


def _contend(root: str, i: int, rounds: int, barrier: Any, results: Any) -> None:
    leases = Leases(lease_store(root))
    for r in range(rounds):
        barrier.wait()
        lease = leases.acquire("alice", f"p{i}", 10, T0 + 100 * r)
        results.put((r, lease.epoch if lease else None))


def test_several_processes_racing_for_an_expired_lease_make_one_winner_per_epoch(
    tmp_path: Path,
) -> None:
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork (the children only do file IO)")
    context = multiprocessing.get_context("fork")
    processes, rounds = 6, 4
    barrier, results = context.Barrier(processes), context.Queue()
    args = (f"file://{tmp_path}", rounds, barrier, results)
    children = [
        context.Process(target=_contend, args=(args[0], i, *args[1:])) for i in range(processes)
    ]
    with warnings.catch_warnings():  # a threaded parent: safe, the children only do file IO
        warnings.simplefilter("ignore", DeprecationWarning)
        for child in children:
            child.start()
    outcomes = [results.get(timeout=30) for _ in range(processes * rounds)]
    for child in children:
        child.join(timeout=30)
        assert child.exitcode == 0
    for r in range(rounds):
        assert sorted(e for rr, e in outcomes if rr == r and e is not None) == [r + 1]


@pytest.mark.parametrize(
    "expires_at", ["1e400", "-1e400", "NaN", "1" + "0" * 400, '"1e12"', "true", "null", "[1]"]
)
def test_a_lease_whose_expiry_is_no_finite_number_is_malformed(
    leases: Leases, tmp_path: Path, expires_at: str
) -> None:
    """An expiry of 1e400 (read as infinity) kept the tenant from every node for good with
    no error anywhere (the claim waited forever); NaN or a string was read as expired or
    as a time, so a corrupt file could be taken over as if it were a lease."""
    folder = tmp_path / "leases" / "alice"
    folder.mkdir(parents=True)
    body = f'{{"node": "n1", "epoch": 1, "expires_at": {expires_at}, "acquired_at": {T0}}}'
    (folder / f"{1:020d}.json").write_text(body)
    with pytest.raises(LeaseError, match="malformed lease 1"):
        leases.current("alice")
    with pytest.raises(LeaseError, match="malformed lease 1"):
        leases.acquire("alice", "n2", 10, T0 + 1e9)
    assert epoch_files(tmp_path, "alice") == [f"{1:020d}.json"]


@pytest.mark.parametrize("ttl_s", [float("inf"), float("nan"), -1.0])
def test_a_lease_lasts_a_finite_time(leases: Leases, ttl_s: float) -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        leases.acquire("alice", "n1", ttl_s, T0)
    assert leases.current("alice") is None


def test_a_malformed_earlier_epoch_does_not_hide_the_current_lease(
    leases: Leases, tmp_path: Path
) -> None:
    """The previous holder is only reported (``previous_node``): its file torn or edited
    made the current, well-formed lease unreadable, and the tenant unclaimable."""
    first = leases.acquire("alice", "n1", 10, T0)
    assert first is not None and leases.release(first)
    second = leases.acquire("alice", "n2", 10, T0 + 1)
    assert second is not None and second.previous_node == "n1"
    (tmp_path / "leases" / "alice" / f"{1:020d}.json").write_text('{"node": "n1", "ep')
    current = leases.current("alice")
    assert current is not None and (current.node, current.epoch) == ("n2", 2)
    assert current.previous_node is None
    assert leases.renew(second, 10, T0 + 2) is not None
    assert leases.acquire("alice", "n3", 10, T0 + 3) is None  # n2 still holds it


def test_the_wanted_note_reads_back_and_a_torn_or_foreign_one_asks_for_nothing(
    leases: Leases, tmp_path: Path
) -> None:
    """The note is read by the holder's renewal loop, which stops only on lease and
    replication errors: an ``at`` of 400 digits raised OverflowError there and ended the
    loop, so no tenant of the node was renewed again."""
    assert leases.wanted("alice") is None
    leases.want("alice", "n1", T0)
    assert leases.wanted("alice") is None  # this holder asked: nobody else
    other = Leases(leases.store)
    other.want("alice", "n2", T0)
    assert leases.wanted("alice") == ("n2", T0) and other.wanted("alice") is None
    note = tmp_path / "leases" / "alice" / "wanted.note"
    for body in ('{"node": "n2", "at": 1' + "0" * 400 + "}", '{"node": "n2"', "[]", "7"):
        note.write_text(body)
        assert leases.wanted("alice") is None


def test_another_process_with_the_holders_node_name_waits_like_any_other_node(
    tmp_path: Path,
) -> None:
    """A lease named its holder by node name alone: a second process with that name (the
    node restarted within its lease after a kill, or two nodes given one name) renewed
    the holder's epoch instead of waiting. Two writers of one tenant; and the restarted
    node, finding its marker at that very epoch, restored the epoch before over its own
    newer database (every exchange of the epoch lost). Each :class:`Leases` is one holder."""
    root = f"file://{tmp_path}"
    first, second = Leases(lease_store(root)), Leases(lease_store(root))
    held = first.acquire("alice", "a", 10, T0)
    assert held is not None
    assert second.acquire("alice", "a", 10, T0 + 1) is None
    assert not second.release(Lease("alice", "a", 1, T0 + 10, T0))
    assert first.renew(held, 10, T0 + 2) is not None
    taken = second.acquire("alice", "a", 10, T0 + 12.5)  # once it expired
    assert taken is not None and (taken.epoch, taken.previous_node) == (2, "a")
    assert first.renew(held, 10, T0 + 13) is None and not first.release(held)
    assert second.renew(taken, 10, T0 + 14) is not None


class _StallBeforeCreate(FileLeaseStore):
    """A node that stalls between reading the current lease and creating the next epoch
    (a GC pause, a frozen VM): ``meanwhile`` runs where the stall was."""

    def __init__(self, root: Path, meanwhile: Any) -> None:
        super().__init__(root)
        self.meanwhile = meanwhile

    def create(self, tenant: str, epoch: int, body: bytes) -> bool:
        meanwhile, self.meanwhile = self.meanwhile, None
        if meanwhile is not None:
            meanwhile()
        return super().create(tenant, epoch, body)


def test_an_epoch_created_after_newer_ones_were_pruned_is_no_lease(tmp_path: Path) -> None:
    """The stalled node's epoch had been taken and pruned meanwhile, so its create
    succeeded: it served the tenant as holder of epoch 2 while another node held epoch 5,
    until its next renewal (two writers)."""
    others = Leases(lease_store(f"file://{tmp_path}"))

    def four_epochs_pass() -> None:
        for i in range(4):  # epochs 2..5; creating 5 prunes 2
            lease = others.acquire("alice", f"n{i}", 10, T0 + 20 + i)
            assert lease is not None and others.release(lease)
        assert others.acquire("alice", "n9", 10, T0 + 30) is not None  # epoch 6 held

    first = others.acquire("alice", "n1", 10, T0)
    assert first is not None and first.epoch == 1
    stalled = Leases(_StallBeforeCreate(tmp_path, four_epochs_pass))
    assert stalled.acquire("alice", "late", 10, T0 + 15) is None
    current = others.current("alice")
    assert current is not None and (current.node, current.epoch) == ("n9", 6)
