"""gpuprov.porttest: the port test's probes and verdict, as launch's preflight and check use them."""

from __future__ import annotations

from gpuprov import porttest


def test_every_source_probes_every_port_of_every_other_listener() -> None:
    listening = {
        "node1": ("10.0.0.1", {"rendezvous": 29400, "NCCL/gloo": 40001}),
        "node2": ("10.0.0.2", {"rendezvous": 29401, "NCCL/gloo": 40002}),
    }
    tried = porttest.probes(["node1", "node2", "node3"], listening)
    assert [(p.source, p.target, p.kind, p.address, p.port) for p in tried] == [
        ("node1", "node2", "rendezvous", "10.0.0.2", 29401),
        ("node1", "node2", "NCCL/gloo", "10.0.0.2", 40002),
        ("node2", "node1", "rendezvous", "10.0.0.1", 29400),
        ("node2", "node1", "NCCL/gloo", "10.0.0.1", 40001),
        ("node3", "node1", "rendezvous", "10.0.0.1", 29400),
        ("node3", "node1", "NCCL/gloo", "10.0.0.1", 40001),
        ("node3", "node2", "rendezvous", "10.0.0.2", 29401),
        ("node3", "node2", "NCCL/gloo", "10.0.0.2", 40002),
    ]
    tokens = {p.source: p.token for p in tried}
    assert len(set(tokens.values())) == 3 and all(t.startswith(s + "-") for s, t in tokens.items())


def test_a_probe_fails_on_its_senders_error_or_a_token_that_never_arrived() -> None:
    tried = porttest.probes(["node2", "node3", "node4"], {"node1": ("10.0.0.1", {"rendezvous": 29400})})
    node2, node3, node4 = tried
    answers = {node2: "ok", node3: "Connection refused"}  # node4: no answer at all
    assert porttest.failures(tried, answers) == {node3: "Connection refused", node4: "no answer"}
    assert porttest.failures(tried, answers, received={node3.token}) == {
        node2: porttest.NOT_RECEIVED,
        node3: "Connection refused",
        node4: "no answer",
    }
    assert porttest.failures(tried, dict.fromkeys(tried, "ok"), received={p.token for p in tried}) == {}
