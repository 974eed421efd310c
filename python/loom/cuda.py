"""loom.cuda: what torch.cuda offers that loom has: availability, streams and events.

Each CUDA device has a default stream. A thread's current stream (the default one unless a
``with loom.cuda.stream(s):`` block selects another) is where its ops record and run; each stream
has its own trace of pending ops. Using a tensor produced on another stream makes the current
stream wait for it on the device (an event), so two streams never race::

    s = loom.cuda.Stream()
    with loom.cuda.stream(s):
        y = (x * 2).exp()          # recorded on s's trace, runs on s
    s.synchronize()                # submits s's pending ops and waits for them

    hi = loom.cuda.Stream(priority=loom.cuda.stream_priority_range()[1])  # most urgent
    x1 = x.to("cuda:1")            # every visible GPU is "cuda:N", each with its own streams

    start, end = loom.cuda.Event(enable_timing=True), loom.cuda.Event(enable_timing=True)
    start.record()
    ...
    end.record()                   # flushes the current stream's trace first
    end.synchronize()
    ms = start.elapsed_time(end)
"""
import contextlib

from . import _loom


def is_available() -> bool:
    """True when a CUDA driver and a GPU were found (the CUDA backend registered)."""
    return _loom.cuda_is_available()


def device_count() -> int:
    """The number of visible CUDA devices (0 without a driver or a GPU)."""
    return _loom._cuda_device_count()


def stream_priority_range(device=None) -> tuple:
    """``(least, greatest)`` stream priorities of ``device``: numerically lower is more urgent,
    e.g. ``(0, -5)``; 0 is the default."""
    return tuple(_loom._cuda_stream_priority_range(_index(device)))


def _index(device) -> int:
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    s = str(device)
    if s == "cuda":
        return 0
    if s.startswith("cuda:"):
        return int(s[5:])
    raise ValueError(f"loom.cuda: expected a CUDA device, got {device!r}")


class Stream:
    """A CUDA stream with its own trace of pending ops (like torch.cuda.Stream).

    ``Stream()`` creates a new non-blocking stream on ``device`` (default cuda:0). ``priority``:
    lower numbers are more urgent (see ``stream_priority_range``); the driver clamps it into the
    device's range.
    """

    def __init__(self, device=None, priority: int = 0, *, _handle=None):
        if _handle is not None:
            self._s = _handle
        else:
            self._s = _loom._CudaStream.create(_index(device), int(priority))

    @property
    def priority(self) -> int:
        """The stream's priority as the driver applied it."""
        return self._s.priority

    @property
    def device(self) -> str:
        return f"cuda:{self._s.device_index}"

    @property
    def id(self) -> int:
        """0 for the device's default stream; unique in the process otherwise."""
        return self._s.id

    @property
    def cuda_stream(self) -> int:
        """The CUstream handle as an int."""
        return self._s.cuda_stream

    def synchronize(self) -> None:
        """Submits this stream's pending ops, then waits for all its work."""
        self._s.synchronize()

    def query(self) -> bool:
        """True when nothing is pending on the stream and its work has finished."""
        return self._s.query()

    def wait_stream(self, other: "Stream") -> None:
        """Work recorded on this stream from now on waits for all work recorded on ``other``."""
        self._s.wait_stream(other._s)

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def record_event(self, event: "Event" = None) -> "Event":
        event = event if event is not None else Event()
        event.record(self)
        return event

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and self._s == other._s

    def __hash__(self) -> int:
        return hash(self._s)

    def __repr__(self) -> str:
        what = "default stream" if self.id == 0 else f"stream {self.id}"
        return f"<loom.cuda.Stream {self.device} {what}>"


class Event:
    """A CUDA event (like torch.cuda.Event). ``record()`` submits the stream's pending ops first,
    so the event marks the point after everything recorded on the stream so far."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                 device=None):
        if interprocess:
            raise ValueError("loom.cuda.Event: interprocess events are not supported")
        self._e = _loom._CudaEvent.create(bool(enable_timing), _index(device))

    @property
    def enable_timing(self) -> bool:
        return self._e.timing

    def record(self, stream: Stream = None) -> None:
        """Records the event on ``stream`` (default: the current stream) after its pending ops."""
        self._e.record(None if stream is None else stream._s)

    def wait(self, stream: Stream = None) -> None:
        """Work recorded on ``stream`` (default: the current stream) from now on waits for it."""
        self._e.wait(None if stream is None else stream._s)

    def synchronize(self) -> None:
        self._e.synchronize()

    def query(self) -> bool:
        return self._e.query()

    def elapsed_time(self, end: "Event") -> float:
        """Milliseconds between this event and ``end`` (both with enable_timing=True)."""
        return self._e.elapsed_time(end._e)


def current_stream(device=None) -> Stream:
    """The calling thread's current stream of ``device`` (default cuda:0)."""
    return Stream(_handle=_loom._cuda_current_stream(_index(device)))


def default_stream(device=None) -> Stream:
    return Stream(_handle=_loom._cuda_default_stream(_index(device)))


def set_stream(stream: Stream) -> None:
    """Makes ``stream`` the calling thread's current stream of its device."""
    _loom._cuda_set_current_stream(stream._s)


@contextlib.contextmanager
def stream(s: Stream):
    """Selects ``s`` as the current stream of its device inside the ``with`` block (this thread
    only); ``None`` changes nothing."""
    if s is None:
        yield None
        return
    prev = _loom._cuda_current_stream(s._s.device_index)
    _loom._cuda_set_current_stream(s._s)
    try:
        yield s
    finally:
        _loom._cuda_set_current_stream(prev)


def stream_of(tensor) -> Stream:
    """The stream ``tensor`` was produced on."""
    return Stream(_handle=_loom._cuda_stream_of(tensor))


def record_stream(tensor, s: Stream) -> None:
    """Marks ``tensor``'s memory as used on ``s`` outside loom: its free waits for ``s``."""
    _loom._cuda_record_stream(tensor, s._s)


def synchronize(device=None) -> None:
    """Submits every stream's pending ops and waits for the device."""
    _loom._cuda_synchronize(_index(device))


__all__ = ["is_available", "device_count", "stream_priority_range", "Stream", "Event", "current_stream", "default_stream", "set_stream",
           "stream", "stream_of", "record_stream", "synchronize"]
