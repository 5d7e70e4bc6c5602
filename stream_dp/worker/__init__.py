"""The Kafka adapter: a Faust app around the pure engine (ingest, coordinator, release)."""
