"""Functions as the running gateway reads them: specs by name and by version, cached for the
accept route, the dispatcher and the headroom controller alike, and the GPUs their active
invocations hold."""
