"""Completion webhooks delivered: the leader's loop over the outbox (deliverer.py) and the one
HTTP edge that posts a signed message to a checked address (sender.py)."""
