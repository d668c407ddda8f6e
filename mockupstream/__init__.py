"""A scripted upstream LLM server (``python manage.py mockupstream``).

It speaks the three protocols with their real encoders and answers from a fixed
script: the API key chooses a fault, the model name chooses the content (the
table is in :mod:`mockupstream.scenarios`). Tests, ``make run`` and the
bench use it as their upstream; users can point their clients at it offline.

``server.make_app()`` is the aiohttp application, ``server.run(host, port)``
serves it, ``server.ServerThread`` runs it in-process on a free port (tests).
Nothing is imported here so that the pure ``scenarios`` module stays light.
"""
