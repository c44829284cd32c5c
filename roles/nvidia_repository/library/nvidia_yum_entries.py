#!/usr/bin/python3
"""Disable the other dnf repository definitions of NVIDIA's CUDA repository, so gpuprov's is the only one.

Runs on the host (Python 3.6 and newer). NVIDIA's install guide adds the repository with `dnf config-manager
--add-repo <repo dir>/cuda-rhel9.repo`, which writes /etc/yum.repos.d/cuda-rhel9.repo: section
[cuda-rhel9-x86_64], baseurl the repository, gpgcheck=1 and gpgkey the key's https URL (imported on first use
without a fingerprint check). Beside gpuprov's own definition that is the same repository twice (dnf offers
each package from both, and a hand-written copy with gpgcheck=0 installs unverified packages), and a
section with gpuprov's repository id in another file is a duplicate id dnf warns about and reads in an
order gpuprov does not choose. gpuprov's definition (gpgcheck=1, the key checked by fingerprint and imported
into rpm) is kept; every other section whose id is gpuprov's or whose baseurl is the repository URL (up to
the scheme and a trailing slash) is commented out, line by line. Check mode reports, writes nothing.
"""

import glob
import os
import re

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: nvidia_yum_entries
short_description: Comment out dnf repository sections that duplicate gpuprov's repository
options:
  url: {description: The repository URL, type: str, required: true}
  repo_id: {description: gpuprov's repository id, type: str, required: true}
  own_file: {description: gpuprov's repository file, left alone, type: path, required: true}
  repos_dir: {description: dnf's repository directory, type: path, default: /etc/yum.repos.d}
"""

DISABLED = "# Disabled by gpuprov (nvidia_repository): "


def url_key(uri):
    return re.sub(r"^[a-z+]+://", "", uri.strip()).rstrip("/")


def sections(lines):
    """(section id, first line, last line, {lower-case key: value}) of an ini-style .repo file."""
    result, current = [], None
    for index, line in enumerate(lines):
        header = re.match(r"^\s*\[([^\]]+)\]\s*$", line)
        if header:
            if current:
                result.append(current)
            current = (header.group(1).strip(), index, index, {})
            continue
        if current is None:
            continue
        current = (current[0], current[1], index, current[3])
        if "=" in line and not line.lstrip().startswith(("#", ";")):
            name, _, value = line.partition("=")
            current[3][name.strip().lower()] = value.strip()
    if current:
        result.append(current)
    return result


def duplicates(lines, url, repo_id):
    key = url_key(url)
    found = []
    for section_id, first, last, fields in sections(lines):
        baseurls = [url_key(u) for u in re.split(r"[,\s]+", fields.get("baseurl", "")) if u]
        if section_id == repo_id or key in baseurls:
            found.append((section_id, first, last))
    return found


def converge(repos_dir, url, repo_id, own_file, check_mode):
    disabled = []
    for path in sorted(glob.glob(os.path.join(repos_dir, "*.repo"))):
        if os.path.abspath(path) == os.path.abspath(own_file):
            continue
        with open(path) as handle:
            lines = handle.read().splitlines()
        found = duplicates(lines, url, repo_id)
        for section_id, first, last in found:
            for index in range(first, last + 1):
                if lines[index].strip():
                    lines[index] = DISABLED + lines[index]
            disabled.append(f"{path} [{section_id}]")
        if found and not check_mode:
            with open(path, "w") as handle:
                handle.write("\n".join(lines) + "\n")
    return {"changed": bool(disabled), "disabled": disabled}


def main():
    module = AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "repo_id": {"type": "str", "required": True},
            "own_file": {"type": "path", "required": True},
            "repos_dir": {"type": "path", "default": "/etc/yum.repos.d"},
        },
        supports_check_mode=True,
    )
    p = module.params
    module.exit_json(**converge(p["repos_dir"], p["url"], p["repo_id"], p["own_file"], module.check_mode))


if __name__ == "__main__":
    main()
