"""`gpuprov bootstrap` with a test playbook in place of site.yml; everything else is the real command.

Usage: python driver.py PLAYBOOK [gpuprov arguments...]
"""

import sys
from pathlib import Path

from gpuprov import cli
from gpuprov.bootstrap import core

core.PLAYBOOK = str(Path(sys.argv[1]).resolve())
cli.main(sys.argv[2:])
