"""The mathematics of stream-dp: pure, synchronous functions (numpy only; no Kafka, no asyncio)."""
