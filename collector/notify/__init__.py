"""Chat notifications: one small module per service, routing, digests, a durable outbox."""
