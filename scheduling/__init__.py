"""Cluster state (Django models) and, under engine/, the plain-Python scheduling engine."""
