"""`gpuprov sandbox`: a local cluster of containers that behave like GPU servers, for the demo and the tests.

- spec.py: what `sandbox up` may be asked for (name, node count, OS list), checked before anything loads.
- cluster.py: `sandbox up / down / inventory`: the containers, their network and state, SSH readiness.
- docker.py: the Docker engine, started (and installed) when missing, driven through its CLI.
- images.py: one local image per supported OS (debootstrap), cached by content.
- keys.py: the client key pair and a host key per node, made by gpuprov (known_hosts written up front).
- inventory.py: the INI inventory a sandbox writes for Ansible and gpuprov's commands.
- mirror.py: the signed package mirror (stand-in repositories, Debian's Slurm, a PEP 503 wheel index).
- debian_archive.py: the real Debian 12 packages the mirror serves (Slurm and what it needs).
- rpm_modules.py: the dnf module metadata of the stand-in rpm repositories.
- rocky_python.py: the rocky9 nodes' stand-in python3.11 rpm and the AppStream repository file they get.
- standins/: the stand-in packages and programs (NVIDIA's names and versions, small honest payloads).
"""
