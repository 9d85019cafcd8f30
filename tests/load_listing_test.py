#!/usr/bin/python3
"""`larder load` fetches a listing's pages as they come: through the shaping
front (tests/servers/shaping_proxy.py) with a listing's later pages answered
3 s late, the files of the first page are fetched meanwhile.

  /usr/bin/python3 -m pytest -q tests/load_listing_test.py   (as root: FUSE)

A module of its own (one cluster and mount per test process): the machinery
of bench/cold_read_bench.py, started as tests/cold_epoch_test.py starts it.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cold_epoch_test import started_bench  # noqa: E402


LATER_PAGE_MS = 3000


@pytest.fixture(scope="module")
def held_pages():
    """A cluster whose store answers a listing's later pages 3 s late."""
    yield from started_bench("larder-loadtest.", files=1100, file_kib=8, dirs=1,
                             request_log="{workdir}/requests.log",
                             later_page_ms=LATER_PAGE_MS)


def test_a_load_fetches_each_page_while_the_next_is_listed(held_pages):
    """`larder load` sends a page's blocks to their owners as the page comes:
    the files of the first page (100 entries) are fetched while the store
    holds the second page back (3 s here), not after the whole listing (which
    took two pages before too: 1,000 entries, then the last 101)."""
    b = held_pages
    name, paths = b.new_set()
    before = b.proxy.stats()
    b.cluster.run("load", f"/data/{name}")
    after = b.proxy.stats()  # Also flushes the request log.
    assert after["gets"]["object"] - before["gets"]["object"] == len(paths) + 1
    with open(b.args.request_log) as f:
        log = [line.split() for line in f]
    later = [e for e in log if f"prefix={name}%2F" in e[4] and "continuation-token=" in e[4]]
    assert later, "the load's listing had no later page"
    # When the front let the later page's answer go.
    answered = float(later[0][0]) + float(later[0][1]) / 1000 + LATER_PAGE_MS / 1000
    early = [e for e in log if e[3] == "GET" and f"/{name}/" in e[4] and float(e[0]) < answered]
    # Whole batches of the first page (96 of its 100 files; the rest go with
    # the next page's).
    assert len(early) >= 80, f"{len(early)} files fetched before the second page came"
