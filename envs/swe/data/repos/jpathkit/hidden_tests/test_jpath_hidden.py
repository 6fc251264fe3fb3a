import pytest

from jpathkit import PathError, query, set_path

DATA = {
    "store": {
        "book": [
            {"title": "Sayings", "price": 8.95, "tags": ["old"]},
            {"title": "Sword", "price": 12.99},
            {"title": "Moby", "price": 8.99, "isbn": "x"},
            {"title": "Rings", "price": 22.99, "isbn": "y"},
        ],
        "bicycle": {"color": "red", "price": 19.95},
    }
}


def test_negative_index():
    """Negative indexes count from the end."""
    assert query(DATA, "$.store.book[-1].title") == ["Rings"]
    assert query(DATA, "$.store.book[4]") == []


def test_wildcard():
    """* matches every child."""
    assert query(DATA, "$.store.book[*].title") == ["Sayings", "Sword", "Moby", "Rings"]


def test_slice():
    """[a:b] slices lists, either bound optional."""
    assert [b["title"] for b in query(DATA, "$.store.book[1:3]")] == ["Sword", "Moby"]
    assert len(query(DATA, "$.store.book[:2]")) == 2
    assert len(query(DATA, "$.store.book[2:]")) == 2


def test_recursive_descent():
    """..name finds the key at any depth, in document order."""
    assert query(DATA, "$..price") == [8.95, 12.99, 8.99, 22.99, 19.95]


def test_filters():
    """Filters compare a member with a literal."""
    assert [b["title"] for b in query(DATA, "$.store.book[?(@.price < 10)]")] == ["Sayings", "Moby"]
    assert [b["title"] for b in query(DATA, "$.store.book[?(@.price >= 12.99)]")] == ["Sword", "Rings"]
    assert [b["title"] for b in query(DATA, "$.store.book[?(@.isbn == 'y')]")] == ["Rings"]
    assert len(query(DATA, "$.store.book[?(@.isbn != 'y')]")) == 1


def test_quoted_key():
    """['name'] selects a key like .name."""
    assert query(DATA, "$['store']['bicycle'].color") == ["red"]


def test_bad_paths():
    """Malformed paths raise PathError."""
    for bad in ["store", "$.", "$[1", "$[abc]", "$[?(price)]", "$..", "$!"]:
        with pytest.raises(PathError):
            query(DATA, bad)


def test_set_path():
    """set_path changes values in place and counts them."""
    data = {"a": {"b": [1, 2, 3]}}
    assert set_path(data, "$.a.b[-1]", 30) == 1
    assert set_path(data, "$.a.c", "new") == 1
    assert data == {"a": {"b": [1, 2, 30], "c": "new"}}
    with pytest.raises(PathError):
        set_path(data, "$..b", 0)
