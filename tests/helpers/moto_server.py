"""moto's standalone S3 server, with S3's conditional writes made atomic (what the tests run).

moto (5.2.5) checks ``If-None-Match: *`` and ``If-Match`` on PutObject and then stores the object
as two separate steps, with no lock between them (``S3Response.put_object`` in
``moto/s3/responses.py``: ``self.backend.get_object(...) is not None`` -> ``PreconditionFailed``,
then, a few dozen lines on, ``self.backend.put_object(...)``), on a threaded werkzeug server. Two
conditional PUTs of one key that arrive together can both pass the check and both answer 200,
the second overwriting the first: measured with 4 threads racing on one key, 3 double winners in
1 500 rounds with the CPU loaded, none in 1 500 idle (bench/RESULTS.md, 2026-11-26 session 3).
AWS S3 does not do that ("If multiple conditional writes occur for the same object name, the
first write operation to finish succeeds"; the others get 412), and delta-rs's commit, hence
kraftlake's fencing on a store, relies on it. So this launcher serialises conditional PutObject
requests (check and store under one lock) and then runs moto's server unchanged.

``--non-atomic`` leaves moto as it is; ``--conditional-put-delay S`` sleeps ``S`` seconds between
a conditional put's check and its store, widening the race window so that tests can make the
race happen on purpose (tests/test_object_store.py shows that moto alone lets two writers win
then, and that this launcher does not).

Usage, with ``tests`` on ``PYTHONPATH``: ``python -m helpers.moto_server [--non-atomic]
[--conditional-put-delay S] -H HOST -p PORT`` (then moto's own options).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time


def patch(*, atomic: bool, delay_s: float) -> None:
    from moto.s3.models import S3Backend
    from moto.s3.responses import S3Response

    lock = threading.Lock()
    conditional = threading.local()
    put_request = S3Response.put_object
    store = S3Backend.put_object

    def put_object(self):  # type: ignore[no-untyped-def]
        if not (self.headers.get("If-None-Match") or self.headers.get("If-Match")):
            return put_request(self)
        conditional.active = True
        try:
            if atomic:
                with lock:
                    return put_request(self)
            return put_request(self)
        finally:
            conditional.active = False

    def put_object_stored(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if delay_s and getattr(conditional, "active", False):
            time.sleep(delay_s)  # after the request's precondition check, before the store
        return store(self, *args, **kwargs)

    S3Response.put_object = put_object
    S3Backend.put_object = put_object_stored


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--non-atomic", action="store_true")
    parser.add_argument("--conditional-put-delay", type=float, default=0.0)
    ours, moto_args = parser.parse_known_args(argv)
    patch(atomic=not ours.non_atomic, delay_s=ours.conditional_put_delay)
    from moto.server import main as moto_main

    moto_main(moto_args)


if __name__ == "__main__":
    main(sys.argv[1:])
