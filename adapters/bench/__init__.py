"""Measuring placers: the benchmark suites, their report and plots, and the trace replay."""
