"""Print a repository's metadata file as the host sees it: `fetch_url.py URL [MAX_BYTES]`.

`gpuprov lock resolve` (lock_commands/metadata.py) sends this as `python -c` text to one host of each OS,
so the metadata comes from where the host's apt/dnf and pip will fetch (a site mirror, a proxy the host
uses, a name only the cluster resolves). A gzip file (`Packages.gz`, `primary.xml.gz`) is unpacked here:
the SSH layer reads text. Exit 0 with the text on stdout; exit 1 with one line on stderr.

It runs with the host's system Python before anything has checked it (EL8's is 3.6): it parses on 3.6 and
needs nothing newer (gpuprov/onhost/__init__.py).
"""

import gzip
import sys
import urllib.request
from typing import Sequence

TIMEOUT_S = 60
DEFAULT_MAX_BYTES = 512 * 1024 * 1024  # NVIDIA's largest Packages file is tens of MB unpacked


def main(argv: Sequence[str]) -> int:
    if len(argv) not in (2, 3):
        sys.stderr.write("usage: fetch_url.py URL [MAX_BYTES]\n")
        return 2
    url = argv[1]
    limit = int(argv[2]) if len(argv) == 3 else DEFAULT_MAX_BYTES
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            data = answer.read(limit + 1)
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except Exception as exc:  # one line, whatever failed: the controller shows it per host
        sys.stderr.write(
            "cannot fetch {}: {}\n".format(url, " ".join(str(exc).split()) or type(exc).__name__)
        )
        return 1
    if len(data) > limit:
        sys.stderr.write(f"cannot fetch {url}: larger than {limit} bytes\n")
        return 1
    sys.stdout.write(data.decode("utf-8", "replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
