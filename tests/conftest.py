"""Settings for the whole test run."""

import signal
from pathlib import Path

import pytest

# A run started in the background of a non-interactive shell (`nohup scripts/test.sh &`) inherits SIGINT
# ignored, and Python then installs no KeyboardInterrupt handler; an ignored signal also stays ignored in
# every process the tests start. The Ctrl-C tests (in-process, and of `gpuprov launch`) need it delivered;
# a handler set here is reset to the default in child processes at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Markers follow folders: tests/unit is pure Python, tests/local runs real tools on this machine (Ansible
# with a local connection, gpg, the package-repository tools, venv builds) and tests/integration needs Docker,
# so `-m "not local and not integration"` selects the pure unit tests and `-m "not integration"` stays the
# documented quick run. A test in tests/local that takes half a minute or more is marked integration as well.
FOLDER_MARKERS = {"local": "local", "integration": "integration"}


@pytest.hookimpl(tryfirst=True)  # before -m reads the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    for item in items:
        folder = item.path.relative_to(tests).parts[0] if item.path.is_relative_to(tests) else None
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])


# Where a run's time goes, by file: pytest's --durations (pyproject.toml) lists the slowest tests, this sums
# every phase of every test (setup, call, teardown) per file, so a CI log shows which files to cut. A
# session-scoped fixture's setup (a sandbox, an image) counts in the file of the first test that uses it.
FILE_SECONDS: dict[str, float] = {}
FILES_SHOWN = 30


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    file = report.nodeid.split("::", 1)[0]
    FILE_SECONDS[file] = FILE_SECONDS.get(file, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FILE_SECONDS:
        return
    total = sum(FILE_SECONDS.values())
    slowest = sorted(FILE_SECONDS.items(), key=lambda item: item[1], reverse=True)[:FILES_SHOWN]
    terminalreporter.section(f"seconds per file (the {len(slowest)} slowest of {len(FILE_SECONDS)})")
    for file, seconds in slowest:
        terminalreporter.write_line(f"{seconds:8.1f} s {100 * seconds / total:5.1f} %  {file}")
    terminalreporter.write_line(f"{total:8.1f} s in all tests' setup, call and teardown")
