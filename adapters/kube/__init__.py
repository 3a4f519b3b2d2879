"""Kubernetes in and out: dumps and objects read into a snapshot, bindings written back."""
