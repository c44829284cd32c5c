#!/usr/bin/python3
"""Converge a host's apt entries for NVIDIA's CUDA repository to one entry signed by the verified key.

Runs on the host (Python 3.6 and newer: EL8's and Ubuntu 20.04's interpreters parse it). apt refuses two
entries of one URL with different Signed-By ("Conflicting values set for option Signed-By", then "The list
of sources could not be read": every apt call fails), so this runs before the role's first apt task.

An entry names the repository when its URI is the repository URL, up to the scheme and a trailing slash
(`http://` and `https://` entries of one repository reach the same packages). An entry is *verified* when
its Signed-By names keyring files (or an inline key) whose primary keys are exactly the verified key, and no
option lowers apt's checks (trusted=yes, allow-insecure, allow-weak, allow-downgrade-to-insecure). One
verified `deb` entry outside gpuprov's own file is adopted (NVIDIA's cuda-keyring list first, a conffile of
a package: editing it would make its upgrades ask); every other entry of the URL is disabled: a one-line
entry commented out, a deb822 stanza marked `Enabled: no` (sources.list(5)), or, when the stanza names other
URIs too, the URL dropped from its URIs. With nothing to adopt, gpuprov's own entry (written by the role
afterwards) is the one; with an entry adopted, gpuprov's own file is removed. Check mode reports, writes
nothing.
"""

