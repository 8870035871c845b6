"""Tenancy: business units, teams, projects, memberships and roles, and who may see what.

The bottom layer of the Django apps: scheduling, billing, agents and the UI build on it; it
imports none of them.
"""
