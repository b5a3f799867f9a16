"""How `make test` deals the tests to its xdist workers (tests/conftest.py): the book's group
to one worker first, then the other tests longest first, the rest in their own order."""

from __future__ import annotations

from types import SimpleNamespace

import conftest

BOOK = [f"tests/test_book.py::test_{i}" for i in range(3)] + ["tests/test_website.py::test_b"]
SHORT = ["tests/core/test_a.py::test_one", "tests/core/test_a.py::test_two"]
RECOMPUTE = "tests/test_recompute.py::test_committed_results_recompute_under_other_cpu_kernels"
CONVERGED = "tests/test_converged_evidence.py::test_no_claim_reads_an_unconverged_run[demo]"


class Node:
    """A stand-in for xdist's WorkerController: records what it is sent."""

    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes):
        self.sent.extend(indexes)

    def shutdown(self):
        self.shutting_down = True


def dealt(collection: list[str], workers: int) -> list[list[str]]:
    option = SimpleNamespace(tx=[f"{workers}*popen"], loadscopereorder=True)
    config = SimpleNamespace(option=option, getvalue=lambda name: getattr(option, name))
    scheduler = conftest.pytest_xdist_make_scheduler(config, None)
    nodes = [Node(f"gw{i}") for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    order = [[collection[i] for i in node.sent] for node in nodes]
    order.append(list(scheduler.workqueue))  # what is left, in the order it will be dealt
    return order


def test_the_book_group_goes_first_then_the_longest_tests():
    """Each worker is sent a first scope, then a second where it holds two tests or fewer."""
    collection = [*SHORT, CONVERGED, *BOOK, RECOMPUTE]
    first, second, third, left = dealt(collection, 3)
    assert first == BOOK  # the largest scope, on one worker
    assert second == [RECOMPUTE, SHORT[0]] and third == [CONVERGED, SHORT[1]]
    assert left == []


def test_a_collection_without_long_tests_keeps_its_order():
    first, second, left = dealt([*SHORT, *BOOK, "tests/test_z.py::test_z"], 2)
    assert first == BOOK and second == SHORT and left == ["tests/test_z.py::test_z"]
