"""loom.save / loom.load: checkpoints as safetensors files.

A flat dict of str -> Tensor (a Module.state_dict()) is written with exactly those names, so the
`safetensors` package and torch read it. Any other state (an optimizer's state_dict, or
{"model": ..., "optim": ..., "step": 100}) is flattened: each tensor is stored under its dotted
path ("optim.state.0.exp_avg") and the rest of the structure, with its non-tensor values, is
kept as JSON in the header's __metadata__ under _TREE_KEY, from which load rebuilds it (integer
dict keys come back as ints, tuples as tuples).
"""
import errno
import json
import os

from . import _loom

_TREE_KEY = "loom.tree"
_TREE_VERSION = 1
# The tags of the JSON tree: every container and tensor is an object with one of these keys, so
# a JSON scalar in the tree is always a plain value (None, bool, int, float, str).
_TENSOR, _DICT, _LIST, _TUPLE = "tensor", "dict", "list", "tuple"
_SCALARS = (type(None), bool, int, float, str)


class _Malformed(ValueError):
    """A tree that save did not write (raised as ValueError)."""


def _is_key(k):
    return isinstance(k, _SCALARS) or (isinstance(k, tuple) and all(_is_key(x) for x in k))


def _is_flat(obj):
    return isinstance(obj, dict) and all(
        isinstance(k, str) and isinstance(v, _loom.Tensor) for k, v in obj.items())


def _flatten(obj, path, tensors):
    """obj as a JSON tree; its tensors go into `tensors` under their dotted paths."""
    if isinstance(obj, _loom.Tensor):
        name = ".".join(path)
        if name in tensors:  # {"a.b": x, "a": {"b": y}}: the tree says which is which
            n = 1
            while f"{name}~{n}" in tensors:
                n += 1
            name = f"{name}~{n}"
        tensors[name] = obj
        return {_TENSOR: name}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not _is_key(k):
                raise TypeError(f"loom.save: the key {k!r} at {'.'.join(path) or 'the top'} is "
                                f"a {type(k).__name__}; keys must be str, int, float, bool, "
                                "None or tuples of them")
            items.append([_flatten(k, path + [str(k)], {}), _flatten(v, path + [str(k)], tensors)])
        return {_DICT: items}
    if isinstance(obj, (list, tuple)):
        tag = _TUPLE if isinstance(obj, tuple) else _LIST
        return {tag: [_flatten(v, path + [str(i)], tensors) for i, v in enumerate(obj)]}
    if isinstance(obj, _SCALARS):
        return obj
    raise TypeError(f"loom.save: cannot save {'.'.join(path) or 'the object'} of type "
                    f"{type(obj).__name__} (tensors, dicts, lists, tuples, str, int, float, "
                    "bool and None can be saved)")


def _unflatten(node, tensors, where):
    if not isinstance(node, dict):
        return node
    if len(node) != 1:
        raise _Malformed(f"loom.load: {where}: a malformed {_TREE_KEY} entry: {node!r}")
    (tag, value), = node.items()
    if tag == _TENSOR:
        if value not in tensors:
            raise _Malformed(f"loom.load: {where}: {_TREE_KEY} names a tensor {value!r} that the "
                             "file does not hold")
        return tensors[value]
    if tag == _DICT:
        return {_unflatten(k, tensors, where): _unflatten(v, tensors, where) for k, v in value}
    if tag == _LIST:
        return [_unflatten(v, tensors, where) for v in value]
    if tag == _TUPLE:
        return tuple(_unflatten(v, tensors, where) for v in value)
    raise _Malformed(f"loom.load: {where}: a malformed {_TREE_KEY} entry: {node!r}")


def _path(f, op):
    try:
        return os.fspath(f)
    except TypeError:
        raise TypeError(f"{op}: f must be a path (str or os.PathLike), not "
                        f"{type(f).__name__}") from None


def save(obj, f, metadata=None):
    """Saves obj to the path f as a safetensors file.

    obj: a dict of str -> Tensor (written with exactly those names), or nested dicts, lists and
    tuples of tensors and plain values (None, bool, int, float, str). metadata: an optional dict
    of str -> str kept in the file's header. Tensors are synced and written contiguously from
    host memory; two that share memory are written as two copies. The file appears whole or not
    at all (written under a temporary name, then renamed).
    """
    path = _path(f, "loom.save")
    meta = dict(metadata or {})
    for k, v in meta.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"loom.save: metadata must map str to str, got {k!r}: {v!r}")
    if _TREE_KEY in meta:
        raise ValueError(f"loom.save: the metadata key {_TREE_KEY!r} is loom's own")
    if _is_flat(obj):
        tensors = dict(obj)
    else:
        tensors = {}
        tree = _flatten(obj, [], tensors)
        meta[_TREE_KEY] = json.dumps({"version": _TREE_VERSION, "tree": tree})
    _loom._save_file(tensors, path, meta)


def load(f, map_location=None):
    """Loads what save wrote (or any safetensors file) from the path f.

    map_location: the device the tensors are put on (None: the CPU). Gives back the structure
    saved: a flat file as a dict of name -> Tensor. A missing file raises FileNotFoundError, a
    malformed one ValueError naming the file.
    """
    path = _path(f, "loom.load")
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "loom.load: no such file", path)
    device = "cpu" if map_location is None else map_location
    tensors, meta = _loom._load_file(path, device)
    if _TREE_KEY not in meta:
        return tensors
    where = f"'{path}'"
    try:
        packed = json.loads(meta[_TREE_KEY])
        version, tree = packed["version"], packed["tree"]
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"loom.load: {where}: {_TREE_KEY} is not loom's tree ({e})") from None
    if version != _TREE_VERSION:
        raise ValueError(f"loom.load: {where}: {_TREE_KEY} version {version}; this loom reads "
                         f"{_TREE_VERSION}")
    try:
        return _unflatten(tree, tensors, where)
    except _Malformed:
        raise
    except (TypeError, ValueError) as e:  # a dict entry that is no pair, an unhashable key
        raise ValueError(f"loom.load: {where}: a malformed {_TREE_KEY} ({e})") from None
