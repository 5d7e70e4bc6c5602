"""The secret-routes privacy model (docs/math.md §14): a release mode of its own, beside the
public-occupancy release of :mod:`stream_dp.release`."""

from stream_dp.config import PUBLIC_OCCUPANCY, SECRET_ROUTES

__all__ = ["PUBLIC_OCCUPANCY", "SECRET_ROUTES"]
