"""The student's terminal client: sign in, list and fetch labs, submit and watch the grading.

It talks to a Ringlab server's JSON API with the standard library only (no torch, no new
dependency). ``format`` is pure (API bodies in, text out); ``http`` is the thin network part;
``config`` keeps the server and token; ``commands`` wires them into the ``ringlab`` command.
"""
