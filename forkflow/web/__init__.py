"""The dashboard: a FastAPI app over the store, server-rendered pages with charts shipped here.

Importing this package is cheap; FastAPI, Starlette and Jinja2 are imported by `app` and `serve`.
"""
