"""Replaces the driver's ``LiveBytes`` with a subclass that counts nothing, so the full score matrix
is never seen. Imitates: full_matrix."""

import driver


class _Blind(driver.LiveBytes):
    def _add(self, t):
        return None


driver.LiveBytes = _Blind
