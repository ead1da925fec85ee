"""The configuration of ``lammer web``: command-line options, or the same keys in a TOML file.

Every option of ``lammer web`` has a key of the same name in ``web.toml`` (``--mqtt-host``
is ``mqtt_host``); an option given on the command line wins over the file. The result is
validated by one strict pydantic model, and every problem is reported at once as
``key: what is wrong`` (unknown keys are errors with a "did you mean", integers and
booleans are strict, relative paths are taken from the file's folder), as the table
configuration does.

```toml
mqtt_host = "127.0.0.1"               # or every node of the floor: "floor1,floor2,floor3:1884"
mqtt_port = 1883                      # the port of a node given without one
mqtt_user = "display"                 # read-only: subscribes, never publishes
mqtt_password_file = "credentials/display"
terminal_user = "terminal"            # publishes the stickperson's requests only
terminal_password_file = "credentials/terminal"
prefix = "lammer"
listen = "127.0.0.1:8080"
users = "web-users"                   # lammer web adduser NAME --users web-users
keepalive = 30                        # a page shows "table closed" after this long silent
attract_seconds = 300                 # the player display's attract view after this long idle
secure_cookies = false                # true behind TLS (a reverse proxy); implied by tls_cert
mqtt_ca_file = "floor/ca.crt"         # MQTT over TLS, the broker verified with this CA
tls_cert = "tls/web.crt"              # serve HTTPS (then HSTS, Secure cookies) with this
tls_key = "tls/web.key"               # certificate and its key (0600)

records_db = "host=floor-db dbname=lammer_records user=records_reader"  # /reports: the
                                      # records store, as its read-only role; the password
                                      # from PGPASSFILE or ~/.pgpass, never in this string
records_day_starts = "06:00"          # when a gaming day starts (lammer records --day-starts)
records_timezone = "America/Indiana/Indianapolis"   # the floor's (default: the system's)
records_big_hit = 100                 # a big hit pays this to 1 or more
metrics_listen = "127.0.0.1:9464"     # Prometheus metrics on a port of their own
metrics_allow_from = []               # scrapers beyond this machine (then listen wider)

floor_controllers = ["floor/ctl1.json", "floor/ctl2.json"]  # the floor-controller.json
                                      # files floor-config reads: the pit marks a lost
                                      # controller's tables "controller unreachable"

[areas]                               # the pit view's areas (filters): name -> table ids
"Pit 1" = ["craps-1", "uth-1"]
"High limit" = ["bj-7"]
```
"""

from __future__ import annotations

import re
import ssl
from datetime import time
from pathlib import Path
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from deploy.floor import Declaration, FloorError, parse_declaration
from display.errors import WebConfigError
from foundation.config_files import (
    TYPE_PROBLEMS,
    did_you_mean,
    existing_file,
    from_folder,
    open_mode,
    read_toml,
)
from foundation.endpoints import is_loopback, parse_listen, parse_nodes, parse_port
from foundation.tls import client_context
from metrics.settings import MetricsConfigError, MetricsSettings, metrics_settings

Port = Annotated[StrictInt, AfterValidator(parse_port)]

MAX_AREAS = 64
MAX_AREA_TABLES = 1000
# A table id as the pages take it in a URL (server.NAME_TABLE): no '/', '+', '#', spaces.
_TABLE_ID = re.compile(r"[^/+#\s\x00-\x1f\x7f]{1,64}")


