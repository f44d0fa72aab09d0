"""Who hears that an invocation changed: the hub, for what this replica changed itself, and the
poller, for what another replica on the same database changed. `?wait`, the CLI's follow, the
console's feed and admission wake on them."""
