"""BookKeeper's ``BookKeeperDiskSpaceWeightedLedgerPlacementTest``, case by case: ten bookies,
2000 ledgers E3/W3 created through kraftlake's real writer decider (``CreateLedger``), with
BookKeeper's checks on how often each bookie lands in an ensemble. BookKeeper's test starts bookies
that report a custom free space; here ``BookieInfo`` records set it, and a bookie killed or added
is a ``BookieAvailability`` or a ``BookieRegistered`` record. No racks: BookKeeper's test runs
the default (rack-unaware) placement."""

from __future__ import annotations

from collections import Counter

from kraftlake.records.bookkeeper import Availability, BookieAvailability, BookieInfo, BookieRegistered
from kraftlake.statemachine.bookkeeper import BookiesView
from kraftlake.statemachine.bookkeeper import commands as c
from kraftlake.statemachine.bookkeeper.decider import decide
from kraftlake.statemachine.bookkeeper.reducer import apply
from kraftlake.statemachine.simulation import Simulation

FREE = 1_000_000
MULTIPLE = 3
N = 10


def _cluster(free: list[int]) -> Simulation:
    k = Simulation(BookiesView(), decide, apply, 1_000_000)
    for i, f in enumerate(free):
        k.emit(
            [BookieRegistered(bookie_id=f"b{i}"), BookieInfo(bookie_id=f"b{i}", free_bytes=f, total_bytes=10 * FREE)]
        )
    return k


def _ledgers(k: Simulation, n: int = 2000) -> Counter:
    m: Counter = Counter()
    for _ in range(n):
        d = k.run(c.CreateLedger(ensemble_size=3, write_quorum=3, ack_quorum=3))
        m.update(k.view.ledgers[d.reply.ledger_id].ensembles[0])
    return m


def _honoured(m: Counter, heavy: list[str], light: list[str]) -> None:
    for h in heavy:
        for b in light:
            assert abs(m[h] / m[b] - MULTIPLE) < 1, (h, b, m[h] / m[b])


def _even(m: Counter, bookies: list[str]) -> None:
    for a, b in zip(bookies, bookies[1:]):
        assert abs(m[a] - m[b]) * 100 / m[b] <= 30, (a, b)


def _info(k: Simulation, bookie: str, free: int) -> None:
    k.emit([BookieInfo(bookie_id=bookie, free_bytes=free, total_bytes=10 * FREE)])


BOOKIES = [f"b{i}" for i in range(N)]


def test_testDiskSpaceWeightedBookieSelection():
    k = _cluster([FREE] * (N - 2) + [MULTIPLE * FREE] * 2)
    _honoured(_ledgers(k), BOOKIES[-2:], BOOKIES[:-2])


def test_testDiskSpaceWeightedBookieSelectionWithChangingWeights():
    k = _cluster([FREE] * (N - 2) + [MULTIPLE * FREE] * 2)
    _honoured(_ledgers(k), BOOKIES[-2:], BOOKIES[:-2])
    for b, f in (("b0", MULTIPLE * FREE), ("b1", MULTIPLE * FREE), ("b8", FREE), ("b9", FREE)):
        _info(k, b, f)
    _honoured(_ledgers(k), ["b0", "b1"], BOOKIES[2:])


def test_testDiskSpaceWeightedBookieSelectionWithBookiesDying():
    k = _cluster([FREE] * (N - 2) + [MULTIPLE * FREE] * 2)
    m = _ledgers(k)
    assert abs(m["b8"] / m["b0"] - MULTIPLE) < 1 and abs(m["b9"] / m["b1"] - MULTIPLE) < 1
    for b in ("b9", "b8"):
        k.emit([BookieAvailability(bookie_id=b, availability=Availability.LOST)])
    m = _ledgers(k)
    _even(m, BOOKIES[:-2])
    assert m["b8"] == 0 and m["b9"] == 0


def test_testDiskSpaceWeightedBookieSelectionWithBookiesBeingAdded():
    k = _cluster([FREE] * N)
    for b in ("b9", "b8"):
        k.emit([BookieAvailability(bookie_id=b, availability=Availability.LOST)])
    _even(_ledgers(k), BOOKIES[:-2])
    for b in ("b9", "b8"):  # restarted with more free space
        k.emit([BookieAvailability(bookie_id=b, availability=Availability.WRITABLE)])
        _info(k, b, MULTIPLE * FREE)
    _honoured(_ledgers(k), ["b8", "b9"], BOOKIES[:-2])


def test_testDiskSpaceWeightedBookieSelectionWithPeriodicBookieInfoUpdate():
    """The two bookies report more free space at the next periodic ``GET_BOOKIE_INFO``: placement
    follows from then on (kraftlake reads the weights from the last ``BookieInfo``)."""
    k = _cluster([FREE] * N)
    _even(_ledgers(k), BOOKIES)
    for b in ("b8", "b9"):
        _info(k, b, MULTIPLE * FREE)
    _honoured(_ledgers(k), ["b8", "b9"], BOOKIES[:-2])
