"""The table configuration: one TOML file per table, validated by pydantic.

``load_config(path)`` reads and validates a file and raises ``ConfigFileError`` listing
*every* problem as ``key.path: what is wrong`` (``bust_bonus.decks: must be between 1 and
8, got 0``). Unknown keys are errors: a typo must not be silently ignored. Relative paths
(journal, password file, TLS files) are taken relative to the configuration file's
directory, so a config and its files can move together.

The keys of the issue ("Configuration") are the interface operators rely on; the rest have
defaults. ``TableConfig.model_json_schema()`` gives the JSON Schema for tooling.

Sections and who needs them:

* ``[table]`` always: ``id`` (one MQTT topic level, without ``.`` or spaces) and ``game``.
* ``[shuffler]`` for the card games, BJ included (the card-reading shoe speaks the
  shuffler protocol, shuffler-icd.md); ``[dice_reader]`` for CRAPS; ``[bonus_craps]``
  (CRAPS) and ``[bust_bonus]`` (BJ) have defaults. A section the game does not use is
  accepted (one file may list every key) and reported by
  ``TableConfig.notes()``, which ``lammer check-config`` prints.
* ``[mqtt]``, ``[journal]``, ``[logging]``, ``[watchdog]``: optional, with defaults;
  ``[metrics]`` (a Prometheus endpoint) only when given.
"""

from __future__ import annotations

import datetime as dt
import os
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from daemon.errors import ConfigFileError
from drivers.errors import DriverConfigError
from drivers.settings import RS485_MAX_DELAY, DriverSettings, Rs485
from foundation.backoff import DEFAULT_INITIAL, DEFAULT_MAXIMUM
from foundation.config_files import (
    TYPE_PROBLEMS,
    did_you_mean,
    existing_file,
    private_file,
    read_toml,
    resolve,
)
from metrics.settings import MetricsConfigError, MetricsSettings, metrics_settings
from rules.events import GAMES, Device, TableGame

CARD_GAMES: Final[frozenset[str]] = frozenset(GAMES)
"""The games a shuffler deals (``rules.events.Game``); the others are dice games."""

DEFAULT_STATE_DIR = Path("/var/lib/lammer")  # systemd StateDirectory=lammer

# MQTT topic wildcards and separator (MQTT 3.1.1 section 4.7): a table id is one level.
_TOPIC_FORBIDDEN = frozenset("/+#\0")
# mqtt-api.md "Conventions": no '.' or spaces, which floor brokers such as NATS refuse.
_FLOOR_FORBIDDEN = frozenset(".")
_PREFIX_MAX = 128


def _num(value: float) -> str:
    """A number as the operator wrote it: ``0``, not ``0.0``."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _between(lo: float, hi: float) -> AfterValidator:
    def check(value: float) -> float:
        if not lo <= value <= hi:
            raise ValueError(f"must be between {_num(lo)} and {_num(hi)}, got {_num(value)}")
        return value

    return AfterValidator(check)


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError(f"must be greater than 0, got {_num(value)}")
    return value


def _stopbits(value: float) -> float:
    if value not in (1, 1.5, 2):
        raise ValueError(f"must be 1, 1.5 or 2, got {_num(value)}")
    return value


def _range(lo: float, hi: float) -> Any:
    """Schema bounds (for tooling) plus our own message (for operators)."""
    return Field(json_schema_extra={"minimum": lo, "maximum": hi})


Seconds = Annotated[
    StrictFloat, AfterValidator(_positive), Field(json_schema_extra={"exclusiveMinimum": 0})
]
Port = Annotated[StrictInt, _range(1, 65535), _between(1, 65535)]


class _Section(BaseModel):
    """Common settings: frozen, unknown keys forbidden."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TableSection(_Section):
    """``[table]``: who the table is and what it plays."""

    # Each key that ``info``'s body (contract.payloads.InfoBody) also declares is published
    # there as it is (daemon.publications.info_publication hands this section over whole):
    # under its serialization alias where the names differ (``id`` is ``info``'s ``table``).
    id: str = Field(
        serialization_alias="table",
        description="Table id: one MQTT topic level without . or spaces; the systemd instance",
    )
    game: TableGame = Field(
        description="The game the table plays (the shuffler must report it as its MODE)"
    )

    @field_validator("id")
    @classmethod
    def _topic_level(cls, value: str) -> str:
        # mqtt-api.md: the base topic is <prefix>/<table_id>; the id must be one level.
        if not value:
            raise ValueError("must not be empty")
        bad = sorted({c for c in value if c in _TOPIC_FORBIDDEN or not c.isprintable()})
        if bad or value != value.strip():
            shown = ", ".join(repr(c) for c in bad) or "leading/trailing space"
            raise ValueError(f"must be usable as one MQTT topic level, got {value!r} ({shown})")
        if len(value) > 64:
            raise ValueError(f"must be at most 64 characters, got {len(value)}")
        floor = sorted({c for c in value if c in _FLOOR_FORBIDDEN or c.isspace()})
        if floor:
            shown = ", ".join(repr(c) for c in floor)
            raise ValueError(
                f"must not hold '.' or spaces (mqtt-api.md: floor brokers such as NATS "
                f"refuse them), got {value!r} ({shown})"
            )
        return value


