"""Instances shared by the check, decision and scoring tests."""

from rlvr.defab.parser import parse_literal, parse_theory

# Level 3: D⁻ wrongly derives flies(tweety) (the anomaly) and its downstream migrates(tweety).
PENGUIN = parse_theory("""
bird(tweety).
bird(robin).
penguin(tweety).
r1: bird(X) => flies(X).
r2: flies(X) => migrates(X).
s1: penguin(X) -> seabird(X).
""")
ANOMALY = parse_literal("flies(tweety)")

# Level 1: the fact bird(tweety) was removed; Level 2: the rule r1 was removed.
L1_THEORY = parse_theory("bird(robin).\nr1: bird(X) => flies(X).\nr2: penguin(X) => swims(X).\npenguin(opus).\n")
L2_THEORY = parse_theory("bird(tweety).\nanimal(tweety).\nr2: penguin(X) => swims(X).\npenguin(opus).\n"
                         "d1: sick(X) ~> ~flies(X).\n")
TARGET = parse_literal("flies(tweety)")
