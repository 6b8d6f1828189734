"""The RepackRun controller's process: the reconcile loop (`loop`) and the certificate manager it
runs beside it (`certmanager`)."""
