"""gpuprov.launch.slurm's parsers against recorded output of Debian 12's real Slurm 22.05.8
(tests/recorded/slurm/), and how the output reader maps srun's labels to nodes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from gpuprov.launch import slurm

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "slurm"


def recorded(name: str) -> str:
    return (RECORDED / f"{name}-22.05.8").read_text()


@pytest.mark.parametrize(
    ("name", "state", "reason", "code", "final"),
    [
        ("scontrol-show-job-pending", "PENDING", "Resources", 0, False),
        ("scontrol-show-job-running", "RUNNING", "None", 0, False),
        ("scontrol-show-job-completed", "COMPLETED", "None", 0, True),
        ("scontrol-show-job-failed", "FAILED", "NonZeroExitCode", 3, True),
        ("scontrol-show-job-cancelled", "CANCELLED", "None", 143, True),
    ],
)
def test_job_states(name: str, state: str, reason: str, code: int, final: bool) -> None:
    parsed = slurm.parse_job(recorded(name))
    assert (parsed.state, parsed.reason, parsed.exit_code, parsed.final) == (state, reason, code, final)


def test_running_job_names_its_batch_host() -> None:
    assert slurm.parse_job(recorded("scontrol-show-job-running")).batch_host == "node1"


def test_a_signal_in_exit_code_is_128_plus_it() -> None:
    assert slurm.parse_job("JobState=CANCELLED ExitCode=0:15").exit_code == 143


def test_an_unknown_job_is_final_with_no_code() -> None:
    parsed = slurm.parse_job(recorded("scontrol-show-job-unknown"))
    assert (parsed.state, parsed.exit_code, parsed.final) == ("UNKNOWN", None, True)


class FakePrinter:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def line(self, host: str, text: str) -> None:
        self.lines.append((host, text))


def test_output_lines_go_to_the_node_of_their_srun_label() -> None:
    reader = slurm.OutputReader.__new__(slurm.OutputReader)
    printer = FakePrinter()
    reader.printer, reader.host, reader.nodes = printer, "node1", []  # type: ignore[assignment]
    reader.job = SimpleNamespace(hosts=[SimpleNamespace(name="node1"), SimpleNamespace(name="node2")])  # type: ignore[assignment]
    for line in [
        "gpuprov-nodes: node1 node2",
        "1: [rank1]:rank 1 up",
        "0: [rank0]:rank 0 up",
        "srun: error: node2: task 1: Exited with exit code 3",
    ]:
        reader._print(line)
    assert printer.lines == [
        ("node2", "[rank1]:rank 1 up"),
        ("node1", "[rank0]:rank 0 up"),
        ("node1", "srun: error: node2: task 1: Exited with exit code 3"),
    ]


def test_a_batch_host_the_record_names_otherwise_is_looked_for_by_its_output() -> None:
    """Slurm's BatchHost is its node name (node1); an inventory that names the host node1.cluster.test
    (launch.slurm_nodes) leaves the record without it: the reader looks for the output file instead,
    at most every FIND_INTERVAL_S while the job runs."""
    reader = slurm.OutputReader.__new__(slurm.OutputReader)
    reader.job = SimpleNamespace(hosts=[SimpleNamespace(name="node1.cluster.test")])  # type: ignore[assignment]
    reader.client, reader.next_find = None, 0.0
    looked: list[int] = []

    def find() -> bool:
        looked.append(1)
        return False

    reader.find = find  # type: ignore[method-assign]
    reader.attach("node1")
    reader.attach("node1")
    assert looked == [1] and reader.client is None


def test_lines_of_a_node_the_record_does_not_name_go_with_the_batch_host() -> None:
    reader = slurm.OutputReader.__new__(slurm.OutputReader)
    printer = FakePrinter()
    reader.printer, reader.host, reader.nodes = printer, "gpu01.example", []  # type: ignore[assignment]
    reader.job = SimpleNamespace(hosts=[SimpleNamespace(name="gpu01.example")])  # type: ignore[assignment]
    for line in ["gpuprov-nodes: gpu01 gpu02", "1: [rank1]:rank 1 up"]:
        reader._print(line)
    assert printer.lines == [("gpu01.example", "gpu02: [rank1]:rank 1 up")]
