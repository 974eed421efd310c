"""RemovableHandle: what registering a module hook returns."""
import itertools
import weakref

__all__ = ["RemovableHandle"]

_next_id = itertools.count()


class RemovableHandle:
    """Removes one hook from the ordered dict(s) it was stored in.

    The dicts are held weakly so a handle does not keep a deleted module's hooks alive.
    Usable as a context manager: the hook is removed on exit.
    """

    def __init__(self, *hook_dicts):
        self.id = next(_next_id)
        self._dicts = [weakref.ref(d) for d in hook_dicts]

    def remove(self):
        for ref in self._dicts:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