import glob
import os
import re
import shutil
import subprocess
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: nvidia_apt_entries
short_description: Converge apt's entries of one repository URL to one entry signed by a verified key
options:
  url: {description: The repository URL, type: str, required: true}
  fingerprint: {description: Full fingerprint of the verified key, type: str, required: true}
  own_file: {description: gpuprov's own entry, left to the role (removed when another is adopted), type: path}
  apt_dir: {description: apt's configuration directory, type: path, default: /etc/apt}
"""

DISABLED = "# Disabled by gpuprov (nvidia_repository): "
LOWERING = ("trusted", "allow-insecure", "allow-weak", "allow-downgrade-to-insecure")
CUDA_KEYRING_LIST = re.compile(r"/cuda-[a-z0-9]+-[a-z0-9_]+\.list$")


def url_key(uri):
    """The URI without its scheme and trailing slashes: what two entries of one repository share."""
    return re.sub(r"^[a-z+]+://", "", uri.strip()).rstrip("/")


def source_files(apt_dir):
    parts = os.path.join(apt_dir, "sources.list.d")
    files = [os.path.join(apt_dir, "sources.list")]
    files += sorted(glob.glob(os.path.join(parts, "*.list")) + glob.glob(os.path.join(parts, "*.sources")))
    return [f for f in files if os.path.isfile(f)]


# --------------------------------------------------------------------------------------------------------
# Reading entries


def one_line_entries(path, lines, key):
    """Entries of a one-line file naming the URL: dicts with the line index, type and options."""
    found = []
    pattern = re.compile(r"^\s*(deb|deb-src)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)")
    for index, line in enumerate(lines):
        match = pattern.match(line)
        if not match or url_key(match.group(3)) != key:
            continue
        options = {}
        for option in (match.group(2) or "").split():
            name, _, value = option.partition("=")
            options[name.rstrip("+-").lower()] = value
        found.append(
            {
                "file": path,
                "format": "one-line",
                "line": index,
                "type": match.group(1),
                "signed_by": options.get("signed-by", ""),
                "lowering": [o for o in LOWERING if options.get(o, "no").lower() in ("yes", "true")],
            }
        )
    return found


def stanzas(lines):
    """deb822 paragraphs as (first line, last line, {lower-case field: value}); comment lines skipped."""
    result, start, fields, name = [], None, {}, None
    for index, line in enumerate([*lines, ""]):
        if not line.strip():
            if start is not None:
                result.append((start, index - 1, fields))
            start, fields, name = None, {}, None
            continue
        if line.lstrip().startswith("#"):
            continue
        start = index if start is None else start
        if line[0] in " \t" and name:
            fields[name] += "\n" + ("" if line.strip() == "." else line.strip())
        elif ":" in line:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            fields[name] = value.strip()
    return result


def deb822_entries(path, lines, key):
    found = []
    for first, last, fields in stanzas(lines):
        uris = fields.get("uris", "").split()
        if key not in [url_key(u) for u in uris] or fields.get("enabled", "yes").lower() == "no":
            continue
        found.append(
            {
                "file": path,
                "format": "deb822",
                "line": first,
                "last": last,
                "type": "deb" if "deb" in fields.get("types", "").split() else "deb-src",
                "uris": uris,
                "signed_by": fields.get("signed-by", ""),
                "lowering": [o for o in LOWERING if fields.get(o, "no").lower() in ("yes", "true")],
            }
        )
    return found


def read_entries(apt_dir, url, own_file):
    key, entries = url_key(url), []
    for path in source_files(apt_dir):
        if own_file and os.path.abspath(path) == os.path.abspath(own_file):
            continue
        with open(path) as handle:
            lines = handle.read().splitlines()
        reader = deb822_entries if path.endswith(".sources") else one_line_entries
        entries += reader(path, lines, key)
    return entries


# --------------------------------------------------------------------------------------------------------
# Keys


def primary_fingerprints(key_file):
    """The primary keys' fingerprints of an OpenPGP key file (binary or armored), upper case."""
    home = tempfile.mkdtemp()
    try:
        listing = subprocess.run(
            ["gpg", "--homedir", home, "--batch", "--no-options", "--with-colons", "--show-keys", key_file],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            universal_newlines=True,  # noqa: UP021 (`text` is Python 3.7+; EL8 has 3.6)
            check=False,
        ).stdout
    finally:
        shutil.rmtree(home, ignore_errors=True)
    found, after_pub = set(), False
    for record in listing.splitlines():
        fields = record.split(":")
        if fields[0] == "pub":
            after_pub = True
        elif fields[0] == "fpr" and after_pub:
            found.add(fields[9].upper())
            after_pub = False
    return found


def signing_keys(signed_by):
    """The primary fingerprints Signed-By names, or None when they cannot be read (a missing file, a
    fingerprint instead of a file, nothing at all)."""
    if "BEGIN PGP PUBLIC KEY BLOCK" in signed_by:
        with tempfile.NamedTemporaryFile("w", suffix=".asc") as inline:
            inline.write(signed_by.strip() + "\n")
            inline.flush()
            return primary_fingerprints(inline.name) or None
    paths = [p for p in re.split(r"[,\s]+", signed_by) if p]
    if not paths or not all(p.startswith("/") and os.path.isfile(p) for p in paths):
        return None
    found = set()
    for path in paths:
        found |= primary_fingerprints(path)
    return found


def is_verified(entry, fingerprint):
    return not entry["lowering"] and signing_keys(entry["signed_by"]) == {fingerprint}


def adoptable(entries, fingerprint):
    """The entry to keep instead of gpuprov's own: a verified deb entry, cuda-keyring's list first."""
    candidates = [e for e in entries if e["type"] == "deb" and is_verified(e, fingerprint)]
    candidates.sort(key=lambda e: (not CUDA_KEYRING_LIST.search(e["file"]), e["file"], e["line"]))
    return candidates[0] if candidates else None


# --------------------------------------------------------------------------------------------------------
# Disabling


def disable(lines, entry, url):
    """Disable ENTRY in LINES (in place)."""
    if entry["format"] == "one-line":
        lines[entry["line"]] = DISABLED + lines[entry["line"]]
        return
    key = url_key(url)
    others = [u for u in entry["uris"] if url_key(u) != key]
    for index in range(entry["line"], entry["last"] + 1):
        if re.match(r"(?i)^uris\s*:", lines[index]) and others:
            lines[index] = "URIs: " + " ".join(others)
            lines.insert(index, DISABLED + "dropped " + url + " from the URIs below")
            return
    enabled = [i for i in range(entry["line"], entry["last"] + 1) if re.match(r"(?i)^enabled\s*:", lines[i])]
    if enabled:  # "Enabled: yes" written out: a second Enabled field would be a syntax error
        lines[enabled[0]] = "Enabled: no"
    else:
        lines.insert(entry["last"] + 1, "Enabled: no")
    lines.insert(entry["line"], DISABLED + "the stanza below")


def converge(apt_dir, url, fingerprint, own_file, check_mode):
    entries = read_entries(apt_dir, url, own_file)
    adopted = adoptable(entries, fingerprint)
    to_disable = [e for e in entries if e is not adopted]
    by_file = {}
    for entry in to_disable:
        by_file.setdefault(entry["file"], []).append(entry)
    for path, in_file in by_file.items():
        with open(path) as handle:
            lines = handle.read().splitlines()
        # From the bottom up: an insertion leaves the line numbers of the entries above it as they were.
        for entry in sorted(in_file, key=lambda e: e["line"], reverse=True):
            disable(lines, entry, url)
        if not check_mode:
            with open(path, "w") as handle:
                handle.write("\n".join(lines) + "\n")
    remove_own = bool(adopted and own_file and os.path.exists(own_file))
    if remove_own and not check_mode:
        os.remove(own_file)
    return {
        "changed": bool(to_disable) or remove_own,
        "adopted": adopted["file"] if adopted else "",
        "disabled": [f"{e['file']}:{e['line'] + 1}" for e in to_disable],
        "removed_own": remove_own,
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "fingerprint": {"type": "str", "required": True},
            "own_file": {"type": "path", "default": None},
            "apt_dir": {"type": "path", "default": "/etc/apt"},
        },
        supports_check_mode=True,
    )
    p = module.params
    fingerprint = p["fingerprint"].replace(" ", "").upper()
    module.exit_json(**converge(p["apt_dir"], p["url"], fingerprint, p["own_file"], module.check_mode))


if __name__ == "__main__":
    main()
