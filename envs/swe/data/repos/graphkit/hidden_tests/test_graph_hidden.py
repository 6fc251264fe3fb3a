import pytest

from graphkit import CycleError, Graph, NoPathError


def make_weighted():
    g = Graph()
    for a, b, w in [("s", "a", 1), ("a", "b", 2), ("s", "b", 5), ("b", "t", 1), ("a", "t", 6)]:
        g.add_edge(a, b, w)
    return g


def test_shortest_path_weights():
    """Dijkstra picks the lightest path, not the fewest edges."""
    assert make_weighted().shortest_path("s", "t") == (4, ["s", "a", "b", "t"])


def test_shortest_path_to_self():
    """The path from a node to itself costs nothing."""
    assert make_weighted().shortest_path("a", "a") == (0, ["a"])


def test_no_path():
    """An unreachable goal raises NoPathError."""
    g = make_weighted()
    g.add_node("island")
    with pytest.raises(NoPathError):
        g.shortest_path("s", "island")
    with pytest.raises(NoPathError):
        g.hops("s", "island")


def test_hops():
    """hops counts edges on the shortest unweighted path."""
    assert make_weighted().hops("s", "t") == 2
    assert make_weighted().hops("s", "s") == 0


def test_undirected_edges_both_ways():
    """Undirected edges go both ways and count once."""
    g = Graph(directed=False)
    g.add_edge(1, 2)
    g.add_edge(2, 3)
    assert g.neighbors(2) == [1, 3]
    assert g.edge_count() == 2


def test_negative_weight_rejected():
    """Negative weights are rejected."""
    with pytest.raises(ValueError):
        Graph().add_edge(1, 2, -1)


def test_topological_sort():
    """Every edge goes forward in the topological order; ties sorted."""
    g = Graph()
    for a, b in [("shirt", "tie"), ("tie", "jacket"), ("pants", "shoes"), ("pants", "belt"), ("belt", "jacket")]:
        g.add_edge(a, b)
    assert g.topological_sort() == ["pants", "belt", "shirt", "shoes", "tie", "jacket"]


def test_cycle_detection():
    """A cycle makes topological_sort fail and has_cycle true."""
    g = Graph()
    g.add_edge(1, 2)
    g.add_edge(2, 3)
    assert not g.has_cycle()
    g.add_edge(3, 1)
    assert g.has_cycle()
    with pytest.raises(CycleError):
        g.topological_sort()


def test_components():
    """Components are found ignoring direction, largest first."""
    g = Graph()
    g.add_edge(1, 2)
    g.add_edge(3, 2)
    g.add_edge(7, 8)
    g.add_node(5)
    assert g.components() == [[1, 2, 3], [7, 8], [5]]


def test_edge_count_directed():
    """Directed edges count once each."""
    assert make_weighted().edge_count() == 5
