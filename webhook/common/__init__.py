"""What the in-cluster processes share (and nothing of any one of them): leader election on a Lease
(`election`), Prometheus metrics (`metrics`) and the one health/metrics HTTP server (`health`)."""
