from jpathkit import query

DATA = {"store": {"name": "corner", "book": [{"title": "A", "price": 8}, {"title": "B", "price": 12}]}}


def test_child_names():
    """Dotted names walk into objects."""
    assert query(DATA, "$.store.name") == ["corner"]


def test_index():
    """[n] picks a list element."""
    assert query(DATA, "$.store.book[1].title") == ["B"]
