"""How one configuration key is declared, parsed, validated and shown, the way Kafka does it.

Kafka's `ConfigDef` gives every key a type, a default, an optional validator, an importance and a
doc string; values arrive as strings and are parsed by type before the validator runs. Error
text follows Kafka's ("Invalid value abc for configuration num.partitions: Not a number of type
INT") because operators paste it into searches, and because tools such as `kafka-configs` show
the broker's message verbatim. The numbering of `ConfigType` and `ConfigSource` is the wire
numbering of DescribeConfigs, so handlers can put them on the wire unchanged.

Nothing here knows which keys exist: the broker table lives in `broker`, the topic table in
`topic`.
"""
from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from collections.abc import Mapping
from typing import Literal, Sequence

from protocol.config_resources import ConfigSource, ConfigSynonym

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1

Importance = Literal["high", "medium", "low"]


class ConfigType(enum.IntEnum):
    """A key's value type, numbered as DescribeConfigs v3+ carries it (`config_type`)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigError(ValueError):
    """A configuration value (or name) that cannot be accepted.

    Handlers turn it into INVALID_CONFIG with `str(error)` as the error message, and the server
    prints it and exits at start, so `str()` is always a single line. `message` replaces the
    standard sentence for the few errors that are not about one value (an unknown topic config
    name, two settings in conflict).
    """

    def __init__(self, key: str, value: object, reason: str, *, message: str | None = None) -> None:
        self.key = key
        self.value = value
        self.reason = reason
        if message is None:
            shown = "null" if value is None else str(value)
            message = f"Invalid value {shown} for configuration {key}: {reason}"
        self.message = " ".join(message.split("\n")).replace("\r", " ")
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


# --- validators -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Range:
    """Numeric bounds, inclusive; Kafka's `Range.atLeast` / `Range.between`."""

    min: int | float | None = None
    max: int | float | None = None

    def check(self, key: str, value: object) -> None:
        assert isinstance(value, (int, float))
        if self.min is not None and value < self.min:
            raise ConfigError(key, _show(value), f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigError(key, _show(value), f"Value must be no more than {self.max}")

    def describe(self) -> str:
        if self.max is None:
            return f"[{self.min},...]"
        if self.min is None:
            return f"[...,{self.max}]"
        return f"[{self.min},...,{self.max}]"


@dataclass(frozen=True)
class OneOf:
    """A string from a fixed set, compared case-sensitively as Kafka's `ValidString` does."""

    choices: tuple[str, ...]

    def check(self, key: str, value: object) -> None:
        if value not in self.choices:
            raise ConfigError(key, value, f"String must be one of: {', '.join(self.choices)}")

    def describe(self) -> str:
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True)
class OneOfIgnoringCase:
    """A string from a fixed set in any case, as Kafka's `CaseInsensitiveValidString`: its
    error names the choices upper-cased, as Kafka's does."""

    choices: tuple[str, ...]

    def check(self, key: str, value: object) -> None:
        upper = [c.upper() for c in self.choices]
        if not isinstance(value, str) or value.upper() not in upper:
            raise ConfigError(key, value,
                              f"String must be one of (case insensitive): {', '.join(upper)}")

    def describe(self) -> str:
        return f"(case insensitive) [{', '.join(c.upper() for c in self.choices)}]"


@dataclass(frozen=True)
class ListOf:
    """Every element of a list from a fixed set (Kafka's `ValidList`), optionally without repeats.

    The error names the offending element, not the whole list, as Kafka's does.
    """

    choices: tuple[str, ...]
    unique: bool = False

    def check(self, key: str, value: object) -> None:
        assert isinstance(value, tuple)
        for item in value:
            OneOf(self.choices).check(key, item)
        if self.unique and len(set(value)) != len(value):
            raise ConfigError(key, ",".join(value), "Values must not repeat")

    def describe(self) -> str:
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True)
class NonEmptyUniqueList:
    """A list that must have at least one element and no repeats (directory lists, listeners)."""

    def check(self, key: str, value: object) -> None:
        assert isinstance(value, tuple)
        if not value or any(not item for item in value):
            raise ConfigError(key, ",".join(value), "Empty list or empty element is not allowed")
        if len(set(value)) != len(value):
            raise ConfigError(key, ",".join(value), "Values must not repeat")

    def describe(self) -> str:
        return "non-empty list of distinct values"


