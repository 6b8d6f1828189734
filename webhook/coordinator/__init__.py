"""The placement coordinator's process: the pure placement decision (`placement`) and the loop that
does the I/O around it (`loop`)."""
