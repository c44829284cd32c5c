import re

import pytest

from gpuprov.errors import BadInput
from gpuprov.sandbox.cluster import Node, plan
from gpuprov.sandbox.spec import parse_os_list, validate_name


def node(index: int, os_name: str = "debian12") -> Node:
    return Node(f"node{index}", index, os_name, f"gpuprov-t-node{index}", running=True)


def test_new_sandbox_defaults_to_two_debian_nodes():
    result = plan("t", [], None, None)
    assert result.add == [(1, "debian12"), (2, "debian12")]


def test_os_list_is_assigned_to_nodes_in_turn():
    result = plan("t", [], 3, ["debian12", "rocky9"])
    assert result.add == [(1, "debian12"), (2, "rocky9"), (3, "debian12")]


def test_asking_again_for_what_exists_adds_nothing():
    current = [node(1), node(2, "rocky9")]
    assert plan("t", current, 2, ["debian12", "rocky9"]).add == []
    assert plan("t", current, None, None).add == []


def test_repeated_up_extends_a_mixed_cluster():
    current = [node(1)]
    assert plan("t", current, 2, ["debian12", "rocky9"]).add == [(2, "rocky9")]


def test_an_existing_node_with_another_os_is_refused():
    with pytest.raises(BadInput, match="already has node1 running debian12, not rocky9"):
        plan("t", [node(1)], 2, ["rocky9"])


def test_shrinking_is_refused_with_what_to_do():
    with pytest.raises(BadInput, match="sandbox down --name t"):
        plan("t", [node(1), node(2), node(3)], 2, None)


@pytest.mark.parametrize("count", [0, 17, -1])
def test_node_count_out_of_range(count):
    with pytest.raises(BadInput, match="1 to 16"):
        plan("t", [], count, None)


def test_unknown_os_lists_the_supported_ones():
    with pytest.raises(BadInput, match=re.escape("debian12, ubuntu22.04, rocky9")):
        parse_os_list("debian12,centos7")


def test_os_list_parsing_strips_blanks():
    assert parse_os_list(" debian12 , rocky9,") == ["debian12", "rocky9"]


@pytest.mark.parametrize("name", ["default", "ci-1", "a.b_c"])
def test_valid_names(name):
    validate_name(name)


@pytest.mark.parametrize("name", ["", "Upper", "-lead", "x" * 32, "sp ace", "semi;colon"])
def test_invalid_names(name):
    with pytest.raises(BadInput, match="not valid"):
        validate_name(name)
