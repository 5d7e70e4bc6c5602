"""Sub-commands of the ``stream-dp`` CLI; each module exposes ``register(subparsers)``."""