_REPLICA_ENTRY = re.compile(r"([0-9]+:[0-9]+)?")


@dataclass(frozen=True)
class ThrottledReplicas:
    """`*` or `partition:broker` pairs, the form the replication-throttle topic configs take
    (Kafka's ThrottledReplicaListValidator: empty entries pass, and the message names the
    value as the Java list it parsed)."""

    def check(self, key: str, value: object) -> None:
        assert isinstance(value, tuple)
        if "".join(value) == "*" or all(_REPLICA_ENTRY.fullmatch(item) for item in value):
            return
        raise ConfigError(
            key, f"[{', '.join(value)}]",
            f"{key} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")

    def describe(self) -> str:
        return "[partitionId]:[brokerId],[partitionId]:[brokerId],..."


@dataclass(frozen=True)
class KnownClass:
    """One of the Java class names pybroker has a counterpart for (a plugin key such as
    replica.selector.class). Kafka loads any class on its classpath and fails at start when it
    cannot; here every other name is refused at start, in Kafka's words, with what is served."""

    choices: tuple[str, ...]

    def check(self, key: str, value: object) -> None:
        if value not in self.choices:
            raise ConfigError(key, value, f"Class {value} could not be found (pybroker serves "
                                          f"{', '.join(self.choices)})")

    def describe(self) -> str:
        return f"[{', '.join(self.choices)}]"


_ISO_DURATION = re.compile(
    r"P(?:(?P<d>[0-9]+)D)?(?:T(?:(?P<h>[0-9]+)H)?(?:(?P<m>[0-9]+)M)?"
    r"(?:(?P<s>[0-9]+)(?:[.,](?P<f>[0-9]{0,9}))?S)?)?", re.IGNORECASE)


def iso_duration_ms(text: str) -> int | None:
    """A non-negative ISO-8601 duration (Java's `Duration.parse` form PnDTnHnMn.nS) in ms;
    None when it is not one (a sign, weeks or years, an empty `P` or `PT`)."""
    match = _ISO_DURATION.fullmatch(text)
    if match is None or not any(match.group(g) for g in "dhms") or text.upper().endswith("T"):
        return None
    d, h, m, s = (int(match.group(g) or 0) for g in "dhms")
    millis = int(((match.group("f") or "") + "000")[:3])
    return (((d * 24 + h) * 60 + m) * 60 + s) * 1000 + millis


@dataclass(frozen=True)
class ShareOffsetReset:
    """`share.auto.offset.reset` (Kafka's ShareGroupAutoOffsetResetStrategy validator):
    latest, earliest or by_duration:<ISO-8601 duration>, in Kafka's words when not."""

    def check(self, key: str, value: object) -> None:
        text = str(value)
        if text in ("latest", "earliest") or (
                text.startswith("by_duration:")
                and iso_duration_ms(text[len("by_duration:"):]) is not None):
            return
        raise ConfigError(key, text, (
            f"Invalid value `{text}` for configuration {key}. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."))

    def describe(self) -> str:
        return "[latest, earliest, by_duration:PnDTnHnMn.nS]"


@dataclass(frozen=True)
class CountOrAll:
    """A count of at least 1, or -1 for "all there are" (num.cores: every CPU the process
    may use). 0 and other negatives are refused: neither is a count anyone means."""

    def check(self, key: str, value: object) -> None:
        assert isinstance(value, int)
        if value != -1 and value < 1:
            raise ConfigError(key, value, "Value must be -1 (all) or at least 1")

    def describe(self) -> str:
        return "-1 (all) or [1,...]"


