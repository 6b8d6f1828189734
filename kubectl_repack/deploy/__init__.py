"""What `kubectl repack install` puts into a cluster: the manifests of the webhook process and the
TLS material it serves with. Rendering only: applying them is the install command's job."""
