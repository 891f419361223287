"""First on the ``PYTHONPATH`` of the Ray test cluster's processes only: that cluster starts
without ``rfc3987_syntax``, as docs/batch.md ("Start-up") suggests for a cluster whose
processes need no ``iri`` format checks. Every Ray process imports ``jsonschema``, which
builds that package's grammar at import when it can (seconds of CPU per process on the
shared test machine, where the eight processes of a local cluster then outlast Ray's own
30 s start-up wait); ``jsonschema`` skips its ``iri`` checks when this import fails."""

raise ImportError("rfc3987_syntax is left out of the Ray test cluster's environment")