class WebConfig(BaseModel):
    """Everything ``lammer web`` needs; the keys are the command-line options' names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mqtt_host: str = Field(
        default="127.0.0.1",
        description="the broker, or every node of the floor cluster: HOST[:PORT],HOST[:PORT],...",
    )
    mqtt_port: Port = Field(default=1883, description="the port of a node given without one")
    mqtt_user: str | None = Field(default=None, description="the read-only display user")
    mqtt_password_file: Path | None = Field(default=None, description="its password, one line")
    terminal_user: str | None = Field(
        default=None, description="the MQTT user that publishes the stickperson's requests"
    )
    terminal_password_file: Path | None = Field(default=None, description="its password, one line")
    prefix: str = Field(default="lammer", description="topic prefix: <prefix>/<table>/...")
    listen: str = Field(default="127.0.0.1:8080", description="HOST:PORT of the web server")
    users: Path | None = Field(
        default=None, description="the stickpersons' users file (lammer web adduser)"
    )
    keepalive: Annotated[StrictInt, Field(ge=3, le=3600)] = Field(
        default=30,
        description="seconds without a word from the server before a page shows table closed",
    )
    attract_seconds: Annotated[StrictInt, Field(ge=10, le=86400)] = Field(
        default=300,
        description="seconds without a new round or roll before the player display shows "
        "its attract view (the pay table large)",
    )
    secure_cookies: StrictBool = Field(
        default=False, description="mark the session cookie Secure (serve behind TLS)"
    )
    session_hours: Annotated[StrictInt, Field(ge=1, le=24)] = Field(
        default=12, description="hours a login lasts"
    )
    mqtt_ca_file: Path | None = Field(
        default=None,
        description="connect to the broker (every node) over TLS, verifying it with this CA "
        "(the floor's: floor-config's ca.crt)",
    )
    tls_cert: Path | None = Field(
        default=None, description="serve HTTPS with this certificate (chain first)"
    )
    tls_key: Path | None = Field(default=None, description="the certificate's key (0600)")
    floor_controllers: list[Path] = Field(
        default_factory=list,
        description="the controllers' floor-controller.json (the files floor-config reads): "
        "which tables each floor bridge carries, for the pit",
    )
    areas: dict[str, list[str]] = Field(
        default_factory=dict,
        description="the pit view's areas: an area's name and its table ids (a table in one)",
    )
    records_db: str | None = Field(
        default=None,
        description="the records store for /reports: a libpq connection string of its "
        "read-only role (its password from PGPASSFILE or ~/.pgpass)",
    )
    records_day_starts: str = Field(
        default="06:00", description="when a gaming day starts, HH:MM local time"
    )
    records_timezone: str | None = Field(
        default=None, description="the floor's time zone for gaming days (default: the system's)"
    )
    records_big_hit: Annotated[StrictInt, Field(ge=2, le=1_000_000)] = Field(
        default=100, description="a big hit on /reports pays this to 1 or more"
    )
    metrics_listen: str | None = Field(
        default=None,
        description="serve Prometheus metrics on a listener of their own, HOST:PORT (PORT "
        "alone: 127.0.0.1:PORT), never on the pages' port; a host beyond loopback needs "
        "metrics_allow_from (default: none)",
    )
    metrics_allow_from: list[str] = Field(
        default_factory=list,
        description="addresses or networks of the Prometheus servers allowed to scrape "
        "besides this machine (10.0.0.5, 10.0.0.0/24); others get 403",
    )

    @field_validator("records_db")
    @classmethod
    def _records_db(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            keys = conninfo_to_dict(value)
        except ProgrammingError as exc:
            raise ValueError(f"not a libpq connection string: {exc}") from None
        if "password" in keys:
            # A command line is readable by every user of the machine (ps).
            raise ValueError("give its password in a pgpass file (PGPASSFILE), not here")
        return value

    @field_validator("records_day_starts")
    @classmethod
    def _day_starts(cls, value: str) -> str:
        if not re.fullmatch(r"[0-9]{2}:[0-9]{2}", value):
            raise ValueError(f"must be HH:MM, got {value!r}")
        try:
            time.fromisoformat(value)
        except ValueError:
            raise ValueError(f"must be HH:MM, got {value!r}") from None
        return value

    @field_validator("records_timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"not a time zone (Europe/Paris): {value!r}") from None
        return value

    @field_validator("mqtt_host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name the broker, got an empty string")
        parse_nodes(value, 1883)
        return value

    @field_validator("areas")
    @classmethod
    def _areas(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        if len(value) > MAX_AREAS:
            raise ValueError(f"at most {MAX_AREAS} areas, got {len(value)}")
        where: dict[str, str] = {}
        for name, tables in value.items():
            if not name.strip() or len(name) > 64 or any(not c.isprintable() for c in name):
                raise ValueError(f"an area's name is 1 to 64 printable characters, got {name!r}")
            if len(tables) > MAX_AREA_TABLES:
                raise ValueError(f"{name!r}: at most {MAX_AREA_TABLES} tables")
            for table in tables:
                if not _TABLE_ID.fullmatch(table):
                    raise ValueError(f"{name!r}: not a table id: {table!r}")
                if table in where:
                    raise ValueError(f"table {table!r} is in {where[table]!r} and {name!r}")
                where[table] = name
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        levels = value.split("/")
        if not value or any(not level for level in levels):
            raise ValueError(f"must be topic levels separated by single '/', got {value!r}")
        if any(c in "+#\0" for c in value) or value.startswith("$"):
            raise ValueError(f"must not hold '+', '#' or start with '$', got {value!r}")
        return value

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        parse_listen(value)
        return value

    @field_validator("mqtt_password_file", "terminal_password_file")
    @classmethod
    def _password_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else existing_file(value, info)

    @field_validator("floor_controllers")
    @classmethod
    def _floor_controllers(cls, value: list[Path], info: ValidationInfo) -> list[Path]:
        paths = [existing_file(path, info) for path in value]
        seen: dict[str, Path] = {}
        for path in paths:
            controller = _declaration(path).controller
            if controller in seen:
                raise ValueError(f"controller {controller!r} declared twice: {seen[controller]}")
            seen[controller] = path
        return paths

    @field_validator("users")
    @classmethod
    def _users(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else existing_file(value, info)

    @field_validator("mqtt_ca_file", "tls_cert")
    @classmethod
    def _certificate(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        value = existing_file(value, info)
        if b"-----BEGIN CERTIFICATE-----" not in value.read_bytes()[: 1 << 20]:
            raise ValueError(f"not a PEM certificate: {value}")
        return value

    @field_validator("tls_key")
    @classmethod
    def _key(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        value = existing_file(value, info)
        if open_mode(value):
            mode = value.stat().st_mode & 0o777
            raise ValueError(f"{value} may be read by others (mode {mode:04o}): chmod 0600 it")
        return value

    @model_validator(mode="after")
    def _pairs(self) -> WebConfig:
        problems = []
        if self.mqtt_password_file is not None and self.mqtt_user is None:
            problems.append("mqtt_user: required when mqtt_password_file is set")
        if self.terminal_password_file is not None and self.terminal_user is None:
            problems.append("terminal_user: required when terminal_password_file is set")
        if (self.tls_cert is None) != (self.tls_key is None):
            problems.append("tls_cert and tls_key: give both to serve HTTPS, or neither")
        problems += self._metrics_problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _metrics_problems(self) -> list[str]:
        if self.metrics_listen is None:
            return ["metrics_allow_from: needs metrics_listen"] if self.metrics_allow_from else []
        try:
            metrics_settings(self.metrics_listen, self.metrics_allow_from)
        except MetricsConfigError as exc:
            return [f"metrics_listen: {str(exc).replace('allow_from', 'metrics_allow_from')}"]
        return []

    def metrics(self) -> MetricsSettings | None:
        """The metrics listener (``metrics_listen``), or None."""
        if self.metrics_listen is None:
            return None
        return metrics_settings(self.metrics_listen, self.metrics_allow_from)

    @property
    def day_starts(self) -> time:
        """``records_day_starts`` as a time."""
        return time.fromisoformat(self.records_day_starts)

    @property
    def mqtt_nodes(self) -> list[tuple[str, int]]:
        """Every broker to try, in order: ``mqtt_host``'s nodes, ``mqtt_port`` where a node
        gives no port of its own."""
        return parse_nodes(self.mqtt_host, self.mqtt_port)

    @property
    def https(self) -> bool:
        """Whether the server itself speaks TLS (``tls_cert`` and ``tls_key``)."""
        return self.tls_cert is not None

    @property
    def cookies_secure(self) -> bool:
        """Whether cookies carry ``Secure``: behind TLS, ours or a proxy's."""
        return self.secure_cookies or self.https

    @property
    def password_in_clear(self) -> bool:
        """Whether a password would go to a broker off this machine without TLS."""
        logs_in = self.mqtt_password_file is not None or self.terminal_password_file is not None
        remote = any(not is_loopback(host) for host, _ in self.mqtt_nodes)
        return logs_in and remote and self.mqtt_ca_file is None

    def mqtt_tls(self) -> ssl.SSLContext | None:
        """The TLS context of the MQTT connections (TLS 1.2 at least, the broker's
        certificate and name verified with ``mqtt_ca_file``), or None for plain MQTT."""
        return client_context(self.mqtt_ca_file)

    def http_tls(self) -> ssl.SSLContext | None:
        """The web server's own TLS context (TLS 1.2 at least), or None for plain HTTP."""
        if self.tls_cert is None or self.tls_key is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.tls_cert), str(self.tls_key))
        return context

    @property
    def listen_address(self) -> tuple[str, int]:
        """``listen`` as ``(host, port)``."""
        return parse_listen(self.listen)

    def controllers(self) -> dict[str, list[str]]:
        """Controller -> its tables' ids, from ``floor_controllers`` (read when called)."""
        out: dict[str, list[str]] = {}
        for path in self.floor_controllers:
            declaration = _declaration(path)
            out[declaration.controller] = [t.id for t in declaration.tables]
        return out

    def mqtt_password(self) -> str | None:
        """The display user's password (the file's first line), or None."""
        return _first_line(self.mqtt_password_file)

    def terminal_password(self) -> str | None:
        """The terminal user's password (the file's first line), or None."""
        return _first_line(self.terminal_password_file)


