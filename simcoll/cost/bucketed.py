"""Cost model of the bucketed all-reduce overlapped with compute (DDP's gradient sync).

Derivation (ours): bucket i of B is ready at (i+1) t_c, t_c = compute / B, and takes t_a
(the ``inner`` algorithm's time on n/B bytes) once the previous bucket is done, so the
last bucket ends at t_c + t_a + (B-1) max(t_c, t_a). Exact where ``inner``'s model is
exact for a bucket, the element count divides by B, and every rank finishes a bucket at
the same instant (or B = 1).
"""

from __future__ import annotations

from simcoll.cost import Traffic, cost_model, is_exact, predict, traffic

__all__ = ["bucketed_time"]


def _bucket_bytes(nbytes: int, itemsize: int, buckets: int) -> list[int]:
    q, extra = divmod(nbytes // itemsize, buckets)
    return [(q + (i < extra)) * itemsize for i in range(buckets)]


def _traffic(p: int, nbytes: int, itemsize: int, *, buckets: int = 1, compute: float = 0.0,
             inner: str = "ring") -> Traffic:
    parts = [traffic("all_reduce", inner, p=p, nbytes=b, itemsize=itemsize)
             for b in _bucket_bytes(nbytes, itemsize, buckets)]
    return Traffic(*(sum(getattr(t, f) for t in parts)
                     for f in ("sent", "received", "host_sent", "host_received")))


_ENDS_TOGETHER = ("ring", "direct", "naive", "recursive_doubling", "rabenseifner")
"""Inner algorithms whose every rank finishes at the same instant wherever their own model
is exact. With the others (trees) a rank that finishes bucket i early starts bucket i+1
before the rest, which the formula's bucket-after-bucket sum does not see (the run is then
up to a few per cent faster than the formula)."""


def _exact(p: int, nbytes: int, itemsize: int, *, buckets: int = 1, compute: float = 0.0,
           inner: str = "ring") -> bool:
    return ((nbytes // itemsize) % buckets == 0
            and (buckets == 1 or inner in _ENDS_TOGETHER)
            and is_exact("all_reduce", inner, p=p, nbytes=nbytes // buckets,
                         itemsize=itemsize))


@cost_model("all_reduce", "bucketed", traffic=_traffic, exact=_exact)
def bucketed_time(p: int, nbytes: int, alpha: float, beta: float, gamma: float, *,
                  buckets: int = 1, compute: float = 0.0, inner: str = "ring") -> float:
    """t_c + t_a + (B-1) max(t_c, t_a), with t_c = compute / B and t_a = ``inner``'s
    predicted time for n / B bytes."""
    t_c = compute / buckets
    t_a = predict("all_reduce", inner, p=p, nbytes=nbytes // buckets, alpha=alpha,
                  beta=beta, gamma=gamma)
    return t_c + t_a + (buckets - 1) * max(t_c, t_a)
