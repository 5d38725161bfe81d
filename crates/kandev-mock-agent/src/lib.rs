//! A deterministic, scripted ACP agent for tests, benchmarks and first runs.
