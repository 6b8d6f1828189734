"""The in-cluster processes, one subpackage each (an import-linter contract keeps them apart):

- `webhook.admission`: the mutating webhook (`python -m webhook`, `repack-webhook`): the pure
  admission decision, its Flask app, the hardened gunicorn worker, and the watched state it reads;
- `webhook.coordinator`: the placement coordinator (`python -m webhook.coordinator`);
- `webhook.controller`: the RepackRun controller and its certificate manager (`python -m webhook.controller`);
- `webhook.common`: what they share: leader election, metrics, the health/metrics HTTP server.
"""
