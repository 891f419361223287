"""The one compiled part: the stream parser's JSON grammar (``structured/_cjson.c``).

It is optional: without a C compiler the build goes on and the pure-Python parser, which gives
the same events, does the work (``langfx_nb.structured.stream_parser.ACCELERATED`` says which).
Everything else about the package is declared in ``pyproject.toml``.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "langfx_nb.structured._cjson",
            ["langfx_nb/structured/_cjson.c"],
            optional=True,
        )
    ]
)
