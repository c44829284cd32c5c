"""The stand-in programs: POSIX sh files in programs/ (the test hosts' /bin/sh is dash), made per package.

A program file is a shell script that shellcheck reads as it is; three rules make the installed program:

- A line `. ./NAME.sh` is replaced by the text of programs/NAME.sh (the settings every tool reads, in
  gpus-conf.sh; the conda script inside the installer's here-document), so each program is one file on the
  test host and shellcheck, told to follow sourced files, sees the variables they set.
- A line that starts with `# shellcheck ` is for the linter only and is left out.
- Each @NAME@ is replaced by the value given for NAME (versions, paths); every one needs a value.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

# Simulated GPUs: the stand-in tools read this file on the test host (shell syntax, see nvidia-smi.sh).
# GPUPROV_STANDIN_GPUS_CONF overrides the path, which lets tests run the tools without touching /etc.
GPUS_CONF = "/etc/gpuprov/standin-gpus.conf"

PROGRAMS = resources.files("gpuprov.sandbox.standins") / "programs"

_INCLUDE = re.compile(r"^\. \./(?P<name>[\w.-]+\.sh)\n", re.MULTILINE)
_LINT_DIRECTIVE = re.compile(r"^[ \t]*# shellcheck [^\n]*\n", re.MULTILINE)
_PLACEHOLDER = re.compile(r"@(?P<name>[A-Z_]+)@")


def program(name: str, **values: str) -> bytes:
    """programs/<name> as installed: includes expanded, linter directives dropped, @NAME@s filled in."""
    text = _expanded(name)
    placeholders = {m["name"] for m in _PLACEHOLDER.finditer(text)}
    missing, unused = placeholders - values.keys(), values.keys() - placeholders
    if missing or unused:
        raise ValueError(f"{name}: no value for {sorted(missing)}, no placeholder for {sorted(unused)}")
    return _PLACEHOLDER.sub(lambda m: values[m["name"]], text).encode()


@functools.cache
def _expanded(name: str) -> str:
    text = (PROGRAMS / name).read_bytes().decode()
    text = _LINT_DIRECTIVE.sub("", text)
    return _INCLUDE.sub(lambda m: _expanded(m["name"]), text)
