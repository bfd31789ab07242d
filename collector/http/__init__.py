"""The collector's HTTP edge: the ASGI app, auth, OpenAPI, Alertmanager intake."""