def _declaration(path: Path) -> Declaration:
    try:
        return parse_declaration(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from None
    except FloorError as exc:
        raise ValueError(f"{path}: not a floor-controller declaration: {exc}") from None


def _first_line(path: Path | None) -> str | None:
    if path is None:
        return None
    text = path.read_text(encoding="utf-8")
    return text.splitlines()[0] if text else ""


def _describe(error: Any) -> str:
    kind = error["type"]
    loc = ".".join(str(p) for p in error["loc"])
    got = f", got {error.get('input')!r}"
    if kind == "extra_forbidden":
        return f"{loc}: unknown key{did_you_mean(loc, WebConfig.model_fields)}"
    message = str(error["msg"]).removeprefix("Value error, ")
    if kind in TYPE_PROBLEMS:
        message = TYPE_PROBLEMS[kind] + got
    elif kind in {"greater_than_equal", "less_than_equal"}:
        message = message + got
    if not loc:  # a cross-field check: its message names its keys
        return message
    return f"{loc}: {message}"


def validate_web_config(data: dict[str, Any], *, base_dir: Path | None = None) -> WebConfig:
    """Validate settings; raises ``WebConfigError`` listing every problem."""
    try:
        return WebConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        problems: list[str] = []
        for error in exc.errors():
            problems.extend(
                _describe(error).split("; ") if not error["loc"] else [_describe(error)]
            )
        raise WebConfigError(None, problems) from exc


def load_web_config(path: Path | None, overrides: dict[str, Any]) -> WebConfig:
    """The configuration from ``path`` (TOML, may be None) with ``overrides`` on top.

    ``overrides`` are command-line values (None means "not given"); relative paths given on
    the command line are taken from the current folder, those in the file from its folder.
    """
    data: dict[str, Any] = {}
    base_dir: Path | None = None
    if path is not None:
        data = read_toml(path, WebConfigError)
        base_dir = path.resolve().parent
        for key in (
            "mqtt_password_file",
            "terminal_password_file",
            "users",
            "mqtt_ca_file",
            "tls_cert",
            "tls_key",
        ):
            if isinstance(data.get(key), str):
                data[key] = str(from_folder(Path(data[key]), base_dir))
        if isinstance(data.get("floor_controllers"), list):
            data["floor_controllers"] = [
                str(from_folder(Path(v), base_dir)) if isinstance(v, str) else v
                for v in data["floor_controllers"]
            ]
    for key, value in overrides.items():
        if value is not None:
            data[key] = value
    try:
        return validate_web_config(data, base_dir=Path.cwd())
    except WebConfigError as exc:
        raise WebConfigError(path, exc.problems) from exc.__cause__
