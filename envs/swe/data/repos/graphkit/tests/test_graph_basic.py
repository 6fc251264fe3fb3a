from graphkit import Graph


def test_add_edge_creates_nodes():
    """Adding an edge adds both ends as nodes."""
    g = Graph()
    g.add_edge("a", "b")
    assert sorted(g.nodes()) == ["a", "b"]


def test_bfs_order():
    """BFS visits neighbors level by level."""
    g = Graph()
    for a, b in [(1, 2), (1, 3), (2, 4), (3, 4)]:
        g.add_edge(a, b)
    assert g.bfs(1) == [1, 2, 3, 4]
