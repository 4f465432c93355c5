"""Suite-wide set-up: the Hypothesis profiles every property test runs under.

- ``default`` (what the README's test command runs): no deadline (a loaded 2-core machine makes
  per-example timings meaningless), the failing example's reproduction blob printed, and each
  test's own example count (``hypothesis_profiles.examples(n)``: ``n``).
- ``long`` (``HYPOTHESIS_PROFILE=long``, or pytest's ``--hypothesis-profile=long``): a scheduled
  soak. Every count ``examples(n)`` gives is ten times larger, and the attack suite
  (``tests/hostile``), derandomized by default so that CI runs the same inputs every time, draws
  from fresh seeds. ``hostile-long`` is the older name of the same profile.
"""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis_profiles import LONG_FACTOR, PROFILE_ENV

settings.register_profile("default", deadline=None, print_blob=True)
settings.register_profile("long", deadline=None, print_blob=True, max_examples=100 * LONG_FACTOR)
settings.register_profile("hostile-long", settings.get_profile("long"))
settings.load_profile(os.environ.get(PROFILE_ENV, "default"))
