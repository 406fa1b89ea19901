"""The service errors: SweepError for the sweep service, EngineServiceError for the order engine
service, and the deprecated names EngineError/EngineTimeout, which still catch both."""
from __future__ import annotations

import errno
import pickle
import re
import socket
import warnings
from pathlib import Path

import pytest

import tollfree
from tollfree import errors, orders
from tollfree.errors import (EngineServiceError, EngineServiceTimeout, ServiceError, ServiceTimeout,
                             SweepError, SweepTimeout)

PKG = Path(tollfree.__file__).resolve().parent


def _deprecated(module, name):
    with pytest.warns(DeprecationWarning, match=name):
        return getattr(module, name)


def test_deprecated_names_warn_and_are_the_common_base():
    for module in (tollfree, errors):
        assert _deprecated(module, "EngineError") is ServiceError
        assert _deprecated(module, "EngineTimeout") is ServiceTimeout
    with pytest.warns(DeprecationWarning):
        from tollfree.errors import EngineError  # the old import still works
    assert EngineError is ServiceError
    with pytest.raises(AttributeError):
        tollfree.NoSuchName  # noqa: B018
    with pytest.raises(AttributeError):
        errors.NoSuchName  # noqa: B018


def test_except_engine_error_still_catches_both_services():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        EngineError, EngineTimeout = tollfree.EngineError, tollfree.EngineTimeout
    for raised in (SweepError(-errno.EPIPE), EngineServiceError(-errno.EPIPE), SweepTimeout(),
                   EngineServiceTimeout()):
        try:
            raise raised
        except EngineError as e:
            assert e is raised
    for raised in (SweepTimeout(), EngineServiceTimeout()):
        try:
            raise raised
        except EngineTimeout as e:
            assert e is raised and isinstance(e, TimeoutError) and e.code == -errno.ETIMEDOUT


def test_the_two_services_are_told_apart():
    assert not issubclass(EngineServiceError, SweepError)
    assert not issubclass(SweepError, EngineServiceError)
    assert issubclass(SweepTimeout, SweepError) and issubclass(SweepTimeout, TimeoutError)
    assert issubclass(EngineServiceTimeout, EngineServiceError)
    assert not issubclass(SweepTimeout, EngineServiceError)
    assert "sweep service" in str(SweepTimeout())
    assert "engine service" in str(EngineServiceTimeout())
    for e in (SweepError(-errno.EPIPE, "x"), EngineServiceTimeout(message="y")):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and (back.code, back.message) == (e.code, e.message)


def test_os_error_maps_to_the_named_service():
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    assert type(errors.os_error(refused, "connect")) is SweepError
    assert type(errors.os_error(refused, "connect", EngineServiceError)) is EngineServiceError
    assert errors.os_error(refused, "connect").code == -errno.ECONNREFUSED
    assert type(errors.os_error(socket.timeout(), "recv")) is SweepTimeout
    timeout = errors.os_error(socket.timeout(), "recv", EngineServiceError)
    assert type(timeout) is EngineServiceTimeout


def test_each_client_raises_its_own_service_error(tmp_path):
    missing = f"unix:{tmp_path}/missing.sock"
    with pytest.raises(SweepError) as ei:
        tollfree.connect(missing, timeout=5)
    assert ei.value.code == -errno.ENOENT
    with pytest.raises(EngineServiceError) as ei:
        orders.connect(missing, timeout=5)
    assert ei.value.code == -errno.ENOENT


def test_no_module_raises_the_deprecated_names():
    """New code raises SweepError or EngineServiceError; the old names live in errors.py only."""
    old = re.compile(r"\bEngine(Error|Timeout)\b")
    users = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
             if p.name not in ("errors.py", "__init__.py") or p.parent != PKG
             if old.search(p.read_text())]
    assert users == []
