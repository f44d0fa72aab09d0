"""The headroom controller: keeps the warm capacity the policy asks for, through the backend's
warm units (placeholder pods, CapacityBuffers, warm local slots), sized by domain/headroom."""
