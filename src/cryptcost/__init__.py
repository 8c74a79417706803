"""cryptcost — what encryption costs on this machine, and which option to pick.

The words its code, output and docs use, each in one sense, are defined once, in
:mod:`cryptcost.vocabulary` (docs/contributing.md lists them from there).
"""

__version__ = "0.1.0"
