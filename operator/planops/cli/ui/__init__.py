"""`kubectl plan ui`: the web page of a namespace's Plans (server.py serves static/; view.py is
what it shows, pure). Imported only by that verb: aiohttp's server is no cost of the others."""