class DeviceSection(_Section):
    """``[shuffler]`` or ``[dice_reader]``: the serial port and the driver's timings.

    Port settings default to link-layer.md "Physical" (115200 8N1, no flow control);
    every one is configurable per device as that clause allows. Over ``rfc2217://`` they
    are set on the device server's port; over ``socket://`` the server's own settings
    apply. ``rs485 = true`` puts a port of this machine in the kernel's RS-485 mode
    (``drivers.settings.Rs485``), with the ``rs485_*`` keys.
    """

    port: str = Field(
        description="A device path (/dev/lammer/shuffler), a pty, socket://host:port (a "
        "device server's raw TCP port) or rfc2217://host:port[?timeout=S&ign_set_control] "
        "(one that speaks RFC 2217)"
    )
    baudrate: Annotated[StrictInt, AfterValidator(_positive)] = Field(
        default=115200, description="Bits a second on the line: the device's setting"
    )
    bytesize: Literal[5, 6, 7, 8] = Field(default=8, description="Data bits per character")
    parity: Literal["N", "E", "O", "M", "S"] = Field(
        default="N", description="Parity: none, even, odd, mark or space"
    )
    stopbits: Annotated[
        StrictFloat, AfterValidator(_stopbits), Field(json_schema_extra={"enum": [1, 1.5, 2]})
    ] = Field(default=1, description="Stop bits per character")
    rtscts: StrictBool = Field(default=False, description="Hardware flow control (RTS/CTS)")
    xonxoff: StrictBool = Field(default=False, description="Software flow control (XON/XOFF)")
    ack_deadline: Seconds = Field(
        default=0.25,
        description="link-layer.md: the host ACKs every good frame within 250 ms",
    )
    silence_timeout: Seconds = Field(
        default=30.0,
        description="Seconds without a byte before the driver sends QUERY to check the link",
    )
    reconnect_initial: Seconds = Field(
        default=DEFAULT_INITIAL, description="First delay before reopening a lost port (jittered)"
    )
    reconnect_max: Seconds = Field(
        default=DEFAULT_MAXIMUM,
        description="Cap of the reopen backoff: a replugged port is reopened within this long",
    )
    rs485: StrictBool = Field(
        default=False,
        description="RS-485 half duplex in the kernel (TIOCSRS485) on a port of this machine "
        "whose driver has it: RTS switches the transmitter",
    )
    rs485_rts_level_for_tx: StrictBool = Field(
        default=True, description="RTS while sending (true: high); with rs485 = true"
    )
    rs485_rts_level_for_rx: StrictBool = Field(
        default=False, description="RTS while receiving (true: high); with rs485 = true"
    )
    rs485_delay_before_tx: Annotated[StrictFloat, _between(0, RS485_MAX_DELAY)] = Field(
        default=0.0,
        description="Seconds from RTS up to the first bit, whole milliseconds, at most 0.1",
    )
    rs485_delay_before_rx: Annotated[StrictFloat, _between(0, RS485_MAX_DELAY)] = Field(
        default=0.0,
        description="Seconds from the last bit to RTS down, whole milliseconds, at most 0.1",
    )

    @field_validator("port")
    @classmethod
    def _port_given(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a serial port or pyserial URL, got an empty string")
        return value

    @model_validator(mode="after")
    def _driver_accepts(self) -> DeviceSection:
        # The driver's own checks, so check-config refuses what `lammer run` would: a
        # malformed socket:// URL, a baud rate out of range... (building a driver opens
        # nothing). The backoff order has its own, clearer check on the keys themselves.
        if self.reconnect_max < self.reconnect_initial:
            return self
        if not self.rs485:
            # A key at its default changes nothing (a dumped configuration has them all).
            given = sorted(
                k
                for k in self.model_fields_set
                if k.startswith("rs485_") and getattr(self, k) != type(self).model_fields[k].default
            )
            if given:
                raise ValueError(f"{', '.join(given)}: RS-485 settings need rs485 = true")
        try:
            self.driver_settings("shuffler")
        except DriverConfigError as exc:
            raise ValueError(str(exc)) from exc
        return self

    def driver_settings(self, device: Device) -> DriverSettings:
        """This section as the driver takes it (``DriverConfigError`` if it cannot work)."""
        return DriverSettings(
            device=device,
            url=self.port,
            baudrate=self.baudrate,
            bytesize=self.bytesize,
            parity=self.parity,
            stopbits=self.stopbits,
            xonxoff=self.xonxoff,
            rtscts=self.rtscts,
            ack_deadline=self.ack_deadline,
            silence_timeout=self.silence_timeout,
            reconnect_initial=self.reconnect_initial,
            reconnect_max=self.reconnect_max,
            rs485=Rs485(
                rts_level_for_tx=self.rs485_rts_level_for_tx,
                rts_level_for_rx=self.rs485_rts_level_for_rx,
                delay_before_tx=self.rs485_delay_before_tx,
                delay_before_rx=self.rs485_delay_before_rx,
            )
            if self.rs485
            else None,
        )


class TlsSection(_Section):
    """``[mqtt.tls]``: TLS to the broker. Files must exist; ``cert_file`` needs ``key_file``."""

    ca_file: Annotated[Path | None, Field(description="CA bundle; None: system store")] = None
    cert_file: Path | None = Field(
        default=None, description="Client certificate, if the broker asks for one"
    )
    key_file: Path | None = Field(default=None, description="The client certificate's key")

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _exists(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else existing_file(value, info)


class MqttSection(_Section):
    """``[mqtt]``: the broker and the topic prefix (mqtt-api.md "Conventions")."""

    host: str = Field(default="127.0.0.1", description="The broker: host name or address")
    port: Port = Field(default=1883, description="The broker's port")
    prefix: str = Field(default="lammer", description="Base topic is <prefix>/<table id>")
    client_id: str | None = Field(
        default=None, description="One stable client id per table; default lammer-<table id>"
    )
    keepalive: Annotated[StrictInt, _range(5, 65535), _between(5, 65535)] = Field(
        default=30,
        description="Seconds between MQTT pings: the broker publishes the table's will "
        "(offline) within 1.5 times this when its host goes silent",
    )
    username: str | None = Field(
        default=None, description="The table's MQTT user (broker-config: lammer-<table id>)"
    )
    password_file: Path | None = Field(
        default=None, description="File holding the password (never the password itself)"
    )
    tls: TlsSection | None = Field(default=None, description="TLS to the broker, if given")
    reconnect_initial: Seconds = Field(default=DEFAULT_INITIAL, description="First reconnect delay")
    reconnect_max: Seconds = Field(
        default=DEFAULT_MAXIMUM,
        description="Cap of the jittered backoff: displays stay stale at most this long "
        "after the broker returns",
    )
    floor_resend: Annotated[StrictFloat, _range(0, 3600), _between(0, 3600)] = Field(
        default=30.0,
        description="When the controller's bridge to the floor drops, publish again the "
        "newest message if it was acknowledged in the last this many seconds (never "
        "retained): from it every floor subscriber learns the latest seq and asks for what "
        "it lacks (request/resend). 0: never",
    )

    @field_validator("host")
    @classmethod
    def _host_given(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name the broker, got an empty string")
        return value

    @field_validator("prefix")
    @classmethod
    def _prefix_topic(cls, value: str) -> str:
        levels = value.split("/")
        if not value or any(not level for level in levels):
            raise ValueError(f"must be topic levels separated by single '/', got {value!r}")
        if any(c in "+#\0" for c in value) or value.startswith("$"):
            raise ValueError(f"must not hold '+', '#' or start with '$', got {value!r}")
        # The prefix is in every topic, as the table id is (mqtt-api.md "Conventions"), and
        # is written into the broker's ACL by broker-config: one printable line, bounded.
        odd = sorted(
            {c for c in value if c in _FLOOR_FORBIDDEN or c.isspace() or not c.isprintable()}
        )
        if odd:
            shown = ", ".join(repr(c) for c in odd)
            raise ValueError(
                f"must not hold '.', spaces or control characters (floor brokers such as "
                f"NATS refuse them), got {value!r} ({shown})"
            )
        if len(value) > _PREFIX_MAX:
            raise ValueError(f"must be at most {_PREFIX_MAX} characters, got {len(value)}")
        return value

    @field_validator("client_id")
    @classmethod
    def _client_id(cls, value: str | None) -> str | None:
        if value is not None and not 1 <= len(value.encode()) <= 128:
            raise ValueError(f"must be 1 to 128 bytes, got {len(value.encode())}")
        return value

    @field_validator("password_file")
    @classmethod
    def _password_exists(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return None if value is None else private_file(value, info)

    def read_password(self) -> str | None:
        """The password from ``password_file`` (first line, without its newline), or None."""
        if self.password_file is None:
            return None
        text = self.password_file.read_text(encoding="utf-8")
        return text.splitlines()[0] if text else ""


class JournalSection(_Section):
    """``[journal]``: where the SQLite journal lives, its gaming days and its retention
    (``daemon.segments``), its snapshots and the key of its hash chain."""

    path: Path | None = Field(
        default=None, description="the live segment; default /var/lib/lammer/<table id>.db"
    )
    day_starts: str = Field(
        default="06:00",
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="local time at which a gaming day (and a journal segment) begins, HH:MM",
    )
    time_zone: str | None = Field(
        default=None, description="IANA zone of the gaming day (default: the system's)"
    )
    retention_days: int = Field(
        default=365,
        ge=1,
        le=36_500,
        strict=True,
        description="closed segments older than this many gaming days may be removed",
    )
    retention_bytes: int | None = Field(
        default=None,
        ge=1,
        strict=True,
        description="and only while the archive holds more than this (none: no byte cap)",
    )
    archive_command: Path | None = Field(
        default=None,
        description="run with an expired segment's path before it is removed (e.g. to copy "
        "it off the box); the segment stays until the command exits 0",
    )
    hmac_key_file: Path | None = Field(
        default=None,
        description="key of the journal's hash chain (HMAC-SHA-256), readable by its owner "
        "only; without it the chain is plain SHA-256",
    )
    snapshot_every: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        strict=True,
        description="records between two snapshots of the table state at most",
    )
    snapshot_interval: float = Field(
        default=600.0,
        gt=0,
        le=86_400,
        description="seconds between two snapshots at most (while records are written)",
    )
    disk_low_hours: int = Field(
        default=24,
        ge=1,
        le=8760,
        strict=True,
        description="alarm DISK_LOW when the journal's disk has less free space than this "
        "many hours of the table's measured journal growth need",
    )

    @field_validator("path")
    @classmethod
    def _usable(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        value = resolve(value, info)
        if value.is_dir():
            raise ValueError(f"is a directory, expected a file path: {value}")
        # The journal creates missing directories; an ancestor that is a file cannot work.
        for parent in value.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise ValueError(f"{parent} is not a directory")
                break
        return value

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}: use an IANA name") from exc
        return value

    @field_validator("archive_command")
    @classmethod
    def _command(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        value = existing_file(value, info)
        if not os.access(value, os.X_OK):
            raise ValueError(f"is not executable: {value}")
        return value

    @field_validator("hmac_key_file")
    @classmethod
    def _key(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is None:
            return None
        value = private_file(value, info)
        if value.stat().st_size < 16:
            raise ValueError(f"holds {value.stat().st_size} bytes: a key needs 16 or more")
        return value

    def read_key(self) -> bytes | None:
        """The HMAC key (the file's bytes), or None."""
        return None if self.hmac_key_file is None else self.hmac_key_file.read_bytes()

    @property
    def day_start(self) -> dt.time:
        """``day_starts`` as a time."""
        hour, minute = self.day_starts.split(":")
        return dt.time(int(hour), int(minute))

    @property
    def zone(self) -> zoneinfo.ZoneInfo | None:
        """The zone of the gaming day (None: the system's)."""
        return None if self.time_zone is None else zoneinfo.ZoneInfo(self.time_zone)


class LoggingSection(_Section):
    """``[logging]``: structlog output."""

    format: Literal["auto", "json", "console"] = Field(
        default="auto", description="auto: JSON lines unless the log stream is a terminal"
    )
    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description="The least level logged (debug shows raw frames: never in production)",
    )

    @field_validator("level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value


class WatchdogSection(_Section):
    """``[watchdog]``: feeding systemd's watchdog (WatchdogSec= in the unit sets the period).

    The watchdog is fed only while every loop of the pipeline has shown progress within
    ``stall_timeout`` seconds; otherwise systemd restarts the service.
    """

    enabled: StrictBool = Field(
        default=True, description="Feed systemd's watchdog (under systemd with WatchdogSec=)"
    )
    stall_timeout: Seconds = Field(
        default=10.0,
        description="Seconds a loop of the pipeline may show no progress before the watchdog "
        "is no longer fed",
    )


class BonusCrapsSection(_Section):
    """``[bonus_craps]``: which of the two pay tables of the Bonus Craps rules is in use."""

    paytable: Literal[1, 2] = Field(default=1, description="Bonus Craps pay table 1 or 2")


class BustBonusSection(_Section):
    """``[bust_bonus]``: the blackjack shoe."""

    decks: Annotated[StrictInt, _range(1, 8), _between(1, 8)] = Field(
        default=6, description="Decks in the shoe: a card may appear that many times a round"
    )
    dealer_hits_soft_17: StrictBool = Field(
        default=False, description="House rule for playing out the dealer's hand (rule (11))"
    )


class SoftwareSection(_Section):
    """``[software]``: the approved releases (docs/auditors/software-authentication.md).
    At start the table computes its installed software's digest (``lammer
    verify-install``) and, when ``manifests`` are given, stays closed (``availability``
    ``offline``, a ``SOFTWARE`` alarm naming the first file that differs) unless it
    matches one of them, each signed by one of ``public_keys`` (``lammer release``)."""

    manifests: list[Annotated[Path, AfterValidator(existing_file)]] = Field(
        default_factory=list,
        description="Approved release manifests (lammer release manifest); none: no check",
    )
    public_keys: list[Annotated[Path, AfterValidator(existing_file)]] = Field(
        default_factory=list,
        description="Public keys (PEM) the manifests must be signed with",
    )

    @model_validator(mode="after")
    def _keys_given(self) -> SoftwareSection:
        if self.manifests and not self.public_keys:
            raise ValueError("manifests are given without public_keys to verify them with")
        return self


class MetricsSection(_Section):
    """``[metrics]``: a Prometheus endpoint (``GET /metrics``, text format) for the floor's
    IT (docs/floor/monitoring.md). Opt-in: without this section nothing listens. Each table
    of a controller needs a port of its own."""

    listen: str = Field(
        description="HOST:PORT (or PORT: 127.0.0.1:PORT) of the metrics endpoint; a host "
        "other than loopback needs allow_from",
    )
    allow_from: list[str] = Field(
        default=[],
        description="Addresses or networks (10.0.0.5, 10.0.0.0/24) of the Prometheus servers "
        "allowed to scrape besides this machine; others get 403",
    )

    @model_validator(mode="after")
    def _checked(self) -> MetricsSection:
        try:
            metrics_settings(self.listen, self.allow_from)
        except MetricsConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    def settings(self) -> MetricsSettings:
        """The listener as ``metrics.endpoint`` serves it."""
        return metrics_settings(self.listen, self.allow_from)


class TableConfig(_Section):
    """One table's whole configuration."""

    table: TableSection
    shuffler: DeviceSection | None = None
    dice_reader: DeviceSection | None = None
    mqtt: MqttSection = MqttSection()
    journal: JournalSection = JournalSection()
    logging: LoggingSection = LoggingSection()
    watchdog: WatchdogSection = WatchdogSection()
    bonus_craps: BonusCrapsSection = BonusCrapsSection()
    bust_bonus: BustBonusSection = BustBonusSection()
    software: SoftwareSection = SoftwareSection()
    metrics: MetricsSection | None = None

    @property
    def client_id(self) -> str:
        """The MQTT client id: ``[mqtt] client_id`` or ``lammer-<table id>``."""
        return self.mqtt.client_id or f"lammer-{self.table.id}"

    @property
    def journal_path(self) -> Path:
        """The journal file: ``[journal] path`` or ``/var/lib/lammer/<table id>.db``."""
        return self.journal.path or DEFAULT_STATE_DIR / f"{self.table.id}.db"

    @property
    def base_topic(self) -> str:
        """``<prefix>/<table id>`` (mqtt-api.md "Conventions")."""
        return f"{self.mqtt.prefix}/{self.table.id}"

    def notes(self) -> list[str]:
        """Sections given but not used by this table's game (shown by check-config)."""
        game = self.table.game
        used = {
            "shuffler": game in CARD_GAMES,
            "dice_reader": game == "CRAPS",
            "bonus_craps": game == "CRAPS",
            "bust_bonus": game == "BJ",
        }
        return [
            f"{section}: not used by a {game} table (ignored)"
            for section, needed in used.items()
            if section in self.model_fields_set and not needed
        ]

    def instance_problem(self, instance: str) -> str | None:
        """Why this configuration may not run as the systemd instance ``instance``
        (``lammer@<instance>``, whose config is ``/etc/lammer/<instance>.toml``), or None.

        The instance is the table id: a file copied from another table and not edited
        would otherwise run a second daemon as that table (its journal, its client id,
        its topics) under this table's name.
        """
        if instance == self.table.id:
            return None
        return (
            f"table.id: is {self.table.id!r}, but the systemd instance is {instance!r} "
            f"(lammer@{instance}): the instance name must be the table id"
        )

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: Any) -> Any:
        # Cross-field checks run on the raw data so they are reported together with the
        # field errors (an after-validator would run only once every field is valid).
        extra = _cross_problems(data)
        try:
            model = handler(data)
        except ValidationError as exc:
            if not extra:
                raise
            errors: list[Any] = [*exc.errors(), *extra]
            raise ValidationError.from_exception_data(exc.title, errors) from None
        if extra:
            raise ValidationError.from_exception_data(cls.__name__, extra)
        return model


def _cross(loc: tuple[str, ...], message: str, data: object) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError("cross_field", "{message}", {"message": message}),
        loc=loc,
        input=data,
    )


def _cross_problems(data: object) -> list[InitErrorDetails]:
    """Problems that need more than one key; silent about keys the fields reject anyway."""
    if not isinstance(data, dict):
        return []
    out: list[InitErrorDetails] = []
    table = data.get("table")
    game = table.get("game") if isinstance(table, dict) else None
    if game in CARD_GAMES and "shuffler" not in data:
        why = "the card-reading shoe speaks the shuffler protocol" if game == "BJ" else ""
        out.append(_cross(("shuffler",), _needed(str(game), why), data))
    if game == "CRAPS" and "dice_reader" not in data:
        out.append(_cross(("dice_reader",), _needed("CRAPS", ""), data))

    mqtt = data.get("mqtt")
    if isinstance(mqtt, dict):
        if mqtt.get("password_file") is not None and mqtt.get("username") is None:
            out.append(
                _cross(("mqtt", "username"), "required when mqtt.password_file is set", data)
            )
        tls = mqtt.get("tls")
        if isinstance(tls, dict) and (tls.get("cert_file") is None) != (
            tls.get("key_file") is None
        ):
            given, missing = (
                ("cert_file", "key_file")
                if tls.get("key_file") is None
                else ("key_file", "cert_file")
            )
            out.append(_cross(("mqtt", "tls", missing), f"required with mqtt.tls.{given}", data))
        out.extend(_backoff_problems(mqtt, ("mqtt",), data))
    for device in ("shuffler", "dice_reader"):
        section = data.get(device)
        if isinstance(section, dict):
            out.extend(_backoff_problems(section, (device,), data))
    return out


def _backoff_problems(
    section: dict[str, Any], loc: tuple[str, ...], data: object
) -> list[InitErrorDetails]:
    initial, cap = section.get("reconnect_initial"), section.get("reconnect_max")
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (initial, cap))
    if numbers and initial > cap:  # type: ignore[operator]
        message = f"must not be less than reconnect_initial ({initial}), got {cap}"
        return [_cross((*loc, "reconnect_max"), message, data)]
    return []


def _needed(game: str, why: str) -> str:
    return f"required for a {game} table" + (f" ({why})" if why else "")


# ---------------------------------------------------------------------------------------
# Error messages for operators


def _format_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(file)"


def _field_names(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys allowed beside ``loc``'s last part (for "did you mean")."""
    current: Any = model
    for part in loc[:-1]:
        field = current.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            return []
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
        if current is None:
            return []
    return list(current.model_fields)


def _describe(error: Any) -> str:
    """One pydantic error as ``what is wrong``, in words an operator understands."""
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    got = f", got {value!r}"
    if kind == "extra_forbidden":
        names = _field_names(TableConfig, tuple(error["loc"]))
        hint = did_you_mean(str(error["loc"][-1]), names)
        return f"unknown key{hint}" + (
            f" (known: {', '.join(names)})" if names and not hint else ""
        )
    if kind == "missing":
        return "required, missing"
    if kind in {"value_error", "cross_field"}:
        return str(ctx.get("error") or ctx.get("message") or error["msg"]).removeprefix(
            "Value error, "
        )
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}{got}"
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return f"must be a table ([section] or {{...}}){got}"
    if kind in TYPE_PROBLEMS:
        return f"{TYPE_PROBLEMS[kind]}{got}"
    return f"{error['msg']}{got}"


def problems_of(exc: ValidationError) -> list[str]:
    """Every error of a validation as ``key.path: what is wrong``."""
    return [f"{_format_loc(tuple(e['loc']))}: {_describe(e)}" for e in exc.errors()]


def validate_config(data: dict[str, Any], *, base_dir: Path | None = None) -> TableConfig:
    """Validate parsed TOML data. Raises ``ConfigFileError`` listing every problem."""
    try:
        return TableConfig.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        raise ConfigFileError(None, problems_of(exc)) from exc


def load_config(path: str | Path) -> TableConfig:
    """Read and validate a table's TOML file.

    Raises ``ConfigFileError`` (with ``path`` and every problem) for a missing or
    unreadable file, TOML that does not parse, or settings that do not validate.
    """
    path = Path(path)
    data = read_toml(path, ConfigFileError)
    try:
        return validate_config(data, base_dir=path.resolve().parent)
    except ConfigFileError as exc:
        raise ConfigFileError(path, exc.problems) from exc.__cause__
