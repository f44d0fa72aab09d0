"""The web console at /ui: its login (a signed session cookie in exchange for an API token),
its pages (static files shipped in the package) and nothing else: the pages read the /v1 API."""
