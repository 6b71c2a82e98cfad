# The Python worker of a code context: the agent starts it as
# `python3 -c <this file>` with two pipes on file descriptors 3 (frames
# from the agent) and 4 (frames to the agent). A frame is a 4-byte
# big-endian length and that many bytes of JSON. The user's code writes to
# file descriptors 1 and 2 as it likes: nothing it prints can forge a
# frame. Standard library only; Python 3.8+.
import ast
import base64
import builtins
import io
import json
import linecache
import os
import signal
import struct
import sys
import threading
import traceback
import types

# The frame pipes move off 3 and 4 to close-on-exec descriptors (os.dup
# makes non-inheritable ones), so that no child of the user's code holds
# them.
_RFD = os.dup(3)
_WFD = os.dup(4)
os.close(3)
os.close(4)

_MAX_OUTPUT = 8 << 20
_running = False
_SEND_LOCK = threading.Lock()  # a display() from a thread of the code's must not cut into another frame
_BACKEND = "module://_sandbox_mpl"


def _read_exact(n):
    b = bytearray()
    while len(b) < n:
        chunk = os.read(_RFD, n - len(b))
        if not chunk:
            return None
        b += chunk
    return bytes(b)


def _recv():
    head = _read_exact(4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    body = _read_exact(n)
    if body is None:
        return None
    return json.loads(body.decode("utf-8"))


def _send(msg):
    # Every frame says how much the worker had written to stdout and
    # stderr before it, so that the agent sends the events in that order.
    out, err = sys.__stdout__, sys.__stderr__
    if isinstance(out, _Text) and isinstance(err, _Text):
        msg["stdout"], msg["stderr"] = out.buffer.count, err.buffer.count
    body = json.dumps(msg, ensure_ascii=False).encode("utf-8", "surrogateescape")
    data = memoryview(struct.pack(">I", len(body)) + body)
    # SIGINT is held off while a frame is written: a KeyboardInterrupt
    # half-way would leave a broken frame, which the agent treats as a
    # lost interpreter.
    old = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
    try:
        with _SEND_LOCK:
            while data:
                n = os.write(_WFD, data)
                data = data[n:]
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _Raw(io.RawIOBase):
    """Unbuffered bytes to a file descriptor, counted."""

    def __init__(self, fd):
        self._fd = fd
        self.count = 0

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def write(self, b):
        mv = memoryview(b).cast("B")
        total = len(mv)
        while mv:
            n = os.write(self._fd, mv)
            self.count += n
            mv = mv[n:]
        return total


class _Text(io.TextIOBase):
    """sys.stdout and sys.stderr: every write reaches the pipe at once,
    whatever PYTHONUNBUFFERED says."""

    def __init__(self, fd, name):
        self.buffer = _Raw(fd)
        self._name = name

    @property
    def name(self):
        return self._name

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "surrogateescape"

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return self.buffer.fileno()

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        self.buffer.write(s.encode("utf-8", "surrogateescape"))
        return len(s)

    def flush(self):
        pass


_BINARY = ("image/png", "image/jpeg", "image/gif", "application/pdf")
_REPRS = (
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
)


def _bundle(obj):
    """The MIME bundle of obj, as IPython's display formats it."""
    try:
        data = {"text/plain": repr(obj)}
    except Exception as e:  # a broken __repr__ is the user's to see
        data = {"text/plain": "<repr failed: %s: %s>" % (type(e).__name__, e)}
    if isinstance(obj, type):
        return data
    for meth, mime in _REPRS:
        f = getattr(obj, meth, None)
        if not callable(f):
            continue
        try:
            v = f()
        except Exception:
            continue
        if isinstance(v, tuple) and v:
            v = v[0]
        if v is None:
            continue
        if mime in _BINARY:
            if isinstance(v, (bytes, bytearray)):
                v = base64.b64encode(bytes(v)).decode("ascii")
            elif not isinstance(v, str):
                continue
        elif mime == "application/json":
            try:
                json.dumps(v)
            except Exception:
                continue
        elif not isinstance(v, str):
            continue
        data[mime] = v
    return data


def _cap(data):
    """data cut to _MAX_OUTPUT bytes: the largest rich types go first,
    then text/plain is cut. Returns (data, truncated)."""

    def size(v):
        return len(v) if isinstance(v, str) else len(json.dumps(v))

    total = sum(size(v) for v in data.values())
    if total <= _MAX_OUTPUT:
        return data, False
    for mime in sorted((m for m in data if m != "text/plain"), key=lambda m: -size(data[m])):
        total -= size(data.pop(mime))
        if total <= _MAX_OUTPUT:
            return data, True
    text = data.get("text/plain", "")
    data["text/plain"] = text[: _MAX_OUTPUT // 4]  # at most 4 bytes a character
    return data, True


def _emit(kind, data):
    data, truncated = _cap(data)
    msg = {"type": kind, "data": data}
    if truncated:
        msg["truncated"] = True
    _send(msg)


def display(*objs):
    """Shows each of objs as a rich output of the running call."""
    for obj in objs:
        _emit("display", _bundle(obj))


def _show_figure(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    _emit("display", {"text/plain": repr(fig), "image/png": base64.b64encode(buf.getvalue()).decode("ascii")})


# The matplotlib backend the worker provides (see _install_mpl_backend):
# show() and the figures a cell leaves open become display outputs.
# matplotlib itself is imported only if the user's code imports it.
_MPL_SOURCE = '''
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas
from matplotlib._pylab_helpers import Gcf

class FigureManager(FigureManagerBase):
    def show(self):
        _show_figure(self.canvas.figure)

def show(*args, **kwargs):
    for m in Gcf.get_all_fig_managers():
        _show_figure(m.canvas.figure)
    Gcf.destroy_all()
'''


def _install_mpl_backend():
    import importlib.abc
    import importlib.util

    class Loader(importlib.abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            module.__dict__["_show_figure"] = _show_figure
            exec(compile(_MPL_SOURCE, "<sandbox_mpl>", "exec"), module.__dict__)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "_sandbox_mpl":
                return importlib.util.spec_from_loader(name, Loader())
            if name == "matplotlib" and not os.environ.get("MPLBACKEND"):
                return _matplotlib_spec(self, name, path, target)
            return None

    # First, to see matplotlib's import before the finder that loads it.
    sys.meta_path.insert(0, Finder())


def _matplotlib_spec(me, name, path, target):
    """The spec the other finders give matplotlib, its loader made to set
    the worker's backend once the module has run, as MPLBACKEND would
    (matplotlib reads it at the very end of its import). The backend is
    not put in MPLBACKEND itself: the code's child processes would inherit
    a backend only the worker can import."""
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(name, path, target)
        if spec is not None:
            break
    else:
        return None
    loader = spec.loader
    run = getattr(loader, "exec_module", None)
    if run is None:
        return spec

    def exec_module(module):
        run(module)
        if not os.environ.get("MPLBACKEND"):
            module.rcParams["backend"] = _BACKEND

    loader.exec_module = exec_module  # this module's loader only
    return spec


def _flush_figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        if plt.get_backend() != _BACKEND:
            return
        from matplotlib._pylab_helpers import Gcf

        managers = Gcf.get_all_fig_managers()
        if not managers:
            return
        for m in managers:
            _show_figure(m.canvas.figure)
        Gcf.destroy_all()
    except Exception:
        pass


def _on_sigint(signum, frame):
    # Only the user's code is interrupted; the worker's own steps between
    # cells are not.
    if _running:
        raise KeyboardInterrupt


def _cell_traceback(e):
    tb = e.__traceback__
    # The worker's own frames (_run_cell) are left out.
    while tb is not None and tb.tb_frame.f_code.co_filename == _run_cell.__code__.co_filename:
        tb = tb.tb_next
    lines = traceback.format_exception(type(e), e, tb)
    return [l.rstrip("\n") for l in lines]


def _run_cell(code, count, ns):
    global _running
    name = "<cell-%d>" % count
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        _running = True
        tree = ast.parse(code, filename=name, mode="exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, name, "exec"), ns)
        value = None
        if last is not None:
            value = eval(compile(last, name, "eval"), ns)
        _running = False
        _flush_figures()
        if value is not None:
            ns["_"] = value
            _emit("result", _bundle(value))
        return "ok"
    except BaseException as e:  # KeyboardInterrupt and SystemExit too: the context lives on
        _running = False
        try:
            _send({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": _cell_traceback(e)})
        except KeyboardInterrupt:
            pass
        return "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
    finally:
        _running = False


def main():
    global _MAX_OUTPUT
    out = _Text(1, "<stdout>")
    err = _Text(2, "<stderr>")
    sys.stdout = sys.__stdout__ = out
    sys.stderr = sys.__stderr__ = err
    sys.stdin = sys.__stdin__ = open(os.devnull)
    main_mod = types.ModuleType("__main__")
    main_mod.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main_mod
    builtins.display = display
    ns = main_mod.__dict__
    _install_mpl_backend()
    signal.signal(signal.SIGINT, _on_sigint)
    _send({"type": "ready", "pid": os.getpid()})
    while True:
        try:
            msg = _recv()
        except KeyboardInterrupt:
            continue
        if msg is None:
            return
        if msg.get("type") != "execute":
            continue
        if msg.get("max_output"):
            _MAX_OUTPUT = int(msg["max_output"])
        count = int(msg.get("count", 0))
        status = _run_cell(msg.get("code", ""), count, ns)
        _send({"type": "done", "count": count, "status": status})


main()
