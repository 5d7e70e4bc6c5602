"""The secret-routes privacy model (docs/math.md §14): a release mode of its own, beside the
public-occupancy release of :mod:`stream_dp.release`."""

#: ``privacy_model`` of the two models (config ``privacy_model``; every secret-routes record).
PUBLIC_OCCUPANCY, SECRET_ROUTES = "public-occupancy", "secret-routes"
