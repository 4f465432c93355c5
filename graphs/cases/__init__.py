"""One cases module per DirectML operator: its catalog generators and its input recipes.

The operator registry names each operator's ``"module:function"`` (``cases``); the function
returns the operator's catalog cases for a seed, and the module's ``make_inputs(desc, recipe,
rng)`` draws a case's inputs. ``common`` holds the ``Case`` record and what generators share.
"""