Validator = (Range | OneOf | OneOfIgnoringCase | ListOf | NonEmptyUniqueList | ThrottledReplicas | KnownClass
             | ShareOffsetReset | CountOrAll)


def at_least(minimum: int | float) -> Range:
    return Range(min=minimum)


def between(minimum: int | float, maximum: int | float) -> Range:
    return Range(min=minimum, max=maximum)


# --- keys ---------------------------------------------------------------------------------------


class KeyState(enum.Enum):
    """What the broker does with a key it accepts: no key is a silent promise.

    - HONOURED: acts as in Kafka (or as its doc says, where the difference is deliberate).
    - INERT: belongs to a feature not built yet (`ConfigKey.feature`); accepted, so Kafka's
      files load, but setting it logs a one-line warning at start naming the key and that
      feature. Values that could only work with the feature are refused (`refused_values`).
    - NOT_APPLICABLE: tunes a part of Kafka pybroker has no counterpart for (thread pools,
      KRaft controllers, preallocation); accepted silently, the doc says why.
    - DEPRECATED: an older Kafka name for (part of) a key of today; honoured as Kafka read it
      then, and setting it logs a one-line warning at start naming the key to use.

    As a feature lands, its keys move from INERT to HONOURED.
    """

    HONOURED = "honoured"
    INERT = "inert"
    NOT_APPLICABLE = "not applicable"
    DEPRECATED = "deprecated"


# The features INERT keys wait for: the open issues that will make them work.
FEATURES = {
    # Followers reach a leader on its first listener today; choosing one matters once
    # listeners differ in security.
    "security": "security (TLS and SASL listeners, and the listener brokers use between them)",
    "fetchers": "fetchers (several per source broker: pybroker runs one per leader)",
}


@dataclass(frozen=True)
class ConfigKey:
    """One declared configuration: Kafka's name, type, parsed default, validator and our doc.

    `default` is the parsed Python value (int, float, bool, str, tuple of str) or None when the
    key has no default and something else decides (e.g. `log.retention.ms` falls back to hours).
    `state` says whether the broker acts on it (see KeyState); an INERT key names its `feature`.
    """

    name: str
    type: ConfigType
    default: object
    validator: Validator | None
    importance: Importance
    doc: str
    sensitive: bool = field(default=False)
    state: KeyState = field(default=KeyState.HONOURED)
    feature: str | None = field(default=None)
    refused_values: tuple[object, ...] = field(default=())

    def __post_init__(self) -> None:
        # As Kafka's ConfigKey does: a default that fails its own validator is a bug in the table.
        if self.default is not None and self.validator is not None:
            self.validator.check(self.name, self.default)
        if (self.state is KeyState.INERT) != (self.feature in FEATURES):
            raise ValueError(f"{self.name}: an inert key, and only one, names its feature")
        if self.refused_values and self.feature is None:
            raise ValueError(f"{self.name}: refused values name the feature they wait for")

    def parse(self, raw: str) -> object:
        """Parse and validate one raw string; raises ConfigError with Kafka's wording."""
        value = parse_value(self.name, self.type, raw)
        if value is not None and self.validator is not None:
            self.validator.check(self.name, value)
        if value in self.refused_values:
            raise ConfigError(self.name, value,
                              f"Needs {FEATURES[self.feature or '']}, which pybroker does "
                              "not have yet")
        return value

    def inert_warning(self) -> str | None:
        """The one line logged when this key is set, or None if setting it takes effect."""
        if self.state is not KeyState.INERT:
            return None
        return (f"Configuration '{self.name}' has no effect yet: it is used by "
                f"{FEATURES[self.feature or '']}, which pybroker does not have yet")

    def valid_values(self) -> str:
        return self.validator.describe() if self.validator is not None else ""


