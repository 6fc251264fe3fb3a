"""The served site: real HTTP on loopback, escaping, URLs that carry the state, clean shutdown."""

import socket
import threading

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.envs.webshop.catalog import default_catalog
from agentgym.envs.webshop.goal import Goal
from agentgym.envs.webshop.pages import Shop, State, clean_query, state_from_url, state_to_path
from agentgym.envs.webshop.search import default_engine
from agentgym.envs.webshop.server import CSP, ShopServer
from agentgym.envs.webshop.tasks import WebShopTaskSpace

TASK = WebShopTaskSpace().split("train")[0]


def make_shop():
    return Shop(default_catalog(), default_engine(), Goal.from_params(TASK.params, TASK.seed))


@pytest.fixture(scope="module")
def server():
    make_shop()  # build catalog and index before any thread bookkeeping
    server = ShopServer()
    server.sessions["t1"] = make_shop()
    server.start()
    yield server
    server.stop()


def get(server, path):
    return httpx.get(server.base_url + path, timeout=10)


def test_pages_are_served_with_a_no_script_policy(server):
    response = get(server, "/s/t1/")
    assert response.status_code == 200 and response.headers["content-security-policy"] == CSP
    assert "<form" in response.text and "Instruction:" in response.text
    results = get(server, state_to_path(State("results", "sulfate free shampoo", 1), "t1"))
    assert results.status_code == 200 and results.text.count('href="/s/t1/item/B0') == 10


def test_query_is_escaped_in_html(server):
    evil = '<script>window.pwned=1</script><img src=x onerror="window.pwned=1">'
    response = get(server, state_to_path(State("results", clean_query(evil), 1), "t1"))
    assert "<script>window" not in response.text and "<img" not in response.text
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in response.text


@pytest.mark.parametrize("path", [
    "/", "/s/nope/", "/s/t1/item/B0NOTREAL", "/s/t1/results/extra", "/s/t1/teleport/x",
    "/s/t1/results?q=shampoo&page=99", "/s/t1/results?q=shampoo&page=-1",
])
def test_unknown_pages_are_404(server, path):
    assert get(server, path).status_code == 404


def test_options_a_product_does_not_offer_are_404(server):
    product = default_catalog().by_asin[TASK.params["asin"]]
    dim, values = product.options[0]
    ok = get(server, state_to_path(State("item", "", 1, product.asin, ((dim, values[0]),)), "t1"))
    bad = get(server, state_to_path(State("item", "", 1, product.asin, ((dim, "galactic"),)), "t1"))
    assert ok.status_code == 200 and bad.status_code == 404


def test_stop_leaves_no_thread_and_frees_the_port():
    make_shop()
    before = set(threading.enumerate())
    server = ShopServer()
    server.sessions["x"] = make_shop()
    server.start()
    port = server.port
    assert get(server, "/s/x/").status_code == 200
    assert len(set(threading.enumerate()) - before) >= 1
    server.stop()
    assert set(threading.enumerate()) - before == set()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
    server.start()  # restartable (a crashed browser backend restarts what is dead)
    assert get(server, "/s/x/").status_code == 200
    server.stop()
    assert set(threading.enumerate()) - before == set()


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["search", "results", "item", "description", "features", "done"]),
       query=st.text(max_size=80), page=st.integers(1, 5), session=st.text(min_size=1, max_size=10),
       options=st.dictionaries(st.text(min_size=1, max_size=10), st.text(max_size=10), max_size=2))
def test_states_survive_the_trip_through_urls(kind, query, page, session, options):
    if kind == "search":
        state = State()
    else:
        asin = "" if kind == "results" else "B0ABCDEF12"
        opts = tuple(sorted(options.items())) if kind != "results" else ()
        state = State(kind, clean_query(query), page, asin, opts)
    assert state_from_url("http://127.0.0.1:1" + state_to_path(state, session)) == (session, state)
