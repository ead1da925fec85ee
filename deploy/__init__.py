"""Deployment: the generators of the broker and floor configurations, their shared file
helpers, and the private brokers and clusters the demo, tests and benchmarks start."""
