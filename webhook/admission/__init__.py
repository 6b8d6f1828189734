"""The mutating webhook's process: the pure admission decision (`review`), its Flask app (`app`),
gunicorn's hardened worker (`worker`, with `framing` and `reaper`), the state the watches keep
current (`relocation_store`, `coordinator_liveness`, `watches`) and the process entry (`serve`)."""
