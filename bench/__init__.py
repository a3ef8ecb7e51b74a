"""Benchmarks for astrbot_plugin_ltm (see bench/README.md)."""
