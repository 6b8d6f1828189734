"""Tests whose subject is real time on real sockets: socket and request deadlines, slow and idle
peers, the production gunicorn worker in a subprocess. They are not unit tests (no fake clock can
stand in for a kernel socket timeout or gunicorn's own threads) and need no cluster; pytest runs
them with the rest (testpaths = tests), so hack/test.sh and .ci/run do. Waits poll with a deadline;
a bound on how long something took is asserted only where that bound is the behaviour under test.
"""
