"""The live map of released windows: a release store fed from the releases topic (or a
file), and the aiohttp pages that the worker and ``stream-dp dashboard`` both serve."""
