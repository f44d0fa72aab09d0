"""High availability: one leader among the gateway replicas, elected on a Kubernetes Lease."""