_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SPLIT = re.compile(r"\s*,\s*")
_INT_RANGES = {
    ConfigType.SHORT: (INT16_MIN, INT16_MAX),
    ConfigType.INT: (INT32_MIN, INT32_MAX),
    ConfigType.LONG: (INT64_MIN, INT64_MAX),
}


def parse_value(key: str, type_: ConfigType, raw: str) -> object:
    """Turn a raw string into a typed value as Kafka's `ConfigDef.parseType` does.

    Whitespace around the value is ignored. Integers must be plain decimal and fit the Java type
    (Python's `int()` would also accept `1_000` and non-ASCII digits, which Kafka rejects).
    """
    text = raw.strip()
    if type_ is ConfigType.BOOLEAN:
        if text.lower() == "true":
            return True
        if text.lower() == "false":
            return False
        raise ConfigError(key, raw, "Expected value to be either true or false")
    if type_ in _INT_RANGES:
        low, high = _INT_RANGES[type_]
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise ConfigError(key, raw, f"Not a number of type {type_.name}")
        return int(text)
    if type_ is ConfigType.DOUBLE:
        if not _DOUBLE.fullmatch(text):
            raise ConfigError(key, raw, "Not a number of type DOUBLE")
        return float(text[:-1] if text[-1] in "fFdD" else text)
    if type_ is ConfigType.LIST:
        return tuple(_LIST_SPLIT.split(text)) if text else ()
    return text  # STRING, CLASS, PASSWORD


def _java_double(value: float) -> str:
    """Render a float as Java's `Double.toString` would, so DescribeConfigs shows `1.0E-4`."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python, like Java, writes this range without an exponent
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    point = len(digits) - 1 + exponent
    significant = "".join(map(str, digits)).rstrip("0") or "0"
    mantissa = significant[0] + "." + (significant[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{point}"


def _show(value: object) -> str:
    return _java_double(value) if isinstance(value, float) else str(value)


def to_config_string(value: object) -> str | None:
    """The string a typed value is shown as on the wire (Kafka's `ConfigDef.convertToString`)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, (tuple, list, frozenset, set)):
        return ",".join(str(item) for item in value)
    return str(value)


# --- DescribeConfigs rows -------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer, for a topic or a broker.

    Field meanings follow the wire message: `value` is None for a key with no value (or a
    sensitive one), `is_default` is what v0 carries instead of `source`, and `synonyms` is empty
    unless the key has broker-level equivalents that are set.
    """

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    read_only: bool
    is_sensitive: bool
    synonyms: tuple[ConfigSynonym, ...]
    config_type: ConfigType
    documentation: str


def kafka_synonym_order(
    name: str,
    group: Sequence[str],
    layers: Sequence[tuple[ConfigSource, Mapping[str, str | None]]],
    *,
    trim: bool = True,
) -> list[ConfigSynonym]:
    """Broker-level synonyms of `name` the way Kafka's DescribeConfigs lists them.

    `layers` are the broker's configuration layers, highest first (`BrokerConfig.layers`:
    dynamic per-broker, dynamic default, static, defaults). Kafka lists every name of the
    synonym group set in the first layer, then in the next, and so on (a default only when not
    null), and then drops entries from the front until it reaches `name` itself. The drop is
    why `retention.ms` shows no synonyms when only `log.retention.hours` is set: it starts at
    `log.retention.ms`, which is unset. We keep that quirk so tools print what they would print
    against Kafka. `trim=False` keeps the whole list: Kafka's CreateTopics answer (its
    controller's view) reports retention.ms as static broker config when only
    `log.retention.hours` is set.
    """
    found = [ConfigSynonym(n, layer[n], source)
             for source, layer in layers for n in group
             if n in layer and (layer[n] is not None or source is not ConfigSource.DEFAULT_CONFIG)]
    while trim and found and found[0].name != name:
        found.pop(0)
    return found
