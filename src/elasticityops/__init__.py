"""ElasticityOps: Lambda-style GPU jobs on Kubernetes, and on one machine."""

__version__ = "0.1.0"
