"""Notifications: job and budget events told to people by mail and to teams' chat by webhook."""
