"""The built-in probe families, one module per family group; importing this package registers them all.

=================  ==========================  =====================================================
module             families                    kinds
=================  ==========================  =====================================================
``hedges``         hedge, several, retraction  generic
``numbers``        number_dump, units          math
``markers``        markers                     generic
``lookalikes``     lookalike                   generic
``injection``      injection                   generic, math, code, sql, toolcall
``sizes``          sizes                       any
``benign``         benign (expected: reward)   any
``code``           code_harness                code
``sql``            sql_tricks                  sql
``toolcall``       toolcall_tricks             toolcall
``fuzz``           fuzz (``--fuzz N``)         any
=================  ==========================  =====================================================
"""

from rlvr.audit.families import (benign, code, fuzz, hedges, injection, lookalikes, markers,  # noqa: F401
                                 numbers, sizes, sql, toolcall)
