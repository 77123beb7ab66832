"""Development infrastructure: a local S3 server for tests, benchmarks and manual use."""
