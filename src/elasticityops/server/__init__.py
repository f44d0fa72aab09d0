"""The composition root: builds a running gateway from the settings (the store, the backend, the
dispatcher, the headroom controller, the leader election, the app) and keeps the files of its
data dir. The only place the components meet; they know each other through the domain's ports."""
